/* A mesh rank's shard buffers, shared by everything the ranks run for
 * DTensor records (mesh/rank_work.c, mesh/redist_exec.c): the box a
 * rank holds, contiguous views of box-shaped buffers, and a rank's device
 * memory for one record with its first error. A rank that failed (out of
 * memory, a failed input) allocates nothing more: it abstains from the
 * record's remaining collectives (sim_coll_abstain), so the other members
 * fail at once with its message instead of waiting for it, and its
 * output is poisoned with the first error. */
#ifndef MESH_SHARD_H
#define MESH_SHARD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "kernels/cpu/cpu.h"
#include "mesh/mesh.h"

/* the part of the global tensor one mesh index holds */
typedef struct mesh_box {
  int n;
  int64_t off[DT_MAX_DIMS], len[DT_MAX_DIMS];
} mesh_box;

mesh_box mesh_box_of(const dt_mesh *m, const dt_placement *pl,
                     const dt_shape *shape, int idx);
static inline int64_t mesh_box_numel(const mesh_box *b) {
  return core_numel_of(b->len, b->n);
}
/* the whole global shape as a box */
mesh_box mesh_box_all(const dt_shape *shape);

/* A contiguous view of a buffer shaped like b; dim >= 0 narrows it to
 * [start, start + count) along dim. */
cpu_view mesh_box_view(void *data, dt_dtype d, const mesh_box *b, int dim,
                       int64_t start, int64_t count);
/* Narrows a view of the global tensor to box b. */
void mesh_view_narrow(cpu_view *v, const mesh_box *b);

/* Partial placements at mesh index idx: true (and the identity in *value)
 * when a Partial(sum/prod) dim puts this index off coordinate 0 — the
 * global value lives on coordinate 0 and the others hold the identity. */
bool mesh_partial_identity(const dt_mesh *m, const dt_placement *pl, int idx,
                           double *value);

/* the mesh index that writes its box when the global value is assembled:
 * coordinate 0 on every non-Shard mesh dim (one writer per box) */
bool mesh_box_owner(const dt_mesh *m, const dt_placement *pl, int idx);

/* The first error recorded on any storage of t (a DTensor or a
 * single-device tensor), or NULL. */
const core_poison *mesh_tensor_poison(const dt_tensor *t);

/* ---- a rank's memory for one record */
typedef struct mesh_rank_mem {
  dt_runtime *rt;
  int rank;
  const char *api;        /* the public function, for messages */
  const dt_tensor *made;  /* the DTensor mesh_rank_storage last made a */
  int made_idx;           /* shard of (its mesh index): the block's tag */
  dt_status st;           /* first failure on this rank */
  char msg[512];
} mesh_rank_mem;

typedef struct mesh_buf { void *p; } mesh_buf; /* device memory or NULL */

void mesh_rank_mem_init(mesh_rank_mem *rm, dt_runtime *rt, int rank,
                        const char *api);
/* Records the first error (later ones are dropped). */
void mesh_rank_note(mesh_rank_mem *rm, dt_status st, const char *msg);
/* bytes of device memory; NULL (and the error noted) once the rank failed */
mesh_buf mesh_rank_alloc(mesh_rank_mem *rm, size_t bytes);
void mesh_rank_free(mesh_rank_mem *rm, mesh_buf b);
/* The output storage takes buffer b, or the first error (b is freed). */
void mesh_rank_finish(mesh_rank_mem *rm, core_storage *out, mesh_buf b);

/* Data movement in the rank's device memory, in its stream order (the
 * backend's: memcpy-like loops on a CPU rank, kernels on a CUDA one); a
 * failure is noted in rm (and returned). Nothing happens once rm failed. */
dt_status mesh_copy_view(mesh_rank_mem *rm, const cpu_view *dst,
                         const cpu_view *src);
dt_status mesh_fill(mesh_rank_mem *rm, void *data, dt_dtype d, int64_t n,
                    double value);
/* Between host memory and the rank's device memory: dev is a contiguous
 * buffer of the view's sizes. On a CPU rank a plain copy; on a device the
 * view is packed in a host buffer and copied over (the rank thread waits
 * for that copy: these are the API's host boundaries, from_host and
 * to_host). */
dt_status mesh_upload(mesh_rank_mem *rm, void *dev, const cpu_view *host);
dt_status mesh_download(mesh_rank_mem *rm, const cpu_view *host,
                        const void *dev);
/* Mesh index idx's storage of DTensor t, made now by the calling rank
 * (its thread owns it): the bytes of its box, published into
 * t->spec->storages[idx] with a release store. When the host has no memory
 * for the struct, the error is noted in rm and a static poisoned storage
 * stands in (never freed), so callers need no NULL check. */
core_storage *mesh_rank_storage(mesh_rank_mem *rm, const dt_tensor *t, int idx);
/* the same, and the box it sized (mesh_box_of of t's spec at idx) */
core_storage *mesh_rank_storage_box(mesh_rank_mem *rm, const dt_tensor *t, int idx,
                                    mesh_box *box);
/* Entry idx of a spec's storages from any thread: NULL while the rank has
 * not made it (an acquire load; pairs with mesh_rank_storage). */
static inline core_storage *mesh_spec_storage(const core_spec *s, int idx) {
  return __atomic_load_n(&s->storages[idx], __ATOMIC_ACQUIRE);
}

#endif
