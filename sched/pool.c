/* The worker pool: rank threads consuming their own record queues, the
 * broadcast ring, and parking on event counts. Chunked work on per-rank
 * Chase–Lev deques, stealing and cancellation are in sched/steal.c; a
 * rank thread steals from its main loop here (rank_main).
 *
 * Queues. Each rank has a bounded many-producer queue of records
 * (sched/queue.c). A record for one rank lives in place in a cell of that
 * rank's queue. A producer waits only while the queue of the rank it
 * addresses is full: a slow or blocked rank holds up its own stream.
 *
 * Broadcast. A record for every rank is written ONCE, in place, into the
 * pool's broadcast ring (Disruptor style: one writer per cell, a cursor
 * per reader), so publishing it costs the same for 2 ranks or 1,000:
 *   claim: t = fetch_add(btail, 1) (relaxed: only arbitrates producers);
 *     wait until cell[t % cap].seq == t (acquire; the previous lap's last
 *     reader freed it);
 *   commit: remaining = ranks; seq = t + 1 (release);
 *   a rank reads ticket bnext when seq == bnext + 1 (acquire), runs it,
 *     bnext += 1, and the last of the ranks (remaining reaches 0, acq_rel,
 *     so every rank's reads come first) sets seq = t + cap (release):
 *     free for ticket t + cap.
 * Every rank runs every ticket in ticket order, so all-rank records keep
 * one order across ranks (collectives match by it). A rank stops at a
 * claimed ticket until it is published (bounded: producers never block
 * between claim and commit).
 * Merging the two streams. A one-rank record stores bseq = btail read
 * after its claim. Rank r runs its queue's head m when m.bseq <= bnext
 * (every ticket below m.bseq has run), else ticket bnext first. Records
 * ordered by happens-before keep their order on every rank: a ticket t
 * claimed before m's claim gives m.bseq > t (coherence of btail); m
 * claimed before t gives m.bseq <= t, and m is visible to r once t is
 * (r loads ticket bnext's seq with acquire before it peeks its queue).
 *
 * Waking for a broadcast: only the ranks parked waiting for it (each
 * parking rank sets its bit in its ticket's cell's waiter bitmap), and by
 * a hand-over (see wake_caught_up): the issuer wakes one, the woken ranks
 * wake the rest two at a time.
 *
 * Parking (no lost wake-ups). A rank with nothing to do spins for
 * cfg.spin_ns, then:
 *   (1) v = ck_ec_value(ec)              (its own event count)
 *   (2) set its bit in `parked`, then in the waiter bitmap of ticket
 *       bnext's cell (seq_cst RMWs), then a seq_cst fence
 *   (3) re-check for work (ticket bnext; its queue's head; any deque)
 *   (4) ck_ec_wait(ec, v): sleeps only while ec still equals v
 * A producer, after making work visible (queue commit / deque push, both
 * release stores), issues a seq_cst fence and loads `parked` (a broadcast:
 * the ticket's waiter bitmap); for each
 * relevant set bit it ck_ec_inc's that rank's event count. The two fences
 * order (2) before (3) and the publication before the load of `parked`,
 * so either the rank's re-check (3) sees the work, or the producer sees the
 * bit and increments ec, which makes (4) return at once (value != v) or
 * wakes it. A rank parks only on the cell at its own head, and whoever
 * commits that cell addresses this rank and wakes it: no rank sleeps with
 * work addressed to it, and no rank is woken for work that is not.
 *
 * Helping (sched/help.c). Between (3) and (4) the rank gives up its token
 * (who runs its records) and takes it back after (4); while it sleeps an
 * issuing thread may take it, run the rank's records and park it again by
 * steps (2)-(3) on its behalf. A committer may leave the ranks it took
 * from a waiter bitmap asleep when its thread is about to help them
 * (sched_help_defer); that thread then owes each a help or a wake-up. */
#include "sched/pool.h"

#include "sched/chaos.h"
#include "sched/fault_table.h"

#include <ck_ec.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/host_alloc.h"
#include "sched/deque.h"
#include "sched/fence.h"
#include "sched/queue.h"
#include "sched/trace_recorder.h"
#include "sched/pool_internal.h"
#include "sched/help.h"

#define TARGET_ALL SCHED_ALL
#define POOL_PREFAULT_MAX ((size_t)64 << 20) /* queue bytes faulted in at once */

