/* Autograd: for every differentiable op of the library,
 *   - the gradient of sum(op(x) * w) for random w equals central finite
 *     differences in float64 (an independent reference: only forward
 *     values enter it);
 *   - on DTensors (meshes 2, 3 and 2x2; every placement combination of
 *     the inputs on 1-D meshes, a sample on 2x2; auto_redistribute) the
 *     gradients equal the single-device gradients;
 *   - non-differentiable ops make outputs that do not require grad;
 * plus the graph's life (freed after backward, retain_graph, no-grad,
 * accumulation, errors) and threads. DTORCH_SWEEP=reduced samples. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_cases.h"
#include "testutil.h"
#include "threads.h"

enum { V_ANY = TU_V_ANY, V_POS = TU_V_POS, V_NONZERO = TU_V_NONZERO,
       V_INDEX = TU_V_INDEX, V_BOOL = TU_V_BOOL, V_SPREAD = TU_V_SPREAD };
typedef tu_in_spec in_spec;
typedef dt_tensor *(*op_fn)(dt_tensor **in);
typedef struct gcase { const char *name; op_fn fn; int nin; in_spec in[3]; } gcase;

#define F(...) {DT_FLOAT64, DT_SHAPE(__VA_ARGS__), V_ANY, 0}
#define FS(...) {DT_FLOAT64, DT_SHAPE(__VA_ARGS__), V_SPREAD, 0}
#define POS(...) {DT_FLOAT64, DT_SHAPE(__VA_ARGS__), V_POS, 0}
#define NZ(...) {DT_FLOAT64, DT_SHAPE(__VA_ARGS__), V_NONZERO, 0}
#define BOOLS(...) {DT_BOOL, DT_SHAPE(__VA_ARGS__), V_BOOL, 0}
#define IDX(r, ...) {DT_INT64, DT_SHAPE(__VA_ARGS__), V_INDEX, r}

#define BIN(f) static dt_tensor *op_##f(dt_tensor **x) { return dt_##f(x[0], x[1]); }
#define UN(f) static dt_tensor *op_##f(dt_tensor **x) { return dt_##f(x[0]); }
#define SC(f, v) static dt_tensor *op_##f(dt_tensor **x) { return dt_##f(x[0], v); }
BIN(add) BIN(sub) BIN(mul) BIN(div) BIN(pow) BIN(maximum) BIN(minimum)
BIN(remainder) BIN(matmul) BIN(lt)
SC(add_scalar, 1.5) SC(sub_scalar, 0.5) SC(mul_scalar, -2.0) SC(div_scalar, 4.0)
SC(pow_scalar, 3.0) SC(remainder_scalar, 0.7)
UN(neg) UN(abs) UN(exp) UN(log) UN(sqrt) UN(rsqrt) UN(sin) UN(cos) UN(tanh)
UN(sigmoid) UN(relu) UN(silu) UN(gelu) UN(gelu_tanh) UN(contiguous) UN(clone)
UN(squeeze_all)
static dt_tensor *op_clamp(dt_tensor **x) { return dt_clamp(x[0], -0.5, 0.75); }
static dt_tensor *op_where(dt_tensor **x) { return dt_where(x[0], x[1], x[2]); }
static dt_tensor *op_masked_fill(dt_tensor **x) { return dt_masked_fill(x[0], x[1], 9.0); }
static dt_tensor *op_cast(dt_tensor **x) { return dt_cast(x[0], DT_FLOAT64); }
static dt_tensor *op_cast_int(dt_tensor **x) { return dt_cast(x[0], DT_INT64); }
static dt_tensor *op_view(dt_tensor **x) { return dt_view(x[0], DT_SHAPE(2, 3, 4)); }
static dt_tensor *op_reshape(dt_tensor **x) { return dt_reshape(x[0], DT_SHAPE(-1)); }
static dt_tensor *op_transpose(dt_tensor **x) { return dt_transpose(x[0], 0, 1); }
static dt_tensor *op_permute(dt_tensor **x) {
  static const int p[] = {2, 0, 1};
  return dt_permute(x[0], p, 3);
}
static dt_tensor *op_slice(dt_tensor **x) { return dt_slice(x[0], 1, 1, 5, 2); }
static dt_tensor *op_narrow(dt_tensor **x) { return dt_narrow(x[0], 0, -3, 2); }
static dt_tensor *op_select(dt_tensor **x) { return dt_select(x[0], 1, -1); }
static dt_tensor *op_expand(dt_tensor **x) { return dt_expand(x[0], DT_SHAPE(2, 4, 5)); }
static dt_tensor *op_squeeze(dt_tensor **x) { return dt_squeeze(x[0], 1); }
static dt_tensor *op_unsqueeze(dt_tensor **x) { return dt_unsqueeze(x[0], 1); }
static dt_tensor *op_flatten(dt_tensor **x) { return dt_flatten(x[0], 0, 1); }
static const int dim0[] = {0}, dim1[] = {1};
#define RED(f, dims, n, keep)                                                  \
  static dt_tensor *op_##f##_##n##keep(dt_tensor **x) {                       \
    return dt_##f(x[0], dims, n, keep);                                      \
  }
RED(sum, dim0, 1, 0) RED(sum, dim0, 0, 0) RED(mean, dim1, 1, 1) RED(mean, dim0, 1, 0)
RED(amax, dim0, 1, 0) RED(amin, dim1, 1, 1) RED(prod, dim1, 1, 0) RED(argmax, dim1, 1, 0)
static dt_tensor *op_var(dt_tensor **x) { return dt_var(x[0], dim0, 1, true, false); }
static dt_tensor *op_var_b(dt_tensor **x) { return dt_var(x[0], dim1, 1, false, true); }
static dt_tensor *op_softmax(dt_tensor **x) { return dt_softmax(x[0], 1); }
static dt_tensor *op_log_softmax(dt_tensor **x) { return dt_log_softmax(x[0], 0); }
static dt_tensor *op_layer_norm(dt_tensor **x) { return dt_layer_norm(x[0], x[1], x[2], 1e-5); }
static dt_tensor *op_layer_norm_plain(dt_tensor **x) { return dt_layer_norm(x[0], NULL, NULL, 1e-5); }
static dt_tensor *op_rms_norm(dt_tensor **x) { return dt_rms_norm(x[0], x[1], 1e-6); }
static dt_tensor *op_linear(dt_tensor **x) { return dt_linear(x[0], x[1], x[2]); }
static dt_tensor *op_linear_nobias(dt_tensor **x) { return dt_linear(x[0], x[1], NULL); }
static dt_tensor *op_embedding(dt_tensor **x) { return dt_embedding(x[0], x[1]); }
static dt_tensor *op_index_select(dt_tensor **x) { return dt_index_select(x[0], 0, x[1]); }
static dt_tensor *op_ce_mean(dt_tensor **x) { return dt_cross_entropy(x[0], x[1], DT_REDUCTION_MEAN, 1); }
static dt_tensor *op_ce_sum(dt_tensor **x) { return dt_cross_entropy(x[0], x[1], DT_REDUCTION_SUM, -100); }
static dt_tensor *op_ce_none(dt_tensor **x) { return dt_cross_entropy(x[0], x[1], DT_REDUCTION_NONE, -100); }
static dt_tensor *op_ce_probs(dt_tensor **x) { return dt_cross_entropy_smoothed(x[0], x[1], DT_REDUCTION_MEAN, -100, 0.1); }
static dt_tensor *op_ce_smooth(dt_tensor **x) { return dt_cross_entropy_smoothed(x[0], x[1], DT_REDUCTION_SUM, 2, 0.2); }
static dt_tensor *op_dropout(dt_tensor **x) {
  dt_manual_seed(1234); /* the same mask at every evaluation */
  return dt_dropout(x[0], 0.4, true);
}
static dt_tensor *op_cat(dt_tensor **x) { return dt_cat(x, 2, 1); }
static dt_tensor *op_stack(dt_tensor **x) { return dt_stack(x, 2, 0); }

