/* Futures: one-shot completion of asynchronous work (sched/future.h is the
 * runtime's half, dtorch.h's dt_future_* the user's).
 *
 * State machine. `state` is the futex word and the only source of truth:
 *
 *     PENDING (0) --first waiter parks--> WAITING (2) --complete--> DONE (1)
 *     PENDING (0) ------------------complete------------------> DONE (1)
 *
 * WAITING is "pending, and someone may sleep in FUTEX_WAIT on this word";
 * it is never cleared before DONE. The completer exchanges the word to DONE
 * and issues FUTEX_WAKE only when it took the word from WAITING, so a
 * future nobody waits on completes without a syscall. `completed` (a
 * separate flag, exchanged first) catches a second sched_future_complete
 * before it can touch status/message.
 *
 * Publication. status and message are plain fields written by the single
 * completer before the release exchange of `state` to DONE; every reader
 * loads `state` with acquire and reads them only after seeing DONE.
 *
 * No lost wake-up. A waiter sleeps only through FUTEX_WAIT(&state,
 * WAITING), which the kernel performs as "compare the word with WAITING and
 * enqueue" atomically with respect to FUTEX_WAKE on the same word. The
 * waiter's CAS PENDING -> WAITING and the completer's exchange -> DONE are
 * read-modify-writes of one location, so they are totally ordered
 * (modification order; no fence needed):
 *   - CAS first: the exchange returns WAITING, so the completer wakes. The
 *     waiter is either already queued (woken) or its kernel compare sees
 *     DONE != WAITING and returns EAGAIN at once.
 *   - exchange first: the CAS fails and observes DONE; the waiter returns.
 * Several waiters share the bit: the first sets it, the rest see WAITING
 * and park directly; FUTEX_WAKE(INT_MAX) wakes them all. Spurious wake-ups
 * and EINTR just loop back to re-reading the word.
 *
 * Eventfd. Made lazily by sched_future_fd and installed with a CAS from -1.
 * The installer and the completer form a store-buffering (Dekker) pair:
 * installer {CAS efd; load state}, completer {exchange state; load efd},
 * all seq_cst, so at least one sees the other's store and writes 1. Both
 * may write; the counter is then 2, which is just as readable.
 *
 * Callbacks. A Treiber stack of {cb, user, next} nodes. sched_future_then
 * pushes with a CAS (release) unless the head is the CLOSED sentinel, in
 * which case it runs cb at once on its own thread. The completer exchanges
 * the head with CLOSED (acq_rel) and reverses what it took (registration
 * order). A node is either taken by that exchange or, having seen CLOSED,
 * never pushed: every callback runs exactly once.
 *
 * Where callbacks run. Never on a rank thread: a callback may issue ops,
 * wait for results or destroy a runtime, and a rank that ran them inside
 * its own record could wait on itself. A completer on a rank thread hands
 * the list (with a reference on f) to the completion thread: one process-
 * wide thread, started on first use, that runs lists in the order they
 * were handed over (a mutex + condition variable queue: callbacks are not
 * on the op path). Completers on other threads run the list themselves.
 *
 * Lifetime. Refcounted (increment relaxed, decrement acq_rel). The runtime
 * holds a reference until it has completed the future, so a user may
 * release a pending future; and every caller of complete / wait / then /
 * fd holds one for the duration of the call. */
#include "sched/future.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/host_alloc.h"
#include "sched/pool.h"

enum { FUTURE_PENDING = 0, FUTURE_DONE = 1, FUTURE_WAITING = 2 };

/* iterations of the pause loop before a waiter parks (~ a few µs) */
#define FUTURE_SPIN 128
#define FUTURE_YIELD_NS ((int64_t)20 * 1000)

typedef struct cb_node {
  dt_future_callback cb;
  void *user;
  struct cb_node *next;
} cb_node;

/* the head value meaning "completed: run callbacks yourself" */
static cb_node closed_node;
#define CB_CLOSED (&closed_node)

/* callbacks handed to the completion thread: one per future (it completes
 * once), kept in the future so a completing rank allocates nothing */
