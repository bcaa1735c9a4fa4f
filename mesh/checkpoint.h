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
/* Multi-process jobs (docs/io.md "Multi-process jobs"): every process's
 * issuing thread takes the same agreements in the same order; `mine` is
 * this process's status for the step (its message the thread's error), key
 * what it votes (keys, if not NULL, gets every process's, [nprocs]). One
 * process, or rt NULL: keys[0] = key, returns mine. Returns: DT_OK when
 * every process succeeded; else this process's own error if it failed,
 * else the first failing process's "fn: path: in process q of P: <its
 * message>"; or the agreement's own timeout / MPI error. */
dt_status mesh_st_agree(dt_runtime *rt, dt_status mine, uint64_t key,
                        uint64_t *keys, const char *fn, const char *path);
/* bytes this process's ranks moved between checkpoint files and their
 * memory (sched_io_stats.bytes summed: merged gaps and O_DIRECT padding
 * included), since the process started: for tests and benchmarks */
void mesh_st_io_bytes(int64_t *read, int64_t *written);
/* adds to the written count (checkpoint_save.c) */
void mesh_st_count_written(int64_t n);
/* strerror_r into buf (the GNU form) */
const char *mesh_st_strerror(int err, char *buf, size_t len);

#endif
