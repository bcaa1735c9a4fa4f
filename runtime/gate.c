/* The runtime's gate: which calls are inside a runtime, so that
 * dt_runtime_destroy frees nothing a call can still reach (runtime.h).
 *
 * A call that reaches the pool, the devices, the collectives or the fault
 * table of a runtime from outside its rank threads enters the gate first
 * and leaves it when it no longer touches them. dt_runtime_destroy closes
 * the gate (no call enters any more: those fail with "the runtime was
 * destroyed"), waits until no thread is inside, and only then tears down.
 * The calls inside complete: the pool still runs everything they publish.
 *
 * Algorithm. Every thread that enters a gate owns a record on a process-
 * wide list (made on its first entry, unlinked when it exits). A record
 * names the runtime the thread is inside (`in`) and how deep (`depth`,
 * its own thread only: a call inside the gate that calls another entry,
 * say synchronize publishing a barrier, is not refused half-way). A
 * thread already inside one runtime that enters another (rare: a callback
 * run inline) counts on that runtime's shared `gate_foreign` instead.
 *
 *   enter(rt):  in = rt (seq_cst);  if closing (seq_cst): in = NULL, refuse
 *   close(rt):  closing = true (seq_cst);  wait until no record has in == rt
 *               (seq_cst loads, under the list's lock) and gate_foreign == 0
 *   leave(rt):  in = NULL (release)
 *
 * Invariant: once close has seen every record without rt and the foreign
 * count at 0, no thread is inside rt and none will enter. It is the
 * store-buffering (Dekker) pair: enter {store in; load closing} and close
 * {store closing; load in} are all seq_cst, so in their single total order
 * either close's load of `in` follows the store (close waits for the
 * leave) or enter's load of `closing` follows close's store (enter
 * refuses). The foreign count is the same pair with an RMW. The release
 * store of leave pairs with close's loads (acquire, as seq_cst): all the
 * call did happens-before the teardown.
 *
 * The fast form (asymmetric fences, as in userspace RCU: M. Desnoyers et
 * al., "User-Level Implementations of Read-Copy Update", IEEE TPDS 2012).
 * The seq_cst store of `in` is an xchg on x86, about half the gate's cost
 * on the op path. Where the kernel offers membarrier(2)'s private
 * expedited command (Linux 4.14+; registered once, at the first runtime),
 * enter stores `in` relaxed behind a compiler barrier and close issues
 * membarrier between its store of `closing` and its loads of `in`: every
 * thread of the process then runs a full barrier at some point during
 * the call, so each enter's store-then-load pair is, as seen by close,
 * either wholly before it (the store is visible) or wholly after (the
 * load sees `closing`), the same two outcomes as with seq_cst. Without
 * membarrier both sides use seq_cst as above. ThreadSanitizer does not
 * model either fence; it checks the happens-before that matters to it,
 * leave's release store read by close.
 *
 * Cost on the op path: a store to this thread's own cache line (no line
 * shared between issuing threads is written) and a load of `closing`,
 * which no one writes until the destroy; the leave is a release store.
 * Rank threads of the runtime and the destroying thread pass without a
 * mark: the pool outlives what they do. */
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "runtime/runtime.h"

typedef struct gate_thread {
  _Atomic(const dt_runtime *) in; /* the runtime this thread is inside */
  int depth;                      /* nested entries of `in` (own thread) */
  struct gate_thread *next, *prev; /* the list, under threads_lock */
} gate_thread;

static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static gate_thread *threads;

/* one block, so the op path pays one TLS address computation */
static _Thread_local struct {
  gate_thread *me;              /* this thread's record, NULL until entry */
  const dt_runtime *own;        /* a rank thread of this runtime */
  const dt_runtime *destroying; /* the runtime this thread tears down */
} tls;

/* membarrier registered: the fast form (see the top); set once, before the
 * first runtime exists (pthread_once orders it for every later reader) */
static bool asym;
static pthread_once_t asym_once = PTHREAD_ONCE_INIT;
static void asym_register(void) {
  asym = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                 0, 0) == 0;
}
void runtime_gate_init(void) { pthread_once(&asym_once, asym_register); }

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void unlink_at_exit(void *p) {
  gate_thread *g = p;
  /* runs on the exiting thread: a later destructor that releases a
   * tensor registers a fresh record (freed by the next round) */
  tls.me = NULL;
  pthread_mutex_lock(&threads_lock);
  if (g->prev) g->prev->next = g->next;
  else threads = g->next;
  if (g->next) g->next->prev = g->prev;
  pthread_mutex_unlock(&threads_lock);
  free(g);
}
static void make_key(void) { pthread_key_create(&exit_key, unlink_at_exit); }

