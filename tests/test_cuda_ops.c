/* The CUDA backend against the CPU backend on the same inputs (label gpu):
 * every op with a CUDA binding (the op list's cuda column) runs on a
 * "cuda" runtime and on a CPU runtime, and the results must agree
 * (bitwise where both compute the same IEEE operations in the same order,
 * within rounding elsewhere).
 * Also: the Philox stream gives the same dt_rand values on both, per-rank
 * out-of-memory with DTORCH_DEVICE_MEMORY, and N ranks on one GPU.
 * Exits 77 (skip) where no "cuda" runtime can be made: no CUDA build, no
 * driver or no GPU; the reason is printed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtorch/dtorch.h"
#if DTORCH_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

static dt_runtime *gpu_rt, *cpu_rt;
/* DTORCH_CUDA_EMULATE=1 (runtime/backend_emu.c): the op tests run through
 * the host fallback on host memory (their logic, in every build); the
 * tests of CUDA itself skip */
static bool emulated;

typedef dt_tensor *(*build_fn)(dt_tensor *const *in);

/* deterministic inputs in [-2, 2] (away from 0 for div / log) */
static void fill(float *x, int64_t n, unsigned seed, bool positive) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    float v = (float)((seed >> 8) & 0xFFFF) / 65536.0f * 4.0f - 2.0f;
    x[i] = positive ? fabsf(v) + 0.25f : v;
  }
}

/* runs build on rt with inputs made from host data; fetches out */
static void run_on(dt_runtime *rt, build_fn build, int nin, float *const *data,
                   const dt_shape *shapes, float *out, size_t out_bytes) {
  assert_int_equal(dt_runtime_set_current(rt), DT_OK);
  dt_tensor *in[4] = {0};
  for (int i = 0; i < nin; i++) {
    in[i] = dt_from_host(data[i], shapes[i], NULL);
    assert_non_null(in[i]);
  }
  dt_tensor *y = build(in);
  if (!y) fail_msg("%s", dt_last_error());
  assert_int_equal(dt_to_host(y, out, out_bytes), DT_OK);
  dt_tensor_release(y);
  for (int i = 0; i < nin; i++) dt_tensor_release(in[i]);
  dt_runtime_set_current(NULL);
}

/* the CUDA result against the CPU one: |g - c| <= tol * (1 + |c|) */
static void compare(build_fn build, int nin, const dt_shape *shapes,
                    int64_t nout, double tol, bool positive, const char *what) {
  float *data[4];
  for (int i = 0; i < nin; i++) {
    int64_t n = 1;
    for (int d = 0; d < shapes[i].ndim; d++) n *= shapes[i].dims[d];
    data[i] = malloc(sizeof(float) * (size_t)n);
    fill(data[i], n, 17u + (unsigned)i, positive);
  }
  float *g = malloc(sizeof(float) * (size_t)nout),
        *c = malloc(sizeof(float) * (size_t)nout);
  run_on(gpu_rt, build, nin, data, shapes, g, sizeof(float) * (size_t)nout);
  run_on(cpu_rt, build, nin, data, shapes, c, sizeof(float) * (size_t)nout);
  for (int64_t i = 0; i < nout; i++)
    if (!(fabs((double)g[i] - c[i]) <= tol * (1 + fabs(c[i]))))
      fail_msg("%s: element %lld: cuda %.9g, cpu %.9g", what, (long long)i,
               g[i], c[i]);
  free(g);
  free(c);
  for (int i = 0; i < nin; i++) free(data[i]);
}

static dt_tensor *b_add(dt_tensor *const *x) { return dt_add(x[0], x[1]); }
static dt_tensor *b_sub(dt_tensor *const *x) { return dt_sub(x[0], x[1]); }
static dt_tensor *b_mul(dt_tensor *const *x) { return dt_mul(x[0], x[1]); }
static dt_tensor *b_div(dt_tensor *const *x) { return dt_div(x[0], x[1]); }
static dt_tensor *b_max(dt_tensor *const *x) { return dt_maximum(x[0], x[1]); }

static void binary_ops(void **state) {
  (void)state;
  /* dense (vectorised path, odd tail) and broadcast (generic path) */
  dt_shape dense[2] = {DT_SHAPE(37, 129), DT_SHAPE(37, 129)};
  dt_shape bcast[2] = {DT_SHAPE(8, 1, 33), DT_SHAPE(5, 1)};
  build_fn fns[] = {b_add, b_sub, b_mul, b_div, b_max};
  const char *names[] = {"add", "sub", "mul", "div", "maximum"};
  for (int i = 0; i < 5; i++) {
    compare(fns[i], 2, dense, 37 * 129, 0, true, names[i]);
    compare(fns[i], 2, bcast, 8 * 5 * 33, 0, true, names[i]);
  }
}

