/* Storage on the engine's side: making it, and freeing it in stream order.
 *
 * The struct is made on the issuing thread when an op's output is created;
 * its data is allocated by the owning rank's thread when the op runs, and
 * only that thread touches the data and the device allocator (so the
 * allocator needs no lock). When the last reference drops:
 *   - on the owning rank's thread: freed there and then;
 *   - on another rank's thread: pushed on the owner's remote-free stack
 *     (rank threads never publish into the ring: one could wait on itself),
 *     which the owner drains before its next record, before it parks, or
 *     when a synchronize wakes it (runtime_wait_remote_frees);
 *   - on any other thread: a release record is published to the owner, so
 *     the free happens in stream order.
 * Storage of a destroyed runtime has no data left (the teardown freed every
 * block); releasing it frees the struct. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host_alloc.h"
#include "core/tensor.h"
#include "runtime/backend.h"
#include "runtime/dry.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"

static void last_release(core_storage *s);

/* The storages of rank r share one reference on the runtime, taken when
 * its count goes 0 -> 1 and dropped when it goes 1 -> 0: every transition
 * is paired with one ref or unref, so the runtime's count is the number
 * of ranks holding storages plus its other holders. The two halves of a
 * 1 -> 0 and a following 0 -> 1 can run in either order on two threads:
 * the count still never reaches 0 early, because a thread making a
 * storage holds a reference of its own (a runtime_ref precondition: the
 * runtime is live while its ranks or callers make storages).
 * relaxed add: the caller's reference keeps rt alive; acq_rel sub: every
 * use of this rank's storages happens-before the unref, which orders the
 * free of rt after them (its acq_rel). Out-of-range ranks (none today)
 * take the shared count directly. */
static void storages_add(dt_runtime *rt, int rank) {
  if (rank < 0 || rank >= rt->nranks) {
    runtime_ref(rt);
    return;
  }
  if (atomic_fetch_add_explicit(&rt->ranks[rank].storages, 1,
                                memory_order_relaxed) == 0)
    runtime_ref(rt);
}

static void storages_sub(dt_runtime *rt, int rank) {
  if (rank < 0 || rank >= rt->nranks) {
    runtime_unref(rt);
    return;
  }
  if (atomic_fetch_sub_explicit(&rt->ranks[rank].storages, 1,
                                memory_order_acq_rel) == 1)
    runtime_unref(rt);
}

core_storage *runtime_storage_new(dt_runtime *rt, int rank, size_t nbytes,
                           const char *fn) {
  if (nbytes > (size_t)INT64_MAX / 2) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: %zu bytes is more than any "
                 "device holds", fn, nbytes);
    return NULL;
  }
  core_storage *s = core_host_malloc(sizeof *s); /* ranks make DTensor shards */
  if (!s) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return NULL;
  }
  atomic_init(&s->refcount, 1);
  atomic_init(&s->poison, NULL);
  atomic_init(&s->version, 0);
  s->data = NULL;
  s->nbytes = nbytes;
  s->rt = rt;
  s->rank = rank;
  s->key = (int)rt->backend->key;
  s->next_free = NULL;
  s->on_last_release = last_release;
  storages_add(rt, rank);
  atomic_fetch_add_explicit(&core_stat_mine()->bytes, (int64_t)nbytes,
                            memory_order_relaxed);
  if (rt->dry_run) runtime_dry_memory(rt, rank, (int64_t)nbytes);
  return s;
}

static void free_struct(core_storage *s) {
  if (s->rt->dry_run) runtime_dry_memory(s->rt, s->rank, -(int64_t)s->nbytes);
  core_poison_free(atomic_load_explicit(&s->poison, memory_order_acquire));
  atomic_fetch_sub_explicit(&core_stat_mine()->bytes, (int64_t)s->nbytes,
                            memory_order_relaxed);
  dt_runtime *rt = s->rt;
  int rank = s->rank;
  free(s);
  storages_sub(rt, rank);
}

void runtime_storage_destroy_on_rank(core_storage *s, dt_runtime *rt, int rank) {
  rt->backend->free(rt, rank, s->data);
  runtime_note_memory(rt, rank);
  free_struct(s);
}

void runtime_storage_destroy_dead(core_storage *s) { free_struct(s); }

/* the last reference dropped (core/storage.c calls this through the
 * struct) */
static void last_release(core_storage *s) {
  dt_runtime *rt = s->rt;
  if (atomic_load_explicit(&rt->dead, memory_order_acquire)) {
    free_struct(s);
    return;
  }
  sched_pool *cur = sched_current_pool();
  bool own = runtime_gate_is_own(rt);
  if (own && sched_current_rank() + rt->first_rank == s->rank) {
    runtime_storage_destroy_on_rank(s, rt, s->rank);
    return;
  }
  /* another thread: inside the gate while it reaches the pool; a runtime
   * being destroyed frees the data with its devices (teardown) */
  if (!runtime_gate_enter(rt, NULL)) { /* a release reports nothing */
    free_struct(s);
    return;
  }
  if (cur) {
    int owner = s->rank; /* s belongs to the owner once pushed */
    runtime_ref(rt);     /* and may take the runtime's last storage ref */
    _Atomic(core_storage *) *head = &rt->ranks[owner].remote_free;
    /* relaxed: published by this rank's pop of its record (release), which
     * a synchronize watching the queues reads with acquire */
    atomic_fetch_add_explicit(&rt->ranks[owner].remote_pending, 1,
                              memory_order_relaxed);
    core_storage *old = atomic_load_explicit(head, memory_order_relaxed);
    do {
      s->next_free = old;
      /* release: s->next_free is written before s is reachable; pairs with
       * the acquire exchange in runtime_drain_remote_frees */
    } while (!atomic_compare_exchange_weak_explicit(
        head, &old, s, memory_order_release, memory_order_relaxed));
    /* no wake-up: the owner frees it before its next record or when it
     * parks; a synchronize wakes owners that still hold some
     * (runtime_wait_remote_frees). Waking here cost one futex call and
     * two context switches per rank per op: the last release of a
     * DTensor on one rank's thread hands every other rank its shard. */
    runtime_unref(rt);
  } else if (!runtime_publish_free(s)) { /* inside already: cannot fail */
    free_struct(s);
  }
  runtime_gate_leave(rt);
}

dt_tensor *runtime_tensor_alloc(dt_dtype dtype, int ndim, const int64_t *sizes,
                           struct dt_runtime *rt, int rank, const char *fn) {
  int64_t strides[DT_MAX_DIMS], n;
  size_t bytes;
  int64_t span = 1; /* strides multiply the non-zero sizes: keep them in range */
  bool span_ok = true;
  for (int i = 0; i < ndim && span_ok; i++)
    span_ok = !__builtin_mul_overflow(span, sizes[i] > 1 ? sizes[i] : 1, &span);
  if (!span_ok || !core_numel_checked(sizes, ndim, &n) ||
      __builtin_mul_overflow((size_t)n, core_dtype_size(dtype), &bytes)) {
    char b[CORE_SHAPE_STR_LEN];
    core_error_set(DT_ERR_OUT_OF_MEMORY,
                 "%s: a %s tensor of shape %s does not fit in memory (its "
                 "byte size overflows)", fn, core_dtype_name(dtype),
                 core_shape_str(sizes, ndim, b, sizeof b));
    return NULL;
  }
  core_contiguous_strides(sizes, ndim, strides);
  core_storage *s = runtime_storage_new(rt, rank, bytes, fn);
  if (!s) return NULL;
  dt_tensor *t = core_tensor_make(dtype, ndim, sizes, strides, 0, s);
  core_storage_release(s);
  return t;
}