typedef struct cb_batch {
  dt_future *f;          /* a reference, dropped after the callbacks ran */
  cb_node *top;          /* as taken by the completer */
  struct cb_batch *next;
} cb_batch;

struct dt_future {
  _Atomic uint32_t state;        /* futex word: PENDING / WAITING / DONE */
  _Atomic uint32_t refs;
  _Atomic bool completed;        /* set by the first sched_future_complete */
  _Atomic int efd;               /* -1 until sched_future_fd */
  _Atomic(cb_node *) callbacks;  /* Treiber stack, or CB_CLOSED */
  dt_status status;              /* valid once state == DONE */
  char *message;                 /* heap copy or NULL; idem */
  cb_batch batch;                /* hand_over's, under completer.lock */
  /* a device event (sched_future_set_event): set once; owner and drop
   * written before the seq_cst store of event publishes them */
  _Atomic(void *) event;
  _Atomic uint32_t ev_seq;      /* futex word of event waiters */
  _Atomic uint32_t ev_waiters;  /* threads in sched_future_wait_event */
  const void *event_owner;
  void (*event_drop)(void *);
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* wait while the word equals `val`; rel_ns < 0 is forever. The result is
 * only a hint: callers re-read the word. */
static void futex_wait(_Atomic uint32_t *word, uint32_t val, int64_t rel_ns) {
  struct timespec ts, *tp = NULL;
  if (rel_ns >= 0) {
    ts.tv_sec = (time_t)(rel_ns / 1000000000);
    ts.tv_nsec = (long)(rel_ns % 1000000000);
    tp = &ts;
  }
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, tp, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL,
          NULL, 0);
}

/* wakes the event waiters (sched_future_wait_event) on a new ev_seq */
static void bump_events(dt_future *f) {
  atomic_fetch_add_explicit(&f->ev_seq, 1, memory_order_seq_cst);
  futex_wake_all(&f->ev_seq);
}

static void eventfd_signal(int fd) {
  uint64_t one = 1;
  /* EAGAIN only if the counter would overflow: it is readable anyway */
  ssize_t n = write(fd, &one, sizeof one);
  (void)n;
}

static void free_nodes(cb_node *n) {
  while (n && n != CB_CLOSED) {
    cb_node *next = n->next;
    free(n);
    n = next;
  }
}

dt_future *sched_future_new(void) {
  dt_future *f = malloc(sizeof *f);
  if (!f) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "sched_future_new: out of memory");
    return NULL;
  }
  atomic_init(&f->state, FUTURE_PENDING);
  atomic_init(&f->refs, 1);
  atomic_init(&f->completed, false);
  atomic_init(&f->efd, -1);
  atomic_init(&f->callbacks, NULL);
  f->status = DT_OK;
  f->message = NULL;
  atomic_init(&f->event, NULL);
  atomic_init(&f->ev_seq, 0);
  atomic_init(&f->ev_waiters, 0);
  f->event_owner = NULL;
  f->event_drop = NULL;
  return f;
}

dt_future *sched_future_retain(dt_future *f) {
  if (f) {
    uint32_t old = atomic_fetch_add_explicit(&f->refs, 1,
                                             memory_order_relaxed);
    CORE_ASSERT(old > 0);
  }
  return f;
}


void sched_future_release(dt_future *f) {
  if (!f) return;
  /* release: our earlier uses of f happen before the free; acquire (on the
   * last decrement): pairs with every other holder's release decrement */
  uint32_t old = atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel);
  CORE_ASSERT(old > 0);
  if (old != 1) return;
  int fd = atomic_load_explicit(&f->efd, memory_order_relaxed);
  if (fd >= 0) close(fd);
  /* a future dropped while pending (the runtime gave up on it) still owns
   * the nodes of callbacks that will now never run */
  free_nodes(atomic_load_explicit(&f->callbacks, memory_order_relaxed));
  void *ev = atomic_load_explicit(&f->event, memory_order_relaxed);
  if (ev && f->event_drop) f->event_drop(ev);
  free(f->message);
  free(f);
}

