/* Storage on the engine's side: making it, and freeing it in stream order.
 *
 * The struct is made on the issuing thread when an op's output is created;
 * its data is allocated by the owning rank's thread when the op runs, and
 * only that thread touches the data and the device allocator (so the
 * allocator needs no lock). When the last reference drops:
 *   - on the owning rank's thread: freed there and then;
 *   - on another rank's thread: pushed on the owner's remote-free stack
 *     (rank threads never publish into the ring: one could wait on itself);
 *   - on any other thread: a release record is published to the owner, so
 *     the free happens in stream order.
 * Storage of a destroyed runtime has no data left (the teardown freed every
 * block); releasing it frees the struct. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"
#include "core/tensor.h"

static void last_release(dt_storage *s);

dt_storage *dt_storage_new(dt_runtime *rt, int rank, size_t nbytes,
                           const char *fn) {
  if (nbytes > (size_t)INT64_MAX / 2) {
    dt_error_set(DT_ERR_OUT_OF_MEMORY, "%s: %zu bytes is more than any "
                 "device holds", fn, nbytes);
    return NULL;
  }
  dt_storage *s = malloc(sizeof *s);
  if (!s) {
    dt_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return NULL;
  }
  atomic_init(&s->refcount, 1);
  atomic_init(&s->poison, NULL);
  s->data = NULL;
  s->nbytes = nbytes;
  s->rt = rt;
  s->rank = rank;
  s->next_free = NULL;
  s->on_last_release = last_release;
  dt_runtime_ref(rt);
  atomic_fetch_add_explicit(&dt_stat_mine()->bytes, (int64_t)nbytes,
                            memory_order_relaxed);
  return s;
}

static void free_struct(dt_storage *s) {
  dt_poison *p = atomic_load_explicit(&s->poison, memory_order_acquire);
  free(p);
  atomic_fetch_sub_explicit(&dt_stat_mine()->bytes, (int64_t)s->nbytes,
                            memory_order_relaxed);
  dt_runtime *rt = s->rt;
  free(s);
  dt_runtime_unref(rt);
}

void dt_storage_destroy_on_rank(dt_storage *s, dt_runtime *rt, int rank) {
  sim_device_free(&rt->ranks[rank].dev, s->data);
  dt_runtime_note_memory(rt, rank);
  free_struct(s);
}

void dt_storage_destroy_dead(dt_storage *s) { free_struct(s); }

/* the last reference dropped (core/storage.c calls this through the
 * struct) */
static void last_release(dt_storage *s) {
  dt_runtime *rt = s->rt;
  if (atomic_load_explicit(&rt->dead, memory_order_acquire)) {
    free_struct(s);
    return;
  }
  sched_pool *cur = sched_current_pool();
  if (cur == rt->pool && sched_current_rank() == s->rank) {
    dt_storage_destroy_on_rank(s, rt, s->rank);
  } else if (cur) {
    _Atomic(dt_storage *) *head = &rt->ranks[s->rank].remote_free;
    dt_storage *old = atomic_load_explicit(head, memory_order_relaxed);
    do {
      s->next_free = old;
      /* release: s->next_free is written before s is reachable; pairs with
       * the acquire exchange in dt_exec_drain_remote_frees */
    } while (!atomic_compare_exchange_weak_explicit(
        head, &old, s, memory_order_release, memory_order_relaxed));
  } else {
    dt_exec_publish_free(s);
  }
}

dt_tensor *dt_tensor_alloc(dt_dtype dtype, int ndim, const int64_t *sizes,
                           struct dt_runtime *rt, int rank, const char *fn) {
  int64_t strides[DT_MAX_DIMS], n;
  size_t bytes;
  int64_t span = 1; /* strides multiply the non-zero sizes: keep them in range */
  bool span_ok = true;
  for (int i = 0; i < ndim && span_ok; i++)
    span_ok = !__builtin_mul_overflow(span, sizes[i] > 1 ? sizes[i] : 1, &span);
  if (!span_ok || !dt_numel_checked(sizes, ndim, &n) ||
      __builtin_mul_overflow((size_t)n, dt_dtype_size(dtype), &bytes)) {
    char b[DT_SHAPE_STR_LEN];
    dt_error_set(DT_ERR_OUT_OF_MEMORY,
                 "%s: a %s tensor of shape %s does not fit in memory (its "
                 "byte size overflows)", fn, dt_dtype_name(dtype),
                 dt_shape_str(sizes, ndim, b, sizeof b));
    return NULL;
  }
  dt_contiguous_strides(sizes, ndim, strides);
  dt_storage *s = dt_storage_new(rt, rank, bytes, fn);
  if (!s) return NULL;
  dt_tensor *t = dt_tensor_make(dtype, ndim, sizes, strides, 0, s);
  dt_storage_release(s);
  return t;
}
