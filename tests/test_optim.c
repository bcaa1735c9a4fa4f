/* Optimisers: SGD (momentum, nesterov, weight decay) and AdamW
 * against naive double-precision loops of PyTorch's update rules, on
 * single-device parameters and on DTensor parameters whose gradients
 * arrive Partial(sum) (data parallelism: the step all-reduces them);
 * gradient clipping by the global norm; argument errors; slots. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { N = 6, STEPS = 4 };

/* the gradient of sum(p * x_k) at step k is x_k: known in advance */
static double xk(int k, int j) { return sin(1.0 + k * 0.7 + j * 1.3) * (j % 2 ? 2 : 1); }

typedef struct ref_state { double p[N], m[N], v[N]; bool first; } ref_state;

static void ref_sgd(ref_state *r, int k, const dt_sgd_options *o) {
  for (int j = 0; j < N; j++) {
    double g = xk(k, j) + o->weight_decay * r->p[j];
    if (o->momentum) {
      r->m[j] = r->first ? g : o->momentum * r->m[j] + g;
      g = o->nesterov ? g + o->momentum * r->m[j] : r->m[j];
    }
    r->p[j] -= o->lr * g;
  }
  r->first = false;
}

static void ref_adamw(ref_state *r, int k, const dt_adamw_options *o) {
  double t = k + 1;
  for (int j = 0; j < N; j++) {
    double g = xk(k, j);
    r->p[j] *= 1 - o->lr * o->weight_decay;
    r->m[j] = o->beta1 * r->m[j] + (1 - o->beta1) * g;
    r->v[j] = o->beta2 * r->v[j] + (1 - o->beta2) * g * g;
    double mh = r->m[j] / (1 - pow(o->beta1, t)), vh = r->v[j] / (1 - pow(o->beta2, t));
    r->p[j] -= o->lr * mh / (sqrt(vh) + o->eps);
  }
}

typedef struct setup { dt_runtime *rt; dt_mesh *m; } setup;

/* p [N] (Replicate on a 2-rank mesh when m) times a batch x [2, N] whose
 * rows sum to x_k (Shard(0): each rank holds one row, so p's gradient
 * arrives Partial(sum), as data parallelism makes it) */
static void backward_step(dt_tensor *p, dt_mesh *m, int k) {
  double xv[2 * N];
  for (int j = 0; j < N; j++) {
    xv[j] = xk(k, j) / 4;
    xv[N + j] = xk(k, j) * 3 / 4;
  }
  dt_tensor_options o = {.dtype = DT_FLOAT64, .mesh = m,
                         .placements = m ? DT_PLACEMENTS(DT_SHARD(0)) : NULL};
  dt_tensor *x = dt_from_host(xv, DT_SHAPE(2, N), &o);
  dt_tensor *y = dt_mul(p, x), *l = dt_sum(y, NULL, 0, false);
  assert_non_null(l);
  assert_int_equal(dt_backward(l), DT_OK);
  if (m) {
    dt_tensor *g = dt_grad(p);
    assert_int_equal(dt_tensor_placement(g, 0).kind, DT_PLACEMENT_PARTIAL);
    dt_tensor_release(g);
  }
  dt_tensor_release(x);
  dt_tensor_release(y);
  dt_tensor_release(l);
}

static void check_param(dt_tensor *p, const ref_state *r, const char *what) {
  double *v = tu_values(p);
  for (int j = 0; j < N; j++)
    if (fabs(v[j] - r->p[j]) > 1e-12 * (1 + fabs(r->p[j])))
      fail_msg("%s: p[%d] = %.15g, reference %.15g", what, j, v[j], r->p[j]);
  free(v);
}

static dt_tensor *initial(dt_mesh *m, ref_state *r) {
  double pv[N];
  for (int j = 0; j < N; j++) pv[j] = r->p[j] = 0.5 - 0.3 * j;
  r->first = true;
  dt_tensor_options o = {.dtype = DT_FLOAT64, .mesh = m, .requires_grad = true};
  return dt_from_host(pv, DT_SHAPE(N), &o);
}

