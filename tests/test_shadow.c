/* Shadow comparison: correct programs report nothing,
 * forward and backward; a real divergence (float16 partial sums rounded
 * per rank) is reported at the right op with its labels and placements;
 * the checks' own gathers do not show in dt_comm_count; errors; the
 * environment switch; threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "threads.h"

static dt_runtime *rt;
static dt_mesh *m22, *m2;

static int setup(void **state) {
  (void)state;
  rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  m22 = dt_mesh_init(rt, NULL, DT_SHAPE(2, 2), (const char *const[]){"dp", "tp"});
  m2 = dt_mesh_create(rt, NULL, DT_SHAPE(2), (const int[]){0, 1}, NULL);
  return rt && m22 && m2 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  dt_mesh_release(m22);
  dt_mesh_release(m2);
  dt_runtime_destroy(rt);
  return 0;
}

static dt_tensor *dfrom(const double *v, dt_shape s, dt_mesh *m, const dt_placement *pl,
                        dt_dtype d, bool grad) {
  dt_tensor *t = dt_from_host(v, s, &(dt_tensor_options){.dtype = DT_FLOAT64, .mesh = m,
                                                          .placements = pl});
  dt_tensor *r = d == DT_FLOAT64 ? dt_tensor_retain(t) : dt_cast(t, d);
  dt_tensor_release(t);
  if (grad) assert_int_equal(dt_tensor_set_requires_grad(r, true), DT_OK);
  return r;
}

/* a column- then row-parallel MLP with its backward: every op agrees */
static void test_correct_program(void **state) {
  (void)state;
  double xv[8 * 6], w1[12 * 6], w2[6 * 12];
  for (int i = 0; i < 48; i++) xv[i] = sin(i * 0.3);
  for (int i = 0; i < 72; i++) w1[i] = cos(i * 0.7) * 0.3, w2[i] = sin(i * 0.2) * 0.3;
  dt_tensor *x = dfrom(xv, DT_SHAPE(8, 6), m22, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE), DT_FLOAT32, false);
  dt_tensor *a = dfrom(w1, DT_SHAPE(12, 6), m22, DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)), DT_FLOAT32, true);
  dt_tensor *b = dfrom(w2, DT_SHAPE(6, 12), m22, DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1)), DT_FLOAT32, true);
  assert_int_equal(dt_shadow_begin(0), DT_OK);
  dt_comm_count_begin();
  dt_label_push("mlp");
  dt_tensor *h = dt_linear(x, a, NULL), *g = dt_gelu(h), *y = dt_linear(g, b, NULL);
  dt_tensor *yr = dt_redistribute(y, NULL, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_tensor *y2 = dt_mul(yr, yr), *l = dt_mean(y2, NULL, 0, false);
  dt_label_pop();
  assert_int_equal(dt_backward(l), DT_OK);
  dt_comm_counts cc = dt_comm_count_end();
  dt_shadow_report r;
  assert_int_equal(dt_shadow_end(&r), DT_OK);
  if (r.first_divergence || r.failed) fail_msg("%s", r.message);
  assert_true(r.ops_checked >= 12); /* forward and backward */
  assert_string_equal(r.message, "");
  /* the program's collectives only: the same program unshadowed */
  dt_comm_count_begin();
  dt_tensor *h2 = dt_linear(x, a, NULL), *g2 = dt_gelu(h2), *z = dt_linear(g2, b, NULL);
  dt_tensor *zr = dt_redistribute(z, NULL, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_tensor *z2 = dt_mul(zr, zr), *l2 = dt_mean(z2, NULL, 0, false);
  dt_zero_grad(a);
  dt_zero_grad(b);
  assert_int_equal(dt_backward(l2), DT_OK);
  dt_comm_counts c2 = dt_comm_count_end();
  assert_int_equal(cc.all_reduce, c2.all_reduce);
  assert_int_equal(cc.all_gather, c2.all_gather);
  assert_int_equal(cc.bytes, c2.bytes);
  TU_RELEASE(x, a, b, h, g, y, yr, y2, l, h2, g2, z, zr, z2, l2);
}

/* float16 sums: one device adds [2048, 1, 1, 1] in float and rounds once
 * (2051 → 2052); on two ranks each half rounds first (2049 → 2048, 2) and
 * the partials add to 2050. The sum is op #2, under the labels. */
static void test_finds_divergence(void **state) {
  (void)state;
  double v[4] = {2048, 1, 1, 1};
  dt_tensor *x = dfrom(v, DT_SHAPE(4), m2, DT_PLACEMENTS(DT_SHARD(0)), DT_FLOAT16, false);
  assert_int_equal(dt_shadow_begin(1e-4), DT_OK);
  dt_tensor *y = dt_neg(x); /* op #1: exact */
  dt_label_push("block");
  dt_label_push("reduce");
  dt_tensor *s = dt_sum(y, NULL, 0, false); /* op #2 */
  dt_label_pop();
  dt_label_pop();
  dt_tensor *t = dt_mul_scalar(s, 2); /* op #3: differs too; the first is reported */
  dt_shadow_report r;
  assert_int_equal(dt_shadow_end(&r), DT_OK);
  assert_int_equal(r.ops_checked, 3);
  assert_int_equal(r.first_divergence, 2);
  assert_true(r.max_diff == 2);
  assert_string_equal(r.message,
                      "first divergence at op #2 (dt_sum, block.reduce, inputs [S(0)] "
                      "\u2192 [P(sum)]): max |diff| 2 (element 0: distributed -2050, "
                      "single device -2052)");
  TU_RELEASE(x, y, s, t);
}

static void test_errors(void **state) {
  (void)state;
  dt_shadow_report r;
  assert_int_equal(dt_shadow_end(&r), DT_ERR_INVALID_ARGUMENT);
  assert_string_equal(dt_last_error(), "dt_shadow_end: shadowing is not on in this "
                      "thread (call dt_shadow_begin first)");
  assert_int_equal(dt_shadow_begin(-1), DT_ERR_INVALID_ARGUMENT);
  assert_string_equal(dt_last_error(), "dt_shadow_begin: tolerance must be finite "
                      "and >= 0, got -1");
  assert_int_equal(dt_shadow_begin(NAN), DT_ERR_INVALID_ARGUMENT);
  dt_label_pop(); /* an empty stack: nothing happens */
}

/* shadowing is per thread: eight threads, each its own report */
static void shadow_thread(void *arg, int i) {
  (void)arg;
  double v[8];
  for (int k = 0; k < 8; k++) v[k] = k + i;
  TU_CHECK(dt_shadow_begin(0) == DT_OK, "%s", dt_last_error());
  dt_tensor *x = dt_from_host(v, DT_SHAPE(8), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = m2, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  dt_tensor *y = dt_mul(x, x), *s = dt_sum(y, NULL, 0, false);
  dt_shadow_report r;
  TU_CHECK(dt_shadow_end(&r) == DT_OK && r.ops_checked == 2 && !r.first_divergence,
           "thread %d: %lld ops, %s", i, (long long)r.ops_checked, r.message);
  dt_tensor_release(x);
  dt_tensor_release(y);
  dt_tensor_release(s);
}

static void test_threads(void **state) {
  (void)state;
  tu_run_threads(8, shadow_thread, NULL);
  TU_ASSERT_NO_THREAD_FAILURES();
}

/* DTORCH_SHADOW=1: a thread started after it is set shadows by itself */
static void *env_thread(void *arg) {
  double v[4] = {1, 2, 3, 4};
  dt_tensor *x = dt_from_host(v, DT_SHAPE(4), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = m2, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  dt_tensor *y = dt_exp(x);
  dt_shadow_report r;
  *(int *)arg = dt_shadow_end(&r) == DT_OK && r.ops_checked == 1 && !r.first_divergence;
  dt_tensor_release(x);
  dt_tensor_release(y);
  return NULL;
}

static void test_environment(void **state) {
  (void)state;
  setenv("DTORCH_SHADOW", "1", 1);
  int ok = 0;
  pthread_join(tu_spawn(env_thread, &ok), NULL);
  unsetenv("DTORCH_SHADOW");
  assert_true(ok);
}

/* ---- inside SPMD functions: every rank checks its own calls */
static dt_shadow_report spmd_rep[4];

/* x claims [S(0), R] on the dp x tp mesh: equal copies along tp (op #1);
 * y claims Replicate on tp but each tp rank holds its own value (op #2) */
static dt_status spmd_claims(dt_spmd_ctx *ctx) {
  int r = ctx->rank, dp = r / 2, tp = r % 2;
  double xv[3] = {dp, dp + 0.5, -1}, yv[3] = {1, 2, 3 + tp * 0.25};
  dt_tensor_options o = {.dtype = DT_FLOAT64};
  dt_tensor *xl = dt_from_host(xv, DT_SHAPE(1, 3), &o), *yl = dt_from_host(yv, DT_SHAPE(1, 3), &o);
  dt_shadow_begin(1e-6);
  dt_label_push("spmd");
  dt_tensor *x = dt_dtensor_from_local(xl, m22, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_tensor *y = dt_dtensor_from_local(yl, m22, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_tensor *z = dt_add(x, y); /* op #3: not checked after the first divergence */
  dt_label_pop();
  dt_shadow_end(&spmd_rep[r]);
  dt_status st = x && y && z ? DT_OK : dt_last_status();
  dt_tensor *all[] = {xl, yl, x, y, z};
  for (int i = 0; i < 5; i++) dt_tensor_release(all[i]);
  return st;
}

static void test_spmd_wrong_claim(void **state) {
  (void)state;
  memset(spmd_rep, 0, sizeof spmd_rep);
  assert_int_equal(dt_spmd_run(rt, spmd_claims, NULL), DT_OK);
  for (int r = 0; r < 4; r++) {
    assert_int_equal(spmd_rep[r].ops_checked, 3);
    assert_int_equal(spmd_rep[r].first_divergence, 2);
    assert_true(spmd_rep[r].max_diff == 0.25);
  }
  /* rank 0 and 1 (dp 0) hold rows 0; element 2 differs: 3 vs 3.25 */
  assert_string_equal(spmd_rep[0].message,
      "first divergence at op #2 (dt_dtensor_from_local, spmd, claims [S(0), R]): "
      "mesh dim 1 (tp) is Replicate but the ranks' copies differ: max |diff| 0.25 "
      "(element 2: rank 1 has 3.25, rank 0 has 3); a Partial value needs its "
      "reduction (a redistribute to Replicate) first");
  assert_string_equal(spmd_rep[3].message, /* dp 1: ranks 2 and 3 */
      "first divergence at op #2 (dt_dtensor_from_local, spmd, claims [S(0), R]): "
      "mesh dim 1 (tp) is Replicate but the ranks' copies differ: max |diff| 0.25 "
      "(element 2: rank 3 has 3.25, rank 2 has 3); a Partial value needs its "
      "reduction (a redistribute to Replicate) first");
}

/* float16 partial sums inside SPMD (as test_finds_divergence): each dp
 * rank's [2048, 1] rounds to 2048 before the partials meet */
static dt_status spmd_f16_sum(dt_spmd_ctx *ctx) {
  int r = ctx->rank;
  double v[2] = {r / 2 ? 1 : 2048, 1};
  dt_tensor *l64 = dt_from_host(v, DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_FLOAT64});
  dt_tensor *l = dt_cast(l64, DT_FLOAT16);
  dt_shadow_begin(1e-4);
  dt_tensor *x = dt_dtensor_from_local(l, m22, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_label_push("reduce");
  dt_tensor *s = dt_sum(x, NULL, 0, false); /* op #2 */
  dt_label_pop();
  dt_shadow_end(&spmd_rep[r]);
  dt_status st = x && s ? DT_OK : dt_last_status();
  dt_tensor *all[] = {l64, l, x, s};
  for (int i = 0; i < 4; i++) dt_tensor_release(all[i]);
  return st;
}

static void test_spmd_op_divergence(void **state) {
  (void)state;
  memset(spmd_rep, 0, sizeof spmd_rep);
  assert_int_equal(dt_spmd_run(rt, spmd_f16_sum, NULL), DT_OK);
  for (int r = 0; r < 4; r++) {
    assert_int_equal(spmd_rep[r].first_divergence, 2);
    /* one device: 2048 + 1 + 1 + 1 = 2051 -> 2052; ranks: 2048 + 2 = 2050 */
    assert_string_equal(spmd_rep[r].message,
        "first divergence at op #2 (dt_sum, reduce, inputs [S(0), R] \u2192 "
        "[P(sum), R]): max |diff| 2 (element 0: distributed 2050, single device 2052)");
  }
}

/* the DP x TP block with correct claims and the reduction: nothing */
static dt_status spmd_correct(dt_spmd_ctx *ctx) {
  int r = ctx->rank, dp = r / 2, tp = r % 2;
  double xv[2 * 4], wv[2 * 4];
  for (int i = 0; i < 8; i++) xv[i] = sin(dp * 8 + i), wv[i] = cos(tp * 8 + i);
  dt_tensor_options o = {.dtype = DT_FLOAT64};
  dt_tensor *xl = dt_from_host(xv, DT_SHAPE(2, 4), &o), *wl = dt_from_host(wv, DT_SHAPE(2, 4), &o);
  dt_shadow_begin(0);
  dt_tensor *x = dt_dtensor_from_local(xl, m22, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_tensor *w = dt_dtensor_from_local(wl, m22, DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  dt_tensor *h = dt_linear(x, w, NULL), *g = dt_relu(h); /* [S(0), S(1)] */
  dt_tensor *s = dt_sum(g, (const int[]){1}, 1, false);  /* [S(0), P(sum)] */
  dt_tensor *sr = dt_redistribute(s, NULL, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_tensor *y = dt_mul(sr, sr);
  dt_shadow_end(&spmd_rep[r]);
  dt_status st = y ? DT_OK : dt_last_status();
  dt_tensor *all[] = {xl, wl, x, w, h, g, s, sr, y};
  for (int i = 0; i < 9; i++) dt_tensor_release(all[i]);
  return st;
}

static void test_spmd_correct_program(void **state) {
  (void)state;
  memset(spmd_rep, 0, sizeof spmd_rep);
  assert_int_equal(dt_spmd_run(rt, spmd_correct, NULL), DT_OK);
  for (int r = 0; r < 4; r++) {
    assert_int_equal(spmd_rep[r].ops_checked, 6);
    assert_int_equal(spmd_rep[r].first_divergence, 0);
    assert_false(spmd_rep[r].failed);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_spmd_wrong_claim),
    cmocka_unit_test(test_spmd_op_divergence),
    cmocka_unit_test(test_spmd_correct_program),
    cmocka_unit_test(test_correct_program),
    cmocka_unit_test(test_finds_divergence),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_threads),
    cmocka_unit_test(test_environment),
  };
  tu_alarm(300);
  return cmocka_run_group_tests(tests, setup, teardown);
}