static const gcase cases[] = {
  {"add", op_add, 2, {F(4, 6), F(4, 6)}},
  {"add_bcast", op_add, 2, {F(5, 3), F(3)}},
  {"sub", op_sub, 2, {F(5, 3), F(1, 3)}},
  {"mul", op_mul, 2, {F(4, 6), F(1, 6)}},
  {"div", op_div, 2, {F(5, 3), NZ(5, 3)}},
  {"pow", op_pow, 2, {POS(4, 3), F(4, 3)}},
  {"maximum", op_maximum, 2, {FS(5, 3), FS(5, 3)}},
  {"minimum", op_minimum, 2, {FS(4, 6), FS(6)}},
  {"remainder", op_remainder, 2, {POS(4, 3), NZ(4, 3)}},
  {"add_scalar", op_add_scalar, 1, {F(5, 3)}},
  {"sub_scalar", op_sub_scalar, 1, {F(4, 6)}},
  {"mul_scalar", op_mul_scalar, 1, {F(5, 3)}},
  {"div_scalar", op_div_scalar, 1, {F(4, 6)}},
  {"pow_scalar", op_pow_scalar, 1, {F(5, 3)}},
  {"remainder_scalar", op_remainder_scalar, 1, {POS(4, 3)}},
  {"neg", op_neg, 1, {F(5, 3)}},
  {"abs", op_abs, 1, {FS(4, 6)}},
  {"exp", op_exp, 1, {F(5, 3)}},
  {"log", op_log, 1, {POS(4, 3)}},
  {"sqrt", op_sqrt, 1, {POS(5, 3)}},
  {"rsqrt", op_rsqrt, 1, {POS(4, 3)}},
  {"sin", op_sin, 1, {F(5, 3)}},
  {"cos", op_cos, 1, {F(4, 3)}},
  {"tanh", op_tanh, 1, {F(5, 3)}},
  {"sigmoid", op_sigmoid, 1, {F(4, 6)}},
  {"relu", op_relu, 1, {FS(5, 3)}},
  {"silu", op_silu, 1, {F(4, 3)}},
  {"gelu", op_gelu, 1, {F(5, 3)}},
  {"gelu_tanh", op_gelu_tanh, 1, {F(4, 3)}},
  {"clamp", op_clamp, 1, {FS(5, 3)}},
  {"where", op_where, 3, {BOOLS(4, 3), F(4, 3), F(3)}},
  {"masked_fill", op_masked_fill, 2, {F(5, 3), BOOLS(5, 3)}},
  {"cast", op_cast, 1, {F(5, 3)}},
  {"view", op_view, 1, {F(6, 4)}},
  {"reshape", op_reshape, 1, {F(5, 3)}},
  {"transpose", op_transpose, 1, {F(5, 3)}},
  {"permute", op_permute, 1, {F(2, 3, 5)}},
  {"slice", op_slice, 1, {F(4, 6)}},
  {"narrow", op_narrow, 1, {F(5, 3)}},
  {"select", op_select, 1, {F(4, 3)}},
  {"expand", op_expand, 1, {F(4, 1)}},
  {"squeeze", op_squeeze, 1, {F(5, 1)}},
  {"squeeze_all", op_squeeze_all, 1, {F(1, 5)}},
  {"unsqueeze", op_unsqueeze, 1, {F(5, 3)}},
  {"flatten", op_flatten, 1, {F(4, 3)}},
  {"contiguous", op_contiguous, 1, {F(5, 3)}},
  {"clone", op_clone, 1, {F(4, 6)}},
  {"sum_dim0", op_sum_10, 1, {F(5, 3)}},
  {"sum_all", op_sum_00, 1, {F(4, 6)}},
  {"mean_dim1_keep", op_mean_11, 1, {F(5, 3)}},
  {"mean_dim0", op_mean_10, 1, {F(5, 3)}},
  {"amax", op_amax_10, 1, {FS(5, 3)}},
  {"amin_keep", op_amin_11, 1, {FS(4, 6)}},
  {"prod", op_prod_10, 1, {NZ(4, 3)}},
  {"var", op_var, 1, {F(5, 3)}},
  {"var_biased_keep", op_var_b, 1, {F(4, 6)}},
  {"softmax", op_softmax, 1, {F(5, 3)}},
  {"log_softmax", op_log_softmax, 1, {F(4, 6)}},
  {"layer_norm", op_layer_norm, 3, {F(5, 6), F(6), F(6)}},
  {"layer_norm_plain", op_layer_norm_plain, 1, {F(4, 6)}},
  {"rms_norm", op_rms_norm, 2, {F(4, 6), F(6)}},
  {"matmul", op_matmul, 2, {F(5, 6), F(6, 3)}},
  {"matmul_batched", op_matmul, 2, {F(2, 3, 4), F(4, 5)}},
  {"matmul_bcast_left", op_matmul, 2, {F(4, 3), F(2, 3, 5)}},
  {"matmul_vec", op_matmul, 2, {F(4, 6), F(6)}},
  {"matmul_vec_left", op_matmul, 2, {F(4), F(4, 3)}},
  {"matmul_dot", op_matmul, 2, {F(5), F(5)}},
  {"linear", op_linear, 3, {F(5, 6), F(4, 6), F(4)}},
  {"linear_3d", op_linear, 3, {F(2, 3, 6), F(4, 6), F(4)}},
  {"linear_nobias", op_linear_nobias, 2, {F(3, 6), F(5, 6)}},
  {"embedding", op_embedding, 2, {IDX(7, 3, 4), F(7, 6)}},
  {"index_select", op_index_select, 2, {F(5, 3), IDX(5, 6)}},
  {"cross_entropy_mean", op_ce_mean, 2, {F(6, 5), IDX(5, 6)}},
  {"cross_entropy_sum", op_ce_sum, 2, {F(5, 4), IDX(4, 5)}},
  {"cross_entropy_none", op_ce_none, 2, {F(5, 4, 3), IDX(4, 5, 3)}},
  {"cross_entropy_probs", op_ce_probs, 2, {F(5, 4), POS(5, 4)}},
  {"cross_entropy_smooth", op_ce_smooth, 2, {F(6, 4), IDX(4, 6)}},
  {"dropout", op_dropout, 1, {F(5, 6)}},
  {"cat", op_cat, 2, {F(4, 3), F(4, 2)}},
  {"stack", op_stack, 2, {F(5, 3), F(5, 3)}},
};
#define NCASES (int)(sizeof cases / sizeof *cases)

