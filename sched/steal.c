/* Chunked loops and stealing: sched_parallel_for / sched_parallel_steps
 * (pool.h), the thieves' side (sched_try_steal) and cancellation. The
 * rank threads, queues and parking are in pool.c.
 *
 * Loops. A loop of n units in chunks of `grain` has k = ceil(n / grain)
 * chunks; chunk i is [i * grain, min(n, (i + 1) * grain)), whatever runs
 * it, so the bits never depend on timing. The owner (the rank running the
 * loop's record) pushes chunks on its Chase–Lev deque (sched/deque.c),
 * runs the first, pops the rest back while idle ranks steal from the
 * other end, then waits for `remaining` (chunks not yet finished) to reach
 * 0, stealing meanwhile. A finished chunk decrements remaining with
 * release; the owner's acquire load of 0 makes every chunk's writes
 * visible to it.
 *
 * Windows. The chunks go in windows of at most SCHED_WINDOW (pushed, run
 * and waited for, then the next): the task list has that many entries
 * whatever k (a sum over 2^62 elements is 2^46 chunks), and between chunks
 * the owner can see a cancellation. A window waits for its slowest chunk:
 * at most about one chunk's time in 1,024 chunks' work, and no change to
 * any chunk's bounds. Loops of up to 1,024 chunks are one window, as
 * before.
 *
 * Steps. A chunk of sched_parallel_steps may be run in pieces: fn(b, e)
 * equals fn(b, x) then fn(x, e). A thief stealing from its main loop
 * (top) runs such a chunk one unit at a time and, between units, looks at
 * its own stream; when a record waits there it leaves: it sets the
 * chunk's begin to the next unit and pushes the chunk on its own deque,
 * then returns to its records. The chunk is the same object, taken again
 * by exactly one taker (deque.c, I2): the owner, waiting for the loop,
 * steals it; the thief pops it back when its stream is idle. So every
 * unit runs exactly once and in order, and remaining counts the chunk
 * once, when its last unit ran. The units the thief ran reach the owner
 * through the push (a release store of bottom, acquired by the next
 * taker's steal, or the thief's own program order when it pops the chunk
 * back) and then the taker's release decrement of remaining. A thief
 * bounds the time its own stream waits to one unit (a GEMM's unit is one
 * panel call: kernels/cpu/gemm.c) instead of one chunk. A rank stealing inside its own loop's wait never
 * leaves (its own records wait for that loop anyway), nor does the owner:
 * only a thief's own stream is at stake.
 *
 * Cancellation. sched_pool_cancel bumps the pool's cancel_gen. Every
 * record stores cancel_gen when it is claimed (pool.c); a record whose
 * stored generation is below the current one was claimed before some
 * cancel, so it is cancelled, if it armed cancellation (sched_cancel_arm:
 * the runtime arms it for ops whose outputs are fresh, which it poisons;
 * frees, collectives and in-place ops are never cut short). A cancelled
 * loop skips the chunks it has not started (owner and thieves alike: a
 * chunk carries its record's generation) and returns false; records
 * claimed after the cancel compare equal and run normally. All accesses
 * of cancel_gen are relaxed: it orders no other memory; a claim that
 * happens-before the cancel reads the old value and one that
 * happens-after reads the new (coherence), and a running loop sees the
 * bump a moment later at its next chunk. */
#include "sched/pool.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/host_alloc.h"
#include "sched/chaos.h"
#include "sched/deque.h"
#include "sched/fence.h"
#include "sched/pool_internal.h"
#include "sched/trace_recorder.h"

#define STEAL_TRIES 4

/* ---- cancellation */
void sched_pool_cancel(sched_pool *p) {
  /* relaxed: see "Cancellation" */
  atomic_fetch_add_explicit(&p->cancel_gen, 1, memory_order_relaxed);
}

static bool gen_cancelled(const sched_pool *p, uint64_t gen) {
  /* relaxed: see "Cancellation" */
  return gen != SCHED_GEN_EXEMPT &&
         atomic_load_explicit(&((sched_pool *)p)->cancel_gen, memory_order_relaxed) != gen;
}

static rank_state *current_rank_state(void) {
  sched_pool *p = sched_current_pool();
  int r = sched_current_rank();
  return p && r >= 0 ? &p->ranks[r] : NULL;
}

bool sched_cancel_arm(void) {
  rank_state *rs = current_rank_state();
  if (!rs) return false;
  rs->gen = rs->claim_gen;
  return gen_cancelled(rs->pool, rs->gen);
}

