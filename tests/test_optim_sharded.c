/* The data-parallel optimizer step sharded over the replicas (api/optim.c,
 * "ZeRO stage 1"): on a dp 2 x tp 2 mesh, a weight [8, 6] laid out
 * [Replicate, Shard(0)] and a bias [8] [Replicate, Shard(0)] whose
 * gradients arrive Partial(sum) on dp. Checked:
 * - AdamW and SGD with momentum over several steps equal a naive double
 *   loop of PyTorch's update on the full tensors, and the sharded run is
 *   bit for bit the replicated one (DTORCH_SHARDED_OPTIMIZER=0);
 * - the weight's step moves a reduce-scatter and an all-gather, no
 *   all-reduce; the bias (no unsharded dim) takes the all-reduce;
 * - the slots hold fresh leaves with the parameters' placements;
 * - switching the path between steps keeps the state (the buffers move
 *   to the other layout);
 * - the size threshold (8 KiB per replica's shard by default,
 *   DTORCH_SHARDED_OPTIMIZER = 0 / 1 / bytes). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "threads.h"

enum { R = 8, C = 6, STEPS = 3 };

/* the gradient of sum(w * x_k) at step k, summed over the batch rows */
static double xk(int k, int i) { return cos(0.3 + 0.9 * k + 0.37 * i) * (1 + i % 3); }

typedef struct ref { double p[R * C], m[R * C], v[R * C]; } ref;

static void ref_adamw(ref *r, int n, int k, const dt_adamw_options *o) {
  double t = k + 1;
  for (int j = 0; j < n; j++) {
    double g = xk(k, j);
    r->p[j] *= 1 - o->lr * o->weight_decay;
    r->m[j] = o->beta1 * r->m[j] + (1 - o->beta1) * g;
    r->v[j] = o->beta2 * r->v[j] + (1 - o->beta2) * g * g;
    double mh = r->m[j] / (1 - pow(o->beta1, t)), vh = r->v[j] / (1 - pow(o->beta2, t));
    r->p[j] -= o->lr * mh / (sqrt(vh) + o->eps);
  }
}

static void ref_sgd(ref *r, int n, int k, const dt_sgd_options *o) {
  for (int j = 0; j < n; j++) {
    double g = xk(k, j);
    r->m[j] = k == 0 ? g : o->momentum * r->m[j] + g;
    r->p[j] -= o->lr * r->m[j];
  }
}

typedef struct job { dt_runtime *rt; dt_mesh *m; } job;
typedef struct dt_counts_pair { int64_t ar, rs; } dt_counts_pair;

static dt_tensor *param(job *j, dt_shape s, ref *r) {
  int64_t n = 1;
  for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
  double v[R * C];
  for (int i = 0; i < n; i++) v[i] = r->p[i] = 0.25 - 0.05 * i;
  return dt_from_host(v, s, &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = j->m, .requires_grad = true,
      .placements = DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0))});
}

/* backward of sum(p * x) with x's batch of 2 rows Shard(0) on dp (a
 * quarter and three quarters of x_k): p's gradient is Partial(sum) on dp */
static void backward(job *j, dt_tensor *p, int k) {
  dt_shape s = dt_tensor_shape(p);
  int64_t n = 1;
  for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
  dt_shape bs = {.ndim = s.ndim + 1};
  bs.dims[0] = 2;
  memcpy(bs.dims + 1, s.dims, sizeof(int64_t) * (size_t)s.ndim);
  double xv[2 * R * C];
  for (int i = 0; i < n; i++) {
    xv[i] = xk(k, i) / 4;
    xv[n + i] = xk(k, i) * 3 / 4;
  }
  dt_tensor *x = dt_from_host(xv, bs, &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = j->m,
      .placements = DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1))});
  dt_tensor *y = dt_mul(x, p), *l = dt_sum(y, NULL, 0, false);
  assert_non_null(l);
  assert_int_equal(dt_backward(l), DT_OK);
  dt_tensor *g = dt_grad(p);
  assert_int_equal(dt_tensor_placement(g, 0).kind, DT_PLACEMENT_PARTIAL);
  TU_RELEASE(g, x, y, l);
}

