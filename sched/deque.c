/* The work-stealing deque (interface in deque.h): each worker owns one,
 * pushes and pops its own tasks at the bottom, and idle workers steal the
 * oldest task from the top of someone else's. The Chase–Lev deque
 * (D. Chase, Y. Lev, "Dynamic circular work-stealing deque", SPAA 2005) in
 * the C11 weak-memory form proved by N. M. Lê, A. Pop, A. Cohen,
 * F. Zappa Nardelli, "Correct and efficient work-stealing for weak memory
 * models", PPoPP 2013 (their figure 1), with the same memory orders.
 *
 * Algorithm. top and bottom are uint64_t indices into a circular array of
 * capacity 2^k (slot i & mask); the live items are [top, bottom). Indices
 * are compared through their signed difference, so they may start anywhere
 * and wrap through 2^64 (sched_deque_create_at lets tests cross the wrap).
 *   push(x): b = bottom; t = top (acquire); if full, grow;
 *     slot[b] = x; bottom = b + 1 (release).
 *   pop():   b = bottom - 1; bottom = b; seq_cst fence; t = top;
 *     t <  b: take slot[b], no race possible;
 *     t == b: the last item, race the thieves: CAS top t -> t + 1, then
 *             bottom = b + 1 whoever won;
 *     t >  b: empty, bottom = b + 1.
 *   steal(): t = top (acquire); seq_cst fence; b = bottom (acquire);
 *     if t < b: x = slot[t] (array loaded with acquire);
 *               CAS top t -> t + 1 (seq_cst); x if it succeeded, else NULL.
 *   grow: the owner copies [top, bottom) into a twice larger array at the
 *     same indices and publishes it (release). The old array is kept on a
 *     list until destroy: a thief may still be reading it.
 *
 * Invariants.
 *   I1 Only the owner writes bottom and array; top only grows, and only by
 *      a successful CAS (from a thief, or from the owner on the last item).
 *   I2 Each index is taken exactly once. Thieves, and the owner on the
 *      last item, take index t only by a CAS of top from t to t + 1, so one
 *      of them wins. The owner takes b without a CAS only when it read
 *      t < b after lowering bottom to b. The two seq_cst fences forbid the
 *      store-buffering outcome (owner: store bottom, fence, load top;
 *      thief: load top, fence, load bottom) in which the owner reads a top
 *      below b while a thief that read top == b reads a bottom above b. So
 *      no thief can still reach b.
 *   I3 The owner never overwrites a slot a thief may still read: it writes
 *      slot b only when b - t < capacity for a top t read with acquire, so
 *      every index that shares the slot (b - capacity and lower) was taken,
 *      and that taker's read of the slot happens before the write.
 *   I4 A thief that reads bottom > t sees slot t's item (and the memory the
 *      item points to): the push of t released bottom, and the owner's later
 *      relaxed stores of bottom extend that release sequence (C11/C17
 *      5.1.2.4: same-thread stores; C++20 dropped that rule, so a port to
 *      it would make pop's stores of bottom release, free on x86), so the
 *      acquire load of bottom synchronizes with it. It sees an array at
 *      least as new as the one t was pushed into, and every array it can
 *      see holds item t at slot t (copies keep indices; an older array is
 *      never written again).
 *
 * Progress. push and pop are wait-free (growth allocates); steal is
 * lock-free: a NULL from steal with items present means another taker won. */
#include "sched/deque.h"

#include "core/host_alloc.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#define DEQUE_LINE 64  /* bytes of one cache line */

typedef struct deque_array {
  uint64_t mask;              /* capacity - 1, capacity a power of two */
  struct deque_array *older;  /* the array this one replaced (owner only) */
  _Atomic(void *) slot[];     /* relaxed; ordering comes from top/bottom */
} deque_array;

struct sched_deque {
  /* CASed by thieves (and by the owner for the last item) */
  alignas(DEQUE_LINE) _Atomic uint64_t top;
  /* written by the owner only; read by thieves once per steal */
  alignas(DEQUE_LINE) _Atomic uint64_t bottom;
  _Atomic(deque_array *) array;
};

_Static_assert(offsetof(struct sched_deque, bottom) -
                   offsetof(struct sched_deque, top) >= DEQUE_LINE,
               "top and bottom must not share a cache line");

/* a - b for indices that may have wrapped through 2^64 (two's complement) */
static inline int64_t index_diff(uint64_t a, uint64_t b) {
  return (int64_t)(a - b);
}

static deque_array *array_new(uint64_t capacity) {
  if (capacity > ((uint64_t)1 << 40)) return NULL;  /* absurd: refuse */
  deque_array *a = core_host_malloc(sizeof *a + capacity * sizeof a->slot[0]);
  if (!a) return NULL;
  a->mask = capacity - 1;
  a->older = NULL;
  for (uint64_t i = 0; i < capacity; i++) atomic_init(&a->slot[i], NULL);
  return a;
}

sched_deque *sched_deque_create_at(int64_t capacity, uint64_t first) {
  uint64_t cap = 2;
  while ((int64_t)cap < capacity && cap < ((uint64_t)1 << 40)) cap <<= 1;
  if (capacity > (int64_t)cap) return NULL;
  sched_deque *q = aligned_alloc(DEQUE_LINE, sizeof *q);
  if (!q) return NULL;
  deque_array *a = array_new(cap);
  if (!a) {
    free(q);
    return NULL;
  }
  atomic_init(&q->top, first);
  atomic_init(&q->bottom, first);
  atomic_init(&q->array, a);
  return q;
}