static dt_tensor *u_neg(dt_tensor *const *x) { return dt_neg(x[0]); }
static dt_tensor *u_exp(dt_tensor *const *x) { return dt_exp(x[0]); }
static dt_tensor *u_log(dt_tensor *const *x) { return dt_log(x[0]); }
static dt_tensor *u_sqrt(dt_tensor *const *x) { return dt_sqrt(x[0]); }
static dt_tensor *u_tanh(dt_tensor *const *x) { return dt_tanh(x[0]); }
static dt_tensor *u_sigmoid(dt_tensor *const *x) { return dt_sigmoid(x[0]); }
static dt_tensor *u_relu(dt_tensor *const *x) { return dt_relu(x[0]); }
static dt_tensor *u_silu(dt_tensor *const *x) { return dt_silu(x[0]); }
static dt_tensor *u_gelu(dt_tensor *const *x) { return dt_gelu(x[0]); }
static dt_tensor *s_add(dt_tensor *const *x) { return dt_add_scalar(x[0], 1.5); }
static dt_tensor *s_mul(dt_tensor *const *x) { return dt_mul_scalar(x[0], -3); }

static void unary_ops(void **state) {
  (void)state;
  dt_shape s[1] = {DT_SHAPE(3, 1000)};
  build_fn fns[] = {u_neg, u_exp, u_log, u_sqrt, u_tanh, u_sigmoid, u_relu,
                    u_silu, u_gelu, s_add, s_mul};
  const char *names[] = {"neg", "exp", "log", "sqrt", "tanh", "sigmoid",
                         "relu", "silu", "gelu", "add_scalar", "mul_scalar"};
  for (int i = 0; i < 11; i++) /* libm vs CUDA math: a few ulp */
    compare(fns[i], 1, s, 3000, 4e-7, i == 2 || i == 3, names[i]);
}