static void check(dt_tensor *p, const ref *r, int n, const char *what, int k) {
  double *v = tu_values(p);
  for (int i = 0; i < n; i++)
    if (fabs(v[i] - r->p[i]) > 1e-12 * (1 + fabs(r->p[i])))
      fail_msg("%s step %d: p[%d] = %.17g, reference %.17g", what, k, i, v[i], r->p[i]);
  free(v);
}

/* on: always (the test's shards are far below the default 8 KiB) */
static void set_sharded(bool on) { setenv("DTORCH_SHARDED_OPTIMIZER", on ? "1" : "0", 1); }

/* STEPS steps of AdamW (or SGD) on the weight and the bias; out: the
 * final values; path[k]: the step's layout (true = sharded) */
static void run(job *j, bool adamw, const bool *path, double *out, bool count) {
  const dt_adamw_options ao = {.lr = 0.02, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8,
                               .weight_decay = 0.01};
  const dt_sgd_options so = {.lr = 0.05, .momentum = 0.9};
  ref rw = {{0}}, rb = {{0}};
  dt_tensor *slots[2] = {param(j, DT_SHAPE(R, C), &rw), param(j, DT_SHAPE(R), &rb)};
  dt_optimizer *opt = adamw ? dt_adamw_create(slots, 2, &ao) : dt_sgd_create(slots, 2, &so);
  assert_non_null(opt);
  const char *what = adamw ? "adamw" : "sgd";
  for (int k = 0; k < STEPS; k++) {
    backward(j, slots[0], k);
    backward(j, slots[1], k);
    set_sharded(path[k]);
    if (count) dt_comm_count_begin();
    assert_int_equal(dt_optimizer_step(opt), DT_OK);
    if (count) {
      dt_comm_counts c = dt_comm_count_end();
      /* sharded: the weight's reduce-scatter + all-gather, the bias's
       * all-reduce; replicated: two all-reduces */
      if (path[k]) {
        TU_CHECK(c.reduce_scatter == 1 && c.all_gather == 1 && c.all_reduce == 1,
                 "%s step %d: rs %lld ag %lld ar %lld", what, k, (long long)c.reduce_scatter,
                 (long long)c.all_gather, (long long)c.all_reduce);
      } else {
        TU_CHECK(c.all_reduce == 2 && c.reduce_scatter == 0 && c.all_gather == 0,
                 "%s step %d (replicated): ar %lld rs %lld ag %lld", what, k,
                 (long long)c.all_reduce, (long long)c.reduce_scatter, (long long)c.all_gather);
      }
    }
    if (adamw) {
      ref_adamw(&rw, R * C, k, &ao);
      ref_adamw(&rb, R, k, &ao);
    } else {
      ref_sgd(&rw, R * C, k, &so);
      ref_sgd(&rb, R, k, &so);
    }
    check(slots[0], &rw, R * C, what, k);
    check(slots[1], &rb, R, what, k);
    dt_tensor *g = dt_grad(slots[0]);
    TU_CHECK(g == NULL, "%s step %d: the new leaf has a gradient", what, k);
    dt_tensor_release(g);
    dt_optimizer_zero_grad(opt);
  }
  /* the slots keep the parameters' placements */
  dt_placement p1 = dt_tensor_placement(slots[0], 1);
  TU_CHECK(dt_tensor_placement(slots[0], 0).kind == DT_PLACEMENT_REPLICATE &&
           p1.kind == DT_PLACEMENT_SHARD && p1.dim == 0, "%s: placements changed", what);
  double *w = tu_values(slots[0]), *b = tu_values(slots[1]);
  memcpy(out, w, sizeof(double) * R * C);
  memcpy(out + R * C, b, sizeof(double) * R);
  free(w);
  free(b);
  dt_optimizer_release(opt);
  TU_RELEASE(slots[0], slots[1]);
  unsetenv("DTORCH_SHARDED_OPTIMIZER");
  TU_ASSERT_NO_THREAD_FAILURES();
}

