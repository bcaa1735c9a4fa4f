/* The broadcast op ring (interface and contract in ring.h): the caller's
 * threads publish one record per op; every rank's worker reads every record
 * with its own cursor. A multi-producer, multi-consumer broadcast ring after
 * the LMAX Disruptor (M. Thompson, D. Farley, M. Barker, P. Gee, A. Stewart,
 * "Disruptor: High performance alternative to bounded queues for exchanging
 * data between concurrent threads", LMAX, 2011): a sequence claimed with one
 * fetch-add, a per-slot "published" sequence in place of the paper's
 * availability buffer, and a cached gating sequence.
 *
 * Algorithm. Sequences are uint64_t and compared modulo 2^64 (the ring may
 * be created at any first sequence, so tests can cross the wrap).
 *   publish(item): seq = fetch_add(head, 1); if seq - gate >= capacity,
 *     wait until every cursor > seq - capacity and raise gate to the least
 *     cursor seen; slot[seq & mask].item = item; slot.seq = seq (release).
 *   peek(c): cur = cursor[c]; if slot[cur & mask].seq == cur (acquire),
 *     return its item.
 *   advance(c): cursor[c] = cur + 1 (release).
 *
 * Invariants (for every claimed seq, first <= seq in modular order):
 *   I1 gate <= min over c of cursor[c] <= every unpublished claimed seq.
 *      Cursors only grow, and gate only grows to a minimum some producer
 *      observed, so a stale gate is merely conservative.
 *   I2 slot[s & mask] is written for s only after every consumer has
 *      finished s - capacity (its cursor > s - capacity): the ring never
 *      holds more than `capacity` records unread by the slowest consumer,
 *      and an unread slot is never overwritten.
 *   I3 slot.seq == cur exactly when record cur is published: a slot starts
 *      one lap behind (first lap's sequence - capacity), and by I2 the next
 *      lap's value (cur + capacity) cannot be written before cursor > cur.
 *   I4 every consumer reads the records in sequence order, hence all in the
 *      same global order; a producer's records are in its claim order
 *      (fetch-adds by one thread return increasing values).
 *
 * Cost. A publish touches head, gate and one slot. The O(consumers) scan
 * runs only when a claim would pass the cached gate, i.e. at most once per
 * (capacity - lag) publishes while consumers keep up, and otherwise only
 * when the ring is full and the producer has to wait anyway.
 *
 * Progress. Consumers are wait-free. A producer blocks only while the ring
 * is full, or (a Disruptor property) consumers stall behind a claimed but
 * unpublished sequence while its producer is descheduled between the
 * fetch-add and the release store. */
#include "sched/ring.h"

#include <limits.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"

#define RING_LINE 64          /* bytes of one cache line */
#define RING_SPINS 64         /* pause instructions before yielding */
#define RING_YIELDS 16        /* sched_yield calls before sleeping */
#define RING_SLEEP_MAX_NS 50000

typedef struct ring_slot {
  _Atomic uint64_t seq;  /* the sequence last published in this slot */
  void *item;            /* written before seq's release store (I2, I3) */
} ring_slot;

/* one cache line per consumer: an advance invalidates no other cursor */
typedef struct ring_cursor {
  alignas(RING_LINE) _Atomic uint64_t next;  /* first unfinished record */
} ring_cursor;

