/* SPMD mode (runtime/spmd_run.h, docs/spmd.md).
 *
 * dt_spmd_run publishes one record to every rank. Each rank thread, when
 * it reaches the record (after everything issued to it before), marks
 * itself as running the function for its rank (a thread-local), makes the
 * runtime current and the random stream its own copy, and calls fn. The
 * publish paths (exec.c) see the mark and run the thread's own work
 * inline. When fn returns the rank departs (sim_coll_depart: peers still
 * waiting for it in a collective fail at once, naming it) and waits at the
 * exit barrier; once every rank is there, one of them brings the
 * collective groups back in step (a failed run can leave members with
 * different round counts) and advances the process random stream past
 * what the ranks drew; a second barrier keeps every rank from running its
 * next record (which may be a collective) before that is done. The last
 * rank to leave the record completes the caller's future with the first
 * failure. */
#include "runtime/spmd_run.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "runtime/backend.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"
#include "sched/future.h"
#include "sim/collectives.h"

static _Thread_local struct { const dt_runtime *rt; int rank; } tls_spmd = {NULL, -1};

int runtime_spmd_rank_tls(const dt_runtime *rt) {
  return tls_spmd.rt == rt ? tls_spmd.rank : -1;
}
int runtime_spmd_any_rank(void) { return tls_spmd.rt ? tls_spmd.rank : -1; }
dt_runtime *runtime_spmd_runtime(void) { return (dt_runtime *)tls_spmd.rt; }

typedef struct spmd_job {
  dt_spmd_fn fn;
  void *arg;
  dt_runtime *rt;
  pthread_barrier_t left, resynced;
  _Atomic uint64_t rng_end;    /* the furthest offset a rank drew to */
  _Atomic int failed;          /* ranks whose fn failed */
  pthread_mutex_t lock;        /* first failure */
  int first_rank;              /* -1: none */
  dt_status first_st;
  char first_msg[768];
  dt_future *done;
} spmd_job;

static void note_failure(spmd_job *j, int rank, dt_status st, const char *msg) {
  atomic_fetch_add_explicit(&j->failed, 1, memory_order_relaxed);
  pthread_mutex_lock(&j->lock);
  if (j->first_rank < 0 || rank < j->first_rank) { /* the lowest rank's */
    j->first_rank = rank;
    j->first_st = st;
    snprintf(j->first_msg, sizeof j->first_msg, "%s", msg);
  }
  pthread_mutex_unlock(&j->lock);
}

static void run_fn(spmd_job *j, dt_runtime *rt, int rank) {
  runtime_set_current(rt); /* rank threads have none: set back to NULL */
  core_rng_local_begin();
  tls_spmd.rt = rt;
  tls_spmd.rank = rank;
  /* relaxed: read only for the watchdog's report */
  atomic_store_explicit(&rt->ranks[rank].in_spmd, true, memory_order_relaxed);
  /* its own ops name themselves while they run (exec.c) */
  atomic_store_explicit(&rt->ranks[rank].where, NULL, memory_order_relaxed);
  dt_spmd_ctx ctx = {.rank = rank, .world_size = rt->nranks, .rt = rt,
                     .arg = j->arg};
  core_clear_error();
  dt_status st = j->fn(&ctx);
  const char *msg = "";
  if (st != DT_OK) {
    msg = core_last_status() != DT_OK ? core_last_error() : "(no message)";
    note_failure(j, rank, st, msg);
  }
  tls_spmd.rt = NULL;
  tls_spmd.rank = -1;
  atomic_store_explicit(&rt->ranks[rank].in_spmd, false, memory_order_relaxed);
  sim_coll_depart(rt->coll, rank, st, msg);
  uint64_t end = core_rng_local_end();
  uint64_t seen = atomic_load_explicit(&j->rng_end, memory_order_relaxed);
  while (end > seen && !atomic_compare_exchange_weak_explicit(
                           &j->rng_end, &seen, end, memory_order_relaxed,
                           memory_order_relaxed)) {
  }
  runtime_set_current(NULL);
}