static void test_sharded_equals_replicated_and_reference(void **state) {
  job *j = *state;
  const bool sharded[STEPS] = {true, true, true}, replicated[STEPS] = {false, false, false};
  for (int adamw = 0; adamw < 2; adamw++) {
    double a[R * C + R], b[R * C + R];
    run(j, adamw, sharded, a, true);
    run(j, adamw, replicated, b, true);
    for (int i = 0; i < R * C + R; i++)
      if (memcmp(&a[i], &b[i], sizeof a[i]))
        fail_msg("%s: value %d sharded %.17g, replicated %.17g", adamw ? "adamw" : "sgd",
                 i, a[i], b[i]);
  }
}

static void test_switching_path_keeps_state(void **state) {
  job *j = *state;
  const bool mixed[STEPS] = {true, false, true}, other[STEPS] = {false, true, false};
  double a[R * C + R], b[R * C + R];
  for (int adamw = 0; adamw < 2; adamw++) {
    run(j, adamw, mixed, a, false);
    run(j, adamw, other, b, false); /* both also match the reference inside */
    for (int i = 0; i < R * C + R; i++)
      if (memcmp(&a[i], &b[i], sizeof a[i]))
        fail_msg("value %d: %.17g vs %.17g", i, a[i], b[i]);
  }
}

/* by default only shards of 8 KiB or more per replica take the sharded
 * step: a [256, 64] float64 weight (64 KiB per replica on dp 2 x tp 2)
 * does, a [64, 32] one (4 KiB) all-reduces; a threshold in bytes moves it */
static dt_counts_pair step_counts(job *j, int64_t rows, int64_t cols) {
  double *v = calloc((size_t)(rows * cols * 2), sizeof *v);
  assert_non_null(v);
  dt_tensor *w = dt_from_host(v, DT_SHAPE(rows, cols), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = j->m, .requires_grad = true,
      .placements = DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0))});
  dt_tensor *x = dt_from_host(v, DT_SHAPE(2, rows, cols), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = j->m,
      .placements = DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1))});
  dt_tensor *y = dt_mul(x, w), *l = dt_sum(y, NULL, 0, false);
  assert_int_equal(dt_backward(l), DT_OK);
  dt_tensor *slots[1] = {w};
  dt_optimizer *opt = dt_sgd_create(slots, 1, &(dt_sgd_options){.lr = 0.1});
  dt_comm_count_begin();
  assert_int_equal(dt_optimizer_step(opt), DT_OK);
  dt_comm_counts c = dt_comm_count_end();
  dt_optimizer_release(opt);
  TU_RELEASE(slots[0], x, y, l);
  free(v);
  return (dt_counts_pair){c.all_reduce, c.reduce_scatter};
}

static void test_threshold(void **state) {
  job *j = *state;
  unsetenv("DTORCH_SHARDED_OPTIMIZER");
  dt_counts_pair big = step_counts(j, 256, 64), small = step_counts(j, 64, 32);
  assert_true(big.ar == 0 && big.rs == 1);
  assert_true(small.ar == 1 && small.rs == 0);
  setenv("DTORCH_SHARDED_OPTIMIZER", "4096", 1); /* 4 KiB: the small one now */
  small = step_counts(j, 64, 32);
  assert_true(small.ar == 0 && small.rs == 1);
  setenv("DTORCH_SHARDED_OPTIMIZER", "0", 1); /* off: the big one all-reduces */
  big = step_counts(j, 256, 64);
  assert_true(big.ar == 1 && big.rs == 0);
  unsetenv("DTORCH_SHARDED_OPTIMIZER");
}

static int setup(void **state) {
  static job j;
  j.rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  j.m = dt_mesh_init(j.rt, "cpu", DT_SHAPE(2, 2), (const char *[]){"dp", "tp"});
  *state = &j;
  return j.rt && j.m ? 0 : -1;
}

static int teardown(void **state) {
  job *j = *state;
  dt_mesh_release(j->m);
  dt_runtime_destroy(j->rt);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_sharded_equals_replicated_and_reference),
    cmocka_unit_test(test_switching_path_keeps_state),
    cmocka_unit_test(test_threshold),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
