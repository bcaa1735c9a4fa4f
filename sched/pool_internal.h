/* The pool's internals, shared by sched/pool.c (rank threads, queues,
 * the broadcast ring, parking) and sched/help.c (issuing threads running
 * a parked rank's records). Not part of the interface (sched/pool.h). */
#ifndef SCHED_POOL_INTERNAL_H
#define SCHED_POOL_INTERNAL_H

#include <ck_ec.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sched/pool.h"
#include "sched/queue.h"
#include "sched/deque.h"
#include "sched/fault_table.h"

#define SCHED_MAX_WORDS 1024 /* ranks / 64: 65,536 ranks at most */

enum { RANK_AWAKE, RANK_ASLEEP, RANK_LENT };

/* what a queue cell holds: a record in place or the stop order; bseq is
 * the broadcast ring's tail when it was claimed (every broadcast ticket
 * below it runs first on this rank) */
typedef enum msg_kind { MSG_INLINE, MSG_STOP } msg_kind;
typedef struct msg_head {
  msg_kind kind;
  uint64_t bseq;
  uint64_t gen;                   /* the pool's cancel_gen at the claim */
  _Alignas(16) char record[];     /* MSG_INLINE */
} msg_head;

/* a cell of the broadcast ring (see "Broadcast" above) */
typedef struct bcast_cell {
  _Atomic uint64_t seq;     /* t: free for ticket t; t + 1: ticket t published */
  _Atomic int remaining;    /* ranks that have not run ticket seq - 1 */
  msg_kind kind;
  uint64_t gen;             /* the pool's cancel_gen at the claim */
  _Alignas(16) char record[];
} bcast_cell;

/* A chunk of a sched_parallel_for: units [begin, end) of fn. A thief that
 * leaves a steps chunk early (sched/steal.c, "Steps") moves begin past the
 * units it ran and pushes the same chunk on its own deque. gen: the
 * cancel generation of the loop's record (SCHED_GEN_EXEMPT: never
 * cancelled). */
typedef struct chunk_task {
  sched_range_fn fn;
  void *ctx;
  int64_t begin, end;
  _Atomic int64_t *remaining;
  uint64_t gen;
  bool steps;
} chunk_task;

/* a record that dt_runtime_cancel does not stop (the default: only
 * records that arm it, sched_cancel_arm, are cancellable) */
#define SCHED_GEN_EXEMPT UINT64_MAX

typedef struct rank_state {
  _Alignas(64) struct ck_ec32 ec;
  uint64_t bnext;                /* next broadcast ticket (rank thread only) */
  _Atomic uint64_t bdone;        /* tickets run: bnext, published for drains */
  sched_queue *queue;
  sched_deque *deque;
  struct sched_pool *pool;
  pthread_t thread;
  int id;
  uint64_t rng;
  /* who runs this rank's records (sched/help.c): RANK_AWAKE its thread,
   * RANK_ASLEEP nobody (the thread sleeps in park; a helper may take it),
   * RANK_LENT a helper */
  _Atomic int tok;
  /* cancellation (sched/steal.c), the token holder's: the record it runs
   * was claimed at claim_gen; gen is claim_gen once the record armed its
   * cancellation, else SCHED_GEN_EXEMPT */
  uint64_t claim_gen, gen;
  /* stealing (the rank thread's; helpers run only tickets): records of
   * its own queue run, own_runs when it last looked and when (ns): a rank
   * that runs records of its own holds off stealing (pool.c,
   * own_stream_recent) */
  int64_t own_runs, seen_records, own_ns;
  _Atomic int64_t records_run, chunks_run, chunks_stolen, chunks_left, parks;
} rank_state;

struct sched_pool {
  sched_pool_config cfg;
  sched_faults *faults;    /* fault injection (sched/fault_table.h), keyed
                              by rank_base + the thread's index */
  int rank_base;
  rank_state *ranks;
  char *bcells;            /* the broadcast ring: bcap cells of bcell bytes */
  size_t bcell;
  uint64_t bcap;
  _Alignas(64) _Atomic uint64_t btail;    /* next broadcast ticket */
  _Alignas(64) _Atomic uint64_t *to_wake; /* ranks handed over to be woken */

  int nwords;
  _Alignas(64) _Atomic uint64_t *parked;   /* bitmap, one bit per rank */
  _Atomic uint64_t *bwait; /* per ring cell: ranks parked waiting for it */
  _Atomic int64_t wakes;
  _Atomic int64_t helped, help_woken; /* sched/help.c */
  _Atomic int spinning;    /* ranks spinning before parking */
  /* bumped by sched_pool_cancel: records claimed before fail (relaxed:
   * see sched/steal.c, "Cancellation") */
  _Alignas(64) _Atomic uint64_t cancel_gen;
  int max_spinners;
  bool crowded;            /* ranks + an issuing thread outnumber the CPUs */
};


/* the cell of broadcast ticket t */
static inline bcast_cell *sched_bcast_at(const sched_pool *p, uint64_t t) {
  return (bcast_cell *)(p->bcells + (t & (p->bcap - 1)) * p->bcell);
}

/* the waiters of ticket t's cell: nwords words, one bit per rank */
static inline _Atomic uint64_t *sched_bwait_at(const sched_pool *p, uint64_t t) {
  return p->bwait + (t & (p->bcap - 1)) * (uint64_t)p->nwords;
}

/* ticket rs->bnext if published, else NULL (whoever runs the rank) */
static inline bcast_cell *sched_bcast_peek(rank_state *rs) {
  bcast_cell *c = sched_bcast_at(rs->pool, rs->bnext);
  /* acquire: pairs with the commit's release (the record is written) */
  return atomic_load_explicit(&c->seq, memory_order_acquire) == rs->bnext + 1
             ? c : NULL;
}

/* ticket rs->bnext ran on this rank (whoever runs the rank) */
void sched_bcast_pop(rank_state *rs, bcast_cell *c);
/* the rank has a record, a ticket, a stealable chunk or pending work */
bool sched_rank_has_work(rank_state *rs);
/* increments rank r's event count: its thread leaves ck_ec32_wait */
void sched_wake_rank(sched_pool *p, int r);
/* hands the ranks in due (nwords words) over to be woken: wakes one of
 * them, which wakes the rest two at a time (pool.c: wake_caught_up) */
void sched_hand_over(sched_pool *p, const uint64_t *due);
/* exchanges this thread's pool and rank (sched_current_pool/_rank) with
 * *pool and *rank: a helper takes a lent rank's identity and gives it back */
void sched_swap_identity(sched_pool **pool, int *rank);
/* runs one record (claimed at cancel generation gen) on rank rs with its
 * faults armed */
void sched_run_record(sched_pool *p, rank_state *rs, void *record, uint64_t gen);
/* wakes parked ranks: `rank` >= 0 that one, SCHED_ALL every parked one,
 * or up to `limit` of them when rank == SCHED_ALL and limit > 0 (issues
 * the seq_cst fence that orders the caller's publication first) */
void sched_wake_parked(sched_pool *p, int rank, int limit);
/* steals one chunk from another rank's deque (or takes one left on its
 * own) and runs it; true if it ran one. top: called from the rank's main
 * loop, so a steps chunk may be left when the rank's own records arrive
 * (sched/steal.c) */
bool sched_try_steal(rank_state *rs, bool top);
/* the rank's own stream has something to run: a published ticket or a
 * queued record */
bool sched_own_work(rank_state *rs);

static inline void sched_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static inline int64_t sched_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#endif