/* ---- ck_ec glue: futex wait/wake and a monotonic clock */
static int ec_gettime(const struct ck_ec_ops *ops, struct timespec *out) {
  (void)ops;
  return clock_gettime(CLOCK_MONOTONIC, out);
}
static void ec_wait32(const struct ck_ec_wait_state *st, const uint32_t *addr,
                      uint32_t expected, const struct timespec *deadline) {
  (void)st;
  struct timespec rel, *prel = NULL;
  if (deadline) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t ns = (deadline->tv_sec - now.tv_sec) * 1000000000LL +
                 (deadline->tv_nsec - now.tv_nsec);
    if (ns <= 0) return;
    rel.tv_sec = ns / 1000000000LL;
    rel.tv_nsec = ns % 1000000000LL;
    prel = &rel;
  }
  syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, prel, NULL, 0);
}
static void ec_wake32(const struct ck_ec_ops *ops, const uint32_t *addr) {
  (void)ops;
  syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}
static const struct ck_ec_ops ec_ops = {
    .gettime = ec_gettime, .wait32 = ec_wait32, .wake32 = ec_wake32,
    .busy_loop_iter = 64, .initial_wait_ns = 1000000,
};
static const struct ck_ec_mode ec_mode = {.ops = &ec_ops,
                                          .single_producer = false};

#if defined(__SANITIZE_THREAD__)
_Atomic unsigned sched_fence_word; /* sched/fence.h */
#endif

static _Thread_local sched_pool *tls_pool;
static _Thread_local int tls_rank = -1;

sched_pool *sched_current_pool(void) { return tls_pool; }
int sched_current_rank(void) { return tls_rank; }

void sched_swap_identity(sched_pool **pool, int *rank) {
  sched_pool *p = tls_pool;
  int r = tls_rank;
  tls_pool = *pool;
  tls_rank = *rank;
  *pool = p;
  *rank = r;
}
int sched_pool_ranks(const sched_pool *p) { return p->cfg.ranks; }

/* ---- waking */
void sched_wake_rank(sched_pool *p, int r) {
  ck_ec32_inc(&p->ranks[r].ec, &ec_mode);
  atomic_fetch_add_explicit(&p->wakes, 1, memory_order_relaxed);
}

/* Wakes parked ranks: `rank` >= 0 that one, TARGET_ALL every parked one,
 * or up to `limit` of them when rank == TARGET_ALL and limit > 0. */
void sched_wake_parked(sched_pool *p, int rank, int limit) {
  /* seq_cst: orders the caller's publication (queue commit or deque push)
   * before the loads of `parked` below; pairs with the fence in park() */
  SCHED_FENCE_SEQ_CST();
  if (rank >= 0) {
    uint64_t w = atomic_load_explicit(&p->parked[rank / 64], memory_order_relaxed);
    if (w & (1ull << (rank % 64))) sched_wake_rank(p, rank);
    return;
  }
  int woken = 0;
  for (int i = 0; i < p->nwords; i++) {
    uint64_t w = atomic_load_explicit(&p->parked[i], memory_order_relaxed);
    while (w) {
      int b = __builtin_ctzll(w);
      w &= w - 1;
      sched_wake_rank(p, i * 64 + b);
      if (limit > 0 && ++woken >= limit) return;
    }
  }
}

/* ---- the broadcast ring */
void sched_bcast_pop(rank_state *rs, bcast_cell *c) {
  sched_pool *p = rs->pool;
  uint64_t t = rs->bnext++;
  /* release: the run happens-before a drain that sees bdone past t */
  atomic_store_explicit(&rs->bdone, rs->bnext, memory_order_release);
  /* acq_rel: every rank's run happens-before the last one frees the cell */
  if (atomic_fetch_sub_explicit(&c->remaining, 1, memory_order_acq_rel) == 1)
    /* release: pairs with the claim's acquire of seq */
    atomic_store_explicit(&c->seq, t + p->bcap, memory_order_release);
}

/* Claims a parked rank for a wake-up: clears its parked bit (seq_cst
 * RMW). True if the bit was set: the rank is still inside park() and,
 * finding its bit already cleared when it leaves, will pass the hand-over
 * on (pass_wakes). False: it is leaving park by itself (awake). */
