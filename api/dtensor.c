/* Public entry points: DTensor queries, local shards, redistribute and
 * communication counting (mesh/handle.c, mesh/redistribute.c).
 * Each forwards to the layer that implements it; the messages those
 * raise name the public function. */
#include "api/api.h"
#include "core/error.h"
#include "dispatch/autograd.h"
#include "dispatch/propagate.h"
#include "mesh/handle.h"
#include "mesh/spmd_coll.h"

/* a redistribute of a tensor that requires grad is a graph node; inside
 * an SPMD function its failure (run inline) is the call's */
static dt_tensor *recorded(dt_tensor *in, dt_tensor *out, const char *fn) {
  out = mesh_spmd_checked(out);
  if (out && !dispatch_autograd_redistributed(in, out)) {
    core_tensor_release(out);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory for the "
                   "autograd graph", fn);
    return NULL;
  }
  return out;
}

dt_status dt_local_to_host(dt_tensor *t, int rank, void *dst,
                           size_t dst_bytes) {
  return mesh_local_to_host(t, rank, dst, dst_bytes);
}

dt_shape dt_tensor_local_shape(const dt_tensor *t, int rank) {
  return mesh_tensor_local_shape(t, rank);
}

dt_placement dt_tensor_placement(const dt_tensor *t, int mesh_dim) {
  return mesh_tensor_placement(t, mesh_dim);
}

/* Inside an SPMD function a redistribute's collectives report the
 * caller's site (dt_call_site: python/dtorch sets the program's line) */
dt_tensor *dt_redistribute(dt_tensor *t, dt_mesh *mesh,
                           const dt_placement *placements) {
  API_SCOPE_SITE;
  dt_tensor *out = recorded(t, mesh_redistribute(t, mesh, placements), "dt_redistribute");
  API_SCOPE_SITE_END();
  return out;
}

dt_tensor *dt_view_shards(dt_tensor *t, dt_shape shape,
                          const dt_placement *placements) {
  return mesh_spmd_checked(mesh_view_shards(t, shape, placements, false));
}

dt_tensor *dt_redistribute_like(dt_tensor *t, const dt_tensor *like) {
  API_SCOPE_SITE;
  dt_tensor *out = recorded(t, mesh_redistribute_like(t, like), "dt_redistribute_like");
  API_SCOPE_SITE_END();
  return out;
}

dt_tensor *dt_redistribute_by_dict(dt_tensor *t, dt_mesh *mesh,
                                   const char *const *dim_names,
                                   const dt_placement *placements, int n,
                                   dt_default_placement mode) {
  API_SCOPE_SITE;
  dt_tensor *out = recorded(t, mesh_redistribute_by_dict(t, mesh, dim_names, placements,
                                                         n, mode),
                            "dt_redistribute_by_dict");
  API_SCOPE_SITE_END();
  return out;
}

void dt_comm_count_begin(void) {
  mesh_comm_count_begin();
}

dt_comm_counts dt_comm_count_end(void) {
  return mesh_comm_count_end();
}

dt_cache_stats dt_sharding_cache_stats(void) {
  dt_cache_stats st = dispatch_cache_stats();  /* reserved words zero */
  st.evictions = dispatch_cache_evictions();
  return st;
}

int64_t dt_sharding_cache_evictions(void) { return dispatch_cache_evictions(); }

void dt_sharding_cache_clear(void) { dispatch_cache_clear(); }

dt_status dt_redistribute_mode_set(dt_redistribute_mode mode) {
  return dispatch_redistribute_mode_set(mode);
}
dt_redistribute_mode dt_redistribute_mode_get(void) {
  return dispatch_redistribute_mode();
}