bool sched_cancelled(void) {
  rank_state *rs = current_rank_state();
  return rs && gen_cancelled(rs->pool, rs->gen);
}

/* ---- running chunks */
/* the chunk is done: t may die once remaining hits 0 */
static void finish_chunk(chunk_task *t) {
  /* release: the chunk's writes happen-before the owner's acquire load of
   * remaining == 0 in run_loop */
  atomic_fetch_sub_explicit(t->remaining, 1, memory_order_release);
}

static void run_chunk(sched_pool *p, chunk_task *t) {
  if (!gen_cancelled(p, t->gen)) t->fn(t->begin, t->end, t->ctx);
  finish_chunk(t);
}

/* A thief's run of a steps chunk: unit by unit, leaving the rest on its
 * own deque when its own stream has a record (see "Steps"). False if it
 * left (the chunk is not finished). */
static bool run_steps(rank_state *rs, chunk_task *t) {
  for (int64_t u = t->begin; u < t->end; u++) {
    if (gen_cancelled(rs->pool, t->gen)) break;
    t->fn(u, u + 1, t->ctx);
    if (u + 1 < t->end && sched_own_work(rs)) {
      t->begin = u + 1;
      if (!sched_deque_push_owner(rs->deque, t)) { /* no memory: run it all */
        t->fn(u + 1, t->end, t->ctx);
        break;
      }
      atomic_fetch_add_explicit(&rs->chunks_left, 1, memory_order_relaxed);
      return false;
    }
  }
  finish_chunk(t);
  return true;
}

/* a stolen chunk [begin, end) as a slice on the thief's track */
static void trace_steal(sched_pool *p, int64_t t0, int64_t cpu0, int victim,
                        int64_t begin, int64_t end) {
  char args[64];
  snprintf(args, sizeof args, "\"victim\":%d,\"begin\":%lld,\"end\":%lld",
           victim, (long long)begin, (long long)end);
  sched_trace_slice(p, "steal", "sched", t0, cpu0, args);
}

/* runs chunk t taken from rank v's deque */
static void run_taken(rank_state *rs, chunk_task *t, int v, bool top) {
  sched_pool *p = rs->pool;
  bool tr = sched_trace_on(p);
  int64_t cpu0 = tr ? sched_trace_cpu() : -1, t0 = tr ? sched_trace_now() : 0;
  /* read before it runs: the chunk may be freed once it has */
  int64_t begin = t->begin, end = t->end;
  if (top && t->steps) run_steps(rs, t);
  else run_chunk(p, t);
  if (tr) trace_steal(p, t0, cpu0, v, begin, end);
  if (v != rs->id)
    atomic_fetch_add_explicit(&rs->chunks_stolen, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&rs->chunks_run, 1, memory_order_relaxed);
}

bool sched_try_steal(rank_state *rs, bool top) {
  sched_pool *p = rs->pool;
  int n = p->cfg.ranks;
  if (n < 2) return false;
  chunk_task *t;
  /* a chunk this rank left for its own records (see "Steps") */
  if (top && (t = sched_deque_pop_owner(rs->deque)) != NULL) {
    run_taken(rs, t, rs->id, top);
    return true;
  }
  if (sched_chaos_point(p->cfg.chaos_seed, rs->id, SCHED_CHAOS_STEAL)) return false;
  for (int k = 0; k < STEAL_TRIES; k++) {
    rs->rng = rs->rng * 6364136223846793005ull + 1442695040888963407ull;
    int v = (int)((rs->rng >> 33) % (uint64_t)n);
    if (v == rs->id) continue;
    if ((t = sched_deque_steal(p->ranks[v].deque)) != NULL) {
      run_taken(rs, t, v, top);
      return true;
    }
  }
  return false;
}

/* ---- the owner's side */
/* The helpers of a loop on rank `me` that pushed `pushed` chunks: parked
 * ranks to wake so they steal. More helpers than CPUs only take turns on
 * the same CPUs (a context switch each; a memory-bound sum of 64 MB took
 * 3.7 ms on 8 ranks over 2 CPUs, 3.1–3.3 ms on 2 ranks), so: with pinned
 * ranks (rank r on CPU r % pin_cpus), the first parked rank of each other
 * CPU; else up to one per other CPU in rank order. Helpers are optional
 * (the owner runs every chunk nobody stole), so a rank that parks while
 * this looks is simply not a helper; one that is about to park sees the
 * chunks in its re-check. */
