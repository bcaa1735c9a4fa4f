/* Storage: the refcounted handle on one rank's device memory.
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

#include "runtime/error.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"
#include "runtime/tensor.h"

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
  dt_runtime_ref(rt);
  atomic_fetch_add_explicit(&dt_stat_mine()->bytes, (int64_t)nbytes,
                            memory_order_relaxed);
  return s;
}

void dt_storage_retain(dt_storage *s) {
  /* relaxed: the caller holds a reference */
  atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
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

void dt_storage_release(dt_storage *s) {
  /* acq_rel: every use of s happens-before whatever frees it */
  if (atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
    return;
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

void dt_storage_set_poison(dt_storage *s, dt_status st, const char *msg) {
  if (!msg) msg = "execution failed";
  size_t n = strlen(msg);
  dt_poison *p = malloc(sizeof *p + n + 1);
  if (!p) return; /* nothing better to do: the op's output stays garbage */
  p->status = st;
  memcpy(p->message, msg, n + 1);
  dt_poison *expected = NULL;
  /* release: the message is written before it is visible; pairs with the
   * acquire in dt_storage_poison() */
  if (!atomic_compare_exchange_strong_explicit(&s->poison, &expected, p,
                                               memory_order_release,
                                               memory_order_relaxed))
    free(p); /* already poisoned: the first message stays */
}
