/* dt_runtime_destroy against everything else a program may be doing with
 * the runtime: issuing threads that made it current (ops, fetches,
 * synchronize, async fetches and events, DTensor redistributes and
 * shard views), a future callback that
 * destroys it, a second destroy, a destroy from inside an SPMD function,
 * an SPMD run that waits behind a run that never ends, and
 * dt_runtime_cancel from threads and callbacks during a destroy. Each call that
 * races the destroy must complete or fail with DT_ERR_DEVICE; nothing
 * crashes or hangs (the alarm fails a hang). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "runtime/runtime.h"
#include "threads.h"

#define ISSUERS 3
#define ROUNDS 40
#define N 64

static dt_runtime *make_rt(int ranks) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = ranks});
  assert_non_null(rt);
  return rt;
}

/* a call's status: DT_OK, or DT_ERR_DEVICE naming the destroy */
static void check_status(dt_status st, const char *what) {
  TU_CHECK(st == DT_OK || (st == DT_ERR_DEVICE &&
                           strstr(dt_last_error(), "destroyed")),
           "%s: %s: %s", what, dt_status_name(st), dt_last_error());
}

typedef struct race {
  dt_runtime *rt;
  _Atomic int ready;        /* issuers that finished a round before destroy */
  _Atomic bool destroyed;   /* dt_runtime_destroy returned */
  _Atomic int after;        /* issuers that saw every call fail after it */
} race;

/* one round of every kind of call; false once the runtime refuses work */
static bool one_round(dt_tensor *a, dt_tensor *b, dt_runtime *rt, float *out) {
  bool ok = true;
  dt_tensor *c = dt_add(a, b);
  if (!c) {
    check_status(dt_last_status(), "dt_add");
    ok = false;
  } else {
    dt_status st = dt_to_host(c, out, sizeof(float) * N);
    check_status(st, "dt_to_host");
    /* a fetch that completed computed a + b = 1 + 2 */
    if (st == DT_OK) TU_CHECK(out[N - 1] == 3.0f, "sum %g", out[N - 1]);
    ok &= st == DT_OK;
    dt_future *f = dt_to_host_async(c, out, sizeof(float) * N);
    if (f) {
      st = dt_future_wait(f, -1);
      check_status(st, "dt_future_wait");
      ok &= st == DT_OK;
      dt_future_release(f);
    } else {
      check_status(dt_last_status(), "dt_to_host_async");
      ok = false;
    }
    dt_tensor_release(c);
  }
  /* the calls added for Python: a typed scalar op, a detached alias and
   * its version, an in-place write into a fresh tensor */
  dt_tensor *s = dt_add_scalar_typed(a, 1.0, DT_SCALAR_FLOAT);
  dt_tensor *d = dt_detach(a);
  if (!s) check_status(dt_last_status(), "dt_add_scalar_typed");
  if (!d) check_status(dt_last_status(), "dt_detach");
  if (d) TU_CHECK(dt_tensor_version(d) == 0, "version %lld",
                  (long long)dt_tensor_version(d));
  dt_tensor *w = s ? dt_full_like(s, 0.0) : NULL;
  if (s && !w) check_status(dt_last_status(), "dt_full_like");
  if (s && w) {
    dt_status cs = dt_copy_(w, s);
    check_status(cs, "dt_copy_");
    dt_status fs = dt_to_host(w, out, sizeof(float) * N);
    check_status(fs, "dt_to_host (copy_)");
    /* a write that ran holds a + 1.0 = 2 */
    if (cs == DT_OK && fs == DT_OK)
      TU_CHECK(out[0] == 2.0f, "copy_ of a + 1.0: %g", out[0]);
    ok &= cs == DT_OK && fs == DT_OK;
  }
  /* a typed clamp: a is ones (float32), a FLOAT bound keeps float32 */
  dt_tensor *cl = dt_clamp_typed(a, 0, DT_SCALAR_INT, 0.5, DT_SCALAR_FLOAT);
  if (!cl) check_status(dt_last_status(), "dt_clamp_typed");
  else {
    dt_status cst = dt_to_host(cl, out, sizeof(float) * N);
    check_status(cst, "dt_to_host (clamp_typed)");
    if (cst == DT_OK) TU_CHECK(out[0] == 0.5f, "clamp_typed of ones to 0.5: %g", out[0]);
  }
  dt_tensor_release(cl);
  ok &= s && d && cl;
  dt_tensor_release(w);
  dt_tensor_release(d);
  dt_tensor_release(s);
  dt_status st = dt_runtime_synchronize(rt);
  check_status(st, "dt_runtime_synchronize");
  ok &= st == DT_OK;
  dt_future *ev = dt_event_record(rt, 1);
  if (ev) {
    check_status(dt_future_wait(ev, -1), "event wait");
    check_status(dt_stream_wait_event(rt, 0, ev), "dt_stream_wait_event");
    dt_future_release(ev);
  } else {
    check_status(dt_last_status(), "dt_event_record");
    ok = false;
  }
  return ok;
}