static dt_tensor *u_abs(dt_tensor *const *x) { return dt_abs(x[0]); }
static dt_tensor *u_rsqrt(dt_tensor *const *x) { return dt_rsqrt(x[0]); }
static dt_tensor *u_sin(dt_tensor *const *x) { return dt_sin(x[0]); }
static dt_tensor *u_cos(dt_tensor *const *x) { return dt_cos(x[0]); }
static dt_tensor *u_gelu_tanh(dt_tensor *const *x) { return dt_gelu_tanh(x[0]); }
static dt_tensor *s_div(dt_tensor *const *x) { return dt_div_scalar(x[0], 3); }
static dt_tensor *b_gelu_bw(dt_tensor *const *x) {
  return dt_gelu_backward(x[0], x[1]);
}
/* bool results as float32 (0 / 1) for the comparison */
static dt_tensor *as_float(dt_tensor *b) {
  dt_tensor *f = b ? dt_cast(b, DT_FLOAT32) : NULL;
  dt_tensor_release(b);
  return f;
}
static dt_tensor *b_lt(dt_tensor *const *x) { return as_float(dt_lt(x[0], x[1])); }
static dt_tensor *b_eq(dt_tensor *const *x) {
  return as_float(dt_eq(x[0], x[0]));
}
static dt_tensor *t_where(dt_tensor *const *x) {
  dt_tensor *c = dt_gt(x[0], x[1]);
  dt_tensor *y = c ? dt_where(c, x[0], x[1]) : NULL;
  dt_tensor_release(c);
  return y;
}
static dt_tensor *o_moment(dt_tensor *const *x) {
  return dt_adam_moment(x[0], x[1], 0.9, true);
}
static dt_tensor *o_apply(dt_tensor *const *x) {
  return dt_adamw_apply(x[0], x[1], x[2], 1e-3, 1e-8, 0.99);
}
static dt_tensor *u_clamp(dt_tensor *const *x) {
  return dt_clamp(x[0], -0.5, 0.7);
}
static dt_tensor *t_masked_fill(dt_tensor *const *x) {
  dt_tensor *m = dt_gt(x[0], x[1]);
  dt_tensor *y = m ? dt_masked_fill(x[0], m, -1.5) : NULL;
  dt_tensor_release(m);
  return y;
}
static dt_tensor *j_stack(dt_tensor *const *x) {
  dt_tensor *p[3] = {x[0], x[1], x[0]};
  return dt_stack(p, 3, 1);
}
static dt_tensor *r_var(dt_tensor *const *x) {
  int d[1] = {1};
  return dt_var(x[0], d, 1, true, false);
}
static dt_tensor *r_argmax(dt_tensor *const *x) {
  int d[1] = {0};
  return as_float(dt_argmax(x[0], d, 1, false));
}
static dt_tensor *r_argmin(dt_tensor *const *x) {
  return as_float(dt_argmin(x[0], NULL, 0, false));
}
static dt_tensor *g_logic(dt_tensor *const *x) {
  dt_tensor *a = dt_gt(x[0], x[1]), *b = dt_lt(x[0], x[1]);
  dt_tensor *and_ = a && b ? dt_logical_and(a, x[0]) : NULL; /* bool, float */
  dt_tensor *or_ = a && b ? dt_logical_or(a, b) : NULL;
  dt_tensor *not_ = or_ ? dt_logical_not(or_) : NULL;
  dt_tensor *y = and_ && not_ ? dt_logical_or(and_, not_) : NULL;
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_tensor_release(and_);
  dt_tensor_release(or_);
  dt_tensor_release(not_);
  return as_float(y);
}
static dt_tensor *g_scatter(dt_tensor *const *x) { /* rows 1, 4, 7, ... */
  return dt_slice_scatter(x[0], DT_SHAPE(3, 3000), 1, 1, 3000, 3);
}
static dt_tensor *g_arange(dt_tensor *const *x) {
  (void)x;
  return dt_arange(-3.5, 250, 0.25, NULL);
}
static dt_tensor *index_of(const int64_t *v, int64_t n, dt_dtype d) {
  int32_t v32[64];
  for (int64_t i = 0; i < n && i < 64; i++) v32[i] = (int32_t)v[i];
  dt_tensor_options o = {.dtype = d};
  return dt_from_host(d == DT_INT64 ? (const void *)v : (const void *)v32,
                      DT_SHAPE(n), &o);
}
static dt_tensor *x_embedding(dt_tensor *const *x) { /* x[0]: [40, 50] */
  static const int64_t ix[6] = {39, 0, 7, 7, 21, 3};
  dt_tensor *i = index_of(ix, 6, DT_INT32);
  dt_tensor *y = i ? dt_embedding(i, x[0]) : NULL;
  dt_tensor_release(i);
  return y;
}
static dt_tensor *x_index_select(dt_tensor *const *x) {
  static const int64_t ix[5] = {49, 0, 11, 11, 2};
  dt_tensor *i = index_of(ix, 5, DT_INT64);
  dt_tensor *t = dt_transpose(x[0], 0, 1); /* a strided input */
  dt_tensor *y = i && t ? dt_index_select(t, 0, i) : NULL;
  dt_tensor_release(i);
  dt_tensor_release(t);
  return y;
}
/* a bad index: the same error (message included) as the CPU */
static void bad_index_same_error(void) {
  static const int64_t ix[3] = {1, 40, 2};
  char msg[2][512];
  for (int k = 0; k < 2; k++) {
    dt_runtime_set_current(k ? cpu_rt : gpu_rt);
    dt_tensor *w = dt_zeros(DT_SHAPE(40, 8), NULL);
    dt_tensor *i = index_of(ix, 3, DT_INT64);
    dt_tensor *y = dt_embedding(i, w);
    float out[24];
    dt_status st = y ? dt_to_host(y, out, sizeof out) : dt_last_status();
    assert_int_equal(st, DT_ERR_INVALID_ARGUMENT);
    snprintf(msg[k], sizeof msg[k], "%s", dt_last_error());
    dt_tensor_release(y);
    dt_tensor_release(i);
    dt_tensor_release(w);
  }
  dt_runtime_set_current(NULL);
  assert_string_equal(msg[0], msg[1]);
  assert_non_null(strstr(msg[0], "index 40 (position 1"));
}
static dt_tensor *b_pow(dt_tensor *const *x) { return dt_pow(x[0], x[1]); }
static dt_tensor *b_floordiv(dt_tensor *const *x) {
  return dt_floor_divide(x[0], x[1]);
}
static dt_tensor *b_rem(dt_tensor *const *x) { return dt_remainder(x[0], x[1]); }
static dt_tensor *s_pow(dt_tensor *const *x) { return dt_pow_scalar(x[0], 2.5); }
static dt_tensor *s_floordiv(dt_tensor *const *x) {
  return dt_floor_divide_scalar(x[0], -0.7);
}
static dt_tensor *s_rem(dt_tensor *const *x) {
  return dt_remainder_scalar(x[0], 0.3);
}
/* cross_entropy of [40, 50] logits: mean with an ignored target and
 * smoothing, sum, and per-position losses */
static dt_tensor *ce_target(void) {
  int64_t v[16];
  for (int i = 0; i < 16; i++) v[i] = (i * 7) % 50;
  v[3] = -100;
  dt_tensor *t16 = index_of(v, 16, DT_INT64), *t = NULL;
  if (t16) { /* 40 targets: the 16 repeated */
    dt_tensor *p[3] = {t16, t16, t16};
    dt_tensor *c48 = dt_cat(p, 3, 0);
    t = c48 ? dt_slice(c48, 0, 0, 40, 1) : NULL;
    dt_tensor_release(c48);
  }
  dt_tensor_release(t16);
  return t;
}
static dt_tensor *ce_with(dt_tensor *x, dt_reduction r, double eps) {
  dt_tensor *t = ce_target();
  dt_tensor *y = t ? dt_cross_entropy_smoothed(x, t, r, -100, eps) : NULL;
  dt_tensor_release(t);
  return y;
}
static dt_tensor *x_ce_mean(dt_tensor *const *x) {
  return ce_with(x[0], DT_REDUCTION_MEAN, 0.1);
}
static dt_tensor *x_ce_sum(dt_tensor *const *x) {
  return ce_with(x[0], DT_REDUCTION_SUM, 0);
}
static dt_tensor *x_ce_none(dt_tensor *const *x) {
  return ce_with(x[0], DT_REDUCTION_NONE, 0);
}
/* index_select's backward: many duplicates, added in index order (the
 * CPU's bits, whatever the order threads run) */
