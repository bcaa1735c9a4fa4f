/* Fault injection by kind: each kind fires at the n-th
 * event on the chosen rank, the failure reaches exactly the work that
 * depends on it with the original cause, other work completes (checked
 * against values computed here), nothing hangs (the watchdog is far
 * away) or leaks, and the runtime stays usable; bad arguments; injection
 * from several threads and from a future callback. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "threads.h"

#define R 4
static dt_runtime *rt;
static dt_mesh *m4;

static int setup(void **state) {
  (void)state;
  rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = R,
                                                .collective_timeout_ms = 20000});
  m4 = dt_mesh_init(rt, NULL, DT_SHAPE(R), NULL);
  dt_runtime_set_current(rt); /* the factories' runtime on this thread */
  return rt && m4 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  dt_runtime_set_current(NULL);
  dt_mesh_release(m4);
  dt_runtime_destroy(rt);
  return 0;
}

static void expect_in(const char *msg, const char *part) {
  if (!strstr(msg, part)) fail_msg("\"%s\" not in: %s", part, msg);
}

/* the full value of t, or the status of its fetch (msg: its error) */
static dt_status fetch(dt_tensor *t, float *out, size_t bytes, char *msg) {
  dt_status st = dt_to_host(t, out, bytes);
  snprintf(msg, 512, "%s", st == DT_OK ? "" : dt_last_error());
  return st;
}

/* the whole runtime still computes and communicates */
static void expect_usable(void) {
  dt_tensor *p = dt_full(DT_SHAPE(8), 1.5, &(dt_tensor_options){.mesh = m4,
      .placements = DT_PLACEMENTS(DT_SHARD(0))});
  dt_tensor *q = dt_redistribute(p, NULL, DT_PLACEMENTS(DT_REPLICATE));
  dt_tensor *s = dt_mul_scalar(q, 2);
  float v[8];
  assert_int_equal(dt_to_host(s, v, sizeof v), DT_OK);
  for (int i = 0; i < 8; i++) assert_true(v[i] == 3.0f);
  dt_tensor_release(p);
  dt_tensor_release(q);
  dt_tensor_release(s);
}

/* ---- OOM: the 3rd device allocation on rank 1 */
static void test_oom(void **state) {
  (void)state;
  int64_t live = dt_live_tensors(), fired = dt_fault_count(rt);
  assert_int_equal(dt_fault_inject(rt, &(dt_fault){.kind = DT_FAULT_OOM, .rank = 1,
                                                   .after = 3}), DT_OK);
  dt_tensor_options o = {.device = tu_dev(1)};
  dt_tensor *a = dt_full(DT_SHAPE(64), 2, &o);      /* allocation 1 */
  dt_tensor *b = dt_add_scalar(a, 1);                /* 2 */
  dt_tensor *c = dt_mul_scalar(b, 2);                /* 3: fails */
  dt_tensor *d = dt_add(c, a);                       /* depends on c */
  dt_tensor *e = dt_mul(b, a);                       /* does not */
  float v[64];
  char msg[512];
  assert_int_equal(fetch(b, v, sizeof v, msg), DT_OK);
  assert_true(v[0] == 3);
  if (c) { /* the failure is known at the call when the rank was quick */
    assert_int_equal(fetch(c, v, sizeof v, msg), DT_ERR_OUT_OF_MEMORY);
    expect_in(msg, "injected fault (dt_fault_inject): out of memory on rank 1");
    if (d) assert_int_equal(fetch(d, v, sizeof v, msg), DT_ERR_OUT_OF_MEMORY);
  }
  assert_int_equal(fetch(e, v, sizeof v, msg), DT_OK);
  assert_true(v[63] == 6);
  assert_int_equal(dt_fault_count(rt) - fired, 1);
  dt_tensor *ts[] = {a, b, c, d, e};
  for (int i = 0; i < 5; i++) dt_tensor_release(ts[i]);
  expect_usable();
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  assert_int_equal(dt_live_tensors(), live);
}

/* ---- a rank's part of a DTensor op fails: the collective it needed
 * fails on every rank at once, naming it */