static void on_rank(void *arg, dt_runtime *rt, int rank) {
  spmd_job *j = arg;
  run_fn(j, rt, rank);
  /* every rank left fn: no collective is in flight on any group */
  if (pthread_barrier_wait(&j->left) == PTHREAD_BARRIER_SERIAL_THREAD) {
    sim_coll_world_resync(rt->coll);
    core_rng_advance_to(atomic_load_explicit(&j->rng_end, memory_order_relaxed));
  }
  /* the barrier orders the resync before any rank's next collective */
  pthread_barrier_wait(&j->resynced);
}

static void on_done(void *arg) {
  spmd_job *j = arg;
  /* the record's acq_rel countdown ordered every rank's notes before us */
  if (j->first_rank < 0) {
    sched_future_complete(j->done, DT_OK, NULL);
  } else {
    char msg[1024];
    int n = atomic_load_explicit(&j->failed, memory_order_relaxed);
    if (j->rt->nprocs > 1) /* this process's ranks only ran here */
      snprintf(msg, sizeof msg, "dt_spmd_run: rank %d failed (%d of the %d "
               "ranks of process %d failed): %s", j->first_rank, n,
               j->rt->nlocal, j->rt->proc, j->first_msg);
    else
      snprintf(msg, sizeof msg, "dt_spmd_run: rank %d failed (%d of %d ranks "
               "failed): %s", j->first_rank, n, j->rt->nranks, j->first_msg);
    sched_future_complete(j->done, j->first_st, msg);
  }
  sched_future_release(j->done);
  pthread_barrier_destroy(&j->left);
  pthread_barrier_destroy(&j->resynced);
  pthread_mutex_destroy(&j->lock);
  free(j);
}

/* ---- turns: one run (or the destroy) holds the runtime at a time. A run
 * queued behind one that never ends (one started by a thread the running
 * function joins) would wait for ever; the wait is bounded by the
 * collective timeout instead and names the holder. */
static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool closing(const dt_runtime *rt) {
  /* acquire: pairs with runtime_gate_close's store (seq_cst) */
  return atomic_load_explicit(&((dt_runtime *)rt)->closing,
                              memory_order_acquire);
}

static dt_status turn_timeout(dt_runtime *rt, const char *fn, int64_t now) {
  /* under spmd_lock: the holder's description is stable */
  return core_error_set(DT_ERR_TIMEOUT, "%s: waited %.3f s (the collective "
                        "timeout) for its turn on the runtime, held for %.3f "
                        "s by %s; a call made from inside that run (by a "
                        "thread its function joins) can never have it",
                        fn, (double)rt->coll_timeout_ns * 1e-9,
                        (double)(now - rt->spmd_since_ns) * 1e-9,
                        rt->spmd_holder);
}

dt_status runtime_spmd_take_turn(dt_runtime *rt, const char *fn,
                                 const char *holder) {
  int64_t t = rt->coll_timeout_ns, deadline = t > 0 ? mono_ns() + t : 0;
  struct timespec ts = {deadline / 1000000000, deadline % 1000000000};
  bool destroy = !holder; /* the destroy waits on a closed runtime too */
  dt_status st = DT_OK;
  pthread_mutex_lock(&rt->spmd_lock);
  while (rt->spmd_held && (destroy || !closing(rt)) && st == DT_OK) {
    int e = deadline ? pthread_cond_timedwait(&rt->spmd_turn, &rt->spmd_lock, &ts)
                     : pthread_cond_wait(&rt->spmd_turn, &rt->spmd_lock);
    if (e == ETIMEDOUT && rt->spmd_held && (destroy || !closing(rt)))
      st = turn_timeout(rt, fn, mono_ns());
  }
  if (st == DT_OK && !destroy && closing(rt))
    st = core_error_set(DT_ERR_DEVICE, "%s: the runtime was destroyed", fn);
  if (!holder) holder = fn;
  if (st == DT_OK) {
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    rt->spmd_held = true;
    rt->spmd_since_ns = mono_ns();
    snprintf(rt->spmd_holder, sizeof rt->spmd_holder, "%s on thread \"%s\"",
             holder, name);
  }
  pthread_mutex_unlock(&rt->spmd_lock);
  return st;
}

