/* Public functions from four threads at once and from a future callback
 * (the completion thread), each run checked against the same run on the
 * test's thread: the backward kernels, the fused optimiser kernels, AdamW
 * and clipping, dt_backward_ex, shadow comparison, the communication
 * report and labels; dt_version, dt_runtime_queue_depth and
 * dt_tensor_local_data (the embedding API); dt_clamp_typed on an int
 * tensor with a float bound (the kind decides the dtype), and this
 * thread's redistribution mode (dt_redistribute_mode_set / _get): a mixed
 * Shard(0) + Shard(1) add refused on the strict runtime, run under AUTO;
 * dt_view_shards, valid and refused. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "threads.h"

enum { NV = 14 };
static dt_runtime *rt;
static dt_mesh *mesh;

static double sum_of(dt_tensor *t) {
  dt_tensor *s = t ? dt_sum(t, NULL, 0, false) : NULL;
  dt_tensor *c = s ? dt_cast(s, DT_FLOAT64) : NULL;
  double v = NAN;
  if (!c || dt_to_host(c, &v, sizeof v) != DT_OK) v = NAN;
  TU_RELEASE(s, c);
  return v;
}

/* x (Shard(0)) + x as Shard(1): refused under DEFAULT on this strict
 * runtime, run under AUTO; the mode is this thread's and comes back */
static double typed_and_mode(dt_tensor *x) {
  dt_tensor *x1 = dt_redistribute(x, mesh, DT_PLACEMENTS(DT_SHARD(1)));
  if (!x1 || dt_redistribute_mode_get() != DT_REDISTRIBUTE_DEFAULT) return NAN;
  dt_tensor *no = dt_add(x, x1);
  bool refused = !no && dt_last_status() == DT_ERR_PLACEMENT;
  dt_tensor_release(no);
  if (dt_redistribute_mode_set(DT_REDISTRIBUTE_AUTO) != DT_OK) return NAN;
  dt_tensor *yes = dt_add(x, x1);
  bool back = dt_redistribute_mode_get() == DT_REDISTRIBUTE_AUTO &&
              dt_redistribute_mode_set(DT_REDISTRIBUTE_DEFAULT) == DT_OK &&
              dt_redistribute_mode_get() == DT_REDISTRIBUTE_DEFAULT;
  double v = refused && back ? sum_of(yes) : NAN;
  TU_RELEASE(yes, x1);
  return v;
}

/* an int32 tensor clamped with a FLOAT max is float32, with an INT max
 * int32: 1000 * dtype-check + the clamped sum */
static double clamp_typed(void) {
  int32_t v[6] = {-7, -2, 0, 3, 5, 9};
  dt_tensor *a = dt_from_host(v, DT_SHAPE(6), &(dt_tensor_options){.dtype = DT_INT32, .mesh = mesh});
  dt_tensor *f = a ? dt_clamp_typed(a, -3, DT_SCALAR_INT, 4.5, DT_SCALAR_FLOAT) : NULL;
  dt_tensor *i = a ? dt_clamp_typed(a, -3, DT_SCALAR_INT, 4, DT_SCALAR_INT) : NULL;
  bool kinds = f && i && dt_tensor_dtype(f) == DT_FLOAT32 && dt_tensor_dtype(i) == DT_INT32;
  double r = kinds ? 1000 + sum_of(f) + 100 * sum_of(i) : NAN;
  TU_RELEASE(a, f, i);
  return r;
}

/* x [4, 3] as Shard(0) on 2 ranks viewed as [2, 6] (dt_view_shards: each
 * rank's 6 elements one row): 100 when rank 1's shard is x's last 6
 * values and [3, 4] (rank 0 would hold 8) is refused, + the view's sum */
static double view_shards(dt_tensor *x, const double *xv) {
  dt_tensor *v = dt_view_shards(x, DT_SHAPE(2, 6), DT_PLACEMENTS(DT_SHARD(0)));
  dt_tensor *no = dt_view_shards(x, DT_SHAPE(3, 4), DT_PLACEMENTS(DT_SHARD(0)));
  bool refused = !no && dt_last_status() == DT_ERR_PLACEMENT &&
                 strstr(dt_last_error(), "dt_view_shards") &&
                 strstr(dt_last_error(), "rank 0");
  double loc[6] = {0};
  bool local = v && dt_local_to_host(v, 1, loc, sizeof loc) == DT_OK;
  for (int i = 0; local && i < 6; i++) local = loc[i] == xv[6 + i];
  double r = refused && local ? 100 + sum_of(v) : NAN;
  TU_RELEASE(v, no);
  return r;
}