/* graph nodes alive once the default runtime's ranks let go of their
 * records (an op's record holds its inputs until it ran) */
static int64_t settled_nodes(void) {
  dt_runtime_synchronize(dt_runtime_default());
  return dt_autograd_live_nodes();
}

/* ---- values */

static dt_tensor *tensor_of(const double *v, const in_spec *in, dt_mesh *m,
                            const dt_placement *pl, bool grad) {
  return tu_case_tensor(v, in, m, pl, grad && in->dtype == DT_FLOAT64);
}

/* one case's inputs (host values), the loss weights and results */
typedef struct run {
  const gcase *c;
  double *x[3];
  double *w;            /* weights of the output's elements */
  dt_shape out_shape;
  double *grad[3];      /* single-device gradients (NULL: none) */
} run;

/* sum(out * w) on the host */
static double weighted(dt_tensor *out, const double *w) {
  double *v = tu_values(out);
  int64_t n = tu_shape_numel(dt_tensor_shape(out));
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += v[i] * w[i];
  free(v);
  return s;
}

/* the forward on single-device tensors from values xs (no graph) */
static double loss_at(const run *r, double *const *xs) {
  dt_tensor *in[3] = {0};
  bool was = dt_set_grad_enabled(false);
  for (int i = 0; i < r->c->nin; i++) in[i] = tensor_of(xs[i], &r->c->in[i], NULL, NULL, false);
  dt_tensor *out = r->c->fn(in);
  if (!out) fail_msg("%s: %s", r->c->name, dt_last_error());
  double l = weighted(out, r->w);
  dt_tensor_release(out);
  for (int i = 0; i < r->c->nin; i++) dt_tensor_release(in[i]);
  dt_set_grad_enabled(was);
  return l;
}

