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

#include "sched/pool.h"
#include "sched/queue.h"
#include "sched/deque.h"

#define SCHED_MAX_WORDS 1024 /* ranks / 64: 65,536 ranks at most */

enum { RANK_AWAKE, RANK_ASLEEP, RANK_LENT };

/* what a queue cell holds: a record in place or the stop order; bseq is
 * the broadcast ring's tail when it was claimed (every broadcast ticket
 * below it runs first on this rank) */
typedef enum msg_kind { MSG_INLINE, MSG_STOP } msg_kind;
typedef struct msg_head {
  msg_kind kind;
  uint64_t bseq;
  _Alignas(16) char record[];     /* MSG_INLINE */
} msg_head;

/* a cell of the broadcast ring (see "Broadcast" above) */
typedef struct bcast_cell {
  _Atomic uint64_t seq;     /* t: free for ticket t; t + 1: ticket t published */
  _Atomic int remaining;    /* ranks that have not run ticket seq - 1 */
  msg_kind kind;
  _Alignas(16) char record[];
} bcast_cell;

typedef struct chunk_task {
  sched_range_fn fn;
  void *ctx;
  int64_t begin, end;
  _Atomic int64_t *remaining;
} chunk_task;

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
  _Atomic int64_t records_run, chunks_run, chunks_stolen, parks;
} rank_state;

struct sched_pool {
  sched_pool_config cfg;
  sched_faults *faults;    /* fault injection (sched/fault_table.h) */
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
/* runs one record on rank rs with its faults armed */
void sched_run_record(sched_pool *p, rank_state *rs, void *record);

#endif