static bool claim_parked(sched_pool *p, int r) {
  uint64_t bit = 1ull << (r % 64);
  return atomic_fetch_and_explicit(&p->parked[r / 64], ~bit,
                                   memory_order_seq_cst) & bit;
}

/* A rank that found itself claimed: wake up to two more of the ranks
 * handed over in to_wake. It takes the whole hand-over, claims ranks from
 * it until two are claimed (a rank that cannot be claimed is awake and
 * needs nothing), puts the rest back, and only then wakes the claimed
 * ones, so every bit left in to_wake is followed by the wake of a claimed
 * rank that will look at it again. */
static void pass_wakes(sched_pool *p) {
  int take[2], n = 0;
  for (int i = 0; i < p->nwords && n < 2; i++) {
    uint64_t w = atomic_exchange_explicit(&p->to_wake[i], 0, memory_order_seq_cst);
    while (w && n < 2) {
      int r = i * 64 + __builtin_ctzll(w);
      w &= w - 1;
      if (claim_parked(p, r)) take[n++] = r;
    }
    if (w) atomic_fetch_or_explicit(&p->to_wake[i], w, memory_order_seq_cst);
  }
  for (int k = 0; k < n; k++) sched_wake_rank(p, take[k]);
}

/* The issuer after committing ticket t (see "Waking for a broadcast"):
 * the ranks parked waiting for t need a wake-up (one parked at an earlier
 * ticket was woken by that ticket's committer, or its re-check saw it; so
 * a stream of broadcasts wakes each rank once). A rank parking at t sets
 * its bit in t's cell's waiter bitmap (bwait), so the issuer takes them
 * with one exchange per 64 ranks, whatever the number of ranks, instead
 * of reading every parked rank's progress. It hands them all over in
 * to_wake and wakes ONE of them that it claimed; the ranks pass the rest
 * on two at a time (pass_wakes), so the issuing thread makes one futex
 * call, not one per rank. Order (all seq_cst): the hand-over before the
 * claim; the claimed rank's own clear of its bit comes after the claim in
 * `parked`'s order, and its exchange of to_wake after that, so it sees the
 * hand-over. A waiter bit can be stale (its rank saw the ticket in its
 * re-check and left; or a slow issuer of ticket t - cap takes the bit of a
 * rank parking at t): then a rank is claimed or woken for nothing, parks
 * again and sets its bit again; never a lost wake-up, since whoever takes
 * a bit wakes that rank (directly or by the hand-over). */
static void wake_caught_up(sched_pool *p, uint64_t t) {
  /* seq_cst: the commit before the exchanges of the waiters; pairs with
   * the fence in park() */
  SCHED_FENCE_SEQ_CST();
  uint64_t due[(SCHED_MAX_WORDS)];
  _Atomic uint64_t *wait = sched_bwait_at(p, t);
  bool any = false;
  for (int i = 0; i < p->nwords; i++) {
    /* relaxed load first: most commits find nobody waiting, and a load
     * does not take the line from the ranks that read it; the fence
     * above orders it like the exchange (seq_cst) */
    due[i] = atomic_load_explicit(&wait[i], memory_order_relaxed)
                 ? atomic_exchange_explicit(&wait[i], 0, memory_order_seq_cst) : 0;
    any |= due[i] != 0;
  }
  if (!any) return;
  /* an issuing thread that will run these ranks' part itself keeps them
   * asleep (sched/help.c); it owes each a help or a wake-up */
  if (sched_help_defer(p, t, due)) return;
  sched_hand_over(p, due);
}

void sched_hand_over(sched_pool *p, const uint64_t *due) {
  for (int i = 0; i < p->nwords; i++)
    if (due[i]) atomic_fetch_or_explicit(&p->to_wake[i], due[i], memory_order_seq_cst);
  /* claim one of them and wake it; ranks that cannot be claimed are awake */
  for (int i = 0; i < p->nwords; i++)
    for (uint64_t d = due[i]; d; d &= d - 1) {
      int r = i * 64 + __builtin_ctzll(d);
      if (claim_parked(p, r)) {
        sched_wake_rank(p, r);
        return;
      }
    }
}

static bool any_deque_work(const sched_pool *p) {
  for (int i = 0; i < p->cfg.ranks; i++)
    if (sched_deque_size(p->ranks[i].deque) > 0) return true;
  return false;
}