static void run_sgd(dt_mesh *m, const dt_sgd_options *so, const char *what) {
  ref_state r = {0};
  dt_tensor *slots[1] = {initial(m, &r)};
  dt_optimizer *opt = dt_sgd_create(slots, 1, so);
  assert_non_null(opt);
  for (int k = 0; k < STEPS; k++) {
    backward_step(slots[0], m, k);
    dt_tensor *before = slots[0];
    assert_int_equal(dt_optimizer_step(opt), DT_OK);
    assert_ptr_not_equal(slots[0], before); /* a fresh leaf in the slot */
    assert_true(dt_tensor_requires_grad(slots[0]));
    assert_null(dt_tensor_grad_fn(slots[0]));
    ref_sgd(&r, k, so);
    check_param(slots[0], &r, what);
  }
  assert_int_equal(dt_optimizer_steps(opt), STEPS);
  dt_optimizer_release(opt);
  dt_tensor_release(slots[0]);
}

static void run_adamw(dt_mesh *m, const dt_adamw_options *ao, const char *what) {
  ref_state r = {0};
  dt_tensor *slots[1] = {initial(m, &r)};
  dt_optimizer *opt = dt_adamw_create(slots, 1, ao);
  assert_non_null(opt);
  for (int k = 0; k < STEPS; k++) {
    backward_step(slots[0], m, k);
    assert_int_equal(dt_optimizer_step(opt), DT_OK);
    ref_adamw(&r, k, ao);
    check_param(slots[0], &r, what);
  }
  dt_optimizer_release(opt);
  dt_tensor_release(slots[0]);
}

static void test_updates(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  dt_mesh *mesh = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  dt_mesh *meshes[2] = {NULL, mesh};
  const dt_sgd_options sgds[] = {
    {.lr = 0.1}, {.lr = 0.05, .momentum = 0.9},
    {.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01},
  };
  const dt_adamw_options adam = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999,
                                 .eps = 1e-8, .weight_decay = 0.01};
  for (int mi = 0; mi < 2; mi++) {
    for (int s = 0; s < 3; s++) run_sgd(meshes[mi], &sgds[s], mi ? "sgd on a mesh" : "sgd");
    run_adamw(meshes[mi], &adam, mi ? "adamw on a mesh" : "adamw");
  }
  dt_mesh_release(mesh);
  dt_runtime_destroy(rt);
}

static void test_clip(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  ref_state r = {0};
  dt_tensor *p[2] = {initial(m, &r), initial(NULL, &r)};
  backward_step(p[0], m, 0);
  backward_step(p[1], NULL, 1);
  double want = 0, got = 0;
  for (int j = 0; j < N; j++) want += xk(0, j) * xk(0, j) + xk(1, j) * xk(1, j);
  want = sqrt(want);
  assert_int_equal(dt_clip_grad_norm(p, 2, 1.0, &got), DT_OK);
  assert_true(fabs(got - want) < 1e-12 * want);
  /* clipped: the norm is now 1 (to 1e-6) and the direction kept */
  double after = 0;
  assert_int_equal(dt_clip_grad_norm(p, 2, 100.0, &after), DT_OK);
  assert_true(fabs(after - 1.0) < 1e-5);
  dt_tensor *g0 = dt_grad(p[0]);
  double *v = tu_values(g0);
  for (int j = 0; j < N; j++) assert_true(fabs(v[j] - xk(0, j) / want) < 1e-6);
  free(v);
  dt_tensor_release(g0);
  dt_tensor_release(p[0]);
  dt_tensor_release(p[1]);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

static void test_errors(void **state) {
  (void)state;
  dt_tensor *x = dt_ones(DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_FLOAT32});
  dt_tensor *slots[1] = {x};
  assert_null(dt_sgd_create(slots, 1, &(dt_sgd_options){.lr = 0.1}));
  assert_string_equal(dt_last_error(), "dt_sgd_create: params[0] must be a leaf that "
                      "requires grad");
  assert_int_equal(dt_tensor_set_requires_grad(x, true), DT_OK);
  assert_null(dt_sgd_create(slots, 1, &(dt_sgd_options){.lr = -1}));
  assert_string_equal(dt_last_error(), "dt_sgd_create: options.lr must be finite "
                      "and > 0, got -1");
  assert_null(dt_adamw_create(slots, 1, &(dt_adamw_options){.beta1 = 1.5}));
  assert_non_null(strstr(dt_last_error(), "beta1 1.5"));
  assert_null(dt_adamw_create(slots, 0, NULL));
  assert_int_equal(dt_clip_grad_norm(slots, 1, 0, NULL), DT_ERR_INVALID_ARGUMENT);
  /* defaults; a step without gradients leaves the slot alone */
  dt_optimizer *o = dt_adamw_create(slots, 1, NULL);
  assert_non_null(o);
  assert_int_equal(dt_optimizer_step(o), DT_OK);
  assert_ptr_equal(slots[0], x);
  assert_int_equal(dt_optimizer_step(NULL), DT_ERR_INVALID_ARGUMENT);
  dt_optimizer_release(o);
  dt_optimizer_release(NULL);
  dt_tensor_release(x);
  dt_runtime_synchronize(dt_runtime_default());
  assert_int_equal(dt_autograd_live_nodes(), 0);
}