/* DTensors on a 1-d mesh of every rank, sharded: a redistribute to
 * Replicate (a collective on the ranks) and the add, then the fetch */
static bool dtensor_round(dt_tensor *x, float *out) {
  dt_tensor *y = dt_add(x, x);
  if (!y) {
    check_status(dt_last_status(), "dt_add (DTensor)");
    return false;
  }
  dt_tensor *z = dt_redistribute(y, NULL, (dt_placement[]){DT_REPLICATE});
  bool ok = z != NULL;
  if (!z) check_status(dt_last_status(), "dt_redistribute");
  dt_status st = dt_to_host(z ? z : y, out, sizeof(float) * N);
  check_status(st, "dt_to_host (DTensor)");
  if (st == DT_OK) TU_CHECK(out[N - 1] == 8.0f, "sum %g", out[N - 1]);
  /* y's shards as [4, N / 4]: each rank's 16 elements one row */
  dt_tensor *v = dt_view_shards(y, DT_SHAPE(4, N / 4), (dt_placement[]){DT_SHARD(0)});
  if (!v) check_status(dt_last_status(), "dt_view_shards");
  st = v ? dt_to_host(v, out, sizeof(float) * N) : dt_last_status();
  check_status(st, "dt_to_host (shards view)");
  if (st == DT_OK) TU_CHECK(out[N - 1] == 8.0f, "view %g", out[N - 1]);
  ok &= v != NULL && st == DT_OK;
  dt_tensor_release(v);
  dt_tensor_release(z);
  dt_tensor_release(y);
  return ok && st == DT_OK;
}

static void issuer(void *arg, int i) {
  race *r = arg;
  TU_CHECK_TRUE(dt_runtime_set_current(r->rt) == DT_OK);
  dt_tensor *a = dt_full(DT_SHAPE(N), 1.0, NULL);
  dt_tensor *b = dt_full(DT_SHAPE(N), 2.0, NULL);
  TU_CHECK_TRUE(a && b);
  /* issuer 0 also drives DTensors */
  dt_mesh *m = i == 0 ? dt_mesh_init(r->rt, NULL, DT_SHAPE(4), NULL) : NULL;
  dt_tensor *x = m ? dt_full(DT_SHAPE(N), 4.0, &(dt_tensor_options){
                                 .mesh = m, .placements = (dt_placement[]){
                                                DT_SHARD(0)}})
                   : NULL;
  TU_CHECK_TRUE(i != 0 || x != NULL);
  float out[N];
  bool counted = false;
  /* until a round after the destroy returned: every call then fails */
  for (;;) {
    bool after = atomic_load(&r->destroyed);
    bool ok = one_round(a, b, r->rt, out);
    if (x) ok &= dtensor_round(x, out);
    if (!counted) {
      atomic_fetch_add(&r->ready, 1);
      counted = true;
    }
    if (after) {
      TU_CHECK(!ok, "a call succeeded after dt_runtime_destroy returned");
      break;
    }
  }
  atomic_fetch_add(&r->after, 1);
  dt_tensor_release(x);
  dt_mesh_release(m);
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_runtime_set_current(NULL);
}

static void destroyer(void *arg, int i) {
  race *r = arg;
  if (i < ISSUERS) {
    issuer(arg, i);
    return;
  }
  /* every issuer is in its loop when the destroy begins */
  while (atomic_load(&r->ready) < ISSUERS) tu_sleep_ns(100000);
  dt_runtime_destroy(r->rt);
  atomic_store(&r->destroyed, true);
}

static void test_destroy_while_issuing(void **state) {
  (void)state;
  for (int round = 0; round < ROUNDS; round++) {
    race r = {.rt = make_rt(4)};
    tu_run_threads(ISSUERS + 1, destroyer, &r);
    TU_ASSERT_NO_THREAD_FAILURES();
    assert_int_equal(atomic_load(&r.after), ISSUERS);
  }
}

/* ---- a future callback destroys the runtime the issuers use */
static void destroy_cb(dt_future *f, dt_status st, void *user) {
  (void)f;
  (void)st;
  race *r = user;
  dt_runtime_destroy(r->rt);
  TU_CHECK(dt_last_status() == DT_OK || dt_last_status() == DT_ERR_DEVICE,
           "destroy from a callback: %s", dt_last_error());
  atomic_store(&r->destroyed, true);
}