bool sched_rank_has_work(rank_state *rs) {
  sched_pool *p = rs->pool;
  return sched_bcast_peek(rs) != NULL || sched_queue_peek(rs->queue) != NULL ||
         any_deque_work(p) ||
         (p->cfg.pending && p->cfg.pending(p->cfg.ctx, rs->id));
}

void sched_pool_wake(sched_pool *p, int rank) { sched_wake_parked(p, rank, 0); }

/* wait step i of a spin loop: pause for the first 64, yield until
 * `yields`, then sleep 1 µs doubling up to 64 µs */
static void backoff(int i, int yields, long *sleep_ns) {
  if (i < 64) {
    sched_cpu_relax();
  } else if (i < yields) {
    sched_yield();
  } else {
    struct timespec ts = {0, *sleep_ns};
    nanosleep(&ts, NULL);
    if (*sleep_ns < 50000) *sleep_ns *= 2;
  }
}

/* A woken rank takes its token back: at once unless a helper runs its
 * records (sched/help.c), else once the helper hands it back (it re-parks
 * the rank first, so nothing is lost while this waits). acquire: the
 * helper's runs happen-before this thread's. */
static void take_back(rank_state *rs) {
  long sleep_ns = 1000;
  for (int i = 0;; i++) {
    int e = RANK_ASLEEP;
    if (atomic_compare_exchange_weak_explicit(&rs->tok, &e, RANK_AWAKE,
                                              memory_order_acquire,
                                              memory_order_relaxed))
      return;
    backoff(i, 256, &sleep_ns);
  }
}

/* spin: a rank that just ran a record or a stolen chunk spins briefly
 * first (more is likely to follow: ops and collectives come in streams),
 * at most max_spinners at once (one per CPU). When the ranks and an
 * issuing thread outnumber the CPUs (crowded), a spinning rank yields its
 * CPU instead of pausing: a futex wake-up costs several µs (tens in a
 * VM), a yield under one, and the thread it yields to (the issuer, or a
 * rank with work) is the one everybody waits for. */
static void park(rank_state *rs, bool spin) {
  sched_pool *p = rs->pool;
  /* at most max_spinners ranks spin at once (fewer than the cores), so 64
   * ranks on 2 cores do not burn the cores the issuing thread needs */
  if (spin && atomic_fetch_add_explicit(&p->spinning, 1, memory_order_relaxed) >=
                  p->max_spinners) {
    atomic_fetch_sub_explicit(&p->spinning, 1, memory_order_relaxed);
    spin = false;
  }
  int64_t start = sched_now_ns(), until = start + (spin ? p->cfg.spin_ns : 0);
  /* the spin as a slice of the timeline (docs/trace.md) */
  bool spin_tr = spin && sched_trace_on(p);
  int64_t spun_cpu = spin_tr ? sched_trace_cpu() : -1;
  int64_t spun = spin_tr ? sched_trace_now() : 0;
  bool yielding = false;
  for (int i = 0;; i++) {
    if (sched_rank_has_work(rs)) break;
    if (!spin) break;
    if ((i & 63) == 63 || yielding) {
      int64_t t = sched_now_ns();
      if (t > until) break;
      yielding = p->crowded;
    }
    if (yielding) sched_yield();
    else sched_cpu_relax();
  }
  if (spin) atomic_fetch_sub_explicit(&p->spinning, 1, memory_order_relaxed);
  if (spin_tr) sched_trace_slice(p, "spin", "sched", spun, spun_cpu, NULL);
  if (sched_rank_has_work(rs)) return;
  uint32_t v = ck_ec32_value(&rs->ec);
  uint64_t bit = 1ull << (rs->id % 64);
  _Atomic uint64_t *wait = sched_bwait_at(p, rs->bnext) + rs->id / 64;
  atomic_fetch_or_explicit(&p->parked[rs->id / 64], bit, memory_order_seq_cst);
  /* seq_cst: after the parked bit (a waker that finds this waiter bit
   * finds the parked bit too, unless this rank cleared it leaving) */
  atomic_fetch_or_explicit(wait, bit, memory_order_seq_cst);
  /* seq_cst: both bits are visible before the re-check reads the ticket,
   * the queue and the deques; pairs with the fences in sched_wake_parked() and
   * wake_caught_up() */
  SCHED_FENCE_SEQ_CST();
  bool slept = false;
  if (!sched_rank_has_work(rs)) {
    atomic_fetch_add_explicit(&rs->parks, 1, memory_order_relaxed);
    bool tr = sched_trace_on(p);
    int64_t cpu0 = tr ? sched_trace_cpu() : -1, t0 = tr ? sched_trace_now() : 0;
    /* release: this thread's runs (bnext, its queue, its device) before a
     * helper's acquire of the token (sched/help.c) */
    atomic_store_explicit(&rs->tok, RANK_ASLEEP, memory_order_release);
    ck_ec32_wait(&rs->ec, &ec_mode, v, NULL);
    slept = true;
    if (tr) sched_trace_slice(p, "park", "sched", t0, cpu0, NULL);
  }
  /* relaxed: a hint; a waker that still finds the bit makes one spurious
   * claim (harmless, see wake_caught_up) */
  if (atomic_load_explicit(wait, memory_order_relaxed) & bit)
    atomic_fetch_and_explicit(wait, ~bit, memory_order_relaxed);
  /* seq_cst: if a waker claimed this rank (cleared the bit first), its
   * hand-over comes before this in the order, and passing it on is ours */
  uint64_t old = atomic_fetch_and_explicit(&p->parked[rs->id / 64], ~bit,
                                           memory_order_seq_cst);
  if (!(old & bit)) pass_wakes(p);
  /* the token last: a rank a helper still runs passes the hand-over on
   * first (pass_wakes touches no state of this rank's), so a helper's wait
   * never holds up the wake-ups of the ranks it waits for */
  if (slept) take_back(rs);
}