/* one run: the values it ends with, NV of them (NaN when a call failed) */
static void run(double *out) {
  for (int k = 0; k < NV; k++) out[k] = NAN;
  double xv[12];
  for (int i = 0; i < 12; i++) xv[i] = 0.3 * i - 1.5;
  dt_tensor_options o = {.dtype = DT_FLOAT64, .mesh = mesh,
                         .placements = DT_PLACEMENTS(DT_SHARD(0))};
  dt_tensor *x = dt_from_host(xv, DT_SHAPE(4, 3), &o);
  dt_tensor *idx = dt_from_host((int64_t[]){2, 0, 2}, DT_SHAPE(3),
                                &(dt_tensor_options){.dtype = DT_INT64, .mesh = mesh});
  dt_tensor *t = dt_from_host((int64_t[]){0, 2, 1, 1}, DT_SHAPE(4),
                              &(dt_tensor_options){.dtype = DT_INT64, .mesh = mesh});
  dt_tensor *one = dt_full(DT_SHAPE(), 1, &(dt_tensor_options){.dtype = DT_FLOAT64, .mesh = mesh});
  dt_tensor *xt = dt_transpose(x, 0, 1), *ax = dt_abs(x);
  dt_tensor *r[6] = {
    dt_gelu_backward(x, x), dt_slice_scatter(x, DT_SHAPE(4, 6), 1, 0, 6, 2),
    dt_index_select_backward(x, 1, idx, 4),
    dt_cross_entropy_backward(one, x, t, DT_REDUCTION_MEAN, -100, 0.1),
    dt_adam_moment(xt, xt, 0.9, true), dt_adamw_apply(x, x, ax, 0.1, 1e-3, 0.99),
  };
  for (int k = 0; k < 6; k++) {
    dt_tensor *s = r[k] ? dt_sum(r[k], NULL, 0, false) : NULL;
    dt_tensor *c = s ? dt_cast(s, DT_FLOAT64) : NULL;
    if (!c || dt_to_host(c, &out[k], sizeof out[k]) != DT_OK) out[k] = NAN;
    TU_RELEASE(s, c);
  }
  /* AdamW with clipping, shadowed, reported, labelled */
  dt_tensor *p[1] = {dt_from_host(xv, DT_SHAPE(4, 3), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = mesh, .requires_grad = true})};
  dt_optimizer *opt = dt_adamw_create(p, 1, &(dt_adamw_options){.lr = 0.1});
  char *table = NULL;
  size_t tn;
  FILE *f = open_memstream(&table, &tn);
  bool ok = opt && dt_shadow_begin(0) == DT_OK && dt_comm_debug_begin() == DT_OK;
  dt_label_push("step");
  dt_tensor *y = dt_mul(p[0], x), *l = dt_sum(y, NULL, 0, false);
  dt_label_pop();
  ok = ok && dt_backward_ex(l, &(dt_backward_options){.retain_graph = false}) == DT_OK;
  ok = ok && dt_clip_grad_norm(p, 1, 1.0, &out[6]) == DT_OK;
  ok = ok && dt_optimizer_step(opt) == DT_OK && dt_optimizer_steps(opt) == 1;
  dt_shadow_report rep;
  ok = ok && dt_shadow_end(&rep) == DT_OK && !rep.first_divergence && rep.ops_checked > 0;
  ok = ok && dt_comm_debug_end(f, NULL) == DT_OK;
  fclose(f);
  out[7] = ok ? (double)rep.ops_checked : NAN;
  /* the gradient's gather to p's placement, seen by the report */
  out[8] = ok && table && strstr(table, "all_gather") ? 1 : NAN;
  dt_tensor *ps = dt_sum(p[0], NULL, 0, false);
  double psum = NAN;
  if (ps && dt_to_host(ps, &psum, sizeof psum) == DT_OK) out[8] += psum;
  free(table);
  /* the embedding API: a single-device result's memory read in place */
  dt_tensor *h = dt_arange(0, 8, 1, &(dt_tensor_options){.dtype = DT_FLOAT64});
  dt_tensor *h2 = h ? dt_mul_scalar(h, 0.5) : NULL;
  void *hp = NULL;
  if (h2 && dt_tensor_local_data(h2, &hp) == DT_OK && hp) {
    out[9] = 0;
    for (int i = 0; i < 8; i++) out[9] += ((const double *)hp)[i];
  }
  char ver[32];
  snprintf(ver, sizeof ver, "%d.%d.%d", DT_VERSION_MAJOR, DT_VERSION_MINOR,
           DT_VERSION_PATCH);
  out[10] = !strcmp(dt_version(), ver) && dt_runtime_queue_depth(rt, 0) >= 0 &&
            dt_runtime_queue_depth(rt, 1) >= 0 ? 1 : NAN;
  TU_RELEASE(h, h2);
  out[11] = typed_and_mode(x);
  out[12] = clamp_typed();
  out[13] = view_shards(x, xv);
  dt_optimizer_release(opt);
  TU_RELEASE(ps, p[0], y, l, x, idx, t, one, xt, ax);
  for (int k = 0; k < 6; k++) dt_tensor_release(r[k]);
}

