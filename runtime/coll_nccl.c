/* NCCL for CUDA runtimes over several GPUs (docs/cuda.md): the device
 * world's whole-collective hook (sim_coll_device.call). Every collective
 * still meets the host rendezvous first (its argument checks, the
 * disagreement report and the watchdog of sim/), then each member issues
 * the NCCL call on its rank's stream, which NCCL orders between the GPUs.
 *
 * Communicators: one per collective group, made on the group's first
 * collective: the first member to get there draws the unique id (under the
 * registry's lock), and every member makes its own communicator with
 * ncclCommInitRank from its rank thread (the members are all in the round
 * after the rendezvous, so the blocking init completes). A member's
 * communicator is written and read by that member's thread only; the
 * registry is freed when the runtime closes its ranks, after the rank
 * threads stopped. (ncclCommSplit would need every rank of the parent to
 * call it, which the ranks outside a group never do.)
 *
 * Mapping: all_reduce, broadcast: the NCCL calls; all_gather and
 * reduce_scatter with equal counts: ncclAllGather / ncclReduceScatter,
 * unequal: one ncclBroadcast / ncclReduce per member in a group call;
 * all_to_all, scatter, gather: ncclSend / ncclRecv pairs in a group call.
 * After each call the communicator's asynchronous error is checked.
 *
 * Failure. Communicators are non-blocking (kernels/cuda/nccl.c): a member
 * waits for NCCL at most the collective timeout, and gives up at once
 * when its group is marked broken. A member whose init or call fails
 * marks the group broken (the first message kept) and aborts every
 * member's communicator, so no member's stream waits forever on the GPU
 * for its share; every later collective of the group fails with that
 * message. Each member's communicator is used under its own mutex, which
 * an aborting member takes in turn (no member holds two: no cycle); a
 * member never holds it longer than one bounded wait.
 *
 * Watchdog. A call that was issued everywhere may still never finish on
 * the GPU (a kernel waiting for a peer that died in between). A member
 * records an event on its stream before and after each call and hands
 * both to the registry's watchdog thread (started on first use, on the
 * process's CPUs), which polls them every timeout / 10 (1 to 100 ms): the
 * clock of a call starts when its stream reached it (the first event), so
 * work queued before it does not count; a call whose second event is
 * still pending a timeout later breaks its group as a failure would (the
 * aborted communicators make the kernels return), naming the member, the
 * round and the timeout. The thread owns the list it polls; members push
 * under the watch lock, holding no group mutex (an event record may wait
 * for room in the stream's queue).
 *
 * Faulty ranks. A rank marked faulty (its work was cut short) does not
 * take part in collectives any more: its call fails and breaks the group,
 * so its data does not reach healthy ranks unmarked. */
#include "runtime/backend.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/error.h"
#include "runtime/runtime.h"

#if !DTORCH_HAVE_CUDA

dt_status runtime_nccl_open(dt_runtime *rt) {
  (void)rt;
  return DT_OK;
}
dt_status runtime_nccl_call(void *rt, int rank, const sim_coll_call *k) {
  (void)rt, (void)k;
  return core_error_set(DT_ERR_UNSUPPORTED, "rank %d: NCCL needs the CUDA "
                        "backend", rank);
}
void runtime_nccl_close(dt_runtime *rt) { (void)rt; }

#else

#include "kernels/cuda/cuda.h"

typedef struct nccl_group {
  struct nccl_group *next;
  const sim_coll_group *g;
  const int *ranks;       /* the group's runtime ranks (sim's, stable) */
  int n;
  unsigned char id[CUDA_NCCL_ID_BYTES];
  cuda_nccl_comm **comms; /* per member, made and used by that member
                             under mu[member]; NULL once aborted */
  pthread_mutex_t *mu;
  char failed[256];       /* drawing the id failed: every member says so */
  int broken;             /* __atomic (release / acquire): a member failed,
                             every communicator was aborted */
  char broken_msg[384];   /* the first failure, written before broken */
} nccl_group;