struct sched_ring {
  alignas(RING_LINE) _Atomic uint64_t head;  /* next sequence to claim */
  /* the cached gating minimum, a hint (I1), read by every publish */
  alignas(RING_LINE) _Atomic uint64_t gate;
  /* read-only after create */
  alignas(RING_LINE) ring_slot *slots;
  ring_cursor *cursors;
  uint64_t capacity, mask;
  int consumers;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* One step of a wait: spin (pause), then yield the core, then sleep with
 * exponential backoff (1, 2, 4, ... 32, then 50 µs): with more threads than
 * cores the consumer we wait for may need our core. */
static void backoff(unsigned *step) {
  unsigned s = *step;
  if (s < UINT_MAX) *step = s + 1;
  if (s < RING_SPINS) {
    cpu_relax();
    return;
  }
  if (s < RING_SPINS + RING_YIELDS) {
    sched_yield();
    return;
  }
  unsigned k = s - RING_SPINS - RING_YIELDS;
  long ns = k < 6 ? 1000L << k : RING_SLEEP_MAX_NS;
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

/* a is strictly later than b in modular sequence order */
static inline bool seq_after(uint64_t a, uint64_t b) {
  return a != b && a - b < (UINT64_C(1) << 63);
}

static void *aligned_zalloc(size_t bytes) {
  bytes = (bytes + RING_LINE - 1) / RING_LINE * RING_LINE;
  void *p = aligned_alloc(RING_LINE, bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

sched_ring *sched_ring_create_at(uint32_t capacity, int consumers,
                                 uint64_t first) {
  if (capacity < 2 || (capacity & (capacity - 1)) != 0 || consumers < 1) {
    core_error_set(DT_ERR_INVALID_ARGUMENT,
                 "sched_ring_create: capacity %u (a power of two >= 2) and "
                 "consumers %d (>= 1)", capacity, consumers);
    return NULL;
  }
  sched_ring *r = aligned_zalloc(sizeof *r);
  if (!r) goto oom;
  r->slots = aligned_zalloc((size_t)capacity * sizeof *r->slots);
  r->cursors = aligned_zalloc((size_t)consumers * sizeof *r->cursors);
  if (!r->slots || !r->cursors) goto oom;
  r->capacity = capacity;
  r->mask = capacity - 1;
  r->consumers = consumers;
  /* Plain initialisation (relaxed): the threads that use the ring receive
   * it through whatever publishes the pointer (thread creation, a release
   * store), which orders these stores before their first access. */
  for (uint64_t j = 0; j < capacity; j++) {
    /* one lap behind the first sequence that maps to slot j (I3) */
    uint64_t lap0 = first + ((j - first) & r->mask);
    atomic_init(&r->slots[j].seq, lap0 - capacity);
    r->slots[j].item = NULL;
  }
  for (int c = 0; c < consumers; c++) atomic_init(&r->cursors[c].next, first);
  atomic_init(&r->head, first);
  atomic_init(&r->gate, first);
  return r;
oom:
  sched_ring_destroy(r);
  core_error_set(DT_ERR_OUT_OF_MEMORY,
               "sched_ring_create: out of memory (capacity %u, consumers %d)",
               capacity, consumers);
  return NULL;
}

sched_ring *sched_ring_create(uint32_t capacity, int consumers) {
  return sched_ring_create_at(capacity, consumers, 0);
}

void sched_ring_destroy(sched_ring *r) {
  if (!r) return;
  free(r->slots);
  free(r->cursors);
  free(r);
}

/* Raises the cached gate to `least` unless another producer raised it
 * further; the gate never moves back (I1). */
static void gate_raise(sched_ring *r, uint64_t least) {
  uint64_t old = atomic_load_explicit(&r->gate, memory_order_relaxed);
  /* release: pairs with the acquire load of gate in sched_ring_publish.
   * The caller's acquire loads of the cursors precede this store, so the
   * consumers' last reads of every slot below `least` happen before any
   * producer that trusts this gate without scanning writes the slot. */
  while (seq_after(least, old) &&
         !atomic_compare_exchange_weak_explicit(&r->gate, &old, least,
                                                memory_order_release,
                                                memory_order_relaxed)) {
  }
}

/* The slow path of publish: seq would pass the cached gate. Waits until
 * every consumer has finished seq - capacity (I2), then raises the gate to
 * the least cursor seen, so the next publishes skip this scan. */
static void gate_wait(sched_ring *r, uint64_t seq) {
  uint64_t lag = 0; /* the largest seq - cursor seen */
  for (int c = 0; c < r->consumers; c++) {
    unsigned step = 0;
    uint64_t d;
    /* acquire: pairs with the release store in sched_ring_advance: the
     * consumer's reads of slot (seq - capacity) happen before our write */
    while ((d = seq - atomic_load_explicit(&r->cursors[c].next,
                                           memory_order_acquire)) >=
           r->capacity)
      backoff(&step);
    if (d > lag) lag = d;
  }
  gate_raise(r, seq - lag);
}

/* claim + commit: for producers that fill a record stored beside the slot
 * (the pool's records) between the two. on_wait(arg) runs before the
 * claimer starts waiting for a full ring (e.g. to wake parked consumers). */
uint64_t sched_ring_claim(sched_ring *r, void (*on_wait)(void *), void *arg) {
  /* relaxed: as in sched_ring_publish */
  uint64_t seq = atomic_fetch_add_explicit(&r->head, 1, memory_order_relaxed);
  /* acquire: as in sched_ring_publish (pairs with gate_raise) */
  uint64_t gate = atomic_load_explicit(&r->gate, memory_order_acquire);
  if (seq - gate >= r->capacity) {
    if (on_wait) on_wait(arg);
    gate_wait(r, seq);
  }
  return seq;
}

void sched_ring_commit(sched_ring *r, uint64_t seq, void *item) {
  CORE_ASSERT(item != NULL);
  ring_slot *s = &r->slots[seq & r->mask];
  s->item = item;
  /* release: pairs with the acquire load in sched_ring_peek (as publish) */
  atomic_store_explicit(&s->seq, seq, memory_order_release);
}

uint64_t sched_ring_publish(sched_ring *r, void *item) {
  CORE_ASSERT(item != NULL);
  /* Relaxed: the claim needs only atomicity (each sequence goes to exactly
   * one producer). Nothing is published through head: the slot's reuse is
   * ordered by the acquire on gate / cursors below, and the item's
   * visibility by the release on slot->seq. */
  uint64_t seq = atomic_fetch_add_explicit(&r->head, 1, memory_order_relaxed);
  /* acquire: pairs with the release CAS in gate_raise (the gate carries
   * the scanning producer's acquire loads of the cursors, see there) */
  uint64_t gate = atomic_load_explicit(&r->gate, memory_order_acquire);
  if (seq - gate >= r->capacity) gate_wait(r, seq);
  ring_slot *s = &r->slots[seq & r->mask];
  s->item = item;
  /* release: pairs with the acquire load in sched_ring_peek: a consumer
   * that sees seq sees the item and everything written before publish */
  atomic_store_explicit(&s->seq, seq, memory_order_release);
  return seq;
}

void *sched_ring_peek(sched_ring *r, int c, uint64_t *seq) {
  CORE_ASSERT(c >= 0 && c < r->consumers);
  /* relaxed: only consumer c writes its cursor */
  uint64_t cur =
      atomic_load_explicit(&r->cursors[c].next, memory_order_relaxed);
  *seq = cur;
  const ring_slot *s = &r->slots[cur & r->mask];
  /* acquire: pairs with the release store in sched_ring_publish (I3) */
  if (atomic_load_explicit(&s->seq, memory_order_acquire) != cur) return NULL;
  return s->item;
}

void sched_ring_advance(sched_ring *r, int c) {
  CORE_ASSERT(c >= 0 && c < r->consumers);
  /* relaxed: only consumer c writes its cursor */
  uint64_t cur =
      atomic_load_explicit(&r->cursors[c].next, memory_order_relaxed);
  /* relaxed: a misuse check only. After a successful peek this reads cur
   * (read-read coherence; cur + capacity cannot be written yet, I2). */
  CORE_ASSERT(atomic_load_explicit(&r->slots[cur & r->mask].seq,
                                 memory_order_relaxed) == cur);
  /* release: pairs with the acquire loads in gate_wait and
   * sched_ring_cursor: our reads of the slot (and of what its item points
   * to) happen before a producer reuses the slot */
  atomic_store_explicit(&r->cursors[c].next, cur + 1, memory_order_release);
}

uint64_t sched_ring_claimed(const sched_ring *r) {
  /* relaxed: a counter; it orders nothing (see sched_ring_publish) */
  return atomic_load_explicit(&r->head, memory_order_relaxed);
}

uint64_t sched_ring_cursor(const sched_ring *r, int c) {
  CORE_ASSERT(c >= 0 && c < r->consumers);
  /* acquire: pairs with the release store in sched_ring_advance, so a
   * waiter that sees cursor > s also sees consumer c's work on records <= s */
  return atomic_load_explicit(&r->cursors[c].next, memory_order_acquire);
}
