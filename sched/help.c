/* Helping (sched/help.h): the issuing thread runs a sleeping rank's part
 * of the record it just published.
 *
 * Token. Every rank has a token word (rank_state.tok) that says who runs
 * its records: its thread (AWAKE), nobody (ASLEEP: the thread sleeps in
 * park) or a helper (LENT). Only the holder touches the rank's consumer
 * state (bnext, its queue's head, its device allocator). The thread gives
 * the token up with a release store of ASLEEP just before it sleeps (after
 * its park re-check found nothing); a helper takes it with a CAS
 * ASLEEP -> LENT (acquire) and gives it back with a release store of
 * ASLEEP; the thread, woken, takes it back with a CAS ASLEEP -> AWAKE
 * (acquire), waiting while it is LENT. So every run of the rank's records
 * is ordered after the previous holder's.
 *
 * Deferral. The commit of ticket t takes the waiters parked for it
 * (pool.c: wake_caught_up). On a thread armed by sched_help_begin, they
 * are not woken but owed: their parked bits stay set (a producer of a
 * one-rank record still finds and wakes them), their waiter bits are gone
 * (the committer of t took them). Invariant H (help.h): before
 * sched_help_settle returns, every owed rank was either helped, which
 * re-parks it (below), or woken.
 *
 * Help. With the token, the helper runs ticket t on the rank if it is the
 * rank's next record and helpable (cfg.helpable), as that rank (its pool
 * and rank identity, its host-allocation fault mark, its error state saved
 * and restored), and nothing else; then it re-parks
 * it exactly as park() does: sets its waiter bit on the cell of its new
 * bnext (seq_cst), a seq_cst fence, then the re-check of its work. The
 * producers' side is unchanged (publish, fence, read the waiter bits), so
 * the Dekker argument of pool.c holds: either a later producer sees the
 * bit and wakes the rank, or the re-check sees its work and the helper
 * wakes it. The helper does the re-check while it still holds the token
 * (the rank's bnext is the holder's), gives the token back, then wakes.
 * A thread woken while its rank is lent waits for the token (take_back).
 *
 * Rounds. A collective's member waits for the others in its rendezvous.
 * Helping a ROUND record is only started when every rank not owed has
 * already run it and every owed rank sleeps exactly at it (all_reached);
 * then the rendezvous of a helped member, waiting, helps the next owed
 * rank (sim/collectives.c calls sched_help_next), nested up to
 * MAX_DEPTH, so one thread can make every sleeping member arrive. A ROUND
 * record holds one collective step, so a nested member never waits for a
 * suspended outer one: every member it waits for has arrived, is awake,
 * or is owed and helped deeper. */
#include "sched/help.h"

#include <stdatomic.h>
#include <string.h>

#include "core/error.h"
#include "core/host_alloc.h"
#include "sched/chaos.h"
#include "sched/fault_table.h"
#include "sched/fence.h"
#include "sched/pool_internal.h"
#include "sched/trace_recorder.h"

#define HELP_WORDS 4   /* pools of up to 256 ranks defer */
#define MAX_DEPTH 16   /* nested helps in one thread's stack */

typedef struct help_state {
  sched_pool *armed;        /* the next commit on this pool defers */
  sched_help_kind kind;     /* of the armed record */
  sched_pool *pool;         /* whose ranks are owed */
  sched_help_kind owed_kind;
  uint64_t ticket;          /* the deferred ticket */
  uint64_t owed[HELP_WORDS];
  int depth;                /* helps running on this thread's stack */
} help_state;

static _Thread_local help_state H;
_Thread_local int sched_help_owed;

void sched_help_begin(sched_pool *p, sched_help_kind kind) {
  if (kind == SCHED_HELP_NONE || !p->cfg.helpable || p->nwords > HELP_WORDS ||
      sched_current_pool() || H.pool || sched_trace_on(p) ||
      sched_pool_chaos_seed(p) || sched_faults_armed(p->faults))
    return;
  H.armed = p;
  H.kind = kind;
}

bool sched_help_defer(sched_pool *p, uint64_t t, const uint64_t *due) {
  if (H.armed != p) return false;
  H.armed = NULL; /* one commit */
  int n = 0;
  for (int i = 0; i < p->nwords; i++) {
    H.owed[i] = due[i];
    n += __builtin_popcountll(due[i]);
  }
  H.pool = p;
  H.owed_kind = H.kind;
  H.ticket = t;
  sched_help_owed = n;
  return true;
}

/* the lowest owed rank, taken off the owed set (-1: none) */
static int take_owed(void) {
  for (int i = 0; i < HELP_WORDS; i++)
    if (H.owed[i]) {
      int r = i * 64 + __builtin_ctzll(H.owed[i]);
      H.owed[i] &= H.owed[i] - 1;
      sched_help_owed--;
      return r;
    }
  return -1;
}

static void done_owing(void) {
  if (!sched_help_owed) H.pool = NULL;
}