/* autograd: the gradients of sum(op(x) * w), on a mesh or not */
static void grads_of(const run *r, dt_mesh *m, const dt_placement pl[3][2],
                     double **g) {
  dt_tensor *in[3] = {0};
  for (int i = 0; i < r->c->nin; i++)
    in[i] = tensor_of(r->x[i], &r->c->in[i], m, m ? pl[i] : NULL, true);
  dt_tensor *out = r->c->fn(in);
  if (!out) fail_msg("%s: %s", r->c->name, dt_last_error());
  assert_true(dt_tensor_requires_grad(out));
  in_spec ws = {DT_FLOAT64, dt_tensor_shape(out), V_ANY, 0};
  dt_tensor *w = tensor_of(r->w, &ws, m, NULL, false);
  dt_tensor *p = dt_mul(out, w), *l = dt_sum(p, NULL, 0, false);
  if (!l) fail_msg("%s: loss: %s", r->c->name, dt_last_error());
  if (dt_backward(l) != DT_OK) fail_msg("%s: dt_backward: %s", r->c->name, dt_last_error());
  for (int i = 0; i < r->c->nin; i++) {
    dt_tensor *gi = dt_grad(in[i]);
    g[i] = gi ? tu_values(gi) : NULL;
    dt_tensor_release(gi);
    dt_tensor_release(in[i]);
  }
  dt_tensor_release(w);
  dt_tensor_release(p);
  dt_tensor_release(l);
  dt_tensor_release(out);
}

