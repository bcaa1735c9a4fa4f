/* The worker pool: one thread per rank, a record queue per rank, per-rank
 * Chase–Lev deques for chunked work, and parking on event counts.
 *
 * Generic: the pool moves opaque fixed-size records and calls an exec
 * function for each record addressed to a rank, in the order they were
 * committed to it. It knows nothing of tensors or ops (runtime/exec.c gives
 * records their meaning).
 *
 * A record for one rank lives in place in a cell of that rank's queue
 * (claimed, filled, committed: no malloc); a record for every rank is
 * written once into the pool's broadcast ring, which every rank reads with
 * its own cursor, so it costs the issuer the same whatever the number of
 * ranks; all-rank records reach every rank in the same order, and each
 * rank runs its two streams in the order they were issued. Issuing to one
 * rank waits only while that rank's queue is full; to every rank, while
 * the broadcast ring is full. */
#ifndef SCHED_POOL_H
#define SCHED_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sched_pool sched_pool;

/* exec runs on rank `rank`'s thread for each record addressed to it. */
typedef void (*sched_exec_fn)(void *ctx, void *record, int rank);
/* runs once on each rank thread when it starts (e.g. OpenBLAS threads) */
typedef void (*sched_init_fn)(void *ctx, int rank);
/* Work the pool does not see (e.g. frees other threads handed to the rank):
 * `pending` says whether there is some (any thread; before the rank parks
 * and in its re-check), `idle` does it (the rank's thread, when its queue
 * is empty). Whoever makes such work calls sched_pool_wake after. */
typedef bool (*sched_pending_fn)(void *ctx, int rank);
typedef void (*sched_idle_fn)(void *ctx, int rank);
/* Whether a thread that published `record` may run it on `rank` while that
 * rank's thread sleeps (sched/help.h): a sched_help_kind. */
typedef int (*sched_helpable_fn)(void *ctx, const void *record, int rank);

typedef struct sched_pool_config {
  int ranks;                /* >= 1 */
  uint32_t queue_capacity;  /* records in flight per rank: power of two >= 2 */
  size_t record_size;       /* bytes per record */
  sched_exec_fn exec;
  sched_init_fn init;       /* may be NULL */
  sched_pending_fn pending; /* may be NULL (then idle is not called) */
  sched_idle_fn idle;
  sched_helpable_fn helpable; /* may be NULL: nothing is helped */
  void *ctx;
  uint32_t spin_ns;         /* spin before parking (default 20000) */
  uint64_t chaos_seed;      /* != 0: chaos points perturb (sched/chaos.h) */
  int rank_base;            /* the fault table's key of thread i is
                               rank_base + i (a process of a multi-process
                               job hosts ranks from rank_base); 0 */
  int fault_ranks;          /* the fault table's ranks (0: ranks) */
  int pin_cpus;             /* > 1: rank r runs on CPU r % pin_cpus (the
                               runtime pins), which sched_parallel_for uses
                               to wake one helper per other CPU; 0: not
                               pinned */
} sched_pool_config;
/* the pool's fault table (sched/fault_table.h) */
struct sched_faults *sched_pool_faults(sched_pool *p);
/* rank_base of the config */
int sched_pool_rank_base(const sched_pool *p);
/* the pool's chaos seed (0: off) */
uint64_t sched_pool_chaos_seed(const sched_pool *p);

/* NULL on failure (errno-style cause in *why, a static string). */
sched_pool *sched_pool_create(const sched_pool_config *cfg, const char **why);
/* Waits for every committed record to run, stops and joins the threads. */
void sched_pool_destroy(sched_pool *p);
int sched_pool_ranks(const sched_pool *p);

/* Producer side (any thread that is not one of p's ranks): claim a record
 * for `rank` (SCHED_ALL: every rank), fill it, commit it. A claim blocks
 * while the queue it needs (the rank's, or the broadcast ring) is full and
 * never fails.
 * Every successful claim must be committed, soon: the rank stops at it. */
