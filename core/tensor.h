/* The tensor core (docs/architecture.md): refcounted storage, a local
 * strided view (storage, sizes, strides, offset), a DTensor's spec, and the
 * public handle dt_tensor.
 *
 * A handle is immutable after creation except for its refcount. Single-device
 * tensors hold one local; a DTensor holds a spec and one storage per mesh
 * rank, and each rank's local is made from them. */
#ifndef DT_RUNTIME_TENSOR_H
#define DT_RUNTIME_TENSOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dtorch/dtorch.h"
#include "core/dtype.h"

/* An execution error recorded on a storage: later ops, fetches and futures
 * on it fail with this status and message. */
typedef struct dt_poison { dt_status status; char message[]; } dt_poison;

/* Refcounted device memory of one rank. The struct is made by the issuing
 * thread (runtime/storage.c); `data` is allocated, used and freed only by
 * the owning rank's thread. When the last reference drops, the engine's
 * free path that made it runs (on_last_release): the ground knows no
 * runtime. */
typedef struct dt_storage {
  _Atomic int64_t refcount;
  _Atomic(dt_poison *) poison;   /* set once by the rank, read by anyone */
  void *data;                    /* rank thread only */
  size_t nbytes;
  struct dt_runtime *rt;         /* holds a reference on it */
  int rank;
  struct dt_storage *next_free;  /* remote-free stack link */
  void (*on_last_release)(struct dt_storage *s);
} dt_storage;

typedef struct dt_local {
  dt_storage *storage;     /* NULL only for numel == 0 tensors */
  int64_t offset;          /* in elements */
  int ndim;
  int64_t sizes[DT_MAX_DIMS];
  int64_t strides[DT_MAX_DIMS];   /* in elements; 0 for expanded dims */
} dt_local;

/* A DTensor's distribution: the mesh, one placement per mesh dim, the
 * global shape and one storage per mesh rank (each rank's local tensor is
 * contiguous with the sizes of its box, mesh/mesh.h). Immutable once made;
 * freed through `free`, which the mesh layer that made it set. */
typedef struct dt_dspec {
  dt_mesh *mesh;                       /* retained */
  dt_placement placements[DT_MAX_DIMS];
  dt_shape shape;                      /* global */
  dt_storage **storages;               /* mesh size entries */
  void (*free)(struct dt_dspec *s);
} dt_dspec;

struct dt_tensor {
  _Atomic int64_t refcount;
  uint32_t keys;           /* dispatch keys this tensor lights (dispatch.h) */
  dt_dtype dtype;
  bool requires_grad;
  dt_local local;          /* single device; a DTensor: the global shape
                              with contiguous strides and no storage */
  struct dt_dspec *spec;   /* DTensor: mesh, placements, shards (mesh/) */
};

/* storage refcounts and poison (core/storage.c) */
void dt_storage_retain(dt_storage *s);
/* drops a reference; the last one runs s->on_last_release */
void dt_storage_release(dt_storage *s);
/* records an execution error on s (the first one wins) */
void dt_storage_set_poison(dt_storage *s, dt_status st, const char *msg);
static inline const dt_poison *dt_storage_poison(const dt_storage *s) {
  /* acquire: pairs with the release CAS in dt_storage_set_poison */
  return atomic_load_explicit(&((dt_storage *)s)->poison, memory_order_acquire);
}

/* Makes a handle over `storage` (retained) with the given layout; NULL +
 * DT_ERR_OUT_OF_MEMORY if the handle cannot be allocated. */
dt_tensor *dt_tensor_make(dt_dtype dtype, int ndim, const int64_t *sizes,
                          const int64_t *strides, int64_t offset,
                          dt_storage *storage);

static inline int64_t dt_numel_of(const int64_t *sizes, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= sizes[i];
  return n;
}
/* numel with overflow detection: false when the product passes INT64_MAX */
static inline bool dt_numel_checked(const int64_t *sizes, int ndim,
                                    int64_t *out) {
  int64_t n = 1;
  bool zero = false;
  for (int i = 0; i < ndim; i++) zero |= sizes[i] == 0;
  for (int i = 0; i < ndim && !zero; i++)
    if (__builtin_mul_overflow(n, sizes[i], &n)) return false;
  *out = zero ? 0 : n;
  return true;
}
static inline int64_t dt_numel(const dt_tensor *t) {
  return dt_numel_of(t->local.sizes, t->local.ndim);
}
void dt_contiguous_strides(const int64_t *sizes, int ndim, int64_t *strides);
bool dt_layout_is_contiguous(const int64_t *sizes, const int64_t *strides,
                             int ndim);
/* address of the first element of t's view: on the owning rank's thread,
 * once the op making t has run */
static inline char *dt_tensor_data(const dt_tensor *t) {
  if (!t->local.storage || !t->local.storage->data) return NULL;
  return (char *)t->local.storage->data +
         t->local.offset * (int64_t)dt_dtype_size(t->dtype);
}
/* normalises a possibly negative dim against ndim (scalar: ndim 0 accepts
 * -1 and 0 like PyTorch); returns -1 when out of range */
int dt_wrap_dim(int dim, int ndim);

/* checks shared by every public entry point: a non-NULL tensor */
#define DT_CHECK_TENSOR(t, fn, name)                                        \
  do {                                                                      \
    if (!(t)) {                                                             \
      if (dt_last_status() == DT_OK)                                        \
        dt_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);  \
      return NULL;                                                          \
    }                                                                       \
  } while (0)

/* Live tensor handles and storage bytes: sharded counters (one cache line
 * per shard, a thread sticks to one shard) so the hot path does not bounce
 * one line between threads; dt_live_* sum the shards. */
#define DT_STAT_SHARDS 16
typedef struct dt_stat_shard {
  _Alignas(64) _Atomic int64_t tensors;
  _Atomic int64_t bytes;
} dt_stat_shard;
extern dt_stat_shard dt_stat_shards[DT_STAT_SHARDS];
dt_stat_shard *dt_stat_mine(void);

#endif
