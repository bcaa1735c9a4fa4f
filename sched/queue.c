/* A rank's record queue (contract in queue.h): D. Vyukov's bounded MPMC
 * queue ("Bounded MPMC queue", 1024cores.net, 2010) used with one
 * consumer, records stored in the cells, and stamps stored relative to the
 * cell index so that zeroed memory is the initial state.
 *
 * Algorithm. Positions are uint64_t and compare modulo 2^64. Cell i holds
 * the positions p with p & mask == i, one per lap; its stamp says which
 * state the cell is in for the position p it expects next:
 *   stamp == p - i       free: a producer may claim position p;
 *   stamp == p - i + 1   committed: the consumer may read p;
 *   pop sets stamp = p + capacity - i: free for the next lap.
 *   claim: pos = tail; if stamp[pos & mask] == pos - i (acquire), CAS
 *     tail pos -> pos + 1; the winner owns the cell. A stamp behind pos
 *     means the cell still holds the previous lap's record: full.
 *   commit(pos): stamp = pos - i + 1 (release).
 *   peek: stamp[head & mask] == head - i + 1 (acquire).
 *   pop: stamp = head + capacity - i (release); head += 1.
 *
 * Invariants.
 *   Q1 A cell is owned by at most one party at a time: the producer that
 *      won the CAS for p (from the claim until its commit), then the
 *      consumer (from peek until pop). The stamp moves forward only, by
 *      the owner.
 *   Q2 The consumer reads positions in order, each exactly once: head only
 *      grows, and peek succeeds for head only after its commit.
 *   Q3 At most `capacity` positions are claimed and not popped: claiming
 *      p needs the pop of p - capacity (its stamp).
 * Memory orders: the commit's release pairs with the peek's acquire (the
 * record is written before the consumer reads it); the pop's release pairs
 * with the claim's acquire load of the stamp (the consumer is done reading
 * before a producer writes the next lap). The CAS on tail only arbitrates
 * between producers: relaxed.
 *
 * Progress. The consumer is wait-free. A producer waits only while this
 * queue is full; the consumer stops at a claimed, uncommitted cell while
 * its producer is between claim and commit (bounded: no lock is held
 * there, and the engine's producers never block in between). */
#include "sched/queue.h"

#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#define QUEUE_LINE 64          /* bytes of one cache line */
#define QUEUE_SPINS 64         /* pause instructions before yielding */
#define QUEUE_YIELDS 16        /* sched_yield calls before sleeping */
#define QUEUE_SLEEP_MAX_NS 50000

typedef struct cell_head {
  _Atomic uint64_t stamp;
} cell_head;

struct sched_queue {
  alignas(QUEUE_LINE) _Atomic uint64_t tail;  /* next position to claim */
  alignas(QUEUE_LINE) _Atomic uint64_t head;  /* written by the consumer */
  /* read-only after create */
  alignas(QUEUE_LINE) char *cells;  /* QUEUE_LINE-aligned, inside `block` */
  void *block;                  /* what calloc returned, or NULL */
  void *map;                    /* or the mapping of a prefaulted queue */
  size_t map_len;
  size_t stride;                /* bytes per cell: head + payload, aligned */
  uint64_t capacity, mask;
};

/* the payload starts one line after the stamp's line start, so a record
 * and its stamp never share a line with the neighbouring cell's payload */
#define PAYLOAD_OFFSET QUEUE_LINE

static inline cell_head *cell_at(const sched_queue *q, uint64_t pos) {
  return (cell_head *)(q->cells + (size_t)(pos & q->mask) * q->stride);
}
static inline void *payload(cell_head *c) { return (char *)c + PAYLOAD_OFFSET; }

sched_queue *sched_queue_create_at(uint32_t capacity, size_t cell_size,
                                   uint64_t first) {
  if (capacity < 2 || (capacity & (capacity - 1)) || cell_size == 0 ||
      cell_size > ((size_t)1 << 30))
    return NULL;
  sched_queue *q = aligned_alloc(QUEUE_LINE, sizeof *q);
  if (!q) return NULL;
  memset(q, 0, sizeof *q);
  q->stride = (PAYLOAD_OFFSET + cell_size + QUEUE_LINE - 1) &
              ~(size_t)(QUEUE_LINE - 1);
  q->capacity = capacity;
  q->mask = capacity - 1;
  /* calloc: large blocks come from mmap, zero pages untouched until used;
   * one line more, so the cells can start on a line boundary */
  q->block = calloc(1, (size_t)capacity * q->stride + QUEUE_LINE);
  if (!q->block) {
    free(q);
    return NULL;
  }
  q->cells = (char *)(((uintptr_t)q->block + QUEUE_LINE - 1) &
                      ~(uintptr_t)(QUEUE_LINE - 1));
  atomic_init(&q->tail, first);
  atomic_init(&q->head, first);
  /* zeroed stamps are right for first == 0; otherwise lap 0 starts at
   * first: cell i expects the position p in [first, first + capacity)
   * with p & mask == i */
  for (uint64_t k = 0; first != 0 && k < capacity; k++) {
    uint64_t p = first + k;
    atomic_init(&cell_at(q, p)->stamp, p - (p & q->mask));
  }
  return q;
}

sched_queue *sched_queue_create(uint32_t capacity, size_t cell_size) {
  return sched_queue_create_at(capacity, cell_size, 0);
}

size_t sched_queue_bytes(const sched_queue *q) {
  return (size_t)q->capacity * q->stride;
}