static void run_init(run *r, const gcase *c, int seed) {
  memset(r, 0, sizeof *r);
  r->c = c;
  for (int i = 0; i < c->nin; i++) r->x[i] = tu_case_values(&c->in[i], (uint64_t)(seed * 7 + i));
  dt_tensor *in[3] = {0};
  for (int i = 0; i < c->nin; i++) in[i] = tensor_of(r->x[i], &c->in[i], NULL, NULL, false);
  dt_tensor *out = c->fn(in);
  if (!out) fail_msg("%s: %s", c->name, dt_last_error());
  r->out_shape = dt_tensor_shape(out);
  in_spec ws = {DT_FLOAT64, r->out_shape, V_ANY, 0};
  r->w = tu_case_values(&ws, (uint64_t)seed + 99);
  dt_tensor_release(out);
  for (int i = 0; i < c->nin; i++) dt_tensor_release(in[i]);
}

static void run_free(run *r) {
  for (int i = 0; i < 3; i++) {
    free(r->x[i]);
    free(r->grad[i]);
  }
  free(r->w);
}

/* ---- finite differences */
static void check_fd(run *r) {
  const double h = 1e-6;
  for (int i = 0; i < r->c->nin; i++) {
    if (r->c->in[i].dtype != DT_FLOAT64) {
      assert_null(r->grad[i]);
      continue;
    }
    if (!r->grad[i]) fail_msg("%s: input %d got no gradient", r->c->name, i);
    int64_t n = tu_shape_numel(r->c->in[i].shape);
    for (int64_t j = 0; j < n; j++) {
      double keep = r->x[i][j];
      r->x[i][j] = keep + h;
      double lp = loss_at(r, r->x);
      r->x[i][j] = keep - h;
      double lm = loss_at(r, r->x);
      r->x[i][j] = keep;
      double fd = (lp - lm) / (2 * h), got = r->grad[i][j];
      if (fabs(got - fd) > 1e-5 * (1 + fabs(fd)))
        fail_msg("%s: d/dx%d[%lld] autograd %.10g, finite differences %.10g",
                 r->c->name, i, (long long)j, got, fd);
    }
  }
}

static void test_finite_differences(void **state) {
  (void)state;
  for (int k = 0; k < NCASES; k++) {
    run r;
    run_init(&r, &cases[k], k + 1);
    grads_of(&r, NULL, NULL, r.grad);
    check_fd(&r);
    run_free(&r);
  }
  assert_int_equal(settled_nodes(), 0);
}

/* ---- DTensor gradients equal single-device gradients */
static bool reduced_sweep(void) {
  const char *e = getenv("DTORCH_SWEEP");
  return e && !strcmp(e, "reduced");
}

typedef struct options { int n; dt_placement p[8]; } options;
static options options_of(const in_spec *in) {
  options o = {0};
  o.p[o.n++] = DT_REPLICATE;
  for (int d = 0; d < in->shape.ndim; d++) o.p[o.n++] = DT_SHARD(d);
  if (in->dtype == DT_FLOAT64) o.p[o.n++] = DT_PARTIAL(DT_REDUCE_SUM);
  return o;
}

static void compare_grads(const run *r, double **g, const char *where) {
  for (int i = 0; i < r->c->nin; i++) {
    if (!r->grad[i]) {
      if (g[i]) fail_msg("%s %s: input %d has a gradient on the mesh only", r->c->name, where, i);
      continue;
    }
    if (!g[i]) fail_msg("%s %s: input %d got no gradient", r->c->name, where, i);
    int64_t n = tu_shape_numel(r->c->in[i].shape);
    for (int64_t j = 0; j < n; j++)
      if (fabs(g[i][j] - r->grad[i][j]) > 1e-9 * (1 + fabs(r->grad[i][j])))
        fail_msg("%s %s: d/dx%d[%lld] = %.12g, single device %.12g", r->c->name,
                 where, i, (long long)j, g[i][j], r->grad[i][j]);
  }
}