static void wake_helpers(sched_pool *p, int me, int64_t pushed) {
  int k = p->cfg.pin_cpus, n = p->cfg.ranks;
  if (k <= 1) {
    int lim = p->max_spinners > 1 ? p->max_spinners - 1 : 1;
    sched_wake_parked(p, SCHED_ALL, (int)(pushed < lim ? pushed : lim));
    return;
  }
  /* seq_cst: the pushes before the loads of `parked` (as sched_wake_parked) */
  SCHED_FENCE_SEQ_CST();
  int64_t woken = 0;
  for (int c = 0; c < k && woken < pushed; c++) {
    if (c == me % k) continue;
    for (int r = c; r < n; r += k) {
      uint64_t w = atomic_load_explicit(&p->parked[r / 64], memory_order_relaxed);
      if (w & (1ull << (r % 64))) {
        sched_wake_rank(p, r);
        woken++;
        break;
      }
    }
  }
}

/* One window: chunks c0 .. c0 + w - 1 of the loop in tasks[0 .. w). */
static void run_window(rank_state *rs, const chunk_task *proto, int64_t c0,
                       int64_t w, int64_t grain, int64_t n, chunk_task *tasks) {
  sched_pool *p = rs->pool;
  _Atomic int64_t remaining = w;
  for (int64_t i = 0; i < w; i++) {
    int64_t b = (c0 + i) * grain;
    tasks[i] = *proto;
    tasks[i].begin = b;
    tasks[i].end = n - b < grain ? n : b + grain;
    tasks[i].remaining = &remaining;
  }
  int64_t pushed = 0;
  for (int64_t i = w - 1; i >= 1; i--) /* pop order runs chunk 1 first */
    if (sched_deque_push_owner(rs->deque, &tasks[i])) pushed++;
    else run_chunk(p, &tasks[i]);            /* push failed: run it here */
  if (pushed) wake_helpers(p, rs->id, pushed);
  run_chunk(p, &tasks[0]);
  chunk_task *t;
  while (atomic_load_explicit(&remaining, memory_order_relaxed) > 0 &&
         (t = sched_deque_pop_owner(rs->deque)) != NULL) {
    run_chunk(p, t);
    atomic_fetch_add_explicit(&rs->chunks_run, 1, memory_order_relaxed);
  }
  /* acquire: pairs with the release in finish_chunk, so every chunk's
   * output is visible once remaining reaches 0 */
  for (int spins = 0; atomic_load_explicit(&remaining, memory_order_acquire) > 0; spins++)
    if (!sched_try_steal(rs, false)) {
      if (spins > 1000) sched_yield(); else sched_cpu_relax();
    }
}

static bool run_loop(int64_t n, int64_t grain, sched_range_fn fn, void *ctx,
                     bool steps) {
  if (n <= 0) return true;
  sched_pool *p = sched_current_pool();
  if (!p || grain <= 0 || n <= grain) {
    fn(0, n, ctx);
    return !sched_cancelled();
  }
  rank_state *rs = &p->ranks[sched_current_rank()];
  int64_t k = (n - 1) / grain + 1; /* no overflow near INT64_MAX */
  if (p->cfg.ranks < 2) { /* nobody to steal: the chunks in turn */
    for (int64_t b = 0; b < n && !gen_cancelled(p, rs->gen); b += grain) {
      fn(b, n - b < grain ? n : b + grain, ctx);
      atomic_fetch_add_explicit(&rs->chunks_run, 1, memory_order_relaxed);
    }
    return !gen_cancelled(p, rs->gen);
  }
  int64_t cap = k < SCHED_WINDOW ? k : SCHED_WINDOW;
  chunk_task local[32];
  chunk_task *tasks = cap <= 32 ? local : core_host_malloc(sizeof *tasks * (size_t)cap);
  if (!tasks) { /* no memory for the task list: windows of 32 */
    tasks = local;
    cap = 32;
  }
  chunk_task proto = {fn, ctx, 0, 0, NULL, rs->gen, steps};
  for (int64_t c0 = 0; c0 < k && !gen_cancelled(p, proto.gen); c0 += cap)
    run_window(rs, &proto, c0, k - c0 < cap ? k - c0 : cap, grain, n, tasks);
  if (tasks != local) free(tasks);
  return !gen_cancelled(p, proto.gen);
}

bool sched_parallel_for(int64_t n, int64_t grain, sched_range_fn fn, void *ctx) {
  return run_loop(n, grain, fn, ctx, false);
}

bool sched_parallel_steps(int64_t n, int64_t grain, sched_range_fn fn, void *ctx) {
  return run_loop(n, grain, fn, ctx, true);
}