static void test_rank_fail(void **state) {
  (void)state;
  int64_t fired = dt_fault_count(rt);
  dt_tensor *p = dt_full(DT_SHAPE(8), 1, &(dt_tensor_options){.mesh = m4,
      .placements = DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM))});
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  assert_int_equal(dt_fault_inject(rt, &(dt_fault){.kind = DT_FAULT_RANK_FAIL,
                                                   .rank = 2}), DT_OK);
  int64_t t0 = tu_now_ns();
  dt_tensor *q = dt_redistribute(p, NULL, DT_PLACEMENTS(DT_REPLICATE));
  float v[8];
  char msg[512];
  assert_int_equal(fetch(q, v, sizeof v, msg), DT_ERR_FAULT);
  expect_in(msg, "injected fault (dt_fault_inject): rank failure on rank 2");
  assert_true(tu_now_ns() - t0 < (int64_t)5e9);
  assert_int_equal(dt_fault_count(rt) - fired, 1);
  dt_tensor *q2 = dt_redistribute(p, NULL, DT_PLACEMENTS(DT_REPLICATE));
  assert_int_equal(fetch(q2, v, sizeof v, msg), DT_OK);
  for (int i = 0; i < 8; i++) assert_true(v[i] == 1);
  dt_tensor_release(p);
  dt_tensor_release(q);
  dt_tensor_release(q2);
  expect_usable();
}

/* ---- the 2nd collective call of rank 1 in an SPMD run fails */
static dt_status st_of[R];
static char msg_of[R][512];

static dt_status two_reduces(dt_spmd_ctx *c) {
  float v = (float)c->rank;
  dt_tensor *x = dt_from_host(&v, DT_SHAPE(1), NULL);
  dt_tensor *a = dt_all_reduce(x, DT_REDUCE_SUM, NULL);
  dt_tensor *b = a ? dt_all_reduce(a, DT_REDUCE_SUM, NULL) : NULL;
  st_of[c->rank] = b ? DT_OK : dt_last_status();
  snprintf(msg_of[c->rank], sizeof msg_of[c->rank], "%s", b ? "" : dt_last_error());
  dt_tensor_release(x);
  dt_tensor_release(a);
  dt_tensor_release(b);
  return DT_OK;
}

static void test_collective_fail(void **state) {
  (void)state;
  assert_int_equal(dt_fault_inject(rt, &(dt_fault){.kind = DT_FAULT_COLLECTIVE_FAIL,
                                                   .rank = 1, .after = 2}), DT_OK);
  assert_int_equal(dt_spmd_run(rt, two_reduces, NULL), DT_OK);
  for (int r = 0; r < R; r++) {
    assert_int_equal(st_of[r], DT_ERR_FAULT);
    expect_in(msg_of[r], "injected fault (dt_fault_inject): collective failure on rank 1");
  }
  expect_in(msg_of[0], "member 1 (rank 1) could not take part");
  assert_int_equal(dt_spmd_run(rt, two_reduces, NULL), DT_OK);
  for (int r = 0; r < R; r++) assert_int_equal(st_of[r], DT_OK);
}

/* ---- a stall past the watchdog: the others' collective times out,
 * naming where the stalled rank is; then everything works again */
static void test_stall(void **state) {
  (void)state;
  dt_runtime *w = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2,
                                                          .collective_timeout_ms = 100});
  dt_mesh *m = dt_mesh_init(w, NULL, DT_SHAPE(2), NULL);
  dt_tensor *p = dt_ones(DT_SHAPE(4), &(dt_tensor_options){.mesh = m,
      .placements = DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM))});
  assert_int_equal(dt_runtime_synchronize(w), DT_OK);
  assert_int_equal(dt_fault_inject(w, &(dt_fault){.kind = DT_FAULT_STALL, .rank = 0,
                                                  .stall_ms = 400}), DT_OK);
  dt_tensor *q = dt_redistribute(p, NULL, DT_PLACEMENTS(DT_REPLICATE));
  float v[4];
  char msg[512];
  assert_int_equal(fetch(q, v, sizeof v, msg), DT_ERR_TIMEOUT);
  expect_in(msg, "missing: rank 0");
  dt_tensor *q2 = dt_redistribute(p, NULL, DT_PLACEMENTS(DT_REPLICATE));
  assert_int_equal(fetch(q2, v, sizeof v, msg), DT_OK);
  assert_true(v[0] == 1);
  dt_tensor_release(p);
  dt_tensor_release(q);
  dt_tensor_release(q2);
  dt_mesh_release(m);
  dt_runtime_destroy(w);
}

/* ---- the next checkpoint read of rank 3 fails */
static void test_io(void **state) {
  (void)state;
  char path[] = "/tmp/dtorch_fault_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  float v[16];
  for (int i = 0; i < 16; i++) v[i] = (float)i;
  dt_tensor *t = dt_from_host(v, DT_SHAPE(16), NULL);
  assert_int_equal(dt_save_safetensors(path, &t, (const char *const[]){"w"}, 1), DT_OK);
  assert_int_equal(dt_fault_inject(rt, &(dt_fault){.kind = DT_FAULT_IO, .rank = 3}), DT_OK);
  dt_load_options o = {.mesh = m4, .placements = DT_PLACEMENTS(DT_SHARD(0))};
  dt_tensor *l = dt_load_safetensors(path, "w", &o);
  float got[16];
  char msg[512];
  assert_int_equal(fetch(l, got, sizeof got, msg), DT_ERR_IO);
  expect_in(msg, "rank 3");
  dt_tensor *l2 = dt_load_safetensors(path, "w", &o);
  assert_int_equal(fetch(l2, got, sizeof got, msg), DT_OK);
  for (int i = 0; i < 16; i++) assert_true(got[i] == v[i]);
  dt_tensor_release(t);
  dt_tensor_release(l);
  dt_tensor_release(l2);
  unlink(path);
}