/* ---- the rank thread */

/* one record, with the faults armed for it (sched/fault_table.h) */
void sched_run_record(sched_pool *p, rank_state *rs, void *record, uint64_t gen) {
  if (__builtin_expect(sched_faults_armed(p->faults), 0)) {
    sched_fault_before_record(p->faults, p->rank_base + rs->id);
  }
  rs->claim_gen = gen;
  rs->gen = SCHED_GEN_EXEMPT; /* until the record arms it */
  p->cfg.exec(p->cfg.ctx, record, rs->id);
  rs->gen = SCHED_GEN_EXEMPT;
}

bool sched_own_work(rank_state *rs) {
  return sched_bcast_peek(rs) != NULL || sched_queue_peek(rs->queue) != NULL;
}

/* Whether the rank ran records of its own queue (not all-rank tickets: a
 * barrier or collective every rank ran says nothing of this rank's
 * stream) within the last OWN_STREAM_NS
 * (or cfg.spin_ns if longer): then it does not steal yet. Its stream
 * likely goes on (ops come in streams), and a unit taken now would hold
 * the next record up for the unit's length (a GEMM panel: milliseconds)
 * while the issuer fills the queue and waits. The hold-off outlasts a
 * producer's wait for a full queue (sleeps of up to 50 µs, plus the
 * timer's slack, sched/queue.c), so a rank that drained its queue does not
 * take a unit just before that producer comes back; it costs at most that
 * long of help after a burst of own records. The clock is read only here,
 * when the rank would steal, and only if it ran records since it last
 * looked. */
#define OWN_STREAM_NS 250000
static bool own_stream_recent(rank_state *rs) {
  int64_t ran = rs->own_runs;
  int64_t now = sched_now_ns();
  if (ran != rs->seen_records) {
    rs->seen_records = ran;
    rs->own_ns = now;
  }
  int64_t hold = rs->pool->cfg.spin_ns > OWN_STREAM_NS ? rs->pool->cfg.spin_ns : OWN_STREAM_NS;
  return now - rs->own_ns < hold;
}

sched_faults *sched_pool_faults(sched_pool *p) { return p->faults; }
int sched_pool_rank_base(const sched_pool *p) { return p->rank_base; }

/* Whether running `record` makes the rank spin before it parks (more
 * work is likely to follow). Not after a record its issuer could have run
 * itself (sched/help.h) while ranks and the issuer share the CPUs: a rank
 * spinning for the next small collective would take it on the issuer's
 * CPU (yielding back and forth, 10-15 µs a call) where, asleep, it would
 * be helped (2-3 µs). Read before the run: the record may be reused after. */
static bool spin_after(sched_pool *p, rank_state *rs, const void *record) {
  return !p->crowded || !p->cfg.helpable ||
         p->cfg.helpable(p->cfg.ctx, record, rs->id) == SCHED_HELP_NONE;
}

