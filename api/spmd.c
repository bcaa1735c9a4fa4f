/* Public entry points of SPMD mode (runtime/spmd_run.c, mesh/spmd_coll.c): the
 * run, the collectives on local tensors with their call sites, and
 * DTensors from / to a rank's local tensor. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "core/error.h"
#include "core/tensor.h"
#include "dispatch/autograd.h"
#include "dispatch/shadow.h"
#include "mesh/spmd_coll.h"
#include "runtime/dry.h"
#include "runtime/runtime.h"
#include "runtime/spmd_run.h"
#include "sim/collectives.h"

/* the next collective's (or run's) call site: set by dt_call_site (the
 * header's macros), taken by that call */
static _Thread_local struct { const char *file; int line; } tls_site;
static const char *take_site(char *buf, size_t len);

/* where a run was started, for a run that waits its turn behind it: the
 * call site the header's macro recorded, else the caller's symbol */
dt_status dt_spmd_run(dt_runtime *rt, dt_spmd_fn fn, void *arg) {
  char buf[192];
  const char *site = take_site(buf, sizeof buf);
  Dl_info info;
  void *ret = __builtin_extract_return_addr(__builtin_return_address(0));
  if (!site && dladdr(ret, &info) && info.dli_sname) {
    snprintf(buf, sizeof buf, "%s+%#lx", info.dli_sname,
             (unsigned long)((char *)ret - (char *)info.dli_saddr));
    site = buf;
  }
  return runtime_spmd_run(rt, fn, arg, site);
}

int dt_spmd_rank(void) { return runtime_spmd_any_rank(); }

void dt_call_site(const char *file, int line) {
  tls_site.file = file;
  tls_site.line = line;
}

/* "train.c:88" (the file's last path component), else the label path
 * (dt_label_push), else NULL; the call site is used once */
static const char *take_site(char *buf, size_t len) {
  const char *file = tls_site.file;
  tls_site.file = NULL;
  if (file) {
    const char *base = strrchr(file, '/');
    snprintf(buf, len, "%s:%d", base ? base + 1 : file, tls_site.line);
    return buf;
  }
  return dispatch_label_path(buf, len) ? buf : NULL;
}

const char *api_scope_site_begin(char *buf, size_t len) {
  if (runtime_spmd_any_rank() < 0) return NULL;
  const char *site = take_site(buf, len);
  if (site) sim_coll_set_scope_site(site);
  return site;
}

void api_scope_site_end(const char *site) {
  if (site) sim_coll_set_scope_site(NULL);
}

/* a maker's success ends error chaining (core/error.h) */
static dt_tensor *made(dt_tensor *t) {
  if (t) core_error_succeeded();
  return t;
}

/* a group's reserved words are zero (dtorch.h's conventions) */
static bool group_ok(const char *fn, const dt_group *g) {
  return !g || CORE_RESERVED_ZERO(fn, "dt_group", g) == DT_OK;
}

#define SITE char site_buf[96]; const char *site = take_site(site_buf, sizeof site_buf)

dt_tensor *dt_all_reduce(dt_tensor *t, dt_reduce_op op, const dt_group *g) {
  if (!group_ok("dt_all_reduce", g)) return NULL;
  SITE;
  return made(mesh_spmd_all_reduce(t, op, g, site));
}

dt_tensor *dt_all_gather(dt_tensor *t, int dim, const dt_group *g) {
  if (!group_ok("dt_all_gather", g)) return NULL;
  SITE;
  return made(mesh_spmd_all_gather(t, dim, g, site));
}

dt_tensor *dt_reduce_scatter(dt_tensor *t, dt_reduce_op op, int dim,
                             const dt_group *g) {
  if (!group_ok("dt_reduce_scatter", g)) return NULL;
  SITE;
  return made(mesh_spmd_reduce_scatter(t, op, dim, g, site));
}

dt_tensor *dt_all_to_all(dt_tensor *t, int split_dim, int concat_dim,
                         const dt_group *g) {
  if (!group_ok("dt_all_to_all", g)) return NULL;
  SITE;
  return made(mesh_spmd_all_to_all(t, split_dim, concat_dim, g, site));
}

dt_tensor *dt_broadcast(dt_tensor *t, int root, const dt_group *g) {
  if (!group_ok("dt_broadcast", g)) return NULL;
  SITE;
  return made(mesh_spmd_broadcast(t, root, g, site));
}

dt_status dt_barrier(const dt_group *g) {
  if (!group_ok("dt_barrier", g)) return DT_ERR_INVALID_ARGUMENT;
  SITE;
  return mesh_spmd_barrier(g, site);
}

dt_status dt_send(dt_tensor *t, int dst) {
  SITE;
  return mesh_spmd_send(t, dst, site);
}

dt_tensor *dt_recv(int src, dt_shape shape, dt_dtype dtype) {
  SITE;
  return made(mesh_spmd_recv(src, shape, dtype, site));
}

/* under shadowing, the placements a new DTensor claims are checked */
static dt_tensor *shadowed(dt_tensor *t) {
  if (t && dispatch_shadow_active()) dispatch_shadow_check_claims(t);
  return made(t);
}

/* from / to a local tensor that requires grad is a graph node, as
 * PyTorch's DTensor.from_local and to_local are differentiable */
static dt_tensor *recorded(dt_tensor *in, dt_tensor *out, bool from_local,
                           const char *fn) {
  if (out && !dispatch_autograd_spmd_local(in, out, from_local)) {
    core_tensor_release(out);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory for the "
                   "autograd graph", fn);
    return NULL;
  }
  return out;
}

dt_tensor *dt_dtensor_from_local(dt_tensor *local, dt_mesh *mesh,
                                 const dt_placement *placements) {
  return shadowed(recorded(local, mesh_spmd_from_local(local, mesh, placements, NULL),
                           true, "dt_dtensor_from_local"));
}

dt_tensor *dt_dtensor_from_local_shape(dt_tensor *local, dt_mesh *mesh,
                                       const dt_placement *placements,
                                       dt_shape global_shape) {
  return shadowed(recorded(local, mesh_spmd_from_local(local, mesh, placements,
                                                       &global_shape),
                           true, "dt_dtensor_from_local_shape"));
}

dt_tensor *dt_dtensor_to_local(dt_tensor *t) {
  return made(recorded(t, mesh_spmd_to_local(t), false, "dt_dtensor_to_local"));
}

dt_status dt_fault_inject(dt_runtime *rt, const dt_fault *f) {
  if (f && CORE_RESERVED_ZERO("dt_fault_inject", "dt_fault", f) != DT_OK)
    return DT_ERR_INVALID_ARGUMENT;
  return runtime_fault_inject(rt, f);
}

dt_status dt_fault_clear(dt_runtime *rt) { return runtime_fault_clear(rt); }

int64_t dt_fault_count(const dt_runtime *rt) {
  if (!rt) {  /* a count: -1 with the error set (dtorch.h's conventions) */
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_fault_count: rt is NULL");
    return -1;
  }
  return runtime_fault_count(rt);
}

dt_status dt_dry_run_report(dt_runtime *rt, dt_dry_run_stats *out) {
  return runtime_dry_report(rt, out);
}

dt_status dt_dry_run_reset(dt_runtime *rt) { return runtime_dry_reset(rt); }