static void test_errors(void **state) {
  (void)state;
  assert_int_equal(dt_fault_inject(NULL, &(dt_fault){.kind = DT_FAULT_OOM}),
                   DT_ERR_INVALID_ARGUMENT);
  assert_int_equal(dt_fault_inject(rt, NULL), DT_ERR_INVALID_ARGUMENT);
  assert_int_equal(dt_fault_inject(rt, &(dt_fault){.kind = 64}), DT_ERR_INVALID_ARGUMENT);
  expect_in(dt_last_error(), "f->kind 0x40");
  assert_int_equal(dt_fault_inject(rt, &(dt_fault){.kind = DT_FAULT_OOM, .rank = R}),
                   DT_ERR_INVALID_ARGUMENT);
  expect_in(dt_last_error(), "f->rank 4");
  assert_int_equal(dt_fault_inject(rt, &(dt_fault){.kind = DT_FAULT_OOM, .after = -1}),
                   DT_ERR_INVALID_ARGUMENT);
  /* armed and cleared: nothing fires */
  int64_t fired = dt_fault_count(rt);
  assert_int_equal(dt_fault_inject(rt, &(dt_fault){.kind = DT_FAULT_OOM | DT_FAULT_RANK_FAIL,
                                                   .rank = -1}), DT_OK);
  assert_int_equal(dt_fault_clear(rt), DT_OK);
  expect_usable();
  assert_int_equal(dt_fault_count(rt), fired);
}

/* ---- from several threads and from a future callback */
static void inject_and_compute(void *arg, int i) {
  (void)arg;
  dt_runtime_set_current(rt);
  /* each thread arms a far-away OOM on its rank, computes, disarms */
  TU_CHECK(dt_fault_inject(rt, &(dt_fault){.kind = DT_FAULT_OOM, .rank = i,
                                           .after = 1000000}) == DT_OK, "%s", dt_last_error());
  char dev[8];
  snprintf(dev, sizeof dev, "%s", tu_dev(i));
  dt_tensor *a = dt_full(DT_SHAPE(32), i, &(dt_tensor_options){.device = dev});
  dt_tensor *b = dt_add(a, a);
  float v[32];
  TU_CHECK(dt_to_host(b, v, sizeof v) == DT_OK && v[31] == 2.0f * (float)i, "%s",
           dt_last_error());
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_runtime_set_current(NULL);
}

static _Atomic int cb_st = -1;
static void inject_in_callback(dt_future *f, dt_status st, void *user) {
  (void)f;
  (void)st;
  (void)user;
  dt_runtime_set_current(rt);
  dt_status s = dt_fault_inject(rt, &(dt_fault){.kind = DT_FAULT_RANK_FAIL, .rank = 0});
  dt_tensor *a = dt_ones(DT_SHAPE(4), &(dt_tensor_options){.device = tu_dev(0)});
  float v[4];
  dt_status got = a ? dt_to_host(a, v, sizeof v) : dt_last_status();
  atomic_store(&cb_st, s == DT_OK && got == DT_ERR_FAULT ? 1 : 0);
  dt_tensor_release(a);
  dt_runtime_set_current(NULL);
}

static void test_threads_and_callback(void **state) {
  (void)state;
  tu_run_threads(R, inject_and_compute, NULL);
  assert_int_equal(tu_thread_failures_take(), 0);
  assert_int_equal(dt_fault_clear(rt), DT_OK);
  dt_future *ev = dt_event_record(rt, 1);
  assert_int_equal(dt_future_then(ev, inject_in_callback, NULL), DT_OK);
  int64_t t0 = tu_now_ns();
  while (atomic_load(&cb_st) < 0 && tu_now_ns() - t0 < (int64_t)10e9) tu_sleep_ns(100000);
  assert_int_equal(atomic_load(&cb_st), 1);
  dt_future_release(ev);
  expect_usable();
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_oom),    cmocka_unit_test(test_rank_fail),
    cmocka_unit_test(test_collective_fail), cmocka_unit_test(test_stall),
    cmocka_unit_test(test_io),     cmocka_unit_test(test_errors),
    cmocka_unit_test(test_threads_and_callback),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
