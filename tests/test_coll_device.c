/* Collectives of a device world (sim/collectives.h, sim_coll_device;
 * sim/coll_device.c) on a fake asynchronous device: each rank's "stream"
 * is a worker thread running its queue in order with random delays,
 * events are flags set when the stream reaches them, and a wait is an
 * operation that holds the stream until the flag is set. So the rank
 * threads issue and the streams run later, as with a GPU, and a missing
 * or misplaced event shows as a wrong value (checked on the stream, in
 * order, against a reference computed here) or, under ThreadSanitizer, as
 * a race on the buffers between two stream threads.
 *
 * Checked: every kind over 4 ranks and a subset group [3, 1] (and a
 * barrier-fenced read of another member's buffer, as a cross-mesh
 * redistribute does: a barrier orders the streams), many rounds
 * reusing the same buffers (the next round's fill must wait for the
 * others' reads of this round's input), the rank threads finishing their
 * issue before their streams ran (nobody waited for the device), every
 * event released exactly once and never waited on after its release, a
 * device reduction that fails failing every member with the group still
 * usable (also when one member's alone fails: the others' outputs miss its
 * share), the device's check refusing a call before the rendezvous, the
 * whole-collective hook (NCCL's), and send/recv between device ranks (a
 * ring: the copy after the sender's fill, the next fill after the copy;
 * refused where the device runs whole collectives). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sim/coll_reduce.h"
#include "sim/collectives.h"
#include "support/threads.h"

#define NR 4            /* ranks */
#define ROUNDS 12
#define TEST_TIMEOUT_NS ((int64_t)60 * 1000 * 1000 * 1000)

/* ---- the fake device: one in-order queue and worker thread per rank */

typedef struct sop {
  struct sop *next;
  void (*fn)(void *arg);
  void *arg;
} sop;

typedef struct fstream {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  sop *head, *tail;
  bool stop;
  unsigned seed;
  _Atomic int64_t queued, ran; /* operations queued, completed */
} fstream;

typedef struct fevent {
  _Atomic bool fired;
  _Atomic int released; /* times released: must end at 1 */
  _Atomic bool waited_after_release;
  struct fevent *all_next; /* every event made, for the final count */
} fevent;

static fstream streams[NR];
static pthread_mutex_t events_mu = PTHREAD_MUTEX_INITIALIZER;
static fevent *events_all;
static _Atomic int fail_reduce_dtype = -1; /* reduce fails for this dtype */
static _Atomic int fail_reduce_rank = -1;  /* ... on this rank only */

/* While the gate is closed the streams run nothing: the rank threads must
 * issue every round without any of it having run. A stream that waits
 * more than GATE_NS opens it (and the test fails) instead of hanging. */
#define GATE_NS ((int64_t)20 * 1000 * 1000 * 1000)
static _Atomic bool gate_closed, gate_forced;

static void gate_pass(void) {
  int64_t t0 = tu_now_ns();
  while (atomic_load_explicit(&gate_closed, memory_order_acquire)) {
    if (tu_now_ns() - t0 > GATE_NS) {
      atomic_store(&gate_forced, true);
      atomic_store(&gate_closed, false);
    }
    tu_sleep_ns(100 * 1000);
  }
}

static void *stream_main(void *arg) {
  fstream *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (!s->head && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
    sop *o = s->head;
    if (!o) {
      pthread_mutex_unlock(&s->mu);
      return NULL;
    }
    s->head = o->next;
    if (!s->head) s->tail = NULL;
    unsigned r = (unsigned)rand_r(&s->seed);
    pthread_mutex_unlock(&s->mu);
    gate_pass();
    if (r % 4 == 0) tu_sleep_ns((int64_t)(r % 200) * 1000); /* reorder */
    o->fn(o->arg);
    free(o->arg);
    free(o);
    atomic_fetch_add_explicit(&s->ran, 1, memory_order_release);
  }
}