/* an issued call the watchdog waits for */
typedef struct nccl_watch {
  struct nccl_watch *next;
  nccl_group *g;
  void *start, *end; /* the backend's events before and after the call */
  int rank, member;
  uint64_t seq;
  int64_t deadline;  /* monotonic ns; 0 until the stream reached start */
} nccl_watch;

typedef struct runtime_nccl {
  pthread_mutex_t lock; /* the list, and drawing a group's id */
  nccl_group *groups;
  /* the watchdog: pushes under wlock; the thread takes them all */
  pthread_mutex_t wlock;
  pthread_cond_t wake;
  nccl_watch *pushed;
  bool started, stop;
  pthread_t thread;
} runtime_nccl;

#define WHY 384

dt_status runtime_nccl_open(dt_runtime *rt) {
  runtime_nccl *r = calloc(1, sizeof *r);
  if (!r)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_runtime_create: out of "
                          "host memory for NCCL's registry");
  pthread_mutex_init(&r->lock, NULL);
  pthread_mutex_init(&r->wlock, NULL);
  pthread_cond_init(&r->wake, NULL);
  rt->nccl = r;
  return DT_OK;
}

static void watch_stop(dt_runtime *rt);

void runtime_nccl_close(dt_runtime *rt) {
  runtime_nccl *r = rt->nccl;
  if (!r) return;
  watch_stop(rt);
  for (nccl_group *g = r->groups, *next; g; g = next) {
    next = g->next;
    for (int i = 0; i < g->n; i++) {
      cuda_nccl_comm_destroy(g->comms[i]);
      pthread_mutex_destroy(&g->mu[i]);
    }
    free(g->comms);
    free(g->mu);
    free(g);
  }
  pthread_mutex_destroy(&r->lock);
  pthread_mutex_destroy(&r->wlock);
  pthread_cond_destroy(&r->wake);
  free(r);
  rt->nccl = NULL;
}

/* the registry entry of k's group, made with its id by the first member
 * to get here; a failed draw is kept in the entry, so every member of the
 * group fails alike instead of some blocking in ncclCommInitRank */
static nccl_group *group_of(runtime_nccl *r, const sim_coll_call *k,
                            char *why, size_t n) {
  pthread_mutex_lock(&r->lock);
  nccl_group *g = r->groups;
  while (g && g->g != k->g) g = g->next;
  if (!g && (g = calloc(1, sizeof *g)) &&
      (!(g->comms = calloc((size_t)k->n, sizeof *g->comms)) ||
       !(g->mu = calloc((size_t)k->n, sizeof *g->mu)))) {
    free(g->comms);
    free(g);
    g = NULL;
  }
  if (g && !g->g) {
    if (cuda_nccl_unique_id(g->id, g->failed, sizeof g->failed) &&
        !g->failed[0])
      snprintf(g->failed, sizeof g->failed, "ncclGetUniqueId failed");
    g->g = k->g;
    g->ranks = k->ranks;
    g->n = k->n;
    for (int i = 0; i < g->n; i++) pthread_mutex_init(&g->mu[i], NULL);
    g->next = r->groups;
    r->groups = g;
  }
  if (!g) snprintf(why, n, "out of host memory for a communicator");
  else if (g->failed[0]) snprintf(why, n, "%s", g->failed);
  pthread_mutex_unlock(&r->lock);
  return g && !g->failed[0] ? g : NULL;
}

static dt_status fail(dt_runtime *rt, int rank, const sim_coll_call *k,
                      const char *why) {
  return core_error_set(DT_ERR_DEVICE, "rank %d (cuda:%d), member %d of a "
                        "group of %d: %s", rank, rt->ranks[rank].gpu,
                        k->member, k->n, why);
}

static int64_t prefix(const int64_t *c, int j) {
  int64_t s = 0;
  for (int i = 0; i < j; i++) s += c[i];
  return s;
}
static bool equal(const int64_t *c, int n) {
  for (int i = 1; i < n; i++)
    if (c[i] != c[0]) return false;
  return true;
}