static dt_tensor *g_isel_bw(dt_tensor *const *x, int dim, int64_t n,
                            int64_t size, dt_dtype idt) {
  int64_t v[64];
  for (int64_t i = 0; i < n; i++) v[i] = (i * 5 + i / 3) % size;
  dt_tensor *i = index_of(v, n, idt);
  dt_tensor *y = i ? dt_index_select_backward(x[0], dim, i, size) : NULL;
  dt_tensor_release(i);
  return y;
}
static dt_tensor *g_isel_bw0(dt_tensor *const *x) { /* [40, 50] -> [7, 50] */
  return g_isel_bw(x, 0, 40, 7, DT_INT64);
}
static dt_tensor *g_isel_bw1(dt_tensor *const *x) { /* -> [40, 13] */
  return g_isel_bw(x, -1, 50, 13, DT_INT32);
}
/* cross_entropy's backward over ce_target (an ignored position), with a
 * scalar grad (mean, smoothed; sum) or per-position grads (none) */
static dt_tensor *ce_bw_with(dt_tensor *x, dt_reduction r, double eps) {
  float gv[40];
  for (int i = 0; i < 40; i++) gv[i] = 0.5f + 0.03f * (float)i;
  dt_tensor *t = ce_target();
  dt_tensor *g = r == DT_REDUCTION_NONE ? dt_from_host(gv, DT_SHAPE(40), NULL)
                                        : dt_full(DT_SHAPE(), 0.7, NULL);
  dt_tensor *y = t && g ? dt_cross_entropy_backward(g, x, t, r, -100, eps)
                        : NULL;
  dt_tensor_release(g);
  dt_tensor_release(t);
  return y;
}
static dt_tensor *x_ce_bw_mean(dt_tensor *const *x) {
  return ce_bw_with(x[0], DT_REDUCTION_MEAN, 0.1);
}
static dt_tensor *x_ce_bw_sum(dt_tensor *const *x) {
  return ce_bw_with(x[0], DT_REDUCTION_SUM, 0);
}
static dt_tensor *x_ce_bw_none(dt_tensor *const *x) {
  return ce_bw_with(x[0], DT_REDUCTION_NONE, 0.2);
}
/* a bad index or target: the CPU's error (message included) from the
 * backward kernels, and from a gather with an empty output */
static dt_tensor *bad_isel_bw(void) {
  static const int64_t ix[3] = {1, 9, 2};
  dt_tensor *g = dt_zeros(DT_SHAPE(3, 4), NULL), *i = index_of(ix, 3, DT_INT64);
  dt_tensor *y = g && i ? dt_index_select_backward(g, 0, i, 9) : NULL;
  dt_tensor_release(g);
  dt_tensor_release(i);
  return y;
}
static dt_tensor *bad_ce_bw(void) {
  static const int64_t tv[3] = {1, 50, -100};
  dt_tensor *x = dt_zeros(DT_SHAPE(3, 50), NULL), *t = index_of(tv, 3, DT_INT64);
  dt_tensor *g = dt_full(DT_SHAPE(), 1, NULL);
  dt_tensor *y = x && t && g ? dt_cross_entropy_backward(g, x, t,
                                   DT_REDUCTION_MEAN, -100, 0) : NULL;
  dt_tensor_release(x);
  dt_tensor_release(t);
  dt_tensor_release(g);
  return y;
}
static dt_tensor *bad_empty_gather(void) {
  static const int64_t ix[2] = {0, -3};
  dt_tensor *w = dt_zeros(DT_SHAPE(5, 0), NULL), *i = index_of(ix, 2, DT_INT32);
  dt_tensor *y = w && i ? dt_embedding(i, w) : NULL;
  dt_tensor_release(w);
  dt_tensor_release(i);
  return y;
}
static void bad_backward_same_error(dt_tensor *(*make)(void), const char *want) {
  char msg[2][512];
  for (int k = 0; k < 2; k++) {
    dt_runtime_set_current(k ? cpu_rt : gpu_rt);
    dt_tensor *y = make();
    float out[200];
    dt_status st = y ? dt_to_host(y, out, sizeof out) : dt_last_status();
    if (st != DT_ERR_INVALID_ARGUMENT)
      fail_msg("%s on %s: %s", want, k ? "cpu" : "cuda", dt_last_error());
    snprintf(msg[k], sizeof msg[k], "%s", dt_last_error());
    dt_tensor_release(y);
  }
  dt_runtime_set_current(NULL);
  assert_string_equal(msg[0], msg[1]);
  if (!strstr(msg[0], want)) fail_msg("\"%s\" lacks \"%s\"", msg[0], want);
}
static dt_tensor *l_linear(dt_tensor *const *x) {
  return dt_linear(x[0], x[1], x[2]);
}