#define SCHED_ALL (-1)
typedef struct sched_claim {
  int rank;
  uint64_t pos;       /* queue position, or broadcast ticket */
} sched_claim;
void *sched_pool_claim(sched_pool *p, int rank, sched_claim *c);
void sched_pool_commit(sched_pool *p, const sched_claim *c);

/* Any thread but the pool's: waits up to budget_ns (spinning, yielding
 * the CPU when ranks and caller outnumber the CPUs) until every rank ran
 * every record claimed for it before the call; true if so, false
 * when the budget ran out (or the pool has more than 64 ranks): the
 * caller then waits its slow way (a barrier record). The ranks' work for
 * those records happens-before the return of true. */
bool sched_pool_try_drain(sched_pool *p, int64_t budget_ns);
/* Wakes `rank` if it is parked, after the caller made work for it visible
 * that only cfg.pending sees (a release store; this issues the fence). */
void sched_pool_wake(sched_pool *p, int rank);

/* The pool and rank of the calling thread, or NULL / -1 off the pool. */
sched_pool *sched_current_pool(void);
int sched_current_rank(void);

/* Runs fn over [0, n) in chunks of `grain` (the last may be shorter).
 * Chunk boundaries depend only on n and grain. On a rank thread the chunks
 * go on the rank's deque and idle ranks of the same pool steal them; off
 * the pool, or when n <= grain, fn runs inline. Returns when all chunks ran. */
typedef void (*sched_range_fn)(int64_t begin, int64_t end, void *ctx);
/* Loops of more than SCHED_WINDOW chunks go in windows of that many
 * (sched/steal.c). Returns false if the calling record was cancelled
 * (sched_pool_cancel) while it ran: chunks were skipped, the output is
 * not whole; true otherwise. */
#define SCHED_WINDOW 1024
bool sched_parallel_for(int64_t n, int64_t grain, sched_range_fn fn,
                        void *ctx);
/* As sched_parallel_for, for a fn whose units may be run in separate
 * calls: fn(b, e) does the same as fn(b, x) then fn(x, e) for every
 * b < x < e (the units run in order, nothing is carried between calls).
 * A thief then runs a stolen chunk unit by unit and leaves its rest to
 * others when its own records arrive, so a long chunk never holds up the
 * thief's own stream for more than one unit (sched/steal.c, "Steps"). */
bool sched_parallel_steps(int64_t n, int64_t grain, sched_range_fn fn,
                          void *ctx);

/* Cancellation (sched/steal.c, "Cancellation"). sched_pool_cancel: any
 * thread; every record claimed before the call that armed its
 * cancellation (or arms it later) is cancelled. sched_cancel_arm: on a
 * rank thread, inside a record: makes the record cancellable from here
 * on; true if it already is cancelled. sched_cancelled: the record
 * running on this thread armed its cancellation and was cancelled (false
 * off the pool). */
void sched_pool_cancel(sched_pool *p);
bool sched_cancel_arm(void);
bool sched_cancelled(void);

/* Counters for tests and benchmarks (relaxed snapshots). */
typedef struct sched_pool_stats {
  int64_t records_run, chunks_run, chunks_stolen, parks, wakes;
  int64_t chunks_left; /* steps chunks a thief left to run its own records */
  int64_t helped;      /* records an issuing thread ran for a sleeping rank */
  int64_t help_woken;  /* deferred ranks woken after all (sched/help.h) */
} sched_pool_stats;
sched_pool_stats sched_pool_get_stats(const sched_pool *p);
/* Any thread: records waiting for `rank` — claimed in its queue and not
 * yet popped, plus broadcast tickets it has not run. A gauge (relaxed
 * reads of counters that move): exact only while nothing is issued. */
uint64_t sched_pool_queue_depth(const sched_pool *p, int rank);

#endif