static void callback_body(void *arg, int i) {
  race *r = arg;
  if (i < ISSUERS) {
    issuer(arg, i);
    return;
  }
  while (atomic_load(&r->ready) < ISSUERS) tu_sleep_ns(100000);
  dt_runtime_set_current(r->rt);
  static float host[N];
  dt_tensor *t = dt_full(DT_SHAPE(N), 5.0, NULL);
  dt_future *f = dt_to_host_async(t, host, sizeof host);
  TU_CHECK_TRUE(f != NULL);
  if (f) TU_CHECK_TRUE(dt_future_then(f, destroy_cb, r) == DT_OK);
  dt_future_release(f);
  dt_tensor_release(t);
  dt_runtime_set_current(NULL);
}

static void test_destroy_from_callback(void **state) {
  (void)state;
  for (int round = 0; round < ROUNDS / 2; round++) {
    race r = {.rt = make_rt(4)};
    tu_run_threads(ISSUERS + 1, callback_body, &r);
    TU_ASSERT_NO_THREAD_FAILURES();
    assert_int_equal(atomic_load(&r.after), ISSUERS);
  }
}

/* ---- dt_runtime_cancel from several threads and from a future callback
 * while another thread destroys the runtime: each cancel returns DT_OK or
 * DT_ERR_DEVICE, and every one after the destroy returned fails */
static _Atomic int callbacks_due; /* registered and not yet run */

static void cancel_cb(dt_future *f, dt_status st, void *user) {
  (void)f;
  (void)st;
  race *r = user;
  check_status(dt_runtime_cancel(r->rt), "dt_runtime_cancel (callback)");
  atomic_fetch_sub(&callbacks_due, 1);
}

static void canceller(void *arg, int i) {
  race *r = arg;
  if (i == ISSUERS) { /* the destroyer, once every canceller cancelled */
    while (atomic_load(&r->ready) < ISSUERS) tu_sleep_ns(100000);
    dt_runtime_destroy(r->rt);
    atomic_store(&r->destroyed, true);
    return;
  }
  TU_CHECK_TRUE(dt_runtime_set_current(r->rt) == DT_OK); /* holds a ref */
  static float host[ISSUERS][N];
  bool counted = false;
  for (;;) {
    bool after = atomic_load(&r->destroyed);
    dt_tensor *t = dt_full(DT_SHAPE(N), 1.0, NULL);
    dt_future *f = t ? dt_to_host_async(t, host[i], sizeof host[i]) : NULL;
    if (f) {
      atomic_fetch_add(&callbacks_due, 1);
      TU_CHECK_TRUE(dt_future_then(f, cancel_cb, r) == DT_OK);
    }
    dt_future_release(f);
    dt_tensor_release(t);
    dt_status st = dt_runtime_cancel(r->rt);
    check_status(st, "dt_runtime_cancel");
    if (!counted) {
      atomic_fetch_add(&r->ready, 1);
      counted = true;
    }
    if (after) {
      TU_CHECK(st == DT_ERR_DEVICE, "dt_runtime_cancel succeeded after "
               "dt_runtime_destroy returned");
      break;
    }
  }
  atomic_fetch_add(&r->after, 1);
  /* the callbacks use the runtime: its reference (this thread's current
   * runtime) outlives them. Their fetches complete, at the latest when
   * the destroy runs what was published */
  while (atomic_load(&callbacks_due) > 0) tu_sleep_ns(100000);
  dt_runtime_set_current(NULL);
}

static void test_cancel_while_destroying(void **state) {
  (void)state;
  for (int round = 0; round < ROUNDS; round++) {
    race r = {.rt = make_rt(4)};
    tu_run_threads(ISSUERS + 1, canceller, &r);
    TU_ASSERT_NO_THREAD_FAILURES();
    assert_int_equal(atomic_load(&r.after), ISSUERS);
  }
}

/* ---- a call inside the runtime when the destroy begins completes; one
 * that starts after fails at once */
typedef struct held {
  dt_runtime *rt;
  _Atomic bool running, release, fetched, destroyed;
  dt_tensor *t;
  float out[N];
  dt_status fetch_st, turn_st;
  char turn_msg[512];
} held;

static dt_status hold_rank(dt_spmd_ctx *ctx) {
  held *h = ctx->arg;
  if (ctx->rank == 0) {
    atomic_store(&h->running, true);
    while (!atomic_load(&h->release)) tu_sleep_ns(100000);
  }
  return DT_OK;
}