/* NULL when out of memory: the thread then counts as foreign */
static gate_thread *register_thread(void) {
  pthread_once(&exit_once, make_key);
  gate_thread *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  if (pthread_setspecific(exit_key, g) != 0) {
    free(g);
    return NULL;
  }
  pthread_mutex_lock(&threads_lock);
  g->next = threads;
  if (threads) threads->prev = g;
  threads = g;
  pthread_mutex_unlock(&threads_lock);
  tls.me = g;
  return g;
}

void runtime_gate_mark_own(const dt_runtime *rt) { tls.own = rt; }

bool runtime_gate_is_own(const dt_runtime *rt) {
  return rt && tls.own == rt;
}

bool runtime_gate_inside(const dt_runtime *rt) {
  gate_thread *g = tls.me;
  return g && atomic_load_explicit(&g->in, memory_order_relaxed) == rt;
}

static bool refuse(const char *fn) {
  if (fn) core_error_set(DT_ERR_DEVICE, "%s: the runtime was destroyed", fn);
  return false;
}

bool runtime_gate_enter(dt_runtime *rt, const char *fn) {
  if (tls.own == rt || tls.destroying == rt) return true;
  gate_thread *g = tls.me ? tls.me : register_thread();
  /* relaxed: only this thread writes its own record's `in` */
  const dt_runtime *in = g ? atomic_load_explicit(&g->in, memory_order_relaxed)
                           : NULL;
  if (g && in == rt) {
    g->depth++;
    return true;
  }
  if (g && !in) {
    /* seq_cst, or relaxed + compiler barrier against close's membarrier:
     * the Dekker pair with runtime_gate_close (see the top) */
    if (asym) {
      atomic_store_explicit(&g->in, rt, memory_order_relaxed);
      atomic_signal_fence(memory_order_seq_cst);
    } else {
      atomic_store_explicit(&g->in, rt, memory_order_seq_cst);
    }
    if (!atomic_load_explicit(&rt->closing, memory_order_seq_cst)) {
      g->depth = 1;
      return true;
    }
    atomic_store_explicit(&g->in, NULL, memory_order_relaxed); /* did nothing */
    return refuse(fn);
  }
  /* seq_cst: the same pair, through the shared count */
  atomic_fetch_add_explicit(&rt->gate_foreign, 1, memory_order_seq_cst);
  if (!atomic_load_explicit(&rt->closing, memory_order_seq_cst)) return true;
  atomic_fetch_sub_explicit(&rt->gate_foreign, 1, memory_order_relaxed);
  return refuse(fn);
}

void runtime_gate_leave(dt_runtime *rt) {
  if (tls.own == rt || tls.destroying == rt) return;
  gate_thread *g = tls.me;
  if (g && atomic_load_explicit(&g->in, memory_order_relaxed) == rt) {
    /* release: the call's accesses before close's load sees NULL */
    if (--g->depth == 0)
      atomic_store_explicit(&g->in, NULL, memory_order_release);
    return;
  }
  /* release: as above, for close's load of the count */
  atomic_fetch_sub_explicit(&rt->gate_foreign, 1, memory_order_release);
}

static bool anyone_inside(const dt_runtime *rt) {
  /* seq_cst: the other half of the Dekker pair (see the top) */
  if (atomic_load_explicit(&((dt_runtime *)rt)->gate_foreign,
                           memory_order_seq_cst))
    return true;
  bool busy = false;
  pthread_mutex_lock(&threads_lock);
  for (gate_thread *g = threads; g && !busy; g = g->next)
    busy = atomic_load_explicit(&g->in, memory_order_seq_cst) == rt;
  pthread_mutex_unlock(&threads_lock);
  return busy;
}

void runtime_gate_close(dt_runtime *rt) {
  /* seq_cst: the Dekker pair with runtime_gate_enter (see the top) */
  atomic_store_explicit(&rt->closing, true, memory_order_seq_cst);
  /* the fast form's other half: a full barrier on every thread (cannot
   * fail once registered; the seq_cst store above covers the other form) */
  if (asym) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  /* the calls inside finish what they publish: a few µs, unless one
   * waits for ring space behind a long record */
  long sleep_ns = 1000;
  for (int round = 0; anyone_inside(rt); round++) {
    if (round < 64) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < 1000000) sleep_ns *= 2;
  }
}

void runtime_gate_begin_teardown(const dt_runtime *rt) { tls.destroying = rt; }
void runtime_gate_end_teardown(void) { tls.destroying = NULL; }
