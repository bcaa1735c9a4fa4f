/* Tensor handles: creation, refcounts, layout helpers and the public
 * queries. */
#include "core/tensor.h"

#include <stdlib.h>
#include <string.h>

#include "core/call.h"
#include "core/error.h"

core_stat_shard core_stat_shards[CORE_STAT_SHARDS];
static _Atomic unsigned stat_next;
static _Thread_local core_stat_shard *stat_mine;

core_stat_shard *core_stat_mine(void) {
  if (!stat_mine) /* relaxed: only spreads threads over shards */
    stat_mine = &core_stat_shards[atomic_fetch_add_explicit(
        &stat_next, 1, memory_order_relaxed) % CORE_STAT_SHARDS];
  return stat_mine;
}

void core_contiguous_strides(const int64_t *sizes, int ndim, int64_t *strides) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    s *= sizes[i] > 1 ? sizes[i] : 1;
  }
}

bool core_layout_is_contiguous(const int64_t *sizes, const int64_t *strides,
                             int ndim) {
  int64_t expect = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    if (sizes[i] == 0) return true;
    if (sizes[i] != 1 && strides[i] != expect) return false;
    expect *= sizes[i];
  }
  return true;
}

int core_wrap_dim(int dim, int ndim) {
  int n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n) return -1;
  return dim < 0 ? dim + n : dim;
}

dt_tensor *core_tensor_make(dt_dtype dtype, int ndim, const int64_t *sizes,
                          const int64_t *strides, int64_t offset,
                          core_storage *storage) {
  dt_tensor *t = malloc(sizeof *t);
  if (!t) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_tensor: out of host memory");
    return NULL;
  }
  atomic_init(&t->refcount, 1);
  /* the backend key follows the memory: a view of a CUDA tensor is one */
  t->keys = CORE_KEYSET(storage ? (core_key)storage->key : CORE_KEY_CPU);
  t->dtype = dtype;
  t->requires_grad = false;
  t->spec = NULL;
  t->ag = NULL;
  t->local.storage = storage;
  if (storage) core_storage_retain(storage);
  t->local.offset = offset;
  t->local.ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    t->local.sizes[i] = sizes[i];
    t->local.strides[i] = strides[i];
  }
  atomic_fetch_add_explicit(&core_stat_mine()->tensors, 1, memory_order_relaxed);
  return t;
}

dt_tensor *core_tensor_retain(dt_tensor *t) {
  /* relaxed: the caller already holds a reference that keeps t alive */
  if (t) atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
  return t;
}

void core_tensor_release(dt_tensor *t) {
  if (!t) return;
  /* acq_rel: our writes happen-before the free done by the last releaser */
  if (atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1)
    return;
  if (t->ag) t->ag->release(t->ag);
  if (t->local.storage) core_storage_release(t->local.storage);
  /* acq_rel: every alias's use happens-before the free by the last one */
  if (t->spec && atomic_fetch_sub_explicit(&t->spec->aliases, 1,
                                           memory_order_acq_rel) == 0)
    t->spec->free(t->spec);
  atomic_fetch_sub_explicit(&core_stat_mine()->tensors, 1, memory_order_relaxed);
  free(t);
}

int64_t core_live_tensors(void) {
  int64_t n = 0;
  for (int i = 0; i < CORE_STAT_SHARDS; i++)
    n += atomic_load_explicit(&core_stat_shards[i].tensors, memory_order_relaxed);
  return n;
}
int64_t core_live_storage_bytes(void) {
  int64_t n = 0;
  for (int i = 0; i < CORE_STAT_SHARDS; i++)
    n += atomic_load_explicit(&core_stat_shards[i].bytes, memory_order_relaxed);
  return n;
}

static dt_shape shape_of(const int64_t *v, int n) {
  dt_shape s = {.ndim = n};
  for (int i = 0; i < n; i++) s.dims[i] = v[i];
  return s;
}

dt_shape core_tensor_shape(const dt_tensor *t) {
  if (!t) return (dt_shape){.ndim = -1};
  return shape_of(t->local.sizes, t->local.ndim);
}
dt_shape core_tensor_strides(const dt_tensor *t) {
  if (!t) return (dt_shape){.ndim = -1};
  return shape_of(t->local.strides, t->local.ndim);
}
dt_dtype core_tensor_dtype(const dt_tensor *t) {
  return t ? t->dtype : DT_DTYPE_COUNT;
}
int64_t core_tensor_numel(const dt_tensor *t) { return t ? core_numel(t) : -1; }
int core_tensor_ndim(const dt_tensor *t) { return t ? t->local.ndim : -1; }
int64_t core_tensor_storage_offset(const dt_tensor *t) {
  return t ? t->local.offset : -1;
}
bool core_tensor_is_contiguous(const dt_tensor *t) {
  return t && core_layout_is_contiguous(t->local.sizes, t->local.strides,
                                      t->local.ndim);
}
bool core_tensor_shares_storage(const dt_tensor *a, const dt_tensor *b) {
  if (a && b && a->spec && b->spec)
    return a->spec == b->spec; /* a DTensor's shards belong to its spec */
  return a && b && a->local.storage && a->local.storage == b->local.storage;
}
bool core_tensor_requires_grad(const dt_tensor *t) {
  return t && t->requires_grad;
}
dt_mesh *core_tensor_mesh(const dt_tensor *t) {
  /* single device: NULL (the implicit 1-rank mesh) */
  return t && t->spec ? t->spec->mesh : NULL;
}