static void *run_held(void *arg) {
  held *h = arg;
  TU_CHECK_TRUE(dt_spmd_run(h->rt, hold_rank, h) == DT_OK);
  return NULL;
}

static void *fetch_held(void *arg) {
  held *h = arg;
  /* queued behind the held run: inside the runtime until it ends */
  h->fetch_st = dt_to_host(h->t, h->out, sizeof h->out);
  atomic_store(&h->fetched, true);
  return NULL;
}

static dt_status nothing(dt_spmd_ctx *ctx);

/* a second run: waits for its turn behind the held one */
static void *run_second(void *arg) {
  held *h = arg;
  h->turn_st = dt_spmd_run(h->rt, nothing, NULL);
  snprintf(h->turn_msg, sizeof h->turn_msg, "%s", dt_last_error());
  return NULL;
}

static void *destroy_held(void *arg) {
  held *h = arg;
  dt_runtime_destroy(h->rt);
  atomic_store(&h->destroyed, true);
  return NULL;
}

static void test_destroy_waits_for_calls_inside(void **state) {
  (void)state;
  held h = {.rt = make_rt(2)};
  dt_runtime_set_current(h.rt);
  h.t = dt_full(DT_SHAPE(N), 7.0, NULL);
  assert_non_null(h.t);
  pthread_t run = tu_spawn(run_held, &h);
  while (!atomic_load(&h.running)) tu_sleep_ns(100000);
  int64_t before = dt_runtime_queue_depth(h.rt, 0); /* the held run's */
  pthread_t fetch = tu_spawn(fetch_held, &h);
  /* the fetch's record is published (rank 0 has it queued behind) */
  while (dt_runtime_queue_depth(h.rt, 0) <= before) tu_sleep_ns(100000);
  pthread_t second = tu_spawn(run_second, &h);
  pthread_t des = tu_spawn(destroy_held, &h);
  while (!atomic_load_explicit(&h.rt->closing, memory_order_acquire))
    tu_sleep_ns(100000);
  /* closing: a new call fails at once, naming the destroy */
  dt_tensor *c = dt_add(h.t, h.t);
  assert_null(c);
  tu_expect_status(dt_last_status(), DT_ERR_DEVICE, "dt_add", "destroyed", NULL);
  assert_false(atomic_load(&h.fetched));
  assert_false(atomic_load(&h.destroyed));
  atomic_store(&h.release, true);
  pthread_join(run, NULL);
  pthread_join(fetch, NULL);
  pthread_join(second, NULL);
  pthread_join(des, NULL);
  /* the run waiting for its turn was told, not run */
  assert_int_equal(h.turn_st, DT_ERR_DEVICE);
  assert_non_null(strstr(h.turn_msg, "dt_spmd_run: the runtime was destroyed"));
  /* the fetch issued before the destroy completed with the value */
  assert_int_equal(h.fetch_st, DT_OK);
  for (int i = 0; i < N; i++) assert_true(h.out[i] == 7.0f);
  dt_tensor_release(h.t);
  dt_runtime_set_current(NULL);
  TU_ASSERT_NO_THREAD_FAILURES();
}

/* ---- a second destroy of the same pointer is an error, not a crash */
static void *destroy_once(void *arg) {
  dt_runtime_destroy(arg);
  return (void *)(intptr_t)dt_last_status();
}

static void test_destroy_twice(void **state) {
  (void)state;
  dt_runtime *rt = make_rt(2);
  dt_runtime_destroy(rt);
  assert_int_equal(dt_last_status(), DT_OK);
  dt_runtime_destroy(rt); /* freed by the first: never read */
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_runtime_destroy", "not a live runtime", NULL);
  /* two threads at once: one destroys, the other is told */
  for (int i = 0; i < 20; i++) {
    rt = make_rt(2);
    pthread_t a = tu_spawn(destroy_once, rt), b = tu_spawn(destroy_once, rt);
    void *ra, *rb;
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    int ok = (ra == (void *)(intptr_t)DT_OK) + (rb == (void *)(intptr_t)DT_OK);
    assert_int_equal(ok, 1);
  }
}

/* ---- destroy inside an SPMD function: an error at the call */
static _Atomic int spmd_destroy_errors;

static dt_status destroy_inside(dt_spmd_ctx *ctx) {
  dt_runtime_destroy(ctx->rt);
  if (dt_last_status() == DT_ERR_INVALID_ARGUMENT &&
      strstr(dt_last_error(), "dt_runtime_destroy") &&
      strstr(dt_last_error(), "rank"))
    atomic_fetch_add(&spmd_destroy_errors, 1);
  return DT_OK;
}