static void describe(const run *r, dt_placement pl[3][2], int mdims, char *buf, size_t n) {
  size_t o = 0;
  for (int i = 0; i < r->c->nin && o < n; i++)
    for (int d = 0; d < mdims && o < n; d++) {
      dt_placement p = pl[i][d];
      o += (size_t)snprintf(buf + o, n - o, "%s%c%s", d ? "" : (i ? " | " : ""),
                            p.kind == DT_PLACEMENT_SHARD ? 'S' : p.kind == DT_PLACEMENT_PARTIAL ? 'P' : 'R',
                            d + 1 < mdims ? "," : "");
      if (p.kind == DT_PLACEMENT_SHARD && o < n) o += (size_t)snprintf(buf + o, n - o, "%d", p.dim);
    }
}

/* combination `idx` of the inputs' options (mixed radix, per mesh dim) */
static void combo(const run *r, const options *opt, int mdims, int64_t idx,
                  dt_placement pl[3][2]) {
  for (int d = 0; d < mdims; d++)
    for (int i = 0; i < r->c->nin; i++) {
      pl[i][d] = opt[i].p[idx % opt[i].n];
      idx /= opt[i].n;
    }
}

typedef struct config { const char *name; dt_shape shape; } config;
static const config configs[] = {
  {"mesh(2)", {1, {2}}}, {"mesh(3)", {1, {3}}}, {"mesh(2x2)", {2, {2, 2}}},
};

static int64_t run_on_mesh(run *r, dt_mesh *m, int mdims, const char *mname) {
  options opt[3];
  int64_t total = 1;
  for (int i = 0; i < r->c->nin; i++) {
    opt[i] = options_of(&r->c->in[i]);
    for (int d = 0; d < mdims; d++) total *= opt[i].n;
  }
  int64_t limit = reduced_sweep() ? 4 : mdims == 1 ? total : 24;
  int64_t step = total > limit ? total / limit : 1, done = 0;
  for (int64_t idx = 0; idx < total; idx += step, done++) {
    dt_placement pl[3][2];
    combo(r, opt, mdims, idx, pl);
    char where[160];
    int o = snprintf(where, sizeof where, "%s [", mname);
    describe(r, pl, mdims, where + o, sizeof where - (size_t)o - 2);
    strcat(where, "]");
    double *g[3] = {0};
    grads_of(r, m, (const dt_placement(*)[2])pl, g);
    compare_grads(r, g, where);
    for (int i = 0; i < 3; i++) free(g[i]);
  }
  return done;
}

static void test_dtensor_grads(void **state) {
  (void)state;
  int64_t total = 0;
  for (size_t k = 0; k < sizeof configs / sizeof *configs; k++) {
    const config *cf = &configs[k];
    dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
        .num_ranks = (int)tu_shape_numel(cf->shape), .auto_redistribute = true});
    dt_mesh *m = dt_mesh_init(rt, NULL, cf->shape, NULL);
    assert_non_null(m);
    for (int c = 0; c < NCASES; c++) {
      run r;
      run_init(&r, &cases[c], c + 1);
      grads_of(&r, NULL, NULL, r.grad);
      total += run_on_mesh(&r, m, cf->shape.ndim, cf->name);
      run_free(&r);
    }
    dt_mesh_release(m);
    dt_runtime_destroy(rt);
  }
  printf("dtensor gradients: %lld placement combinations, all equal to the "
         "single device\n", (long long)total);
  assert_int_equal(settled_nodes(), 0);
}

/* ---- the ops that are not differentiable */
static void test_not_differentiable(void **state) {
  (void)state;
  dt_tensor_options o = {.dtype = DT_FLOAT64, .requires_grad = true};
  dt_tensor *x = dt_ones(DT_SHAPE(3, 4), &o);
  dt_tensor *in[2] = {x, x};
  op_fn fns[] = {op_lt, op_argmax_10, op_cast_int};
  for (int i = 0; i < 3; i++) {
    dt_tensor *y = fns[i](in);
    assert_non_null(y);
    assert_false(dt_tensor_requires_grad(y));
    assert_null(dt_tensor_grad_fn(y));
    dt_tensor_release(y);
  }
  dt_tensor_release(x);
  assert_int_equal(settled_nodes(), 0);
}