/* Whether helping ticket t's round cannot wait for anyone outside this
 * thread's stack: every rank not owed has run everything published so far
 * (queue depth 0 counts the ring: it ran t, so it has arrived), and every
 * owed rank sleeps exactly at t with no one-rank record queued (it runs
 * nothing before t, so helping it makes it arrive now). A rank that is
 * behind (owed through a stale waiter bit, or with a backlog) fails it:
 * then everyone owed is woken and this thread returns at once.
 * (relaxed: the loads only decide between helping and waking; both are
 * correct, helping is only the faster when this says so) */
static bool all_reached(sched_pool *p, uint64_t t) {
  for (int r = 0; r < p->cfg.ranks; r++) {
    rank_state *rs = &p->ranks[r];
    if (r / 64 < HELP_WORDS && (H.owed[r / 64] >> (r % 64) & 1)) {
      if (atomic_load_explicit(&rs->bdone, memory_order_relaxed) != t ||
          sched_queue_depth(rs->queue) != 0)
        return false;
    } else if (sched_pool_queue_depth(p, r) != 0) {
      return false;
    }
  }
  return true;
}

/* Runs ticket `t` on rank rs, as rank rs, if it is the rank's next record
 * and helpable: 1 if it ran. Only that ticket: a rank still behind it
 * (owed through a stale waiter bit, or with records queued) has other
 * work first, possibly a round that waits for ranks asleep outside this
 * stack; the re-park after this finds that work and wakes the rank. */
static int64_t run_as(sched_pool *p, rank_state *rs, uint64_t t) {
  bcast_cell *b = sched_bcast_peek(rs);
  msg_head *m = sched_queue_peek(rs->queue);
  /* a one-rank record comes first: the rank's own thread runs it */
  if ((m && m->bseq <= rs->bnext) || !b || rs->bnext != t ||
      b->kind != MSG_INLINE ||
      p->cfg.helpable(p->cfg.ctx, b->record, rs->id) == SCHED_HELP_NONE)
    return 0;
  sched_pool *pool = p;
  int rank = rs->id;
  sched_swap_identity(&pool, &rank);
  int mark = core_fault_swap_mark(rs->id); /* host-allocation faults */
  core_error_state saved;
  core_error_save(&saved);
  sched_run_record(p, rs, b->record, b->gen);
  atomic_fetch_add_explicit(&rs->records_run, 1, memory_order_relaxed);
  sched_bcast_pop(rs, b);
  core_error_restore(&saved);
  core_fault_swap_mark(mark);
  sched_swap_identity(&pool, &rank);
  return 1;
}

/* Helps rank r (see "Help" above); false if its token was not free (its
 * thread is awake or on its way out of park, or another helper has it). */
static bool help_rank(sched_pool *p, int r, uint64_t t) {
  rank_state *rs = &p->ranks[r];
  int e = RANK_ASLEEP;
  /* acquire: pairs with the thread's (or last helper's) release of ASLEEP */
  if (!atomic_compare_exchange_strong_explicit(&rs->tok, &e, RANK_LENT,
                                               memory_order_acquire,
                                               memory_order_relaxed))
    return false;
  H.depth++;
  int64_t ran = run_as(p, rs, t);
  H.depth--;
  if (ran) atomic_fetch_add_explicit(&p->helped, ran, memory_order_relaxed);
  uint64_t bit = 1ull << (r % 64);
  /* seq_cst: the waiter bit before the re-check; pairs with the
   * producers' fence in wake_caught_up, as park()'s */
  atomic_fetch_or_explicit(sched_bwait_at(p, rs->bnext) + r / 64, bit,
                           memory_order_seq_cst);
  SCHED_FENCE_SEQ_CST();
  bool more = sched_rank_has_work(rs);
  /* release: our runs before the next holder's acquire */
  atomic_store_explicit(&rs->tok, RANK_ASLEEP, memory_order_release);
  if (more) sched_wake_rank(p, r);
  return true;
}

static void wake_owed(sched_pool *p, int r) {
  sched_wake_rank(p, r);
  atomic_fetch_add_explicit(&p->help_woken, 1, memory_order_relaxed);
}

void sched_help_next(void) {
  sched_pool *p = H.pool;
  int r = p ? take_owed() : -1;
  if (r < 0) return;
  if (H.depth >= MAX_DEPTH || !help_rank(p, r, H.ticket)) wake_owed(p, r);
  done_owing();
}

void sched_help_flush(void) {
  sched_pool *p = H.pool;
  if (!p) return;
  uint64_t due[HELP_WORDS];
  memcpy(due, H.owed, sizeof due);
  memset(H.owed, 0, sizeof H.owed);
  atomic_fetch_add_explicit(&p->help_woken, sched_help_owed, memory_order_relaxed);
  sched_help_owed = 0;
  H.pool = NULL;
  sched_hand_over(p, due);
}

void sched_help_settle(sched_pool *p) {
  if (H.armed == p) H.armed = NULL;
  if (H.pool != p || !sched_help_owed) return;
  if (H.owed_kind == SCHED_HELP_ROUND && !all_reached(p, H.ticket)) {
    sched_help_flush();
    return;
  }
  while (sched_help_owed) sched_help_next();
}