/* runs the stack taken by the completer, oldest registration first */
static void run_callbacks(dt_future *f, cb_node *top) {
  cb_node *prev = NULL;
  while (top) {
    cb_node *next = top->next;
    top->next = prev;
    prev = top;
    top = next;
  }
  while (prev) {
    cb_node *next = prev->next;
    prev->cb(f, f->status, prev->user);
    free(prev);
    prev = next;
  }
}

/* ---- the completion thread */
static struct {
  pthread_once_t once;
  pthread_mutex_t lock;
  pthread_cond_t ready;
  cb_batch *head, *tail;
  bool started;
} completer = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER,
               PTHREAD_COND_INITIALIZER, NULL, NULL, false};

static void *completion_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&completer.lock);
  for (;;) {
    while (!completer.head) pthread_cond_wait(&completer.ready, &completer.lock);
    cb_batch *b = completer.head;
    completer.head = b->next;
    if (!completer.head) completer.tail = NULL;
    pthread_mutex_unlock(&completer.lock);
    run_callbacks(b->f, b->top);
    sched_future_release(b->f); /* may free b: it lives in the future */
    pthread_mutex_lock(&completer.lock);
  }
  return NULL;
}

static void completion_start(void) {
  pthread_attr_t a;
  pthread_t t;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  /* the first completer may be a rank thread bound to one CPU: give the
   * completion thread the main thread's CPUs instead of inheriting that */
  cpu_set_t cpus;
  if (sched_getaffinity(getpid(), sizeof cpus, &cpus) == 0)
    pthread_attr_setaffinity_np(&a, sizeof cpus, &cpus);
  completer.started = pthread_create(&t, &a, completion_main, NULL) == 0;
  pthread_attr_destroy(&a);
}

/* false when the completion thread cannot be had: the caller then runs
 * the callbacks itself (nothing better is left) */
static bool hand_over(dt_future *f, cb_node *top) {
  pthread_once(&completer.once, completion_start);
  if (!completer.started) return false;
  cb_batch *b = &f->batch;
  b->f = sched_future_retain(f);
  b->top = top;
  b->next = NULL;
  pthread_mutex_lock(&completer.lock);
  if (completer.tail) completer.tail->next = b;
  else completer.head = b;
  completer.tail = b;
  pthread_cond_signal(&completer.ready);
  pthread_mutex_unlock(&completer.lock);
  return true;
}

void sched_future_complete(dt_future *f, dt_status st, const char *msg) {
  CORE_ASSERT(f != NULL);
  /* a second completion is a runtime bug; catch it before it races on
   * status/message (relaxed: only the flag's own value matters) */
  bool twice = atomic_exchange_explicit(&f->completed, true,
                                        memory_order_relaxed);
  CORE_ASSERT(!twice);
  f->status = st;
  if (msg) {
    size_t n = strlen(msg) + 1;
    f->message = core_host_malloc(n); /* NULL: the status alone */
    if (f->message) memcpy(f->message, msg, n);
  }
  /* release: publishes status/message to every acquire load of state that
   * sees DONE (wait, ready, status, error, fd). seq_cst: the Dekker pair
   * with sched_future_fd's CAS of efd + load of state (see the top). */
  uint32_t old = atomic_exchange_explicit(&f->state, FUTURE_DONE,
                                          memory_order_seq_cst);
  CORE_ASSERT(old != FUTURE_DONE);
  if (old == FUTURE_WAITING) futex_wake_all(&f->state);
  /* seq_cst: the Dekker pair with sched_future_wait_event (see there) */
  if (atomic_load_explicit(&f->ev_waiters, memory_order_seq_cst))
    bump_events(f);
  /* seq_cst: pairs with the CAS in sched_future_fd (the Dekker pair above) */
  int fd = atomic_load_explicit(&f->efd, memory_order_seq_cst);
  if (fd >= 0) eventfd_signal(fd);
  /* acq_rel: acquire pairs with the release CAS of each sched_future_then push
   * (we read the nodes); release pairs with sched_future_then's acquire load
   * that sees CB_CLOSED (it then reads f->status) */
  cb_node *top = atomic_exchange_explicit(&f->callbacks, CB_CLOSED,
                                          memory_order_acq_rel);
  CORE_ASSERT(top != CB_CLOSED);
  if (top && sched_current_pool() && hand_over(f, top)) return;
  run_callbacks(f, top);
}