/* ---- the graph's life */
static dt_tensor *square_sum(dt_tensor *x) {
  dt_tensor *y = dt_mul(x, x), *l = dt_sum(y, NULL, 0, false);
  dt_tensor_release(y); /* the graph keeps what it needs */
  return l;
}

static double grad_at(dt_tensor *x, int i) {
  dt_tensor *g = dt_grad(x);
  assert_non_null(g);
  double *v = tu_values(g), r = v[i];
  free(v);
  dt_tensor_release(g);
  return r;
}

static void test_graph_life(void **state) {
  (void)state;
  dt_tensor_options o = {.dtype = DT_FLOAT64, .requires_grad = true};
  double xv[3] = {1, 2, -3};
  dt_tensor *x = dt_from_host(xv, DT_SHAPE(3), &o);
  dt_tensor *l = square_sum(x);
  assert_string_equal(dt_tensor_grad_fn(l), "sum");
  assert_null(dt_tensor_grad_fn(x));
  assert_null(dt_grad(x)); /* nothing yet */
  assert_int_equal(dt_backward(l), DT_OK);
  assert_true(grad_at(x, 2) == -6);
  /* freed after the first backward */
  assert_int_equal(dt_backward(l), DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "retain_graph"));
  dt_tensor_release(l);
  /* retain_graph: twice, gradients accumulate */
  l = square_sum(x);
  dt_backward_options bo = {.retain_graph = true};
  assert_int_equal(dt_backward_ex(l, &bo), DT_OK);
  assert_int_equal(dt_backward_ex(l, &bo), DT_OK);
  assert_true(grad_at(x, 1) == 4 + 4 + 4); /* 4 from before */
  dt_zero_grad(x);
  assert_null(dt_grad(x));
  /* an explicit seed */
  dt_tensor *seed = dt_full(DT_SHAPE(), 0.5, &(dt_tensor_options){.dtype = DT_FLOAT64});
  bo.grad = seed;
  bo.retain_graph = false;
  assert_int_equal(dt_backward_ex(l, &bo), DT_OK);
  assert_true(grad_at(x, 0) == 1);
  dt_tensor_release(seed);
  dt_tensor_release(l);
  /* no-grad: no graph */
  bool was = dt_set_grad_enabled(false);
  assert_true(was);
  l = square_sum(x);
  assert_false(dt_tensor_requires_grad(l));
  assert_int_equal(dt_backward(l), DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "dt_backward: the tensor does not require grad"));
  dt_tensor_release(l);
  assert_false(dt_set_grad_enabled(true));
  assert_true(dt_grad_enabled());
  /* views keep requires_grad */
  dt_tensor *u = dt_unsqueeze(x, 0), *v = dt_transpose(u, 0, 1);
  assert_true(dt_tensor_requires_grad(u) && dt_tensor_requires_grad(v));
  assert_string_equal(dt_tensor_grad_fn(v), "transpose");
  dt_tensor_release(u);
  dt_tensor_release(v);
  dt_tensor_release(x);
  assert_int_equal(settled_nodes(), 0);
}

static void test_errors(void **state) {
  (void)state;
  dt_tensor_options o = {.dtype = DT_FLOAT64, .requires_grad = true};
  dt_tensor *x = dt_ones(DT_SHAPE(2, 2), &o);
  dt_tensor *y = dt_mul_scalar(x, 3);
  assert_int_equal(dt_backward(y), DT_ERR_SHAPE);
  assert_string_equal(dt_last_error(), "dt_backward: the root has shape [2, 2]; an "
                      "implicit gradient needs one element (pass options.grad to "
                      "dt_backward_ex)");
  dt_tensor *bad = dt_ones(DT_SHAPE(3), &(dt_tensor_options){.dtype = DT_FLOAT64});
  dt_backward_options bo = {.grad = bad};
  assert_int_equal(dt_backward_ex(y, &bo), DT_ERR_SHAPE);
  assert_string_equal(dt_last_error(), "dt_backward_ex: options.grad has shape [3], "
                      "the root [2, 2]");
  assert_int_equal(dt_tensor_set_requires_grad(y, false), DT_ERR_INVALID_ARGUMENT);
  assert_string_equal(dt_last_error(), "dt_tensor_set_requires_grad: only a leaf's "
                      "requires_grad can change; this tensor was made by mul_scalar "
                      "(detach it first)");
  dt_tensor *i = dt_zeros(DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_INT64});
  assert_int_equal(dt_tensor_set_requires_grad(i, true), DT_ERR_DTYPE);
  dt_clear_error();
  assert_int_equal(dt_backward(NULL), DT_ERR_INVALID_ARGUMENT);
  assert_string_equal(dt_last_error(), "dt_backward: root is NULL");
  dt_tensor_release(i);
  dt_tensor_release(bad);
  dt_tensor_release(y);
  dt_tensor_release(x);
  assert_int_equal(settled_nodes(), 0);
}