/* queues fn(arg) on rank's stream; arg is freed after it ran */
static void enqueue(int rank, void (*fn)(void *), void *arg) {
  sop *o = calloc(1, sizeof *o);
  TU_CHECK_TRUE(o != NULL);
  o->fn = fn;
  o->arg = arg;
  fstream *s = &streams[rank];
  atomic_fetch_add(&s->queued, 1);
  pthread_mutex_lock(&s->mu);
  if (s->tail) s->tail->next = o;
  else s->head = o;
  s->tail = o;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void streams_start(void) {
  for (int r = 0; r < NR; r++) {
    fstream *s = &streams[r];
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->seed = 1234u + (unsigned)r;
    s->th = tu_spawn(stream_main, s);
  }
}

/* waits until every stream ran what was queued */
static void streams_drain(void) {
  for (int r = 0; r < NR; r++)
    while (atomic_load(&streams[r].ran) != atomic_load(&streams[r].queued))
      tu_sleep_ns(100 * 1000);
}

/* runs every stream dry and stops it */
static void streams_stop(void) {
  for (int r = 0; r < NR; r++) {
    fstream *s = &streams[r];
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
  }
}

typedef struct ev_arg { fevent *ev; } ev_arg;

static void fire(void *a) {
  /* release: everything the stream did before is seen by a waiter */
  atomic_store_explicit(&((ev_arg *)a)->ev->fired, true, memory_order_release);
}

static void hold(void *a) {
  fevent *ev = ((ev_arg *)a)->ev;
  /* acquire: pairs with fire */
  while (!atomic_load_explicit(&ev->fired, memory_order_acquire))
    tu_sleep_ns(20 * 1000);
}

static void *dev_record(void *ctx, int rank) {
  (void)ctx;
  fevent *ev = calloc(1, sizeof *ev);
  ev_arg *a = malloc(sizeof *a);
  TU_CHECK_TRUE(ev && a);
  pthread_mutex_lock(&events_mu);
  ev->all_next = events_all;
  events_all = ev;
  pthread_mutex_unlock(&events_mu);
  a->ev = ev;
  enqueue(rank, fire, a);
  return ev;
}

static dt_status dev_wait(void *ctx, int rank, void *e) {
  (void)ctx;
  fevent *ev = e;
  if (atomic_load_explicit(&ev->released, memory_order_relaxed))
    atomic_store_explicit(&ev->waited_after_release, true,
                          memory_order_relaxed);
  ev_arg *a = malloc(sizeof *a);
  TU_CHECK_TRUE(a != NULL);
  a->ev = ev;
  enqueue(rank, hold, a);
  return DT_OK;
}

static void dev_release(void *ctx, void *e) {
  (void)ctx;
  atomic_fetch_add_explicit(&((fevent *)e)->released, 1, memory_order_relaxed);
}

#define MAXIO 8
typedef struct reduce_arg {
  const void *in[MAXIO];
  void *out[MAXIO];
  int nin, nout;
  int64_t count;
  dt_dtype d;
  dt_reduce_op op;
} reduce_arg;

static void run_reduce(void *p) {
  reduce_arg *a = p;
  sim_coll_reduce(a->in, a->nin, a->out, a->nout, a->count, a->d, a->op);
  sim_coll_store_fence();
}

static dt_status dev_reduce(void *ctx, int rank, const void *const *in, int nin,
                            void *const *out, int nout, int64_t count,
                            dt_dtype d, dt_reduce_op op) {
  (void)ctx;
  if ((int)d == atomic_load_explicit(&fail_reduce_dtype, memory_order_relaxed) ||
      rank == atomic_load_explicit(&fail_reduce_rank, memory_order_relaxed))
    return core_error_set(DT_ERR_UNSUPPORTED, "fake device: no reduction "
                          "for dtype %d", (int)d);
  reduce_arg *a = calloc(1, sizeof *a);
  TU_CHECK_TRUE(a && nin <= MAXIO && nout <= MAXIO);
  memcpy(a->in, in, sizeof(void *) * (size_t)nin);
  memcpy(a->out, out, sizeof(void *) * (size_t)nout);
  *a = (reduce_arg){.nin = nin, .nout = nout, .count = count, .d = d,
                    .op = op};
  memcpy(a->in, in, sizeof(void *) * (size_t)nin);
  memcpy(a->out, out, sizeof(void *) * (size_t)nout);
  enqueue(rank, run_reduce, a);
  return DT_OK;
}

typedef struct copy_arg { void *dst; const void *src; int64_t bytes; } copy_arg;

static void run_copy(void *p) {
  copy_arg *a = p;
  memmove(a->dst, a->src, (size_t)a->bytes);
}

static dt_status dev_copy(void *ctx, int rank, void *dst, const void *src,
                          int64_t bytes) {
  (void)ctx;
  copy_arg *a = malloc(sizeof *a);
  TU_CHECK_TRUE(a != NULL);
  *a = (copy_arg){dst, src, bytes};
  enqueue(rank, run_copy, a);
  return DT_OK;
}

static const sim_coll_device fake_dev = {
    .record = dev_record, .wait = dev_wait, .release = dev_release,
    .reduce = dev_reduce, .copy = dev_copy};

/* every event made was released exactly once, never waited on after */
static void check_events(void) {
  int n = 0;
  pthread_mutex_lock(&events_mu);
  for (fevent *e = events_all, *next; e; e = next, n++) {
    next = e->all_next;
    assert_int_equal(atomic_load(&e->released), 1);
    assert_false(atomic_load(&e->waited_after_release));
    assert_true(atomic_load(&e->fired));
    free(e);
  }
  events_all = NULL;
  pthread_mutex_unlock(&events_mu);
  assert_true(n > 0);
}

/* ---- buffers, filled and checked on the streams */

#define LEN 3000 /* elements per member: not a multiple of the split units */

static float inbuf[NR][NR * LEN], outbuf[NR][NR * LEN];

/* member m's input element i in round k: small integers, exact sums */
static float value(int k, int m, int64_t i) {
  return (float)((k * 7 + m * 3 + i) % 29) - 9.0f;
}

typedef struct fill_arg { int rank, member, k; int64_t n; } fill_arg;

static void run_fill(void *p) {
  fill_arg *a = p;
  for (int64_t i = 0; i < a->n; i++)
    inbuf[a->rank][i] = value(a->k, a->member, i);
  memset(outbuf[a->rank], 0xff, sizeof outbuf[a->rank]); /* NaN: unwritten */
}

/* K_BARRIER: a cross-mesh pull, each member copying its neighbour's input
 * on its own stream between two barriers */
typedef enum kind { K_ALL_REDUCE, K_RS, K_AG, K_A2A, K_BCAST, K_SCATTER,
                    K_GATHER, K_BARRIER, K_COUNT } kind;
static const char *const kind_names[] = {"all_reduce", "reduce_scatter",
  "all_gather", "all_to_all", "broadcast", "scatter", "gather", "barrier"};

typedef struct check_arg {
  kind kd;
  int rank, member, n, k, root;
  int64_t counts[NR]; /* blocks (elements per member) */
} check_arg;

/* the expected output element i of member m (the reference) */
static float expect(const check_arg *c, int64_t i) {
  int64_t off = 0, j = 0;
  switch (c->kd) {
  case K_ALL_REDUCE: {
    float s = 0; /* small integers: every order gives the same sum */
    for (int m = 0; m < c->n; m++) s += value(c->k, m, i);
    return s;
  }
  case K_RS: {
    for (j = 0; j < c->member; j++) off += c->counts[j];
    float s = 0;
    for (int m = 0; m < c->n; m++) s += value(c->k, m, off + i);
    return s;
  }
  case K_AG:
  case K_GATHER:
    while (i >= off + c->counts[j]) off += c->counts[j++];
    return value(c->k, (int)j, i - off);
  case K_A2A: /* block `member` of every member's input, LEN each */
    return value(c->k, (int)(i / LEN), (int64_t)c->member * LEN + i % LEN);
  case K_BCAST:
    return value(c->k, c->root, i);
  case K_BARRIER:
    return value(c->k, (c->member + 1) % c->n, i);
  case K_SCATTER:
    for (j = 0; j < c->member; j++) off += c->counts[j];
    return value(c->k, c->root, off + i);
  default:
    return 0;
  }
}

static int64_t out_len(const check_arg *c) {
  int64_t total = 0;
  for (int j = 0; j < c->n; j++) total += c->counts[j];
  switch (c->kd) {
  case K_RS: case K_SCATTER: return c->counts[c->member];
  case K_AG: return total;
  case K_GATHER: return c->member == c->root ? total : 0;
  case K_A2A: return (int64_t)c->n * LEN;
  default: return LEN;
  }
}

static void run_check(void *p) {
  check_arg *c = p;
  int64_t n = out_len(c);
  for (int64_t i = 0; i < n; i++) {
    float got = outbuf[c->rank][i], want = expect(c, i);
    if (got != want) {
      TU_CHECK(got == want, "%s round %d member %d element %lld: %g, "
               "want %g", kind_names[c->kd], c->k, c->member, (long long)i,
               (double)got, (double)want);
      return;
    }
  }
}

/* ---- the rank threads */

typedef struct job {
  sim_coll_world *w;
  int ranks[NR], n;
  kind kd;
  int64_t issued_ran[NR]; /* ops its stream had run when issue ended */
} job;

static dt_status call(job *jb, int member, int rank, int k, check_arg *c) {
  sim_coll_group *g = sim_coll_group_get(jb->w, jb->ranks, jb->n);
  const float *in = inbuf[rank];
  float *out = outbuf[rank];
  int64_t send[NR], recv[NR];
  for (int j = 0; j < jb->n; j++) send[j] = recv[j] = LEN;
  switch (jb->kd) {
  case K_ALL_REDUCE:
    return sim_coll_all_reduce(g, member, in, out, LEN, DT_FLOAT32,
                               DT_REDUCE_SUM);
  case K_RS:
    return sim_coll_reduce_scatter(g, member, in, out, c->counts, DT_FLOAT32,
                                   DT_REDUCE_SUM);
  case K_AG:
    return sim_coll_all_gather(g, member, in, out, c->counts, DT_FLOAT32);
  case K_A2A:
    return sim_coll_all_to_all(g, member, in, send, out, recv, DT_FLOAT32);
  case K_BCAST: /* the root's buffer is its input */
    return sim_coll_broadcast(g, member, member == c->root ? (void *)in : out,
                              LEN, DT_FLOAT32, c->root);
  case K_SCATTER:
    return sim_coll_scatter(g, member, in, out, c->counts, DT_FLOAT32, c->root);
  case K_GATHER:
    return sim_coll_gather(g, member, in, out, c->counts, DT_FLOAT32, c->root);
  case K_BARRIER: { /* the neighbour's input, read between two barriers */
    dt_status st = sim_coll_barrier(g, member);
    if (st != DT_OK) return st;
    int next = jb->ranks[(member + 1) % jb->n];
    dev_copy(NULL, rank, out, inbuf[next], LEN * (int64_t)sizeof(float));
    return sim_coll_barrier(g, member);
  }
  default:
    return DT_ERR_INVALID_ARGUMENT;
  }
}

static void rank_body(void *arg, int member) {
  job *jb = arg;
  int rank = jb->ranks[member];
  for (int k = 0; k < ROUNDS; k++) {
    check_arg c = {.kd = jb->kd, .rank = rank, .member = member, .n = jb->n,
                   .k = k, .root = k % jb->n};
    int64_t total = 0;
    for (int j = 0; j < jb->n; j++) total += c.counts[j] = LEN - 97 * j - 13 * k;
    if (jb->kd == K_A2A) total = (int64_t)jb->n * LEN;
    if (jb->kd == K_BCAST || jb->kd == K_ALL_REDUCE || jb->kd == K_BARRIER)
      total = LEN;
    fill_arg *f = malloc(sizeof *f);
    *f = (fill_arg){rank, member, k, total};
    enqueue(rank, run_fill, f);
    dt_status st = call(jb, member, rank, k, &c);
    TU_CHECK(st == DT_OK, "%s round %d member %d: %s", kind_names[jb->kd], k,
             member, core_last_error());
    if (jb->kd == K_BCAST && member == c.root) continue; /* its input */
    check_arg *ca = malloc(sizeof *ca);
    *ca = c;
    enqueue(rank, run_check, ca);
  }
  jb->issued_ran[member] =
      atomic_load_explicit(&streams[rank].ran, memory_order_acquire);
}

/* gated: the streams start only once every rank thread has issued all its
 * rounds (a collective that waited for its device would stall until the
 * gate opened itself); else issue and execution interleave */
static void run_kind(sim_coll_world *w, const int *ranks, int n, kind kd,
                     bool gated) {
  job jb = {.w = w, .n = n, .kd = kd};
  memcpy(jb.ranks, ranks, sizeof(int) * (size_t)n);
  int64_t ran0[NR];
  streams_drain();
  for (int m = 0; m < n; m++) ran0[m] = atomic_load(&streams[ranks[m]].ran);
  if (gated) atomic_store(&gate_closed, true);
  tu_run_threads(n, rank_body, &jb);
  if (!gated) return;
  for (int m = 0; m < n; m++) assert_int_equal(jb.issued_ran[m], ran0[m]);
  assert_false(atomic_load(&gate_forced));
  atomic_store_explicit(&gate_closed, false, memory_order_release);
}

static void test_every_kind(void **state) {
  (void)state;
  sim_coll_world *w = sim_coll_world_create(NR, TEST_TIMEOUT_NS);
  assert_non_null(w);
  sim_coll_world_set_device(w, &fake_dev);
  streams_start();
  int all[NR] = {0, 1, 2, 3}, sub[2] = {3, 1};
  for (int kd = 0; kd < K_COUNT; kd++)
    for (int gated = 0; gated < 2; gated++) {
      run_kind(w, all, NR, (kind)kd, gated);
      run_kind(w, sub, 2, (kind)kd, gated);
    }
  streams_stop();
  TU_ASSERT_NO_THREAD_FAILURES();
  check_events();
  sim_coll_world_destroy(w);
}

/* a device reduction that cannot run fails every member's call; the next
 * round on the group works */
static void fail_body(void *arg, int member) {
  sim_coll_world *w = arg;
  int ranks[NR] = {0, 1, 2, 3};
  sim_coll_group *g = sim_coll_group_get(w, ranks, NR);
  static double din[NR][LEN], dout[NR][LEN];
  dt_status st = sim_coll_all_reduce(g, member, din[member], dout[member], LEN,
                                     DT_FLOAT64, DT_REDUCE_SUM);
  TU_CHECK(st == DT_ERR_UNSUPPORTED, "member %d: %d", member, (int)st);
  TU_CHECK(strstr(core_last_error(), "fake device") != NULL, "%s",
           core_last_error());
  st = sim_coll_all_reduce(g, member, inbuf[member], outbuf[member], LEN,
                           DT_FLOAT32, DT_REDUCE_SUM);
  TU_CHECK(st == DT_OK, "member %d after the failure: %s", member,
           core_last_error());
}

static void test_failed_launch(void **state) {
  (void)state;
  sim_coll_world *w = sim_coll_world_create(NR, TEST_TIMEOUT_NS);
  sim_coll_world_set_device(w, &fake_dev);
  streams_start();
  atomic_store(&fail_reduce_dtype, (int)DT_FLOAT64);
  tu_run_threads(NR, fail_body, w);
  atomic_store(&fail_reduce_dtype, -1);
  streams_stop();
  TU_ASSERT_NO_THREAD_FAILURES();
  check_events();
  sim_coll_world_destroy(w);
}

/* one member's share fails: every member's call fails (the others' output
 * is missing that share), naming it; the group works afterwards */
static void one_fails_body(void *arg, int member) {
  sim_coll_world *w = arg;
  int ranks[NR] = {0, 1, 2, 3};
  sim_coll_group *g = sim_coll_group_get(w, ranks, NR);
  dt_status st = sim_coll_all_reduce(g, member, inbuf[member], outbuf[member],
                                     LEN, DT_FLOAT32, DT_REDUCE_SUM);
  TU_CHECK(st == DT_ERR_UNSUPPORTED, "member %d: %d", member, (int)st);
  if (member != 2)
    TU_CHECK(strstr(core_last_error(), "member 2 (rank 2) could not issue") !=
             NULL, "member %d: %s", member, core_last_error());
  atomic_store(&fail_reduce_rank, -1);
  sim_coll_barrier(g, member);
  st = sim_coll_all_reduce(g, member, inbuf[member], outbuf[member], LEN,
                           DT_FLOAT32, DT_REDUCE_SUM);
  TU_CHECK(st == DT_OK, "member %d after: %s", member, core_last_error());
}

static void test_one_member_fails(void **state) {
  (void)state;
  sim_coll_world *w = sim_coll_world_create(NR, TEST_TIMEOUT_NS);
  sim_coll_world_set_device(w, &fake_dev);
  streams_start();
  atomic_store(&fail_reduce_rank, 2);
  tu_run_threads(NR, one_fails_body, w);
  streams_stop();
  TU_ASSERT_NO_THREAD_FAILURES();
  check_events();
  sim_coll_world_destroy(w);
}

/* the device's check refuses a call before the rendezvous: every member
 * fails the round alike, nothing moves, the group stays usable */
static dt_status refuse_int(void *ctx, int rank, int kd, dt_dtype d,
                            dt_reduce_op op, int n) {
  (void)ctx, (void)kd, (void)op, (void)n;
  if (d != DT_INT32) return DT_OK;
  return core_error_set(DT_ERR_UNSUPPORTED, "fake device: rank %d: no int32",
                        rank);
}

static void refused_body(void *arg, int member) {
  sim_coll_world *w = arg;
  int ranks[NR] = {0, 1, 2, 3};
  sim_coll_group *g = sim_coll_group_get(w, ranks, NR);
  static int32_t iin[NR][LEN], iout[NR][LEN];
  dt_status st = sim_coll_all_reduce(g, member, iin[member], iout[member], LEN,
                                     DT_INT32, DT_REDUCE_SUM);
  TU_CHECK(st == DT_ERR_UNSUPPORTED, "member %d: %d (%s)", member, (int)st,
           core_last_error());
  st = sim_coll_all_reduce(g, member, inbuf[member], outbuf[member], LEN,
                           DT_FLOAT32, DT_REDUCE_SUM);
  TU_CHECK(st == DT_OK, "member %d after: %s", member, core_last_error());
}

static void test_check_refuses(void **state) {
  (void)state;
  sim_coll_device d = fake_dev;
  d.check = refuse_int;
  sim_coll_world *w = sim_coll_world_create(NR, TEST_TIMEOUT_NS);
  sim_coll_world_set_device(w, &d);
  streams_start();
  tu_run_threads(NR, refused_body, w);
  streams_stop();
  TU_ASSERT_NO_THREAD_FAILURES();
  check_events();
  sim_coll_world_destroy(w);
}

/* ---- a device that runs whole collectives itself (the `call` hook, as
 * NCCL): a fake that meets its members at a pthread barrier and moves the
 * data on the calling thread. Checked: every moving round reaches `call`
 * once per member with the round's arguments and the same seq, records
 * no event (only barriers do), and the results are right. */
static pthread_barrier_t call_bar;
static const void *call_in[NR];
static void *call_out[NR];
static _Atomic int calls, events_made;
static uint64_t call_seq[NR];

static void *cd_record(void *ctx, int rank) {
  atomic_fetch_add(&events_made, 1);
  return dev_record(ctx, rank);
}

static dt_status fake_call(void *ctx, int rank, const sim_coll_call *k) {
  (void)ctx;
  atomic_fetch_add(&calls, 1);
  call_seq[k->member] = k->seq;
  TU_CHECK(k->ranks[k->member] == rank && k->n == NR, "rank %d", rank);
  call_in[k->member] = k->in;
  call_out[k->member] = k->out;
  pthread_barrier_wait(&call_bar);
  if (k->kind == SIM_COLL_KIND_ALL_REDUCE) {
    for (int64_t i = 0; i < k->count; i++) {
      float s = 0;
      for (int j = 0; j < k->n; j++) s += ((const float *)call_in[j])[i];
      ((float *)k->out)[i] = s;
    }
  } else {
    TU_CHECK(k->kind == SIM_COLL_KIND_ALL_GATHER, "kind %d", k->kind);
    for (int j = 0, off = 0; j < k->n; off += (int)k->counts[j++])
      memcpy((float *)k->out + off, call_in[j],
             sizeof(float) * (size_t)k->counts[j]);
  }
  pthread_barrier_wait(&call_bar); /* inputs stay until all have read */
  return DT_OK;
}

static void call_body(void *arg, int member) {
  sim_coll_world *w = arg;
  int ranks[NR] = {0, 1, 2, 3};
  sim_coll_group *g = sim_coll_group_get(w, ranks, NR);
  float in[64], out[NR * 64];
  int64_t counts[NR] = {64, 64, 64, 64};
  for (int k = 0; k < 5; k++) {
    for (int i = 0; i < 64; i++) in[i] = value(k, member, i);
    TU_CHECK(sim_coll_all_reduce(g, member, in, out, 64, DT_FLOAT32,
                                 DT_REDUCE_SUM) == DT_OK, "%s", core_last_error());
    for (int i = 0; i < 64; i++) {
      float s = 0;
      for (int j = 0; j < NR; j++) s += value(k, j, i);
      TU_CHECK(out[i] == s, "all_reduce %d: %g", i, (double)out[i]);
    }
    TU_CHECK(sim_coll_all_gather(g, member, in, out, counts, DT_FLOAT32) ==
             DT_OK, "%s", core_last_error());
    for (int i = 0; i < NR * 64; i++)
      TU_CHECK(out[i] == value(k, i / 64, i % 64), "all_gather %d", i);
    TU_CHECK(sim_coll_barrier(g, member) == DT_OK, "%s", core_last_error());
  }
}

static void test_whole_collective_device(void **state) {
  (void)state;
  sim_coll_device d = fake_dev;
  d.record = cd_record;
  d.call = fake_call;
  pthread_barrier_init(&call_bar, NULL, NR);
  sim_coll_world *w = sim_coll_world_create(NR, TEST_TIMEOUT_NS);
  sim_coll_world_set_device(w, &d);
  streams_start();
  tu_run_threads(NR, call_body, w);
  streams_stop();
  TU_ASSERT_NO_THREAD_FAILURES();
  assert_int_equal(atomic_load(&calls), 5 * 2 * NR);
  assert_int_equal(atomic_load(&events_made), 5 * NR); /* the barriers' */
  for (int m = 1; m < NR; m++) assert_true(call_seq[m] == call_seq[0]);
  check_events();
  sim_coll_world_destroy(w);
  pthread_barrier_destroy(&call_bar);
}

/* send/recv on the fake device: a ring, even ranks sending first; the
 * receiver's copy waits for the sender's fill, the sender's next fill
 * waits for the copy; checked on the receiver's stream */
static void p2p_body(void *arg, int member) {
  sim_coll_world *w = arg;
  int next = (member + 1) % NR, prev = (member + NR - 1) % NR;
  const int64_t bytes = LEN * (int64_t)sizeof(float);
  for (int k = 0; k < ROUNDS; k++) {
    fill_arg *f = malloc(sizeof *f);
    *f = (fill_arg){member, member, k, LEN};
    enqueue(member, run_fill, f);
    dt_status a, b;
    if (member % 2 == 0) {
      a = sim_coll_send(w, member, next, inbuf[member], bytes);
      b = sim_coll_recv(w, member, prev, outbuf[member], bytes);
    } else {
      b = sim_coll_recv(w, member, prev, outbuf[member], bytes);
      a = sim_coll_send(w, member, next, inbuf[member], bytes);
    }
    TU_CHECK(a == DT_OK && b == DT_OK, "member %d round %d: %s", member, k,
             core_last_error());
    check_arg *c = malloc(sizeof *c); /* as a broadcast from prev */
    *c = (check_arg){.kd = K_BCAST, .rank = member, .member = member,
                     .n = NR, .k = k, .root = prev};
    enqueue(member, run_check, c);
  }
}

static void test_p2p_device(void **state) {
  (void)state;
  sim_coll_world *w = sim_coll_world_create(NR, TEST_TIMEOUT_NS);
  sim_coll_world_set_device(w, &fake_dev);
  streams_start();
  tu_run_threads(NR, p2p_body, w);
  streams_stop();
  TU_ASSERT_NO_THREAD_FAILURES();
  check_events();
  sim_coll_world_destroy(w);
  /* a device that runs whole collectives (NCCL across GPUs) refuses them */
  sim_coll_device d = fake_dev;
  d.call = fake_call;
  w = sim_coll_world_create(2, TEST_TIMEOUT_NS);
  sim_coll_world_set_device(w, &d);
  char buf[8] = {0};
  assert_int_equal(sim_coll_send(w, 0, 1, buf, 8), DT_ERR_UNSUPPORTED);
  assert_non_null(strstr(core_last_error(), "different GPUs"));
  assert_int_equal(sim_coll_recv(w, 1, 0, buf, 8), DT_ERR_UNSUPPORTED);
  sim_coll_world_destroy(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_kind),
      cmocka_unit_test(test_failed_launch),
      cmocka_unit_test(test_one_member_fails),
      cmocka_unit_test(test_check_refuses),
      cmocka_unit_test(test_whole_collective_device),
      cmocka_unit_test(test_p2p_device),
  };
  return TU_RUN_TESTS_WITH_ALARM(300, tests);
}
