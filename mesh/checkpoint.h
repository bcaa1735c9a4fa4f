/* Safetensors checkpoints (docs/io.md): the issuing thread reads and checks
 * the header (core/safetensors.h), makes the handle and publishes one
 * record; each rank reads its shard's byte ranges with io_uring
 * (sched/io.h) straight into its own device memory, or writes them when
 * saving. checkpoint.c: load and index; checkpoint_save.c: save. */
#ifndef MESH_CHECKPOINT_H
#define MESH_CHECKPOINT_H

#include "dtorch/dtorch.h"
#include "mesh/mesh.h"

/* where a loaded tensor lives: a mesh and its (unchecked) placements, or
 * rank `rank` of rt */
typedef struct mesh_st_target {
  dt_runtime *rt;
  int rank;
  dt_mesh *mesh;
  const dt_placement *placements;
} mesh_st_target;

/* dt_load_safetensors(_async) (dtorch.h): future NULL = none wanted */
dt_tensor *mesh_st_load(const char *path, const char *name,
                        const dt_load_options *o, const mesh_st_target *tg,
                        dt_future **future, const char *fn);
/* dt_safetensors_index (dtorch.h) */
dt_safetensors_info *mesh_st_index(const char *path, const char *fn);
/* dt_save_safetensors (dtorch.h): single-device tensors contiguous */
dt_status mesh_st_save(const char *path, dt_tensor *const *tensors,
                       const char *const *names, int n, const char *fn);
/* strerror_r into buf (the GNU form) */
const char *mesh_st_strerror(int err, char *buf, size_t len);

#endif