/* the NCCL calls of k on comm c and stream s: 0, or -1 with why */
static int issue(cuda_nccl_comm *c, void *s, const sim_coll_call *k,
                 char *why, size_t wn) {
  int d = (int)k->dtype, op = (int)k->op, me = k->member, n = k->n, bad = 0;
  size_t es = core_dtype_size(k->dtype);
  const char *in = k->in;
  char *out = k->out;
  switch (k->kind) {
  case SIM_COLL_KIND_ALL_REDUCE:
    return cuda_nccl_all_reduce(c, s, in, out, k->count, d, op, why, wn);
  case SIM_COLL_KIND_BROADCAST:
    return cuda_nccl_broadcast(c, s, in, out, k->count, d, k->root, why, wn);
  case SIM_COLL_KIND_ALL_GATHER:
    if (equal(k->counts, n))
      return cuda_nccl_all_gather(c, s, in, out, k->counts[0], d, why, wn);
    break;
  case SIM_COLL_KIND_REDUCE_SCATTER:
    if (equal(k->counts, n))
      return cuda_nccl_reduce_scatter(c, s, in, out, k->counts[0], d, op,
                                      why, wn);
    break;
  default:
    break;
  }
  if (cuda_nccl_group(c, true, why, wn)) return -1;
  for (int j = 0; j < n && !bad; j++) {
    switch (k->kind) {
    case SIM_COLL_KIND_ALL_GATHER: { /* member j's block, from j */
      char *at = out + (size_t)prefix(k->counts, j) * es;
      bad = cuda_nccl_broadcast(c, s, j == me ? in : at, at, k->counts[j], d,
                                j, why, wn);
      break;
    }
    case SIM_COLL_KIND_REDUCE_SCATTER: /* block j, reduced onto j */
      bad = cuda_nccl_reduce(c, s, in + (size_t)prefix(k->counts, j) * es,
                             out, k->counts[j], d, op, j, why, wn);
      break;
    case SIM_COLL_KIND_ALL_TO_ALL:
      if (k->send[j])
        bad = cuda_nccl_send(c, s, in + (size_t)prefix(k->send, j) * es,
                             k->send[j], d, j, why, wn);
      if (!bad && k->recv[j])
        bad = cuda_nccl_recv(c, s, out + (size_t)prefix(k->recv, j) * es,
                             k->recv[j], d, j, why, wn);
      break;
    case SIM_COLL_KIND_SCATTER:
      if (me == k->root && k->counts[j])
        bad = cuda_nccl_send(c, s, in + (size_t)prefix(k->counts, j) * es,
                             k->counts[j], d, j, why, wn);
      if (!bad && j == k->root && k->counts[me])
        bad = cuda_nccl_recv(c, s, out, k->counts[me], d, j, why, wn);
      break;
    default: /* gather */
      if (j == k->root && k->counts[me])
        bad = cuda_nccl_send(c, s, in, k->counts[me], d, j, why, wn);
      if (!bad && me == k->root && k->counts[j])
        bad = cuda_nccl_recv(c, s, out + (size_t)prefix(k->counts, j) * es,
                             k->counts[j], d, j, why, wn);
      break;
    }
  }
  char why2[WHY];
  int end = cuda_nccl_group(c, false, why2, sizeof why2);
  if (!bad && end) snprintf(why, wn, "%s", why2);
  return bad || end ? -1 : 0;
}

/* marks g broken with why (the first failure's message stays) and aborts
 * every member's communicator, each under its member's mutex. A member
 * whose communicator is aborted may have work on its stream that the
 * abort cut short (its call returned DT_OK before the failure): its rank
 * gets a sticky fault (runtime_rank_fault), marked before the abort, so
 * its later fetches and synchronizes fail instead of reading incomplete
 * data. False when g was broken already (why is not the first failure) */