/* the outcome of a completed future as wait's result */
static dt_status outcome(const dt_future *f) {
  if (f->status == DT_OK) return DT_OK;
  if (f->message && f->message[0])
    return core_error_set(f->status, "%s", f->message);
  return core_error_set(f->status, "dt_future_wait: the future failed with %s",
                      core_status_name(f->status));
}

/* acquire: pairs with the release exchange in sched_future_complete, so a
 * true result makes status/message readable */
static bool is_done(const dt_future *f) {
  return atomic_load_explicit((_Atomic uint32_t *)&f->state,
                              memory_order_acquire) == FUTURE_DONE;
}

/* parks until DONE or the monotonic deadline (< 0: none); true if DONE */
static bool park(dt_future *f, int64_t deadline) {
  /* acquire: pairs with the completer's release exchange (DONE) */
  uint32_t s = atomic_load_explicit(&f->state, memory_order_acquire);
  while (s != FUTURE_DONE) {
    /* acquire on failure: pairs with the completer's release exchange (we
     * may read DONE, then status). Success needs no order of its own (the
     * no-lost-wake-up argument is modification order of this one word);
     * it is acquire only because C11 forbids a stronger failure order. */
    if (s == FUTURE_PENDING &&
        !atomic_compare_exchange_weak_explicit(&f->state, &s, FUTURE_WAITING,
                                               memory_order_acquire,
                                               memory_order_acquire))
      continue;
    int64_t rel = -1;
    if (deadline >= 0) {
      rel = deadline - now_ns();
      if (rel <= 0) return false;
    }
    futex_wait(&f->state, FUTURE_WAITING, rel);
    /* acquire: as above; a wake, EAGAIN, EINTR, timeout or spurious
     * return all end up here */
    s = atomic_load_explicit(&f->state, memory_order_acquire);
  }
  return true;
}

/* ---- device events (see sched/future.h). Event waiters sleep on their
 * own futex word, ev_seq, which the setter and the completer bump before
 * waking (a wake-up on an unchanged word could be lost: the kernel's
 * compare would still match). A waiter announces itself in ev_waiters,
 * then reads ev_seq, then looks at the event and the state, then sleeps
 * only while ev_seq is unchanged. The setter {store event; load
 * ev_waiters} and the completer {exchange state; load ev_waiters} each
 * form a store-buffering pair with the waiter {increment ev_waiters;
 * load event / state}, all seq_cst: either the waiter sees the store or
 * the other side sees the waiter and bumps ev_seq after its store, so a
 * waiter that read the old ev_seq is woken or never sleeps, and one that
 * read the new ev_seq sees the store. Plain waiters are never woken by
 * an event. */
void sched_future_set_event(dt_future *f, const void *owner, void *ev,
                            void (*drop)(void *)) {
  CORE_ASSERT(f != NULL && ev != NULL);
  CORE_ASSERT(atomic_load_explicit(&f->event, memory_order_relaxed) == NULL);
  f->event_owner = owner;
  f->event_drop = drop;
  /* seq_cst: publishes owner/drop (release) and is the setter's half of
   * the pair above */
  atomic_store_explicit(&f->event, ev, memory_order_seq_cst);
  if (atomic_load_explicit(&f->ev_waiters, memory_order_seq_cst))
    bump_events(f);
}

void *sched_future_wait_event(dt_future *f, const void *owner) {
  void *ev = NULL;
  atomic_fetch_add_explicit(&f->ev_waiters, 1, memory_order_seq_cst);
  for (;;) {
    uint32_t seq = atomic_load_explicit(&f->ev_seq, memory_order_seq_cst);
    /* seq_cst: the waiter's half of both pairs; acquire for owner/drop
     * and for status */
    if (atomic_load_explicit(&f->state, memory_order_seq_cst) == FUTURE_DONE)
      break;
    ev = atomic_load_explicit(&f->event, memory_order_seq_cst);
    if (ev) break;
    futex_wait(&f->ev_seq, seq, -1);
  }
  atomic_fetch_sub_explicit(&f->ev_waiters, 1, memory_order_relaxed);
  if (!ev) return NULL;
  if (f->event_owner == owner) return ev;
  park(f, -1); /* another backend's event: only completion will do */
  return NULL;
}