/* ---- threads: eight graphs at once over one shared leaf */
typedef struct shared { dt_tensor *w; } shared;
static void thread_body(void *arg, int i) {
  shared *s = arg;
  double xv[4] = {1.0 + i, 2, 3, 4};
  dt_tensor *x = dt_from_host(xv, DT_SHAPE(4), &(dt_tensor_options){.dtype = DT_FLOAT64});
  for (int rep = 0; rep < 20; rep++) {
    dt_tensor *p = dt_mul(x, s->w), *l = dt_sum(p, NULL, 0, false);
    TU_CHECK(l && dt_backward(l) == DT_OK, "%s", dt_last_error());
    dt_tensor_release(p);
    dt_tensor_release(l);
  }
  dt_tensor_release(x);
}

static void test_threads(void **state) {
  (void)state;
  shared s = {dt_zeros(DT_SHAPE(4), &(dt_tensor_options){.dtype = DT_FLOAT64,
                                                          .requires_grad = true})};
  tu_run_threads(8, thread_body, &s);
  TU_ASSERT_NO_THREAD_FAILURES();
  /* d/dw sum(x * w) = x; summed over 8 threads x 20 reps */
  assert_true(grad_at(s.w, 0) == 20 * (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8));
  assert_true(grad_at(s.w, 3) == 20 * 8 * 4);
  dt_tensor_release(s.w);
  assert_int_equal(settled_nodes(), 0);
}

/* ---- from a future callback: a whole training step on the completion
 * thread (a server that trains when data arrives) */
typedef struct cb_state { dt_tensor *p[1]; _Atomic int done; int ok; } cb_state;
static void on_data(dt_future *f, dt_status st, void *user) {
  (void)f;
  cb_state *s = user;
  dt_optimizer *opt = dt_sgd_create(s->p, 1, &(dt_sgd_options){.lr = 0.5});
  dt_tensor *l = st == DT_OK && opt ? square_sum(s->p[0]) : NULL;
  s->ok = l && dt_backward(l) == DT_OK && dt_optimizer_step(opt) == DT_OK;
  double v[3] = {0};
  /* p - 0.5 * 2p = 0 */
  s->ok = s->ok && dt_to_host(s->p[0], v, sizeof v) == DT_OK && v[0] == 0 && v[2] == 0;
  dt_tensor_release(l);
  dt_optimizer_release(opt);
  atomic_store(&s->done, 1);
}

static void test_future_callback(void **state) {
  (void)state;
  double xv[3] = {1, 2, 3}, host[3];
  cb_state s = {.p = {dt_from_host(xv, DT_SHAPE(3), &(dt_tensor_options){
                          .dtype = DT_FLOAT64, .requires_grad = true})}};
  dt_future *f = dt_to_host_async(s.p[0], host, sizeof host);
  assert_non_null(f);
  assert_int_equal(dt_future_then(f, on_data, &s), DT_OK);
  while (!atomic_load(&s.done)) tu_sleep_ns(100000);
  assert_true(s.ok);
  dt_future_release(f);
  dt_tensor_release(s.p[0]);
  assert_int_equal(settled_nodes(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_graph_life),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_not_differentiable),
    cmocka_unit_test(test_threads),
    cmocka_unit_test(test_future_callback),
    cmocka_unit_test(test_finite_differences),
    cmocka_unit_test(test_dtensor_grads),
  };
  return TU_RUN_TESTS_WITH_ALARM(900, tests);
}