/* the fused kernels against double loops: float32 and float64, strided
 * (a transposed view) and contiguous inputs, both moment forms */
static void test_fused_kernels(void **state) {
  (void)state;
  enum { R = 37, C = 29, NE = R * C };
  static double a[NE], b[NE], c[NE], bt[NE];
  for (int i = 0; i < NE; i++) {
    a[i] = sin(i * 0.37);
    b[i] = cos(i * 0.11) * 2;
    c[i] = 0.5 + (i % 7) * 0.25;
  }
  for (int r = 0; r < R; r++)
    for (int q = 0; q < C; q++) bt[q * R + r] = b[r * C + q];
  dt_dtype dts[2] = {DT_FLOAT32, DT_FLOAT64};
  for (int k = 0; k < 2; k++) {
    double tol = dts[k] == DT_FLOAT32 ? 2e-6 : 1e-14;
    dt_tensor *ta = tu_tensor(a, DT_SHAPE(R, C), dts[k]), *tb = tu_tensor(b, DT_SHAPE(R, C), dts[k]);
    dt_tensor *tc = tu_tensor(c, DT_SHAPE(R, C), dts[k]);
    dt_tensor *tT = tu_tensor(bt, DT_SHAPE(C, R), dts[k]);
    dt_tensor *tbt = dt_transpose(tT, 0, 1); /* b as a strided view */
    for (int sq = 0; sq < 2; sq++) {
      dt_tensor *m = dt_adam_moment(ta, tbt, 0.8, sq);
      double *v = tu_values(m);
      for (int i = 0; i < NE; i++) {
        double want = 0.8 * a[i] + 0.2 * (sq ? b[i] * b[i] : b[i]);
        if (fabs(v[i] - want) > tol * (1 + fabs(want)))
          fail_msg("adam_moment %s sq=%d [%d]: %.9g, want %.9g", dt_dtype_name(dts[k]), sq, i, v[i], want);
      }
      free(v);
      dt_tensor_release(m);
    }
    dt_tensor *u = dt_adamw_apply(ta, tb, tc, 0.01, 1e-3, 0.99);
    double *v = tu_values(u);
    for (int i = 0; i < NE; i++) {
      double want = 0.99 * a[i] - 0.01 * b[i] / (sqrt(c[i]) + 1e-3);
      if (fabs(v[i] - want) > tol * (1 + fabs(want)))
        fail_msg("adamw_apply %s [%d]: %.9g, want %.9g", dt_dtype_name(dts[k]), i, v[i], want);
    }
    free(v);
    TU_RELEASE(u, ta, tb, tc, tbt, tT);
  }
  dt_tensor *x = dt_ones(DT_SHAPE(3), NULL), *y = dt_ones(DT_SHAPE(4), NULL);
  tu_expect_error(dt_adam_moment(x, y, 0.9, false), DT_ERR_SHAPE,
                  "dt_adam_moment: x has shape [4], buf [3] (they must match)", NULL);
  tu_expect_error(dt_adamw_apply(x, x, x, NAN, 0, 1), DT_ERR_INVALID_ARGUMENT,
                  "dt_adamw_apply: step must be finite, got nan", NULL);
  dt_tensor *i = dt_zeros(DT_SHAPE(3), &(dt_tensor_options){.dtype = DT_INT64});
  tu_expect_error(dt_adam_moment(i, x, 0.9, false), DT_ERR_DTYPE,
                  "dt_adam_moment: buf must have a floating dtype, got int64", NULL);
  TU_RELEASE(x, y, i);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_updates),
    cmocka_unit_test(test_clip),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_fused_kernels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