dt_status sched_future_wait(dt_future *f, int64_t timeout_ns) {
  if (!f)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_future_wait: f is NULL");
  if (is_done(f)) return outcome(f);
  if (timeout_ns != 0) {
    int64_t deadline = -1;
    if (timeout_ns > 0) {
      int64_t now = now_ns();
      /* a deadline past INT64_MAX (~292 years) is forever */
      if (timeout_ns <= INT64_MAX - now) deadline = now + timeout_ns;
    }
    for (int i = 0; i < FUTURE_SPIN; i++) {
      cpu_relax();
      if (is_done(f)) return outcome(f);
    }
    /* then hand the CPU to whoever completes it, for a while: a futex
     * wake-up costs several µs (tens in a VM), a yield less than one */
    int64_t until = now_ns() + FUTURE_YIELD_NS;
    while (now_ns() < until && (deadline < 0 || now_ns() < deadline)) {
      sched_yield();
      if (is_done(f)) return outcome(f);
    }
    if (park(f, deadline)) return outcome(f);
  }
  return core_error_set(DT_ERR_TIMEOUT,
                      "dt_future_wait: not complete after %lld ns",
                      (long long)timeout_ns);
}

bool sched_future_ready(const dt_future *f) { return f && is_done(f); }

dt_status sched_future_status(const dt_future *f) {
  if (!f)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_future_status: f is NULL");
  return is_done(f) ? f->status : DT_ERR_TIMEOUT;
}

const char *sched_future_error(const dt_future *f) {
  if (!f || !is_done(f) || !f->message) return "";
  return f->message;
}

int sched_future_fd(dt_future *f) {
  if (!f) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_future_fd: f is NULL");
    return -1;
  }
  /* acquire: pairs with the installer's CAS below (the fd is open) */
  int fd = atomic_load_explicit(&f->efd, memory_order_acquire);
  if (fd >= 0) return fd;
  int mine = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (mine < 0) {
    core_error_set(DT_ERR_IO, "dt_future_fd: eventfd failed: %s",
                 strerror(errno));
    return -1;
  }
  int expected = -1;
  /* seq_cst: the Dekker pair with sched_future_complete's exchange of state
   * + load of efd; on failure, acquire of the winner's fd */
  if (!atomic_compare_exchange_strong_explicit(&f->efd, &expected, mine,
                                               memory_order_seq_cst,
                                               memory_order_acquire)) {
    close(mine);
    return expected;
  }
  /* seq_cst: the other half of the Dekker pair; if the completer loaded efd
   * before our CAS, we see DONE here and signal for it */
  if (atomic_load_explicit(&f->state, memory_order_seq_cst) == FUTURE_DONE)
    eventfd_signal(mine);
  return mine;
}

dt_status sched_future_then(dt_future *f, dt_future_callback cb, void *user) {
  if (!f)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_future_then: f is NULL");
  if (!cb)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_future_then: cb is NULL");
  /* acquire: pairs with the completer's acq_rel exchange to CB_CLOSED */
  cb_node *head = atomic_load_explicit(&f->callbacks, memory_order_acquire);
  cb_node *n = NULL;
  while (head != CB_CLOSED) {
    if (!n) {
      n = malloc(sizeof *n);
      if (!n)
        return core_error_set(DT_ERR_OUT_OF_MEMORY,
                            "dt_future_then: out of memory");
      n->cb = cb;
      n->user = user;
    }
    n->next = head;
    /* release: pairs with the completer's acq_rel exchange (it reads the
     * node); acquire on failure: as the load above */
    if (atomic_compare_exchange_weak_explicit(&f->callbacks, &head, n,
                                              memory_order_release,
                                              memory_order_acquire))
      return DT_OK;
  }
  free(n);
  cb(f, f->status, user);
  return DT_OK;
}