static bool break_group(dt_runtime *rt, nccl_group *g, const int *ranks,
                        const char *why) {
  runtime_nccl *r = rt->nccl;
  pthread_mutex_lock(&r->lock);
  bool first = !__atomic_load_n(&g->broken, __ATOMIC_RELAXED);
  if (first) {
    snprintf(g->broken_msg, sizeof g->broken_msg, "%.383s", why);
    /* release: broken_msg before the flag */
    __atomic_store_n(&g->broken, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&r->lock);
  char fault[WHY + 160];
  snprintf(fault, sizeof fault, "cuda: an NCCL communicator of this rank "
           "was aborted after a failure in its group (%.383s); its "
           "collectives since may be incomplete", g->broken_msg);
  /* every member marked before any abort (a kernel the first abort ends
   * early is on a rank already marked); marked again at its own abort, for
   * a communicator made in between (the first message stays) */
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < g->n; i++) {
      pthread_mutex_lock(&g->mu[i]);
      if (g->comms[i]) {
        runtime_rank_fault(rt, ranks[i], fault);
        if (pass) {
          cuda_nccl_comm_abort(g->comms[i]);
          g->comms[i] = NULL;
        }
      }
      pthread_mutex_unlock(&g->mu[i]);
    }
  }
  return first;
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void watch_free(const runtime_backend *b, nccl_watch *w) {
  b->event_destroy(w->start);
  b->event_destroy(w->end);
  free(w);
}

/* one pass over the watched calls: starts the clocks of those the streams
 * reached, drops those done, breaks the groups of those past their
 * deadline; returns the rest */
static nccl_watch *watch_pass(dt_runtime *rt, nccl_watch *list) {
  const runtime_backend *b = rt->backend;
  int64_t timeout = sim_coll_world_timeout(rt->coll);
  nccl_watch *keep = NULL;
  while (list) {
    nccl_watch *w = list;
    list = w->next;
    /* the events' GPU current on this thread (no context made elsewhere) */
    if (b->rank_init) b->rank_init(rt, w->rank);
    int64_t now = mono_ns();
    if (!w->deadline && b->event_done(w->start))
      w->deadline = now + (timeout > 0 ? timeout : INT64_MAX / 2);
    bool done = w->deadline && b->event_done(w->end);
    if (!done && (!w->deadline || now <= w->deadline)) {
      w->next = keep;
      keep = w;
      continue;
    }
    if (!done) {
      char msg[WHY];
      snprintf(msg, sizeof msg, "rank %d (member %d): its NCCL call of round "
               "%llu did not finish on the GPU within %.3g s of starting "
               "(DTORCH_COLLECTIVE_TIMEOUT)", w->rank, w->member,
               (unsigned long long)w->seq, (double)timeout / 1e9);
      break_group(rt, w->g, w->g->ranks, msg);
    }
    watch_free(b, w);
  }
  return keep;
}

static void *watch_main(void *arg) {
  dt_runtime *rt = arg;
  runtime_nccl *r = rt->nccl;
  nccl_watch *mine = NULL;
  pthread_mutex_lock(&r->wlock);
  while (!r->stop) {
    while (r->pushed) { /* take the pushed ones */
      nccl_watch *w = r->pushed;
      r->pushed = w->next;
      w->next = mine;
      mine = w;
    }
    if (!mine) {
      pthread_cond_wait(&r->wake, &r->wlock);
      continue;
    }
    pthread_mutex_unlock(&r->wlock);
    mine = watch_pass(rt, mine);
    int64_t poll = sim_coll_world_timeout(rt->coll) / 10;
    poll = poll < 1000000 ? 1000000 : poll > 100000000 ? 100000000 : poll;
    struct timespec ts = {0, (long)poll};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&r->wlock);
  }
  pthread_mutex_unlock(&r->wlock);
  while (mine) { /* at close: the ranks' work is over */
    nccl_watch *w = mine;
    mine = w->next;
    watch_free(rt->backend, w);
  }
  return NULL;
}

/* the watchdog thread on the process's CPUs (the pushing rank thread may
 * be pinned to one) */
static bool watch_start(dt_runtime *rt) {
  runtime_nccl *r = rt->nccl;
  pthread_attr_t a;
  pthread_attr_init(&a);
  cpu_set_t cpus;
  if (sched_getaffinity(getpid(), sizeof cpus, &cpus) == 0)
    pthread_attr_setaffinity_np(&a, sizeof cpus, &cpus);
  bool ok = pthread_create(&r->thread, &a, watch_main, rt) == 0;
  pthread_attr_destroy(&a);
  return ok;
}

