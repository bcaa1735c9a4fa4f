/* The tensor core (docs/architecture.md): refcounted storage, a local
 * strided view (storage, sizes, strides, offset), a DTensor's spec, and the
 * public handle dt_tensor.
 *
 * A handle's layout is immutable after creation; its storage's values
 * change only through dt_copy_ (docs/inplace.md), which bumps the
 * storage's version (a DTensor: its spec's). Single-device
 * tensors hold one local; a DTensor holds a spec and one storage per mesh
 * rank, and each rank's local is made from them. */
#ifndef CORE_TENSOR_H
#define CORE_TENSOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dtorch/dtorch.h"
#include "core/dtype.h"

/* An execution error recorded on a storage: later ops, fetches and futures
 * on it fail with this status and message. The message lives in the same
 * allocation, except for core_poison_no_memory (static: the poison set
 * when the host had no memory for the message; never freed). */
typedef struct core_poison { dt_status status; const char *message; } core_poison;
extern core_poison core_poison_no_memory;
/* frees a poison taken off a storage */
void core_poison_free(core_poison *p);

/* Refcounted device memory of one rank. The struct is made by the issuing
 * thread (runtime/storage.c); `data` is allocated, used and freed only by
 * the owning rank's thread. When the last reference drops, the engine's
 * free path that made it runs (on_last_release): the ground knows no
 * runtime. */
typedef struct core_storage {
  _Atomic int64_t refcount;
  _Atomic(core_poison *) poison;   /* set once by the rank, read by anyone */
  void *data;                    /* rank thread only */
  size_t nbytes;
  struct dt_runtime *rt;         /* holds a reference on it */
  int rank;
  int key;                       /* its backend's dispatch key (core_key) */
  struct core_storage *next_free;  /* remote-free stack link */
  void (*on_last_release)(struct core_storage *s);
  /* in-place writes issued into it (dt_copy_, docs/inplace.md): bumped
   * by the issuing thread, read by autograd's saved-tensor checks */
  _Atomic int64_t version;
} core_storage;

typedef struct core_local {
  core_storage *storage;     /* NULL only for numel == 0 tensors */
  int64_t offset;          /* in elements */
  int ndim;
  int64_t sizes[DT_MAX_DIMS];
  int64_t strides[DT_MAX_DIMS];   /* in elements; 0 for expanded dims */
} core_local;

/* A DTensor's distribution: the mesh, one placement per mesh dim, the
 * global shape and one storage per mesh rank (each rank's local tensor is
 * contiguous with the sizes of its box, mesh/mesh.h). Entry i of
 * `storages` is made by mesh rank i's own thread when the record that
 * produces the tensor runs there (NULL until then; written once with a
 * release store, read with an acquire load off that thread, or plainly
 * after something that orders it: the rank's own later records, a
 * collective, a future); so making a DTensor costs the issuing thread
 * nothing per rank. Otherwise immutable; freed through `free`, which the
 * mesh layer that made it set. */
typedef struct core_spec {
  dt_mesh *mesh;                       /* retained */
  dt_placement placements[DT_MAX_DIMS];
  dt_shape shape;                      /* global */
  core_storage **storages;   /* mesh size entries, made by the ranks */
  void (*free)(struct core_spec *s);
  /* the spec as words of a sharding-cache key (mesh id, dtype and ranks,
   * shape, placements) and their hash, made once with the spec
   * (mesh_dtensor_make), so a lookup copies them instead of encoding */
  int key_n;
  uint64_t key_hash;
  int64_t key[2 + 2 * DT_MAX_DIMS];
  int dry_es;   /* a dry run's spec: its element size, for the per-rank
                   memory counts (mesh/handle.c); 0 otherwise */
  /* in-place writes issued into the shards (dt_copy_), as a storage's */
  _Atomic int64_t version;
  /* handles beyond the first that share this spec (dt_detach): the last
   * one's release frees it */
  _Atomic int64_t aliases;
  /* the view op that made this DTensor ("select"), or NULL: a DTensor
   * view holds its own shards (a copy), so dt_copy_ refuses to write it */
  const char *view_of;
} core_spec;

/* A tensor's autograd state (dispatch/autograd.c owns what follows this
 * header): the tensor's last release calls `release`. core/ knows nothing
 * else of it. */
typedef struct core_autograd {
  void (*release)(struct core_autograd *a);
} core_autograd;

struct dt_tensor {
  _Atomic int64_t refcount;
  uint32_t keys;           /* dispatch keys this tensor lights (dispatch.h) */
  dt_dtype dtype;
  bool requires_grad;
  core_local local;          /* single device; a DTensor: the global shape
                              with contiguous strides and no storage */
  struct core_spec *spec;   /* DTensor: mesh, placements, shards (mesh/) */
  core_autograd *ag;        /* grad_fn / grad (autograd), else NULL */
};

/* the version counter shared by t and every view of its storage (a
 * DTensor: of its spec); NULL for an empty tensor without storage */
static inline _Atomic int64_t *core_version_of(const dt_tensor *t) {
  if (t->spec) return &t->spec->version;
  return t->local.storage ? &t->local.storage->version : NULL;
}
static inline int64_t core_tensor_version(const dt_tensor *t) {
  _Atomic int64_t *v = core_version_of(t);
  /* relaxed: a counter; the ops it guards are ordered by the streams */
  return v ? atomic_load_explicit(v, memory_order_relaxed) : 0;
}