static double want[NV];

static void check(const double *got, const char *who) {
  for (int k = 0; k < NV; k++)
    TU_CHECK(got[k] == want[k], "%s: value %d is %.17g, the test thread's %.17g", who, k,
             got[k], want[k]);
}

static void body(void *arg, int i) {
  (void)arg;
  char who[32];
  snprintf(who, sizeof who, "thread %d", i);
  for (int rep = 0; rep < 3; rep++) {
    double got[NV];
    run(got);
    check(got, who);
  }
}

typedef struct cb_state { _Atomic int done; } cb_state;
static void on_ready(dt_future *f, dt_status st, void *user) {
  (void)f;
  TU_CHECK_TRUE(st == DT_OK);
  double got[NV];
  run(got);
  check(got, "a future callback");
  atomic_store(&((cb_state *)user)->done, 1);
}

static void test_threads_and_callback(void **state) {
  (void)state;
  run(want);
  for (int k = 0; k < NV; k++)
    if (want[k] != want[k]) fail_msg("value %d failed on the test thread: %s", k, dt_last_error());
  /* the two added values against their hand-computed sums: 2x's sum, and
   * the clamp to [-3, 4.5] (-3 -2 0 3 4.5 4.5 = 7) and to [-3, 4] (6) */
  double xs = 0;
  for (int i = 0; i < 12; i++) xs += 2 * (0.3 * i - 1.5);
  if (!(fabs(want[11] - xs) <= 1e-12)) fail_msg("mixed add: %.17g, want %.17g", want[11], xs);
  if (want[12] != 1000 + 7 + 100 * 6) fail_msg("typed clamps: %.17g, want 1607", want[12]);
  if (!(fabs(want[13] - 100 - xs / 2) <= 1e-12))
    fail_msg("shards view: %.17g, want %.17g", want[13], 100 + xs / 2);
  tu_run_threads(4, body, NULL);
  TU_ASSERT_NO_THREAD_FAILURES();
  dt_tensor *a = dt_ones(DT_SHAPE(4), NULL);
  float host[4];
  cb_state s = {0};
  dt_future *f = dt_to_host_async(a, host, sizeof host);
  assert_int_equal(dt_future_then(f, on_ready, &s), DT_OK);
  while (!atomic_load(&s.done)) tu_sleep_ns(100000);
  TU_ASSERT_NO_THREAD_FAILURES();
  dt_future_release(f);
  dt_tensor_release(a);
}

int main(void) {
  rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  mesh = dt_mesh_init(rt, NULL, DT_SHAPE(2), (const char *const[]){"dp"});
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads_and_callback)};
  tu_alarm(300);
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  dt_mesh_release(mesh);
  dt_runtime_destroy(rt);
  return rc;
}
