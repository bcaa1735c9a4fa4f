/* Fault injection by kind (sched/fault_table.h).
 *
 * A table of countdowns, one per (rank, kind): the arming thread stores
 * n; the rank's thread decrements it at each event of the kind and fires
 * the fault on the decrement that reaches 0 (an atomic fetch_sub: a
 * re-arm racing with the count fires either the old or the new fault,
 * never both, never a lost one). `armed` counts nonzero countdowns, so
 * the points cost one relaxed load while nothing is armed. */
#include "sched/fault_table.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sched/pool.h"

struct sched_faults {
  _Atomic int armed;        /* first: sched_faults_armed reads it */
  int ranks;
  _Atomic int64_t fired;
  _Atomic int64_t (*left)[SCHED_FAULT_KINDS];   /* per rank, per kind */
  _Atomic int64_t *stall_ns;                    /* per rank */
};
_Static_assert(offsetof(struct sched_faults, armed) == 0, "armed first");

static const char *const kind_names[] = {"out of memory", "stall", "rank failure",
                                         "collective failure", "I/O error"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == SCHED_FAULT_KINDS,
               "one name per kind");

sched_faults *sched_faults_new(int ranks) {
  sched_faults *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->ranks = ranks;
  f->left = calloc((size_t)ranks, sizeof *f->left);
  f->stall_ns = calloc((size_t)ranks, sizeof *f->stall_ns);
  if (!f->left || !f->stall_ns) {
    sched_faults_free(f);
    return NULL;
  }
  return f;
}

void sched_faults_free(sched_faults *f) {
  if (!f) return;
  free(f->left);
  free(f->stall_ns);
  free(f);
}

void sched_fault_arm(sched_faults *f, int rank, sched_fault_kind kind,
                     int64_t after, int64_t stall_ns) {
  if (kind == SCHED_FAULT_STALL)
    atomic_store_explicit(&f->stall_ns[rank], stall_ns, memory_order_relaxed);
  /* release: the stall length before the count the rank acquires */
  int64_t old = atomic_exchange_explicit(&f->left[rank][kind], after,
                                         memory_order_release);
  if (old <= 0) atomic_fetch_add_explicit(&f->armed, 1, memory_order_relaxed);
}

void sched_fault_clear(sched_faults *f) {
  for (int r = 0; r < f->ranks; r++)
    for (int k = 0; k < SCHED_FAULT_KINDS; k++)
      if (atomic_exchange_explicit(&f->left[r][k], 0, memory_order_relaxed) > 0)
        atomic_fetch_sub_explicit(&f->armed, 1, memory_order_relaxed);
}

int64_t sched_fault_fired(const sched_faults *f) {
  return atomic_load_explicit(&((sched_faults *)f)->fired, memory_order_relaxed);
}

/* counts an event of kind on rank: true on the armed one */
static bool count(sched_faults *f, int rank, sched_fault_kind kind) {
  _Atomic int64_t *c = &f->left[rank][kind];
  /* relaxed: a quick look; the decrement decides */
  if (atomic_load_explicit(c, memory_order_relaxed) <= 0) return false;
  /* acquire: pairs with the arming exchange (the stall length) */
  int64_t was = atomic_fetch_sub_explicit(c, 1, memory_order_acquire);
  if (was != 1) {
    if (was <= 0) atomic_fetch_add_explicit(c, 1, memory_order_relaxed); /* cleared */
    return false;
  }
  atomic_fetch_sub_explicit(&f->armed, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&f->fired, 1, memory_order_relaxed);
  return true;
}

static void describe(char *msg, size_t len, sched_fault_kind kind, int rank) {
  snprintf(msg, len, "injected fault (dt_fault_inject): %s on rank %d",
           kind_names[kind], rank);
}

bool sched_fault_take_at(sched_faults *f, int rank, sched_fault_kind kind,
                         char *msg, size_t len) {
  if (!f || !sched_faults_armed(f) || rank < 0 || rank >= f->ranks ||
      !count(f, rank, kind))
    return false;
  describe(msg, len, kind, rank);
  return true;
}

bool sched_fault_take(sched_fault_kind kind, char *msg, size_t len) {
  sched_pool *p = sched_current_pool();
  return p && sched_fault_take_at(sched_pool_faults(p),
                                  sched_pool_rank_base(p) + sched_current_rank(),
                                  kind, msg, len);
}

void sched_fault_before_record(sched_faults *f, int rank) {
  if (count(f, rank, SCHED_FAULT_STALL)) {
    int64_t ns = atomic_load_explicit(&f->stall_ns[rank], memory_order_relaxed);
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
}
