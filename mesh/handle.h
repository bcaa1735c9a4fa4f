/* DTensors: a global tensor whose shards live on the ranks of a mesh.
 *
 * The handle (dt_tensor with a spec) holds the mesh, one placement per mesh
 * dim, the global shape and one storage per mesh rank; each rank's local
 * tensor is contiguous with the sizes of its box (mesh_local_box). The
 * issuing thread validates and plans; every mesh rank runs its part of a
 * record (fill, distribute, gather, redistribute steps with collectives). */
#ifndef MESH_HANDLE_H
#define MESH_HANDLE_H

#include "core/call.h"
#include "core/tensor.h"
#include "mesh/mesh.h"

/* A DTensor handle over fresh storages (data allocated by the ranks).
 * placements already validated and normalised. */
dt_tensor *mesh_dtensor_make(dt_mesh *m, const dt_placement *pl, dt_shape shape,
                        dt_dtype dtype, const char *fn);
/* a dry run stops counting t's shards (a handle over another's shards) */
void mesh_dry_forget(dt_tensor *t);
/* dt_view_shards (dtorch.h; mesh/view_shards.c). writable: in-place
 * writes into the result are allowed (the caller drops every other handle
 * on the shards: the optimiser's new parameter) */
dt_tensor *mesh_view_shards(dt_tensor *t, dt_shape shape, const dt_placement *pl,
                            bool writable);
/* Specs are immutable once made; equal specs (same mesh content, placements,
 * global shape, dtype) hash equal — the key material of the sharding cache. */
uint64_t mesh_spec_hash(const core_spec *s, dt_dtype dtype);
bool mesh_spec_equal(const core_spec *a, dt_dtype da, const core_spec *b,
                        dt_dtype db);
/* the most elements any rank of t's mesh holds (t's numel for a
 * single-device tensor): a dry run's cost of an op */
int64_t mesh_dry_max_box(const dt_tensor *t);
/* t (a DTensor) with every placement Replicate: t itself (retained) when
 * it is, else a redistribution (collective); NULL + error naming fn */
dt_tensor *mesh_replicated(dt_tensor *t, const char *fn);
/* ---- multi-process jobs (mesh/agree.c) */
/* whether some rank of m runs in another process */
bool mesh_is_split(const dt_mesh *m);
/* Waits until the ops that made outs[0..n) (DTensors on m) ran, and has
 * every process of m agree whether any shard failed: the same status
 * (and the failure's message) in every process. Collective: every
 * process makes the call. */
dt_status mesh_agree_outputs(dt_mesh *m, dt_tensor *const *outs, int n,
                             const char *fn);
/* Called by core_tensor_release when the handle dies. */
void mesh_dtensor_free_spec(core_spec *s);
/* Normalises negative Shard dims and validates; error names fn. */
dt_status mesh_dtensor_check_placements(const dt_mesh *m, const dt_placement *in,
                                   const dt_shape *shape, dt_placement *out,
                                   const char *fn);
/* Factories and from_host with a mesh (api_tensor.c calls these). */
dt_tensor *mesh_dtensor_factory(core_op_id op, dt_shape shape, dt_dtype dtype,
                           dt_mesh *mesh, const dt_placement *pl,
                           double value, const void *host, const char *fn);
dt_status mesh_dtensor_to_host(dt_tensor *t, void *dst, size_t bytes, bool wait,
                          dt_future **out, const char *fn);

/* ---- the implementations behind public entry points (api/) */
/* dt_local_to_host (dtorch.h) */
dt_status mesh_local_to_host(dt_tensor *t, int rank, void *dst,
                             size_t dst_bytes);
/* dt_tensor_local_shape (dtorch.h) */
dt_shape mesh_tensor_local_shape(const dt_tensor *t, int rank);
/* dt_tensor_placement (dtorch.h) */
dt_placement mesh_tensor_placement(const dt_tensor *t, int mesh_dim);
/* dt_redistribute (dtorch.h) */
dt_tensor *mesh_redistribute(dt_tensor *t, dt_mesh *mesh,
                             const dt_placement *placements);
/* dt_redistribute_like (dtorch.h) */
dt_tensor *mesh_redistribute_like(dt_tensor *t, const dt_tensor *like);
/* dt_redistribute_by_dict (dtorch.h) */
dt_tensor *mesh_redistribute_by_dict(dt_tensor *t, dt_mesh *mesh,
                                     const char *const *dim_names,
                                     const dt_placement *placements, int n,
                                     dt_default_placement mode);
/* dt_comm_count_begin (dtorch.h) */
void mesh_comm_count_begin(void);
/* dt_comm_count_end (dtorch.h) */
dt_comm_counts mesh_comm_count_end(void);
/* this thread's collectives go uncounted while paused (a debugging layer's
 * own gathers are not the program's); returns the previous state */
bool mesh_comm_count_pause(bool paused);
/* this thread's collectives, one call per communicating plan step, also
 * go to fn (dt_comm_debug); kind: a mesh_plan_kind; api: the public
 * function that caused it. NULL stops. */
typedef void (*mesh_comm_observer)(void *ctx, const dt_mesh *m, int mesh_dim,
                                   int kind, int64_t bytes, const char *api);
void mesh_comm_observe(mesh_comm_observer fn, void *ctx);

#endif