/* storage refcounts and poison (core/storage.c) */
void core_storage_retain(core_storage *s);
/* drops a reference; the last one runs s->on_last_release */
void core_storage_release(core_storage *s);
/* records an execution error on s (the first one wins) */
void core_storage_set_poison(core_storage *s, dt_status st, const char *msg);
static inline const core_poison *core_storage_poison(const core_storage *s) {
  /* acquire: pairs with the release CAS in core_storage_set_poison */
  return atomic_load_explicit(&((core_storage *)s)->poison, memory_order_acquire);
}

/* Makes a handle over `storage` (retained) with the given layout; NULL +
 * DT_ERR_OUT_OF_MEMORY if the handle cannot be allocated. */
dt_tensor *core_tensor_make(dt_dtype dtype, int ndim, const int64_t *sizes,
                          const int64_t *strides, int64_t offset,
                          core_storage *storage);

static inline int64_t core_numel_of(const int64_t *sizes, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= sizes[i];
  return n;
}
/* numel with overflow detection: false when the product passes INT64_MAX */
static inline bool core_numel_checked(const int64_t *sizes, int ndim,
                                    int64_t *out) {
  int64_t n = 1;
  bool zero = false;
  for (int i = 0; i < ndim; i++) zero |= sizes[i] == 0;
  for (int i = 0; i < ndim && !zero; i++)
    if (__builtin_mul_overflow(n, sizes[i], &n)) return false;
  *out = zero ? 0 : n;
  return true;
}
/* The bytes of n elements of dtype d, checked: false when the product
 * overflows or passes INT64_MAX / 2 (no device or buffer holds that). The
 * one size computation of every public path that turns elements into
 * bytes. */
static inline bool core_bytes_of(int64_t n, dt_dtype d, size_t *bytes) {
  size_t b;
  if (n < 0 || __builtin_mul_overflow((size_t)n, core_dtype_size(d), &b) ||
      b > (size_t)INT64_MAX / 2)
    return false;
  *bytes = b;
  return true;
}
static inline int64_t core_numel(const dt_tensor *t) {
  return core_numel_of(t->local.sizes, t->local.ndim);
}
void core_contiguous_strides(const int64_t *sizes, int ndim, int64_t *strides);
bool core_layout_is_contiguous(const int64_t *sizes, const int64_t *strides,
                             int ndim);
/* address of the first element of t's view: on the owning rank's thread,
 * once the op making t has run */
static inline char *core_tensor_data(const dt_tensor *t) {
  if (!t->local.storage || !t->local.storage->data) return NULL;
  return (char *)t->local.storage->data +
         t->local.offset * (int64_t)core_dtype_size(t->dtype);
}
/* normalises a possibly negative dim against ndim (scalar: ndim 0 accepts
 * -1 and 0 like PyTorch); returns -1 when out of range */
int core_wrap_dim(int dim, int ndim);

/* Live tensor handles and storage bytes: sharded counters (one cache line
 * per shard, a thread sticks to one shard) so the hot path does not bounce
 * one line between threads; dt_live_* sum the shards. */
#define CORE_STAT_SHARDS 16
typedef struct core_stat_shard {
  _Alignas(64) _Atomic int64_t tensors;
  _Atomic int64_t bytes;
} core_stat_shard;
extern core_stat_shard core_stat_shards[CORE_STAT_SHARDS];
core_stat_shard *core_stat_mine(void);

/* ---- the implementations behind public entry points (api/) */
/* dt_tensor_shape (dtorch.h) */
dt_shape core_tensor_shape(const dt_tensor *t);
/* dt_tensor_dtype (dtorch.h) */
dt_dtype core_tensor_dtype(const dt_tensor *t);
/* dt_tensor_numel (dtorch.h) */
int64_t core_tensor_numel(const dt_tensor *t);
/* dt_tensor_ndim (dtorch.h) */
int core_tensor_ndim(const dt_tensor *t);
/* dt_tensor_strides (dtorch.h) */
dt_shape core_tensor_strides(const dt_tensor *t);
/* dt_tensor_storage_offset (dtorch.h) */
int64_t core_tensor_storage_offset(const dt_tensor *t);
/* dt_tensor_is_contiguous (dtorch.h) */
bool core_tensor_is_contiguous(const dt_tensor *t);
/* dt_tensor_shares_storage (dtorch.h) */
bool core_tensor_shares_storage(const dt_tensor *a, const dt_tensor *b);
/* dt_tensor_requires_grad (dtorch.h) */
bool core_tensor_requires_grad(const dt_tensor *t);
/* dt_tensor_mesh (dtorch.h) */
dt_mesh *core_tensor_mesh(const dt_tensor *t);
/* dt_tensor_retain (dtorch.h) */
dt_tensor *core_tensor_retain(dt_tensor *t);
/* dt_tensor_release (dtorch.h) */
void core_tensor_release(dt_tensor *t);
/* dt_live_tensors (dtorch.h) */
int64_t core_live_tensors(void);
/* dt_live_storage_bytes (dtorch.h) */
int64_t core_live_storage_bytes(void);

#endif