/* after member's call on rank's stream (start recorded before it): the
 * event after it and start to the watchdog; a failed record or push goes
 * unwatched */
static void watch_push(dt_runtime *rt, nccl_group *g, int rank,
                       const sim_coll_call *k, void *start) {
  runtime_nccl *r = rt->nccl;
  const runtime_backend *b = rt->backend;
  nccl_watch *w = malloc(sizeof *w);
  void *end = w ? b->event_record(rt, rank) : NULL;
  if (!end) {
    free(w);
    b->event_destroy(start);
    return;
  }
  *w = (nccl_watch){.g = g, .start = start, .end = end, .rank = rank,
                    .member = k->member, .seq = k->seq};
  pthread_mutex_lock(&r->wlock);
  if (!r->started && !r->stop) r->started = watch_start(rt);
  if (r->started && !r->stop) {
    w->next = r->pushed;
    r->pushed = w;
    pthread_cond_signal(&r->wake);
    w = NULL;
  }
  pthread_mutex_unlock(&r->wlock);
  if (w) watch_free(b, w); /* no watchdog thread */
}

static void watch_stop(dt_runtime *rt) {
  runtime_nccl *r = rt->nccl;
  pthread_mutex_lock(&r->wlock);
  r->stop = true;
  bool started = r->started;
  pthread_cond_signal(&r->wake);
  pthread_mutex_unlock(&r->wlock);
  if (started) pthread_join(r->thread, NULL);
  for (nccl_watch *w = r->pushed, *next; w; w = next) {
    next = w->next;
    watch_free(rt->backend, w);
  }
  r->pushed = NULL;
}

dt_status runtime_nccl_call(void *ctx, int rank, const sim_coll_call *k) {
  dt_runtime *rt = ctx;
  char why[WHY] = "";
  if (!rt->nccl) return fail(rt, rank, k, "no NCCL registry (out of memory)");
  nccl_group *g = group_of(rt->nccl, k, why, sizeof why);
  if (!g) return fail(rt, rank, k, why);
  int me = k->member, bad = 0;
  const char *fault = runtime_rank_fault_of(rt, rank);
  /* the watchdog's first event, before the call and outside the lock */
  void *start = sim_coll_world_timeout(rt->coll) > 0
                    ? rt->backend->event_record(rt, rank) : NULL;
  pthread_mutex_lock(&g->mu[me]);
  /* acquire: pairs with break_group's release (broken_msg) */
  if (__atomic_load_n(&g->broken, __ATOMIC_ACQUIRE)) {
    snprintf(why, sizeof why, "the group's communicators were aborted after "
             "an earlier failure: %.300s", g->broken_msg);
    bad = 2;
  } else if (fault) { /* its data must not spread: break the group */
    snprintf(why, sizeof why, "this rank is faulty, so it takes part in no "
             "collective (%.300s)", fault);
    bad = 1;
  } else if (!g->comms[me] &&
             cuda_nccl_comm_init(&g->comms[me], k->n, g->id, me,
                                 rt->ranks[rank].gpu,
                                 sim_coll_world_timeout(rt->coll), &g->broken,
                                 why, sizeof why)) {
    bad = 1;
  } else {
    cuda_nccl_comm *c = g->comms[me];
    void *stream = cuda_rank_stream(rt->ranks[rank].dev_ctx);
    bad = issue(c, stream, k, why, sizeof why) ||
          cuda_nccl_check(c, why, sizeof why);
  }
  pthread_mutex_unlock(&g->mu[me]);
  if (start && !bad) watch_push(rt, g, rank, k, start);
  else if (start) rt->backend->event_destroy(start);
  if (bad == 1) {
    char msg[WHY + 64];
    snprintf(msg, sizeof msg, "rank %d (member %d): %s", rank, me, why);
    if (!break_group(rt, g, k->ranks, msg)) /* gave up: say on what */
      snprintf(why, sizeof why, "the group's communicators were aborted "
               "after an earlier failure: %.300s", g->broken_msg);
  }
  return bad ? fail(rt, rank, k, why) : DT_OK;
}

#endif