static void *rank_main(void *arg) {
  rank_state *rs = arg;
  sched_pool *p = rs->pool;
  tls_pool = p;
  tls_rank = rs->id;
  if (p->cfg.init) p->cfg.init(p->cfg.ctx, rs->id);
  bool worked = false; /* ran something since it parked */
  for (;;) {
    /* the ticket first (acquire), then the queue: see "Merging" */
    bcast_cell *b = sched_bcast_peek(rs);
    msg_head *m = sched_queue_peek(rs->queue);
    if (m && m->bseq <= rs->bnext) {
      if (m->kind == MSG_STOP) {
        sched_queue_pop(rs->queue);
        break;
      }
      sched_chaos_point(p->cfg.chaos_seed, rs->id, SCHED_CHAOS_RECORD);
      worked |= spin_after(p, rs, m->record);
      sched_run_record(p, rs, m->record, m->gen);
      rs->own_runs++;
      atomic_fetch_add_explicit(&rs->records_run, 1, memory_order_relaxed);
      sched_queue_pop(rs->queue);
      continue;
    }
    if (b) {
      if (b->kind == MSG_STOP) {
        sched_bcast_pop(rs, b);
        break;
      }
      sched_chaos_point(p->cfg.chaos_seed, rs->id, SCHED_CHAOS_RECORD);
      worked |= spin_after(p, rs, b->record);
      sched_run_record(p, rs, b->record, b->gen);
      atomic_fetch_add_explicit(&rs->records_run, 1, memory_order_relaxed);
      sched_bcast_pop(rs, b);
      continue;
    }
    if (m) { /* it waits for a claimed ticket that is being written */
      sched_cpu_relax();
      continue;
    }
    if (any_deque_work(p) && own_stream_recent(rs)) {
      /* crowded: the issuer feeding this rank may need the CPU */
      if (p->crowded) sched_yield();
      else sched_cpu_relax();
      continue;
    }
    if (sched_try_steal(rs, true)) {
      worked = true;
      continue;
    }
    if (p->cfg.pending && p->cfg.pending(p->cfg.ctx, rs->id)) {
      p->cfg.idle(p->cfg.ctx, rs->id);
      continue;
    }
    park(rs, worked);
    worked = false;
  }
  tls_pool = NULL;
  tls_rank = -1;
  return NULL;
}

/* ---- producer side */
/* a broadcast ticket's cell, once free (spin, yield, then short sleeps) */
static bcast_cell *bcast_claim(sched_pool *p, uint64_t *t) {
  *t = atomic_fetch_add_explicit(&p->btail, 1, memory_order_relaxed);
  bcast_cell *c = sched_bcast_at(p, *t);
  long sleep_ns = 1000;
  /* acquire: pairs with the last reader's release (it is done reading) */
  for (int i = 0; atomic_load_explicit(&c->seq, memory_order_acquire) != *t; i++)
    backoff(i, 128, &sleep_ns);
  return c;
}

static void bcast_commit(sched_pool *p, bcast_cell *c, uint64_t t) {
  atomic_store_explicit(&c->remaining, p->cfg.ranks, memory_order_relaxed);
  /* release: the record (and remaining) before the ranks' acquire */
  atomic_store_explicit(&c->seq, t + 1, memory_order_release);
  wake_caught_up(p, t);
}

void *sched_pool_claim(sched_pool *p, int rank, sched_claim *c) {
  c->rank = rank;
  if (rank == SCHED_ALL) {
    bcast_cell *b = bcast_claim(p, &c->pos);
    b->kind = MSG_INLINE;
    /* relaxed: see sched/steal.c, "Cancellation" */
    b->gen = atomic_load_explicit(&p->cancel_gen, memory_order_relaxed);
    return b->record;
  }
  msg_head *m = sched_queue_claim(p->ranks[rank].queue, &c->pos);
  m->kind = MSG_INLINE;
  /* after the claim: every ticket claimed before this happens-after
   * is below it (relaxed: coherence of btail suffices) */
  m->bseq = atomic_load_explicit(&p->btail, memory_order_relaxed);
  /* relaxed: see sched/steal.c, "Cancellation" */
  m->gen = atomic_load_explicit(&p->cancel_gen, memory_order_relaxed);
  return m->record;
}

