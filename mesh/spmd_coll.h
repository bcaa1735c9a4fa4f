/* SPMD mode's mesh half (docs/spmd.md): collectives an SPMD function calls
 * on its rank's local tensors, and DTensors made from / taken back to a
 * rank's local tensor. Every function runs on the calling rank thread
 * (runtime_spmd_rank) and fails outside an SPMD function. `site`: where
 * the user called from ("train.c:88", a label, or NULL), carried by the
 * collective for desync reports. */
#ifndef MESH_SPMD_COLL_H
#define MESH_SPMD_COLL_H

#include "dtorch/dtorch.h"

dt_tensor *mesh_spmd_all_reduce(dt_tensor *t, dt_reduce_op op,
                                const dt_group *g, const char *site);
dt_tensor *mesh_spmd_all_gather(dt_tensor *t, int dim, const dt_group *g,
                                const char *site);
dt_tensor *mesh_spmd_reduce_scatter(dt_tensor *t, dt_reduce_op op, int dim,
                                    const dt_group *g, const char *site);
dt_tensor *mesh_spmd_all_to_all(dt_tensor *t, int split_dim, int concat_dim,
                                const dt_group *g, const char *site);
dt_tensor *mesh_spmd_broadcast(dt_tensor *t, int root, const dt_group *g,
                               const char *site);
dt_status mesh_spmd_barrier(const dt_group *g, const char *site);
dt_status mesh_spmd_send(dt_tensor *t, int dst, const char *site);
dt_tensor *mesh_spmd_recv(int src, dt_shape shape, dt_dtype dtype,
                          const char *site);
/* global NULL: inferred (every shard as large as this rank's) */
dt_tensor *mesh_spmd_from_local(dt_tensor *local, dt_mesh *mesh,
                                const dt_placement *pl, const dt_shape *global);
dt_tensor *mesh_spmd_to_local(dt_tensor *t);
/* Inside an SPMD function: t (a DTensor a call just made, run inline)
 * when this rank's shard of it is not poisoned; else t released and
 * NULL with the shard's error (the call's error is the op's, not a
 * poisoned handle: docs/spmd.md). Elsewhere t as it is. */
dt_tensor *mesh_spmd_checked(dt_tensor *t);
/* dt_to_host (wait) / dt_to_host_async of DTensor t on an SPMD rank: a
 * collective with the other ranks of t's mesh (Replicate first), then
 * this rank's replica */
dt_status mesh_spmd_to_host(dt_tensor *t, void *dst, size_t bytes, bool wait,
                            dt_future **out, const char *fn);

#endif