sched_deque *sched_deque_create(int64_t capacity) {
  return sched_deque_create_at(capacity, 0);
}

void sched_deque_destroy(sched_deque *q) {
  if (!q) return;
  deque_array *a = atomic_load_explicit(&q->array, memory_order_relaxed);
  while (a) {
    deque_array *older = a->older;
    free(a);
    a = older;
  }
  free(q);
}

/* Owner only: a twice larger array holding [t, b) at the same indices,
 * published to thieves; NULL (deque unchanged) if allocation fails. */
static deque_array *grow(sched_deque *q, deque_array *old, uint64_t b,
                         uint64_t t) {
  deque_array *a = array_new(2 * (old->mask + 1));
  if (!a) return NULL;
  for (uint64_t i = t; i != b; i++) {
    void *x = atomic_load_explicit(&old->slot[i & old->mask],
                                   memory_order_relaxed);
    atomic_store_explicit(&a->slot[i & a->mask], x, memory_order_relaxed);
  }
  a->older = old;
  /* release: pairs with the acquire load of array in steal; a thief that
   * sees the new array sees its mask and the copied slots */
  atomic_store_explicit(&q->array, a, memory_order_release);
  return a;
}

bool sched_deque_push_owner(sched_deque *q, void *item) {
  uint64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed);
  /* acquire: pairs with the seq_cst CAS of top in steal; the thief's read
   * of the slot it took happens before we reuse that slot (I3) */
  uint64_t t = atomic_load_explicit(&q->top, memory_order_acquire);
  deque_array *a = atomic_load_explicit(&q->array, memory_order_relaxed);
  if (__builtin_expect(index_diff(b, t) > (int64_t)a->mask, 0)) {
    a = grow(q, a, b, t);
    if (!a) return false;
  }
  atomic_store_explicit(&a->slot[b & a->mask], item, memory_order_relaxed);
  /* release (the paper's release fence + relaxed store): pairs with the
   * acquire load of bottom in steal; publishes the slot and whatever the
   * item points to (I4) */
  atomic_store_explicit(&q->bottom, b + 1, memory_order_release);
  return true;
}

void *sched_deque_pop_owner(sched_deque *q) {
  uint64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed) - 1;
  deque_array *a = atomic_load_explicit(&q->array, memory_order_relaxed);
  atomic_store_explicit(&q->bottom, b, memory_order_relaxed);
  /* seq_cst fence: pairs with the seq_cst fence in steal; either that
   * thief's load of bottom sees b, or our load of top below sees its
   * earlier top (I2) */
  atomic_thread_fence(memory_order_seq_cst);
  uint64_t t = atomic_load_explicit(&q->top, memory_order_relaxed);
  int64_t n = index_diff(b, t);  /* items below the one at b */
  if (n < 0) {                   /* was empty */
    atomic_store_explicit(&q->bottom, b + 1, memory_order_relaxed);
    return NULL;
  }
  void *item = atomic_load_explicit(&a->slot[b & a->mask],
                                    memory_order_relaxed);
  if (n > 0) return item;  /* no thief can reach index b: top < b */
  /* the last item. seq_cst: pairs with the thieves' seq_cst CAS of top;
   * one single modification order of top decides the winner (I2) */
  if (!atomic_compare_exchange_strong_explicit(&q->top, &t, t + 1,
                                               memory_order_seq_cst,
                                               memory_order_relaxed))
    item = NULL;  /* a thief took it */
  atomic_store_explicit(&q->bottom, b + 1, memory_order_relaxed);
  return item;
}

void *sched_deque_steal(sched_deque *q) {
  /* acquire: pairs with the seq_cst CAS of top (steal or pop) that wrote
   * t; what that taker saw of bottom and array is not older for us */
  uint64_t t = atomic_load_explicit(&q->top, memory_order_acquire);
  /* seq_cst fence: pairs with the seq_cst fence in pop (I2) */
  atomic_thread_fence(memory_order_seq_cst);
  /* acquire: pairs with the release store of bottom in push (I4) */
  uint64_t b = atomic_load_explicit(&q->bottom, memory_order_acquire);
  if (index_diff(b, t) <= 0) return NULL;
  /* acquire (the paper's consume): pairs with the release store of array
   * in grow; we see the new array's mask and copied slots */
  deque_array *a = atomic_load_explicit(&q->array, memory_order_acquire);
  void *item = atomic_load_explicit(&a->slot[t & a->mask],
                                    memory_order_relaxed);
  /* seq_cst: pairs with the CAS of top in pop and in other thieves; only
   * one taker moves top from t (I2). Failure is relaxed: we return. */
  if (!atomic_compare_exchange_strong_explicit(&q->top, &t, t + 1,
                                               memory_order_seq_cst,
                                               memory_order_relaxed))
    return NULL;
  return item;
}

int64_t sched_deque_size(const sched_deque *q) {
  sched_deque *m = (sched_deque *)q;  /* C11 atomic loads take non-const */
  uint64_t b = atomic_load_explicit(&m->bottom, memory_order_relaxed);
  uint64_t t = atomic_load_explicit(&m->top, memory_order_relaxed);
  int64_t n = index_diff(b, t);
  return n > 0 ? n : 0;
}

int64_t sched_deque_capacity(const sched_deque *q) {
  sched_deque *m = (sched_deque *)q;
  /* acquire: pairs with the release store of array in grow (mask) */
  deque_array *a = atomic_load_explicit(&m->array, memory_order_acquire);
  return (int64_t)a->mask + 1;
}