uint64_t sched_pool_chaos_seed(const sched_pool *p) {
  return p ? p->cfg.chaos_seed : 0;
}

void sched_pool_commit(sched_pool *p, const sched_claim *c) {
  sched_chaos_point(p->cfg.chaos_seed, -1, SCHED_CHAOS_PUBLISH);
  if (c->rank == SCHED_ALL) {
    bcast_commit(p, sched_bcast_at(p, c->pos), c->pos);
    return;
  }
  sched_queue_commit(p->ranks[c->rank].queue, c->pos);
  sched_wake_parked(p, c->rank, 0);
}

/* ---- lifecycle */
static void free_pool(sched_pool *p) {
  for (int i = 0; p->ranks && i < p->cfg.ranks; i++) {
    sched_deque_destroy(p->ranks[i].deque);
    sched_queue_destroy(p->ranks[i].queue);
  }
  free(p->bcells);
  sched_faults_free(p->faults);
  free((void *)p->to_wake);
  free((void *)p->parked);
  free((void *)p->bwait);
  free(p->ranks);
  free(p);
}

sched_pool *sched_pool_create(const sched_pool_config *cfg, const char **why) {
  *why = NULL;
  if (cfg->ranks < 1 || !cfg->exec || cfg->record_size == 0 ||
      cfg->queue_capacity < 2 || (cfg->queue_capacity & (cfg->queue_capacity - 1))) {
    *why = "invalid pool configuration";
    return NULL;
  }
  sched_pool *p = calloc(1, sizeof *p);
  if (!p) { *why = "out of memory"; return NULL; }
  p->cfg = *cfg;
  if (!p->cfg.spin_ns) p->cfg.spin_ns = 20000;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  /* one spinner per CPU; crowded: the ranks and one issuing thread
   * outnumber the CPUs, so spinners yield (see park) */
  p->max_spinners = cpus > 1 ? (int)cpus : 1;
  p->crowded = cfg->ranks + 1 > cpus;
  /* crowded: leave a CPU to the issuing thread; the ranks that park are
   * the ones it can run itself (sched/help.h) */
  if (p->crowded && p->max_spinners > 1) p->max_spinners--;
  p->nwords = (cfg->ranks + 63) / 64;
  p->parked = calloc((size_t)p->nwords, sizeof *p->parked);
  p->ranks = calloc((size_t)cfg->ranks, sizeof *p->ranks);
  p->to_wake = calloc((size_t)p->nwords, sizeof *p->to_wake);
  /* the broadcast ring: as many cells as a rank's queue */
  p->bcap = cfg->queue_capacity;
  p->bcell = (sizeof(bcast_cell) + cfg->record_size + 63) & ~(size_t)63;
  p->bcells = aligned_alloc(64, p->bcell * p->bcap);
  p->bwait = calloc(p->bcap * (size_t)p->nwords, sizeof *p->bwait);
  p->rank_base = cfg->rank_base;
  p->faults = sched_faults_new(cfg->fault_ranks > cfg->ranks ? cfg->fault_ranks
                                                            : cfg->ranks);
  bool ok = p->parked && p->ranks && p->bcells && p->to_wake && p->bwait && p->faults &&
            p->nwords <= SCHED_MAX_WORDS;
  for (uint64_t t = 0; ok && t < p->bcap; t++) {
    bcast_cell *c = sched_bcast_at(p, t);
    atomic_init(&c->seq, t); /* free for ticket t */
    atomic_init(&c->remaining, 0);
  }
  size_t cell = sizeof(msg_head) + cfg->record_size;
  for (int i = 0; ok && i < cfg->ranks; i++) {
    rank_state *rs = &p->ranks[i];
    rs->pool = p;
    rs->id = i;
    rs->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
    rs->claim_gen = rs->gen = SCHED_GEN_EXEMPT;
    ck_ec32_init(&rs->ec, 0);
    rs->deque = sched_deque_create(64);
    rs->queue = sched_queue_create(cfg->queue_capacity, cell);
    ok = rs->deque && rs->queue;
  }
  /* small pools fault their queues in now: otherwise the first lap (1,024
   * records per rank by default) takes a page fault every few records on
   * the issuing thread, tripling the cost of small ops for its first
   * ~10 ms; large pools keep idle queues free of resident memory */
  /* (what a prefault makes resident: each queue rounded up to 2 MiB) */
  size_t huge = (size_t)2 << 20;
  size_t all = ok ? (sched_queue_bytes(p->ranks[0].queue) + huge - 1) / huge * huge *
                        (size_t)cfg->ranks : 0;
  for (int i = 0; ok && all <= POOL_PREFAULT_MAX && i < cfg->ranks; i++)
    sched_queue_prefault(p->ranks[i].queue);
  int started = 0;
  for (; ok && started < cfg->ranks; started++)
    if (pthread_create(&p->ranks[started].thread, NULL, rank_main,
                       &p->ranks[started]) != 0) {
      *why = "cannot start a rank thread";
      ok = false;
      break;
    }
  if (!ok) {
    if (!*why) *why = "out of memory";
    /* stop the threads that run; every queue and deque is freed */
    for (int i = 0; i < started; i++) {
      uint64_t pos;
      msg_head *m = sched_queue_claim(p->ranks[i].queue, &pos);
      m->kind = MSG_STOP;
      m->bseq = 0; /* no broadcast was ever published */
      sched_queue_commit(p->ranks[i].queue, pos);
      sched_wake_parked(p, i, 0);
    }
    for (int i = 0; i < started; i++) pthread_join(p->ranks[i].thread, NULL);
    free_pool(p);
    return NULL;
  }
  return p;
}