void runtime_spmd_give_turn(dt_runtime *rt) {
  pthread_mutex_lock(&rt->spmd_lock);
  rt->spmd_held = false;
  pthread_cond_broadcast(&rt->spmd_turn);
  pthread_mutex_unlock(&rt->spmd_lock);
}

void runtime_spmd_wake_waiters(dt_runtime *rt) {
  pthread_mutex_lock(&rt->spmd_lock); /* a waiter between check and wait */
  pthread_cond_broadcast(&rt->spmd_turn);
  pthread_mutex_unlock(&rt->spmd_lock);
}

/* "the SPMD run of train_step started at train.c:88" */
static void describe_run(char *buf, size_t len, dt_spmd_fn fn,
                         const char *site) {
  Dl_info info;
  char fname[128];
  if (dladdr((void *)(uintptr_t)fn, &info) && info.dli_sname)
    snprintf(fname, sizeof fname, "%s", info.dli_sname);
  else
    snprintf(fname, sizeof fname, "the function at %p", (void *)(uintptr_t)fn);
  snprintf(buf, len, "the SPMD run of %s started at %s", fname,
           site ? site : "an unknown site");
}

static dt_status run_in_turn(dt_runtime *rt, dt_spmd_fn fn, void *arg);

dt_status runtime_spmd_run(dt_runtime *rt, dt_spmd_fn fn, void *arg,
                           const char *site) {
  if (!rt || !fn)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_spmd_run: %s is NULL",
                          !rt ? "rt" : "fn");
  if (closing(rt))
    return core_error_set(DT_ERR_DEVICE, "dt_spmd_run: the runtime was destroyed");
  if (rt->dry_run)
    return core_error_set(DT_ERR_UNSUPPORTED, "dt_spmd_run: a dry-run runtime "
                          "runs no functions (use the controller model)");
  if (sched_current_pool())
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_spmd_run: called on "
                          "rank %d's thread (from an SPMD function or a rank "
                          "callback); SPMD runs do not nest",
                          sched_current_rank());
  char holder[256];
  describe_run(holder, sizeof holder, fn, site);
  runtime_ref(rt); /* the turn's lock outlives a destroy meanwhile */
  dt_status st = runtime_spmd_take_turn(rt, "dt_spmd_run", holder);
  if (st == DT_OK) {
    st = run_in_turn(rt, fn, arg);
    runtime_spmd_give_turn(rt);
  }
  runtime_unref(rt);
  return st;
}

static dt_status run_in_turn(dt_runtime *rt, dt_spmd_fn fn, void *arg) {
  spmd_job *j = calloc(1, sizeof *j);
  dt_future *f = j ? sched_future_new() : NULL;
  if (!f) {
    free(j);
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_spmd_run: out of host memory");
  }
  *j = (spmd_job){.fn = fn, .arg = arg, .rt = rt, .first_rank = -1,
                  .done = sched_future_retain(f)};
  /* the record reaches this process's ranks only (multi-process runtimes
   * host rt->nlocal of the job's rt->nranks) */
  pthread_barrier_init(&j->left, NULL, (unsigned)rt->nlocal);
  pthread_barrier_init(&j->resynced, NULL, (unsigned)rt->nlocal);
  pthread_mutex_init(&j->lock, NULL);
  /* relaxed: the record's publish (a release) orders it for the ranks */
  atomic_fetch_add_explicit(&rt->spmd_active, 1, memory_order_relaxed);
  if (runtime_publish_named_call(rt, -1, "spmd", on_rank, on_done, j) != DT_OK) {
    dt_status st = core_last_status();
    atomic_fetch_sub_explicit(&rt->spmd_active, 1, memory_order_relaxed);
    sched_future_release(f);
    on_done(j); /* completes nobody's future: f was ours alone */
    if (st == DT_ERR_DEVICE)
      return core_error_set(st, "dt_spmd_run: the runtime was destroyed");
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_spmd_run: out of host "
                          "memory for a record to every rank");
  }
  dt_status st = sched_future_wait(f, -1);
  /* every rank left fn: none asks any more */
  atomic_fetch_sub_explicit(&rt->spmd_active, 1, memory_order_relaxed);
  sched_future_release(f);
  return st;
}