/* the kernels bound after the first set: unary and scalar ops, gelu's
 * backward, comparisons, where, the optimiser's updates, linear with a
 * bias */
static void more_kernels(void **state) {
  (void)state;
  dt_shape s1[1] = {DT_SHAPE(3, 1000)}, s2[2] = {DT_SHAPE(40, 50),
                                                  DT_SHAPE(40, 50)};
  build_fn un[] = {u_abs, u_rsqrt, u_sin, u_cos, u_gelu_tanh, s_div};
  const char *un_names[] = {"abs", "rsqrt", "sin", "cos", "gelu_tanh",
                            "div_scalar"};
  for (int i = 0; i < 6; i++)
    compare(un[i], 1, s1, 3000, 4e-7, i == 1, un_names[i]);
  compare(b_gelu_bw, 2, s2, 2000, 1e-6, false, "gelu_backward");
  compare(b_lt, 2, s2, 2000, 0, false, "lt");
  compare(b_eq, 1, s2, 2000, 0, false, "eq");
  compare(t_where, 2, s2, 2000, 0, false, "where");
  compare(u_clamp, 1, s1, 3000, 0, false, "clamp");
  compare(b_pow, 2, s2, 2000, 4e-7, true, "pow");
  compare(b_floordiv, 2, s2, 2000, 0, true, "floor_divide");
  compare(b_rem, 2, s2, 2000, 1e-6, true, "remainder");
  compare(s_pow, 1, s1, 3000, 4e-7, true, "pow_scalar");
  compare(s_floordiv, 1, s1, 3000, 0, false, "floor_divide_scalar");
  compare(s_rem, 1, s1, 3000, 1e-6, false, "remainder_scalar");
  compare(x_embedding, 1, s2, 6 * 50, 0, false, "embedding");
  compare(x_index_select, 1, s2, 5 * 40, 0, false, "index_select");
  bad_index_same_error();
  compare(x_ce_mean, 1, s2, 1, 1e-6, false, "cross_entropy mean, smoothed");
  compare(x_ce_sum, 1, s2, 1, 1e-6, false, "cross_entropy sum");
  compare(x_ce_none, 1, s2, 40, 1e-6, false, "cross_entropy none");
  compare(g_isel_bw0, 1, s2, 7 * 50, 0, false, "index_select_backward dim 0");
  compare(g_isel_bw1, 1, s2, 40 * 13, 0, false, "index_select_backward dim -1");
  compare(x_ce_bw_mean, 1, s2, 2000, 1e-6, false,
          "cross_entropy_backward mean, smoothed");
  compare(x_ce_bw_sum, 1, s2, 2000, 1e-6, false, "cross_entropy_backward sum");
  compare(x_ce_bw_none, 1, s2, 2000, 1e-6, false,
          "cross_entropy_backward none, smoothed");
  bad_backward_same_error(bad_isel_bw, "index 9 (position 1");
  bad_backward_same_error(bad_ce_bw, "target 50 (position 1)");
  bad_backward_same_error(bad_empty_gather, "index -3 (position 1");
  compare(g_logic, 2, s2, 2000, 0, false, "logical and/or/not");
  compare(g_scatter, 1, s1, 3 * 3000, 0, false, "slice_scatter");
  compare(g_arange, 0, s1, 1014, 0, false, "arange");
  compare(r_var, 1, s1, 3, 1e-6, false, "var");
  dt_shape tall[1] = {DT_SHAPE(3000, 3)}; /* a long strided reduction */
  compare(r_argmax, 1, tall, 3, 0, false, "argmax");
  compare(r_argmin, 1, s1, 1, 0, false, "argmin (flat)");
  compare(t_masked_fill, 2, s2, 2000, 0, false, "masked_fill");
  compare(j_stack, 2, s2, 3 * 2000, 0, false, "stack");
  compare(o_moment, 2, s2, 2000, 1e-6, false, "adam_moment");
  dt_shape s3[3] = {DT_SHAPE(40, 50), DT_SHAPE(40, 50), DT_SHAPE(40, 50)};
  compare(o_apply, 3, s3, 2000, 1e-6, true, "adamw_apply");
  dt_shape lin[3] = {DT_SHAPE(2, 17, 48), DT_SHAPE(40, 48), DT_SHAPE(40)};
  compare(l_linear, 3, lin, 2 * 17 * 40, 2e-5, false, "linear");
}