static void test_destroy_inside_spmd(void **state) {
  (void)state;
  dt_runtime *rt = make_rt(4);
  assert_int_equal(dt_spmd_run(rt, destroy_inside, NULL), DT_OK);
  assert_int_equal(atomic_load(&spmd_destroy_errors), 4);
  /* the runtime still works */
  dt_runtime_set_current(rt);
  dt_tensor *t = dt_full(DT_SHAPE(N), 2.0, NULL);
  float out[N];
  assert_int_equal(dt_to_host(t, out, sizeof out), DT_OK);
  assert_true(out[0] == 2.0f);
  dt_tensor_release(t);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  assert_int_equal(dt_last_status(), DT_OK);
}

/* ---- a run started from inside a run waits its turn, then times out
 * naming the run that holds the runtime */
typedef struct nested { dt_runtime *rt; dt_status st; char msg[1024]; } nested;

static dt_status nothing(dt_spmd_ctx *ctx) {
  (void)ctx;
  return DT_OK;
}

static void *nested_run(void *arg) {
  nested *n = arg;
  n->st = dt_spmd_run(n->rt, nothing, NULL);
  snprintf(n->msg, sizeof n->msg, "%s", dt_last_error());
  return NULL;
}

static dt_status start_nested(dt_spmd_ctx *ctx) {
  if (ctx->rank != 0) return DT_OK;
  pthread_t t = tu_spawn(nested_run, ctx->arg);
  pthread_join(t, NULL); /* the outer run ends only after the inner one */
  return DT_OK;
}

static void test_nested_spmd_times_out(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 2, .collective_timeout_ms = 300});
  assert_non_null(rt);
  nested n = {.rt = rt};
  assert_int_equal(dt_spmd_run(rt, start_nested, &n), DT_OK);
  assert_int_equal(n.st, DT_ERR_TIMEOUT);
  /* the holder: a run, the function it runs, where it was started */
  if (!strstr(n.msg, "test_destroy_race.c:")) fail_msg("%s", n.msg);
  assert_non_null(strstr(n.msg, "dt_spmd_run: waited 0.300 s"));
  assert_non_null(strstr(n.msg, "the SPMD run of"));
  /* the runtime is free again */
  assert_int_equal(dt_spmd_run(rt, nothing, NULL), DT_OK);
  dt_runtime_destroy(rt);
}

/* ---- a destroyed current runtime: one behaviour on every thread */
typedef struct cur { dt_runtime *rt; _Atomic int phase; } cur;

static void expect_destroyed_factory(void) {
  dt_tensor *t = dt_zeros(DT_SHAPE(4), NULL);
  TU_CHECK(t == NULL, "a factory on a destroyed current runtime made a tensor");
  dt_tensor_release(t);
  TU_CHECK(dt_last_status() == DT_ERR_DEVICE &&
               strstr(dt_last_error(), "destroyed"),
           "%s: %s", dt_status_name(dt_last_status()), dt_last_error());
}

static void *other_thread(void *arg) {
  cur *c = arg;
  TU_CHECK_TRUE(dt_runtime_set_current(c->rt) == DT_OK);
  atomic_store(&c->phase, 1);
  while (atomic_load(&c->phase) < 2) tu_sleep_ns(100000);
  expect_destroyed_factory();
  dt_runtime_set_current(NULL);
  return NULL;
}

static void test_destroyed_current(void **state) {
  (void)state;
  cur c = {.rt = make_rt(2)};
  pthread_t t = tu_spawn(other_thread, &c);
  while (atomic_load(&c.phase) < 1) tu_sleep_ns(100000);
  assert_int_equal(dt_runtime_set_current(c.rt), DT_OK);
  dt_runtime_destroy(c.rt); /* this thread's own current runtime */
  expect_destroyed_factory();
  atomic_store(&c.phase, 2);
  pthread_join(t, NULL);
  TU_ASSERT_NO_THREAD_FAILURES();
  /* another current runtime (here the default) ends it */
  assert_int_equal(dt_runtime_set_current(NULL), DT_OK);
  dt_tensor *z = dt_zeros(DT_SHAPE(4), NULL);
  assert_non_null(z);
  dt_tensor_release(z);
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]); /* one case by name */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_destroy_twice),
      cmocka_unit_test(test_destroyed_current),
      cmocka_unit_test(test_destroy_inside_spmd),
      cmocka_unit_test(test_nested_spmd_times_out),
      cmocka_unit_test(test_destroy_waits_for_calls_inside),
      cmocka_unit_test(test_destroy_while_issuing),
      cmocka_unit_test(test_destroy_from_callback),
      cmocka_unit_test(test_cancel_while_destroying),
  };
  return TU_RUN_TESTS_WITH_ALARM(240, tests);
}