void sched_queue_prefault(sched_queue *q) {
  /* before any thread uses q: the cells move to a fresh mapping (zeroed
   * by the kernel, 2 MiB-aligned) advised into transparent huge pages, and
   * one write per page faults it in: one fault per 2 MiB where THP is on.
   * The stamps are copied (they are nonzero when q starts at first != 0). */
  size_t n = sched_queue_bytes(q), huge = (size_t)2 << 20;
  size_t len = (n + huge - 1) / huge * huge;
  char *m = mmap(NULL, len + huge, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return; /* the lazy cells stay */
  char *b = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
  if (b > m) munmap(m, (size_t)(b - m));            /* the unaligned head */
  munmap(b + len, (size_t)(m + huge - b));          /* and tail */
  madvise(b, len, MADV_HUGEPAGE);
  long page = sysconf(_SC_PAGESIZE);
  size_t step = page > 0 ? (size_t)page : 4096;
  for (size_t off = 0; off < len; off += step) ((volatile char *)b)[off] = 0;
  for (uint64_t i = 0; i < q->capacity; i++) {      /* the stamps */
    uint64_t st = atomic_load_explicit(&((cell_head *)(q->cells + i * q->stride))->stamp,
                                       memory_order_relaxed);
    if (st) atomic_init(&((cell_head *)(b + i * q->stride))->stamp, st);
  }
  free(q->block);
  q->block = NULL;
  q->map = q->cells = b;
  q->map_len = len;
}

void sched_queue_destroy(sched_queue *q) {
  if (!q) return;
  free(q->block);
  if (q->map) munmap(q->map, q->map_len);
  free(q);
}

void *sched_queue_try_claim(sched_queue *q, uint64_t *pos) {
  uint64_t p = atomic_load_explicit(&q->tail, memory_order_relaxed);
  for (;;) {
    cell_head *c = cell_at(q, p);
    /* acquire: pairs with the release in sched_queue_pop, so the
     * consumer's reads of the previous lap happen-before our writes */
    uint64_t s = atomic_load_explicit(&c->stamp, memory_order_acquire);
    int64_t d = (int64_t)(s - (p - (p & q->mask)));
    if (d == 0) {
      /* relaxed: the CAS only picks the one producer that owns p (Q1) */
      if (atomic_compare_exchange_weak_explicit(&q->tail, &p, p + 1,
                                                memory_order_relaxed,
                                                memory_order_relaxed)) {
        *pos = p;
        return payload(c);
      }
    } else if (d < 0) {
      return NULL; /* the cell still holds the previous lap: full (Q3) */
    } else {
      p = atomic_load_explicit(&q->tail, memory_order_relaxed);
    }
  }
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void *sched_queue_claim(sched_queue *q, uint64_t *pos) {
  long sleep_ns = 1000;
  for (int round = 0;; round++) {
    void *cell = sched_queue_try_claim(q, pos);
    if (cell) return cell;
    if (round < QUEUE_SPINS) {
      cpu_relax();
    } else if (round < QUEUE_SPINS + QUEUE_YIELDS) {
      sched_yield();
    } else {
      struct timespec ts = {0, sleep_ns};
      nanosleep(&ts, NULL);
      if (sleep_ns < QUEUE_SLEEP_MAX_NS) sleep_ns *= 2;
    }
  }
}

void sched_queue_commit(sched_queue *q, uint64_t pos) {
  /* release: the record is written before the consumer may read it; pairs
   * with the acquire in sched_queue_peek */
  atomic_store_explicit(&cell_at(q, pos)->stamp, pos - (pos & q->mask) + 1,
                        memory_order_release);
}

void *sched_queue_peek(sched_queue *q) {
  uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
  cell_head *c = cell_at(q, h);
  /* acquire: pairs with the release in sched_queue_commit */
  uint64_t s = atomic_load_explicit(&c->stamp, memory_order_acquire);
  return s == h - (h & q->mask) + 1 ? payload(c) : NULL;
}

void sched_queue_pop(sched_queue *q) {
  uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
  /* release: our reads of the record happen-before the next lap's claim;
   * pairs with the acquire in sched_queue_try_claim */
  atomic_store_explicit(&cell_at(q, h)->stamp,
                        h + q->capacity - (h & q->mask), memory_order_release);
  /* release: what the consumer did for the record happens-before a
   * sched_queue_done_through that sees it (pairs with its acquire) */
  atomic_store_explicit(&q->head, h + 1, memory_order_release);
}

uint64_t sched_queue_claimed(const sched_queue *q) {
  /* relaxed: the caller's own earlier claims are seen in program order;
   * others' are a snapshot */
  return atomic_load_explicit(&((sched_queue *)q)->tail, memory_order_relaxed);
}

bool sched_queue_done_through(const sched_queue *q, uint64_t pos) {
  /* acquire: pairs with the release store of head in sched_queue_pop */
  uint64_t h = atomic_load_explicit(&((sched_queue *)q)->head,
                                    memory_order_acquire);
  return (int64_t)(h - pos) >= 0;
}

uint64_t sched_queue_depth(const sched_queue *q) {
  /* two relaxed loads are no snapshot: the consumer may pop past the tail
   * read first (the difference goes "negative"), and pop frees a cell
   * before it advances head (a producer may claim it in between): clamp
   * to what the queue can hold */
  uint64_t t = atomic_load_explicit(&((sched_queue *)q)->tail, memory_order_relaxed);
  uint64_t h = atomic_load_explicit(&((sched_queue *)q)->head, memory_order_relaxed);
  int64_t d = (int64_t)(t - h);
  return d < 0 ? 0 : (uint64_t)d > q->capacity ? q->capacity : (uint64_t)d;
}