static dt_tensor *c_t(dt_tensor *const *x) {
  dt_tensor *t = dt_transpose(x[0], 0, 1);
  dt_tensor *y = t ? dt_contiguous(t) : NULL;
  dt_tensor_release(t);
  return y;
}
static dt_tensor *c_half(dt_tensor *const *x) {
  dt_tensor *h = dt_cast(x[0], DT_FLOAT16);
  dt_tensor *y = dt_cast(h, DT_FLOAT32);
  dt_tensor_release(h);
  return y;
}
static dt_tensor *c_mm(dt_tensor *const *x) { return dt_matmul(x[0], x[1]); }

static void copies_casts_matmul(void **state) {
  (void)state;
  dt_shape s[1] = {DT_SHAPE(33, 70)};
  compare(c_t, 1, s, 33 * 70, 0, false, "transpose + contiguous");
  compare(c_half, 1, s, 33 * 70, 0, false, "cast float16 and back");
  dt_shape mm[2] = {DT_SHAPE(3, 64, 48), DT_SHAPE(3, 48, 40)};
  compare(c_mm, 2, mm, 3 * 64 * 40, 2e-5, false, "batched matmul");
}

static dt_tensor *r_sum(dt_tensor *const *x) {
  int d[2] = {0, 2};
  return dt_sum(x[0], d, 2, false);
}
static dt_tensor *r_mean(dt_tensor *const *x) {
  int d[1] = {-1};
  return dt_mean(x[0], d, 1, true);
}
static dt_tensor *r_amax(dt_tensor *const *x) {
  int d[1] = {1};
  return dt_amax(x[0], d, 1, false);
}
static dt_tensor *r_all(dt_tensor *const *x) { return dt_sum(x[0], NULL, 0, false); }
static dt_tensor *r_tsum(dt_tensor *const *x) { /* strided input */
  int d[1] = {0};
  dt_tensor *t = dt_transpose(x[0], 0, 2);
  dt_tensor *y = dt_sum(t, d, 1, false);
  dt_tensor_release(t);
  return y;
}
static dt_tensor *n_softmax(dt_tensor *const *x) { return dt_softmax(x[0], 1); }
static dt_tensor *n_logsoftmax(dt_tensor *const *x) {
  return dt_log_softmax(x[0], -1);
}
static dt_tensor *n_layer_norm(dt_tensor *const *x) {
  return dt_layer_norm(x[0], x[1], x[2], 1e-5);
}
static dt_tensor *n_layer_norm_plain(dt_tensor *const *x) {
  return dt_layer_norm(x[0], NULL, NULL, 1e-5);
}

static dt_tensor *j_cat(dt_tensor *const *x) {
  dt_tensor *t = dt_transpose(x[1], 0, 1); /* a strided input */
  dt_tensor *v[3] = {x[0], t, x[0]};
  dt_tensor *y = dt_cat(v, 3, 1);
  dt_tensor_release(t);
  return y;
}
static dt_tensor *d_dropout(dt_tensor *const *x) {
  dt_manual_seed(77);
  return dt_dropout(x[0], 0.3, true);
}

/* cat along dim 1; dropout's mask from the shared Philox stream: bitwise */
static void cat_and_dropout(void **state) {
  (void)state;
  dt_shape s[2] = {DT_SHAPE(5, 7), DT_SHAPE(3, 5)};
  compare(j_cat, 2, s, 5 * 17, 0, false, "cat of three, one strided");
  dt_shape d[1] = {DT_SHAPE(41, 333)};
  compare(d_dropout, 1, d, 41 * 333, 0, false, "dropout p = 0.3");
}

/* short rows (a warp each) and long rows (a block each) */
static void reductions_and_norms(void **state) {
  (void)state;
  dt_shape s[1] = {DT_SHAPE(6, 50, 7)};
  compare(r_sum, 1, s, 50, 1e-6, false, "sum over dims 0, 2");
  compare(r_mean, 1, s, 300, 1e-6, false, "mean over the last dim");
  compare(r_amax, 1, s, 42, 0, false, "amax over dim 1");
  compare(r_tsum, 1, s, 300, 1e-6, false, "sum of a transposed view");
  dt_shape big[1] = {DT_SHAPE(3, 5000)};
  compare(r_all, 1, big, 1, 1e-6, false, "sum of everything (a block)");
  compare(n_softmax, 1, s, 2100, 1e-6, false, "softmax over dim 1");
  compare(n_logsoftmax, 1, big, 15000, 1e-6, false, "log_softmax, long rows");
  dt_shape ln[3] = {DT_SHAPE(9, 2000), DT_SHAPE(2000), DT_SHAPE(2000)};
  compare(n_layer_norm, 3, ln, 18000, 1e-5, false, "layer_norm, affine");
  compare(n_layer_norm_plain, 1, ln, 18000, 1e-5, false, "layer_norm");
}