bool sched_pool_try_drain(sched_pool *p, int64_t budget_ns) {
  enum { MAX = 64 };
  int n = p->cfg.ranks;
  if (n > MAX || budget_ns <= 0) return false;
  uint64_t mark[MAX];
  for (int i = 0; i < n; i++) mark[i] = sched_queue_claimed(p->ranks[i].queue);
  uint64_t bmark = atomic_load_explicit(&p->btail, memory_order_relaxed);
  int64_t until = sched_now_ns() + budget_ns;
  int next = 0; /* ranks below are done */
  for (unsigned spin = 0;; spin++) {
    /* acquire (bdone): the rank's runs happen-before the return */
    while (next < n && sched_queue_done_through(p->ranks[next].queue, mark[next]) &&
           atomic_load_explicit(&p->ranks[next].bdone, memory_order_acquire) >= bmark)
      next++;
    if (next == n) return true;
    if ((spin & 15) == 15 && sched_now_ns() > until) return false;
    /* crowded: the ranks we wait for may need this CPU */
    if (p->crowded) sched_yield();
    else sched_cpu_relax();
  }
}

void sched_pool_destroy(sched_pool *p) {
  if (!p) return;
  uint64_t t;
  bcast_cell *c = bcast_claim(p, &t);
  c->kind = MSG_STOP;
  bcast_commit(p, c, t);
  for (int i = 0; i < p->cfg.ranks; i++) pthread_join(p->ranks[i].thread, NULL);
  free_pool(p);
}

sched_pool_stats sched_pool_get_stats(const sched_pool *p) {
  sched_pool_stats s = {0};
  for (int i = 0; i < p->cfg.ranks; i++) {
    const rank_state *rs = &p->ranks[i];
    s.records_run += atomic_load_explicit(&rs->records_run, memory_order_relaxed);
    s.chunks_run += atomic_load_explicit(&rs->chunks_run, memory_order_relaxed);
    s.chunks_stolen += atomic_load_explicit(&rs->chunks_stolen, memory_order_relaxed);
    s.chunks_left += atomic_load_explicit(&rs->chunks_left, memory_order_relaxed);
    s.parks += atomic_load_explicit(&rs->parks, memory_order_relaxed);
  }
  s.wakes = atomic_load_explicit(&p->wakes, memory_order_relaxed);
  s.helped = atomic_load_explicit(&p->helped, memory_order_relaxed);
  s.help_woken = atomic_load_explicit(&p->help_woken, memory_order_relaxed);
  return s;
}

uint64_t sched_pool_queue_depth(const sched_pool *p, int rank) {
  rank_state *rs = &p->ranks[rank];
  /* relaxed: a gauge; the rank may run tickets claimed after the tail was
   * read, so done can pass it: clamp at 0 */
  uint64_t tail = atomic_load_explicit(&((sched_pool *)p)->btail, memory_order_relaxed);
  uint64_t done = atomic_load_explicit(&rs->bdone, memory_order_relaxed);
  return sched_queue_depth(rs->queue) + (tail > done ? tail - done : 0);
}
