/* DTensors: a global tensor whose shards live on the ranks of a mesh.
 *
 * The handle (dt_tensor with a spec) holds the mesh, one placement per mesh
 * dim, the global shape and one storage per mesh rank; each rank's local
 * tensor is contiguous with the sizes of its box (mesh_local_box). The
 * issuing thread validates and plans; every mesh rank runs its part of a
 * record (fill, distribute, gather, redistribute steps with collectives). */
#ifndef DT_MESH_DTENSOR_H
#define DT_MESH_DTENSOR_H

#include "mesh/mesh.h"
#include "core/call.h"
#include "core/tensor.h"

/* A DTensor handle over fresh storages (data allocated by the ranks).
 * placements already validated and normalised. */
dt_tensor *dtensor_make(dt_mesh *m, const dt_placement *pl, dt_shape shape,
                        dt_dtype dtype, const char *fn);
/* Specs are immutable once made; equal specs (same mesh content, placements,
 * global shape, dtype) hash equal — the key material of the sharding cache. */
uint64_t dtensor_spec_hash(const dt_dspec *s, dt_dtype dtype);
bool dtensor_spec_equal(const dt_dspec *a, dt_dtype da, const dt_dspec *b,
                        dt_dtype db);
/* Called by dt_tensor_release when the handle dies. */
void dtensor_free_spec(dt_dspec *s);
/* Normalises negative Shard dims and validates; error names fn. */
dt_status dtensor_check_placements(const dt_mesh *m, const dt_placement *in,
                                   const dt_shape *shape, dt_placement *out,
                                   const char *fn);
/* Factories and from_host with a mesh (api_tensor.c calls these). */
dt_tensor *dtensor_factory(dt_op_id op, dt_shape shape, dt_dtype dtype,
                           dt_mesh *mesh, const dt_placement *pl,
                           double value, const void *host, const char *fn);
dt_status dtensor_to_host(dt_tensor *t, void *dst, size_t bytes, bool wait,
                          dt_future **out, const char *fn);

#endif