/* the same Philox stream: uniform bitwise, normal within rounding */
static void random_matches_cpu(void **state) {
  (void)state;
  enum { N = 100003 };
  static float g[N], c[N];
  for (int normal = 0; normal < 2; normal++) {
    dt_runtime *rts[2] = {gpu_rt, cpu_rt};
    float *outs[2] = {g, c};
    for (int r = 0; r < 2; r++) {
      dt_runtime_set_current(rts[r]);
      dt_manual_seed(1234);
      dt_tensor *t = normal ? dt_randn(DT_SHAPE(N), NULL) : dt_rand(DT_SHAPE(N), NULL);
      assert_non_null(t);
      assert_int_equal(dt_to_host(t, outs[r], sizeof g), DT_OK);
      dt_tensor_release(t);
      dt_runtime_set_current(NULL);
    }
    for (int i = 0; i < N; i++)
      if (normal ? !(fabsf(g[i] - c[i]) <= 1e-6f * (1 + fabsf(c[i])))
                 : memcmp(&g[i], &c[i], sizeof *g) != 0)
        fail_msg("%s element %d: cuda %.9g cpu %.9g", normal ? "randn" : "rand",
                 i, g[i], c[i]);
  }
}

/* DTORCH_DEVICE_MEMORY: each rank's own capacity, OOM names it */
static void per_rank_oom(void **state) {
  (void)state;
  dt_runtime_options o = {.device = "cuda", .num_ranks = 1,
                          .device_memory = 1 << 20};
  dt_runtime *rt = dt_runtime_create(&o);
  assert_non_null(rt);
  dt_runtime_set_current(rt);
  dt_tensor *ok = dt_zeros(DT_SHAPE(1000), NULL);
  dt_tensor *big = dt_zeros(DT_SHAPE(1 << 19), NULL); /* 2 MiB */
  float *h = malloc(sizeof(float) << 19);
  assert_int_equal(dt_to_host(ok, h, sizeof(float) * 1000), DT_OK);
  assert_true(h[999] == 0.0f);
  dt_status st = big ? dt_to_host(big, h, sizeof(float) << 19) : dt_last_status();
  free(h);
  assert_int_equal(st, DT_ERR_OUT_OF_MEMORY);
  print_message("  %s\n", dt_last_error());
  dt_tensor_release(ok);
  dt_tensor_release(big);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

/* DTORCH_DTENSOR_IN_SAME_DEVICE: 8 ranks on one GPU, each its own stream */
static void eight_ranks_one_gpu(void **state) {
  (void)state;
  setenv("DTORCH_DTENSOR_IN_SAME_DEVICE", "1", 1);
  dt_runtime_options o = {.device = "cuda"};
  dt_runtime *rt = dt_runtime_create(&o);
  unsetenv("DTORCH_DTENSOR_IN_SAME_DEVICE");
  if (!rt) fail_msg("%s", dt_last_error());
  assert_int_equal(dt_runtime_num_ranks(rt), 8);
  dt_runtime_set_current(rt);
  float sum = 0;
  for (int r = 0; r < 8; r++) {
    char dev[16];
    snprintf(dev, sizeof dev, "cuda:%d", r);
    dt_tensor_options to = {.dtype = DT_FLOAT32, .device = dev};
    dt_tensor *t = dt_full(DT_SHAPE(4), r + 1, &to);
    dt_tensor *u = dt_mul_scalar(t, 2);
    float h[4];
    assert_int_equal(dt_to_host(u, h, sizeof h), DT_OK);
    assert_true(h[3] == 2.0f * (r + 1));
    sum += h[0];
    dt_tensor_release(t);
    dt_tensor_release(u);
  }
  assert_true(sum == 72.0f);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

#if DTORCH_HAVE_CUDA
/* element i of node (lo, hi) of the collectives' pairwise tree over the
 * members (docs/collectives.md), in float */
static float tree_sum(float (*host)[100003], int lo, int hi, int i) {
  if (hi - lo == 1) return host[lo][i];
  int mid = lo + (hi - lo) / 2;
  return tree_sum(host, lo, mid, i) + tree_sum(host, mid, hi, i);
}
#endif

/* the emulated all_reduce's data movement: 5 members' buffers on one GPU,
 * each member reducing its segment, equal to a float sum over the
 * members' pairwise tree (the CPU backend's order and precision) */
static void reduce_through_pointer_table(void **state) {
  (void)state;
  if (emulated) skip(); /* CUDA's own streams and pools */
#if DTORCH_HAVE_CUDA
  enum { N = 5, COUNT = 100003 };
  char why[256];
  cuda_rank *r;
  assert_int_equal(cuda_rank_create(&r, 0, 0, why, sizeof why), 0);
  static float host[N][COUNT], want[COUNT], got[COUNT];
  void *in[N], *out[N];
  for (int k = 0; k < N; k++) {
    fill(host[k], COUNT, 99u + (unsigned)k, false);
    in[k] = cuda_rank_alloc(r, sizeof host[k], why, sizeof why);
    out[k] = cuda_rank_alloc(r, sizeof host[k], why, sizeof why);
    assert_non_null(in[k]);
    assert_non_null(out[k]);
    assert_int_equal(cuda_rank_copy(r, in[k], host[k], sizeof host[k],
                                    CUDA_COPY_H2D, why, sizeof why), 0);
  }
  for (int i = 0; i < COUNT; i++) want[i] = tree_sum(host, 0, N, i);
  for (int m = 0; m < N; m++) /* member m's segment */
    assert_int_equal(cuda_reduce_ptrs(cuda_rank_stream(r), 0, 0, N,
                                      (const void *const *)in, N, out,
                                      (int64_t)COUNT * m / N,
                                      (int64_t)COUNT * (m + 1) / N), 0);
  for (int k = 0; k < N; k++) {
    assert_int_equal(cuda_rank_copy(r, got, out[k], sizeof got, CUDA_COPY_D2H,
                                    why, sizeof why), 0);
    assert_int_equal(cuda_rank_sync(r, why, sizeof why), 0);
    assert_memory_equal(got, want, sizeof got);
  }
  for (int k = 0; k < N; k++) {
    cuda_rank_free(r, in[k]);
    cuda_rank_free(r, out[k]);
  }
  cuda_rank_destroy(r);
#endif
}

static dt_status spmd_nothing(dt_spmd_ctx *ctx) {
  (void)ctx;
  return DT_OK;
}

/* what the CUDA backend lacks fails with a status and a message, never
 * runs CPU code on device memory */
static void unsupported_paths(void **state) {
  (void)state;
  if (emulated) skip(); /* the emulation runs every op */
  dt_runtime_set_current(gpu_rt);
  dt_tensor *x = dt_full(DT_SHAPE(4, 4), 1, NULL);
  assert_non_null(x);
  int d[1] = {1};
  assert_null(dt_argmax(x, d, 1, false));
  assert_int_equal(dt_last_status(), DT_ERR_UNSUPPORTED);
  assert_non_null(strstr(dt_last_error(), "argmax"));
  assert_non_null(strstr(dt_last_error(), "cuda"));
  /* a mesh of CUDA ranks is made (test_cuda_dtensor runs DTensors on it);
   * a "cpu" one on CUDA ranks is a device error */
  dt_mesh *m = dt_mesh_init(gpu_rt, "cuda", DT_SHAPE(1), NULL);
  assert_non_null(m);
  dt_mesh_release(m);
  assert_null(dt_mesh_init(gpu_rt, "cpu", DT_SHAPE(1), NULL));
  assert_int_equal(dt_last_status(), DT_ERR_DEVICE);
  void *p = NULL; /* host code must not read GPU memory */
  assert_int_equal(dt_tensor_local_data(x, &p), DT_ERR_UNSUPPORTED);
  assert_null(p);
  /* SPMD runs work on one GPU (test_cuda_coll has their collectives) */
  assert_int_equal(dt_spmd_run(gpu_rt, spmd_nothing, NULL), DT_OK);
  /* a CPU tensor and a CUDA tensor in one op: a device error */
  dt_runtime_set_current(cpu_rt);
  dt_tensor *c = dt_full(DT_SHAPE(4, 4), 1, NULL);
  assert_null(dt_add(x, c));
  assert_int_equal(dt_last_status(), DT_ERR_DEVICE);
  dt_tensor_release(c);
  dt_tensor_release(x);
  dt_runtime_set_current(NULL);
}

int main(void) {
  dt_runtime_options g = {.device = "cuda", .num_ranks = 1};
  gpu_rt = dt_runtime_create(&g);
  if (!gpu_rt) {
    printf("test_cuda_ops: skipped, no \"cuda\" runtime: %s\n", dt_last_error());
    return 77;
  }
  dt_runtime_options c = {.num_ranks = 1};
  cpu_rt = dt_runtime_create(&c);
  const char *emu = getenv("DTORCH_CUDA_EMULATE");
  emulated = emu && !strcmp(emu, "1");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(binary_ops),
      cmocka_unit_test(unary_ops),
      cmocka_unit_test(more_kernels),
      cmocka_unit_test(copies_casts_matmul),
      cmocka_unit_test(reductions_and_norms),
      cmocka_unit_test(cat_and_dropout),
      cmocka_unit_test(random_matches_cpu),
      cmocka_unit_test(per_rank_oom),
      cmocka_unit_test(eight_ranks_one_gpu),
      cmocka_unit_test(unsupported_paths),
      cmocka_unit_test(reduce_through_pointer_table),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  dt_runtime_destroy(gpu_rt);
  dt_runtime_destroy(cpu_rt);
  return rc;
}
