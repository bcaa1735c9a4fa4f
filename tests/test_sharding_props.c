/* The property test of sharding propagation: for every op of
 * the library, every combination of input placements on 1-D meshes of 2,
 * 3 and 4 ranks and 2-D meshes of 2x2 and 2x3, on shapes that divide and
 * shapes that do not:
 *   strict mode: the op is accepted, runs no collective, and dt_to_host
 *     of its result equals the single-device result; or it fails with
 *     DT_ERR_PLACEMENT;
 *   auto mode: the same case always succeeds with the right value, and a
 *     case strict refused ran at least one collective.
 * The reference is the same op on single-device tensors (whose kernels
 * the op suites check against naive double loops). DTORCH_SWEEP=reduced
 * (the sanitizer builds) samples each case's combinations. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/call.h"
#include "op_cases.h"
#include "testutil.h"

enum { V_ANY = TU_V_ANY, V_POS = TU_V_POS, V_NONZERO = TU_V_NONZERO,
       V_INDEX = TU_V_INDEX, V_BOOL = TU_V_BOOL, V_SMALLINT = TU_V_SMALLINT };
typedef tu_in_spec in_spec;
typedef dt_tensor *(*op_fn)(dt_tensor **in);
typedef struct op_case { const char *name; op_fn fn; int nin; in_spec in[3]; } op_case;

#define F32(...) {DT_FLOAT32, DT_SHAPE(__VA_ARGS__), V_ANY, 0}
#define POS(...) {DT_FLOAT32, DT_SHAPE(__VA_ARGS__), V_POS, 0}
#define NZ(...) {DT_FLOAT32, DT_SHAPE(__VA_ARGS__), V_NONZERO, 0}
#define BOOLS(...) {DT_BOOL, DT_SHAPE(__VA_ARGS__), V_BOOL, 0}
#define IDX(r, ...) {DT_INT64, DT_SHAPE(__VA_ARGS__), V_INDEX, r}
#define INTS(...) {DT_INT64, DT_SHAPE(__VA_ARGS__), V_SMALLINT, 0}

/* ---- the ops, as one-line adapters */
#define BIN(f) static dt_tensor *op_##f(dt_tensor **x) { return dt_##f(x[0], x[1]); }
#define UN(f) static dt_tensor *op_##f(dt_tensor **x) { return dt_##f(x[0]); }
#define SC(f, v) static dt_tensor *op_##f(dt_tensor **x) { return dt_##f(x[0], v); }
BIN(add) BIN(sub) BIN(mul) BIN(div) BIN(pow) BIN(maximum) BIN(minimum)
BIN(floor_divide) BIN(remainder) BIN(eq) BIN(ne) BIN(lt) BIN(le) BIN(gt) BIN(ge)
BIN(logical_and) BIN(logical_or) BIN(matmul)
SC(add_scalar, 1.5) SC(sub_scalar, 0.5) SC(mul_scalar, -2.0) SC(div_scalar, 4.0)
SC(pow_scalar, 2.0) SC(floor_divide_scalar, 3.0) SC(remainder_scalar, 3.0)
UN(neg) UN(abs) UN(exp) UN(log) UN(sqrt) UN(rsqrt) UN(sin) UN(cos) UN(tanh)
UN(sigmoid) UN(relu) UN(silu) UN(gelu) UN(gelu_tanh) UN(logical_not)
UN(contiguous) UN(clone) UN(squeeze_all)
static dt_tensor *op_clamp(dt_tensor **x) { return dt_clamp(x[0], -0.5, 0.75); }
static dt_tensor *op_where(dt_tensor **x) { return dt_where(x[0], x[1], x[2]); }
static dt_tensor *op_masked_fill(dt_tensor **x) { return dt_masked_fill(x[0], x[1], 9.0); }
static dt_tensor *op_cast_f64(dt_tensor **x) { return dt_cast(x[0], DT_FLOAT64); }
static dt_tensor *op_cast_i64(dt_tensor **x) { return dt_cast(x[0], DT_INT64); }
static dt_tensor *op_view(dt_tensor **x) { return dt_view(x[0], DT_SHAPE(2, 3, 4)); }
static dt_tensor *op_reshape(dt_tensor **x) { return dt_reshape(x[0], DT_SHAPE(-1)); }
static dt_tensor *op_reshape2(dt_tensor **x) { return dt_reshape(x[0], DT_SHAPE(3, 2, 6)); }
static dt_tensor *op_transpose(dt_tensor **x) { return dt_transpose(x[0], 0, 1); }
static dt_tensor *op_permute(dt_tensor **x) {
  static const int p[] = {2, 0, 1};
  return dt_permute(x[0], p, 3);
}
static dt_tensor *op_slice(dt_tensor **x) { return dt_slice(x[0], 1, 1, 5, 2); }
static dt_tensor *op_narrow(dt_tensor **x) { return dt_narrow(x[0], 0, 1, 2); }
static dt_tensor *op_select(dt_tensor **x) { return dt_select(x[0], 1, 2); }
static dt_tensor *op_expand(dt_tensor **x) { return dt_expand(x[0], DT_SHAPE(2, 4, 5)); }
static dt_tensor *op_squeeze(dt_tensor **x) { return dt_squeeze(x[0], 1); }
static dt_tensor *op_unsqueeze(dt_tensor **x) { return dt_unsqueeze(x[0], 1); }
static dt_tensor *op_flatten(dt_tensor **x) { return dt_flatten(x[0], 0, 1); }
static const int dim0[] = {0}, dim1[] = {1}, dims01[] = {0, 1};
#define RED(f, dims, n, keep)                                                  \
  static dt_tensor *op_##f##_##n##keep(dt_tensor **x) {                       \
    return dt_##f(x[0], dims, n, keep);                                      \
  }
RED(sum, dim0, 1, 0) RED(sum, dims01, 0, 0) RED(mean, dim1, 1, 1) RED(mean, dim0, 1, 0)
RED(amax, dim0, 1, 0) RED(amin, dim1, 1, 1) RED(prod, dim1, 1, 0)
RED(argmax, dim1, 1, 0) RED(argmin, dim0, 1, 1)
static dt_tensor *op_var(dt_tensor **x) { return dt_var(x[0], dim0, 1, true, false); }
static dt_tensor *op_softmax(dt_tensor **x) { return dt_softmax(x[0], 1); }
static dt_tensor *op_log_softmax(dt_tensor **x) { return dt_log_softmax(x[0], 0); }
static dt_tensor *op_layer_norm(dt_tensor **x) { return dt_layer_norm(x[0], x[1], x[2], 1e-5); }
static dt_tensor *op_rms_norm(dt_tensor **x) { return dt_rms_norm(x[0], x[1], 1e-6); }
static dt_tensor *op_linear(dt_tensor **x) { return dt_linear(x[0], x[1], x[2]); }
static dt_tensor *op_linear_nobias(dt_tensor **x) { return dt_linear(x[0], x[1], NULL); }
static dt_tensor *op_embedding(dt_tensor **x) { return dt_embedding(x[0], x[1]); }
static dt_tensor *op_index_select(dt_tensor **x) { return dt_index_select(x[0], 0, x[1]); }
static dt_tensor *op_ce_mean(dt_tensor **x) { return dt_cross_entropy(x[0], x[1], DT_REDUCTION_MEAN, 1); }
static dt_tensor *op_ce_sum(dt_tensor **x) { return dt_cross_entropy(x[0], x[1], DT_REDUCTION_SUM, -100); }
static dt_tensor *op_ce_none(dt_tensor **x) { return dt_cross_entropy(x[0], x[1], DT_REDUCTION_NONE, -100); }
static dt_tensor *op_ce_probs(dt_tensor **x) { return dt_cross_entropy_smoothed(x[0], x[1], DT_REDUCTION_MEAN, -100, 0.1); }
static dt_tensor *op_dropout(dt_tensor **x) {
  dt_manual_seed(1234); /* the same stream for the DTensor and the reference */
  return dt_dropout(x[0], 0.4, true);
}
static dt_tensor *op_gelu_backward(dt_tensor **x) { return dt_gelu_backward(x[0], x[1]); }
static dt_tensor *op_slice_scatter(dt_tensor **x) {
  return dt_slice_scatter(x[0], DT_SHAPE(5, 7), 1, 1, 6, 2); /* cols 1, 3, 5 */
}
static dt_tensor *op_index_select_backward(dt_tensor **x) {
  return dt_index_select_backward(x[0], 0, x[1], 5);
}
static dt_tensor *op_ce_bw_mean(dt_tensor **x) {
  return dt_cross_entropy_backward(x[0], x[1], x[2], DT_REDUCTION_MEAN, 1, 0.0);
}
static dt_tensor *op_ce_bw_sum(dt_tensor **x) {
  return dt_cross_entropy_backward(x[0], x[1], x[2], DT_REDUCTION_SUM, -100, 0.2);
}
static dt_tensor *op_ce_bw_none(dt_tensor **x) {
  return dt_cross_entropy_backward(x[0], x[1], x[2], DT_REDUCTION_NONE, 2, 0.0);
}
static dt_tensor *op_ce_bw_probs(dt_tensor **x) {
  return dt_cross_entropy_backward(x[0], x[1], x[2], DT_REDUCTION_MEAN, -100, 0.1);
}
static dt_tensor *op_adam_moment(dt_tensor **x) { return dt_adam_moment(x[0], x[1], 0.9, true); }
static dt_tensor *op_adamw_apply(dt_tensor **x) { return dt_adamw_apply(x[0], x[1], x[2], 0.01, 1e-8, 0.99); }
static dt_tensor *op_cat(dt_tensor **x) { return dt_cat(x, 2, 1); }
static dt_tensor *op_stack(dt_tensor **x) { return dt_stack(x, 2, 0); }

static const op_case cases[] = {
  {"add", op_add, 2, {F32(4, 6), F32(4, 6)}},
  {"add_bcast", op_add, 2, {F32(5, 3), F32(3)}},
  {"sub", op_sub, 2, {F32(5, 3), F32(5, 3)}},
  {"mul", op_mul, 2, {F32(4, 6), F32(1, 6)}},
  {"div", op_div, 2, {F32(5, 3), NZ(5, 3)}},
  {"pow", op_pow, 2, {POS(4, 3), F32(4, 3)}},
  {"maximum", op_maximum, 2, {F32(5, 3), F32(5, 3)}},
  {"minimum", op_minimum, 2, {F32(4, 6), F32(4, 6)}},
  {"floor_divide", op_floor_divide, 2, {F32(5, 3), NZ(5, 3)}},
  {"remainder", op_remainder, 2, {F32(4, 3), NZ(4, 3)}},
  {"eq", op_eq, 2, {INTS(5, 3), INTS(5, 3)}},
  {"ne", op_ne, 2, {F32(4, 3), F32(4, 3)}},
  {"lt", op_lt, 2, {F32(5, 3), F32(3)}},
  {"le", op_le, 2, {F32(4, 3), F32(4, 3)}},
  {"gt", op_gt, 2, {F32(4, 3), F32(4, 3)}},
  {"ge", op_ge, 2, {F32(5, 2), F32(5, 2)}},
  {"logical_and", op_logical_and, 2, {BOOLS(4, 3), BOOLS(4, 3)}},
  {"logical_or", op_logical_or, 2, {BOOLS(5, 3), BOOLS(5, 3)}},
  {"add_scalar", op_add_scalar, 1, {F32(5, 3)}},
  {"sub_scalar", op_sub_scalar, 1, {F32(4, 6)}},
  {"mul_scalar", op_mul_scalar, 1, {F32(5, 3)}},
  {"div_scalar", op_div_scalar, 1, {F32(4, 6)}},
  {"pow_scalar", op_pow_scalar, 1, {F32(5, 3)}},
  {"floor_divide_scalar", op_floor_divide_scalar, 1, {INTS(5, 3)}},
  {"remainder_scalar", op_remainder_scalar, 1, {F32(4, 3)}},
  {"neg", op_neg, 1, {F32(5, 3)}},
  {"abs", op_abs, 1, {F32(4, 6)}},
  {"exp", op_exp, 1, {F32(5, 3)}},
  {"log", op_log, 1, {POS(4, 3)}},
  {"sqrt", op_sqrt, 1, {POS(5, 3)}},
  {"rsqrt", op_rsqrt, 1, {POS(4, 3)}},
  {"sin", op_sin, 1, {F32(5, 3)}},
  {"cos", op_cos, 1, {F32(4, 3)}},
  {"tanh", op_tanh, 1, {F32(5, 3)}},
  {"sigmoid", op_sigmoid, 1, {F32(4, 6)}},
  {"relu", op_relu, 1, {F32(5, 3)}},
  {"silu", op_silu, 1, {F32(4, 3)}},
  {"gelu", op_gelu, 1, {F32(5, 3)}},
  {"gelu_tanh", op_gelu_tanh, 1, {F32(4, 3)}},
  {"logical_not", op_logical_not, 1, {BOOLS(5, 3)}},
  {"clamp", op_clamp, 1, {F32(5, 3)}},
  {"where", op_where, 3, {BOOLS(4, 3), F32(4, 3), F32(3)}},
  {"masked_fill", op_masked_fill, 2, {F32(5, 3), BOOLS(5, 3)}},
  {"cast_f64", op_cast_f64, 1, {F32(5, 3)}},
  {"cast_i64", op_cast_i64, 1, {F32(4, 3)}},
  {"view", op_view, 1, {F32(6, 4)}},
  {"reshape_flat", op_reshape, 1, {F32(5, 3)}},
  {"reshape_split", op_reshape2, 1, {F32(6, 6)}},
  {"transpose", op_transpose, 1, {F32(5, 3)}},
  {"permute", op_permute, 1, {F32(2, 3, 5)}},
  {"slice", op_slice, 1, {F32(4, 6)}},
  {"narrow", op_narrow, 1, {F32(5, 3)}},
  {"select", op_select, 1, {F32(4, 3)}},
  {"expand", op_expand, 1, {F32(4, 1)}},
  {"squeeze", op_squeeze, 1, {F32(5, 1)}},
  {"squeeze_all", op_squeeze_all, 1, {F32(1, 5)}},
  {"unsqueeze", op_unsqueeze, 1, {F32(5, 3)}},
  {"flatten", op_flatten, 1, {F32(4, 3)}},
  {"contiguous", op_contiguous, 1, {F32(5, 3)}},
  {"clone", op_clone, 1, {F32(4, 6)}},
  {"sum_dim0", op_sum_10, 1, {F32(5, 3)}},
  {"sum_all", op_sum_00, 1, {F32(4, 6)}},
  {"mean_dim1_keep", op_mean_11, 1, {F32(5, 3)}},
  {"mean_dim0", op_mean_10, 1, {F32(5, 3)}},
  {"amax", op_amax_10, 1, {F32(5, 3)}},
  {"amin_keep", op_amin_11, 1, {F32(4, 6)}},
  {"prod", op_prod_10, 1, {F32(4, 3)}},
  {"argmax", op_argmax_10, 1, {F32(5, 3)}},
  {"argmin_keep", op_argmin_11, 1, {F32(4, 3)}},
  {"var", op_var, 1, {F32(5, 3)}},
  {"softmax", op_softmax, 1, {F32(5, 3)}},
  {"log_softmax", op_log_softmax, 1, {F32(4, 6)}},
  {"layer_norm", op_layer_norm, 3, {F32(5, 6), F32(6), F32(6)}},
  {"rms_norm", op_rms_norm, 2, {F32(4, 6), F32(6)}},
  {"matmul", op_matmul, 2, {F32(5, 6), F32(6, 3)}},
  {"matmul_batched", op_matmul, 2, {F32(2, 3, 4), F32(4, 5)}},
  {"matmul_vec", op_matmul, 2, {F32(4, 6), F32(6)}},
  {"linear", op_linear, 3, {F32(5, 6), F32(4, 6), F32(4)}},
  {"linear_nobias", op_linear_nobias, 2, {F32(3, 6), F32(5, 6)}},
  {"embedding", op_embedding, 2, {IDX(7, 3, 4), F32(7, 6)}},
  {"index_select", op_index_select, 2, {F32(5, 3), IDX(5, 4)}},
  {"cross_entropy_mean", op_ce_mean, 2, {F32(6, 5), IDX(5, 6)}},
  {"cross_entropy_sum", op_ce_sum, 2, {F32(5, 4), IDX(4, 5)}},
  {"cross_entropy_none", op_ce_none, 2, {F32(5, 4, 3), IDX(4, 5, 3)}},
  {"cross_entropy_probs", op_ce_probs, 2, {F32(5, 4), POS(5, 4)}},
  {"dropout", op_dropout, 1, {F32(5, 6)}},
  {"cat", op_cat, 2, {F32(4, 3), F32(4, 2)}},
  {"stack", op_stack, 2, {F32(5, 3), F32(5, 3)}},
  {"gelu_backward", op_gelu_backward, 2, {F32(5, 3), F32(5, 3)}},
  {"gelu_backward_bcast", op_gelu_backward, 2, {F32(3), F32(4, 3)}},
  {"slice_scatter", op_slice_scatter, 1, {F32(5, 3)}},
  {"index_select_backward", op_index_select_backward, 2, {F32(4, 3), IDX(5, 4)}},
  {"cross_entropy_backward_mean", op_ce_bw_mean, 3, {F32(), F32(4, 3, 3), IDX(3, 4, 3)}},
  {"cross_entropy_backward_sum", op_ce_bw_sum, 3, {F32(), F32(5, 4), IDX(4, 5)}},
  {"cross_entropy_backward_none", op_ce_bw_none, 3, {F32(5), F32(5, 4), IDX(4, 5)}},
  {"cross_entropy_backward_probs", op_ce_bw_probs, 3, {F32(), F32(5, 4), POS(5, 4)}},
  {"adam_moment", op_adam_moment, 2, {F32(5, 3), F32(5, 3)}},
  {"adamw_apply", op_adamw_apply, 3, {F32(4, 6), F32(4, 6), POS(4, 6)}},
};
#define NCASES (int)(sizeof cases / sizeof *cases)

/* ---- inputs */

static dt_tensor *dtensor_of(const double *v, const in_spec *in, dt_mesh *m,
                             const dt_placement *pl) {
  return tu_case_tensor(v, in, m, pl, false);
}

/* ---- placements to try for one input on one mesh dim */
typedef struct options { int n; dt_placement p[12]; } options;
static options options_of(const in_spec *in, int mesh_ndim) {
  options o = {0};
  o.p[o.n++] = DT_REPLICATE;
  for (int d = 0; d < in->shape.ndim; d++) o.p[o.n++] = DT_SHARD(d);
  if (in->dtype == DT_FLOAT32) {
    o.p[o.n++] = DT_PARTIAL(DT_REDUCE_SUM);
    o.p[o.n++] = DT_PARTIAL(DT_REDUCE_MAX);
    if (mesh_ndim == 1) {
      o.p[o.n++] = DT_PARTIAL(DT_REDUCE_AVG);
      o.p[o.n++] = DT_PARTIAL(DT_REDUCE_MIN);
    }
  }
  return o;
}

/* ---- comparison */
static bool close_enough(double got, double want, dt_dtype d) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  if (!(d == DT_FLOAT32 || d == DT_FLOAT64)) return got == want;
  return fabs(got - want) <= 2e-4 + 2e-4 * fabs(want);
}

typedef struct ref { dt_shape shape; dt_dtype dtype; double *v; } ref;

static void check_result(dt_tensor *t, const ref *r, const char *what) {
  dt_shape s = dt_tensor_shape(t);
  if (s.ndim != r->shape.ndim || memcmp(s.dims, r->shape.dims, sizeof(int64_t) * (size_t)s.ndim))
    fail_msg("%s: shape differs from the single-device result", what);
  if (dt_tensor_dtype(t) != r->dtype)
    fail_msg("%s: dtype %s, single device %s", what, dt_dtype_name(dt_tensor_dtype(t)),
             dt_dtype_name(r->dtype));
  double *got = tu_values(t);
  int64_t n = tu_shape_numel(s);
  for (int64_t i = 0; i < n; i++)
    if (!close_enough(got[i], r->v[i], r->dtype))
      fail_msg("%s: element %lld is %.9g, single device %.9g", what,
               (long long)i, got[i], r->v[i]);
  free(got);
}

/* ---- one mesh configuration */
typedef struct config { const char *name; dt_shape shape; } config;
static const config configs[] = {
  {"mesh(2)", {1, {2}}}, {"mesh(3)", {1, {3}}}, {"mesh(4)", {1, {4}}},
  {"mesh(2x2)", {2, {2, 2}}}, {"mesh(2x3)", {2, {2, 3}}},
};

/* DTORCH_TEST_DEVICE=cuda: the meshes' ranks are CUDA ranks on one GPU
 * (the references stay single-device CPU tensors); ops the CUDA backend
 * lacks are listed and skipped (the gpu-labelled ctest entry) */
static const char *test_device = "cpu";
static bool on_cuda(void) { return strcmp(test_device, "cuda") == 0; }
static char unsupported_names[4096];

typedef struct world { dt_runtime *rt[2]; dt_mesh *mesh[2]; int ndim; } world;
static world world_make(const config *c) {
  world w = {.ndim = c->shape.ndim};
  int n = (int)tu_shape_numel(c->shape);
  for (int k = 0; k < 2; k++) {
    dt_runtime_options o = {.num_ranks = n, .auto_redistribute = k == 1,
                            .device = test_device};
    w.rt[k] = dt_runtime_create(&o);
    if (!w.rt[k]) fail_msg("runtime: %s", dt_last_error());
    w.mesh[k] = dt_mesh_init(w.rt[k], test_device, c->shape, NULL);
    assert_non_null(w.mesh[k]);
  }
  return w;
}
static void world_free(world *w) {
  for (int k = 0; k < 2; k++) {
    dt_mesh_release(w->mesh[k]);
    dt_runtime_destroy(w->rt[k]);
  }
}

static int64_t collectives(dt_comm_counts c) {
  return c.all_reduce + c.all_gather + c.reduce_scatter + c.all_to_all +
         c.broadcast + c.other;
}

typedef struct totals { int64_t cases, strict_ok, strict_refused; } totals;

/* the ops that ran on DTensors (counted on the first mesh): every op of
 * the library but the factories must be among them */
static bool counting;
static bool seen[CORE_OP_COUNT];
static bool is_factory(core_op_id op) {
  return op == CORE_OP_EMPTY || op == CORE_OP_FULL || op == CORE_OP_ARANGE ||
         op == CORE_OP_RAND || op == CORE_OP_RANDN || op == CORE_OP_FROM_HOST;
}

/* an op the CUDA backend lacks (once per name) */
static void note_unsupported(const char *name) {
  if (strstr(unsupported_names, name)) return;
  size_t at = strlen(unsupported_names);
  snprintf(unsupported_names + at, sizeof unsupported_names - at, "%s%s",
           at ? ", " : "", name);
}

/* runs case oc with placements pl[input][mesh dim] on the world: strict,
 * then (when refused) auto */
static void run_combo(const op_case *oc, double **vals, const ref *r,
                      world *w, dt_placement pl[3][DT_MAX_DIMS], totals *t,
                      const char *cfg) {
  char what[512], ps[256] = "";
  for (int i = 0; i < oc->nin; i++) {
    char one[64] = "";
    size_t at = strlen(ps);
    snprintf(ps + at, sizeof ps - at, "%s[", i ? " " : "");
    for (int d = 0; d < w->ndim; d++) {
      dt_placement p = pl[i][d];
      if (p.kind == DT_PLACEMENT_SHARD) snprintf(one, sizeof one, "S(%d)", p.dim);
      else if (p.kind == DT_PLACEMENT_PARTIAL) snprintf(one, sizeof one, "P%d", p.reduce);
      else snprintf(one, sizeof one, "R");
      at = strlen(ps);
      snprintf(ps + at, sizeof ps - at, "%s%s", d ? "," : "", one);
    }
    at = strlen(ps);
    snprintf(ps + at, sizeof ps - at, "]");
  }
  snprintf(what, sizeof what, "%s on %s with %s", oc->name, cfg, ps);
  t->cases++;
  for (int k = 0; k < 2; k++) {
    dt_tensor *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < oc->nin; i++)
      in[i] = dtensor_of(vals[i], &oc->in[i], w->mesh[k], pl[i]);
    dt_op_counter *cnt = k == 0 && counting ? dt_op_counter_push() : NULL;
    dt_comm_count_begin();
    dt_tensor *out = oc->fn(in);
    dt_comm_counts cc = dt_comm_count_end();
    if (cnt) {
      dt_op_counter_pop(cnt);
      for (int op = 0; op < CORE_OP_COUNT; op++)
        if (dt_op_counter_get(cnt, core_op_name((core_op_id)op)) > 0) seen[op] = true;
      dt_op_counter_free(cnt);
    }
    dt_status st = dt_last_status();
    char err[600];
    snprintf(err, sizeof err, "%s", out ? "" : dt_last_error());
    if (!out && on_cuda() && st == DT_ERR_UNSUPPORTED && strstr(err, "cuda")) {
      note_unsupported(oc->name);
      for (int i = 0; i < oc->nin; i++) dt_tensor_release(in[i]);
      return;
    }
    if (out) {
      check_result(out, r, what);
      if (k == 0 && collectives(cc))
        fail_msg("%s: strict mode ran %lld collectives", what, (long long)collectives(cc));
      if (k == 1 && !collectives(cc))
        fail_msg("%s: strict mode refused it, auto mode ran no collective", what);
    }
    for (int i = 0; i < oc->nin; i++) dt_tensor_release(in[i]);
    dt_tensor_release(out);
    if (out) {
      if (k == 0) t->strict_ok++;
      return;
    }
    if (k == 1) fail_msg("%s: auto mode failed: %s", what, err);
    if (st != DT_ERR_PLACEMENT)
      fail_msg("%s: strict mode failed with status %d (not DT_ERR_PLACEMENT): %s",
               what, (int)st, err);
    t->strict_refused++;
  }
}

/* one Partial kind per tensor (dt_from_host refuses a mix) */
static bool mixed_partials(dt_placement pl[3][DT_MAX_DIMS], int nin, int nd) {
  for (int i = 0; i < nin; i++)
    for (int a = 0; a < nd; a++)
      for (int b = a + 1; b < nd; b++)
        if (pl[i][a].kind == DT_PLACEMENT_PARTIAL &&
            pl[i][b].kind == DT_PLACEMENT_PARTIAL &&
            pl[i][a].reduce != pl[i][b].reduce)
          return true;
  return false;
}

static bool reduced_sweep(void) {
  const char *e = getenv("DTORCH_SWEEP");
  return e && !strcmp(e, "reduced");
}

static void run_case(const op_case *oc, int ci, world *w, const config *cfg,
                     totals *t) {
  double *vals[3] = {NULL, NULL, NULL};
  dt_tensor *sd[3] = {NULL, NULL, NULL};
  for (int i = 0; i < oc->nin; i++) {
    vals[i] = tu_case_values(&oc->in[i], 1000u * (uint64_t)ci + (uint64_t)i);
    sd[i] = tu_tensor(vals[i], oc->in[i].shape, oc->in[i].dtype);
  }
  dt_tensor *want = oc->fn(sd);
  if (!want) fail_msg("%s: single device: %s", oc->name, dt_last_error());
  ref r = {dt_tensor_shape(want), dt_tensor_dtype(want), tu_values(want)};
  dt_tensor_release(want);
  options opt[3];
  int64_t per[3], total = 1;
  for (int i = 0; i < oc->nin; i++) {
    opt[i] = options_of(&oc->in[i], w->ndim);
    per[i] = 1;
    for (int d = 0; d < w->ndim; d++) per[i] *= opt[i].n;
    total *= per[i];
  }
  int64_t limit = reduced_sweep() ? 24 : total, step = total > limit ? total / limit : 1;
  for (int64_t combo = 0; combo < total; combo += step) {
    dt_placement pl[3][DT_MAX_DIMS];
    int64_t rest = combo;
    for (int i = 0; i < oc->nin; i++) {
      int64_t x = rest % per[i];
      rest /= per[i];
      for (int d = 0; d < w->ndim; d++) {
        pl[i][d] = opt[i].p[x % opt[i].n];
        x /= opt[i].n;
      }
    }
    if (!mixed_partials(pl, oc->nin, w->ndim))
      run_combo(oc, vals, &r, w, pl, t, cfg->name);
  }
  for (int i = 0; i < oc->nin; i++) {
    free(vals[i]);
    dt_tensor_release(sd[i]);
  }
  free(r.v);
}

static void test_every_op_every_placement(void **state) {
  (void)state;
  totals t = {0};
  for (size_t k = 0; k < sizeof configs / sizeof *configs; k++) {
    world w = world_make(&configs[k]);
    counting = k == 0;
    for (int c = 0; c < NCASES; c++) run_case(&cases[c], c, &w, &configs[k], &t);
    world_free(&w);
  }
  if (on_cuda())
    printf("sharding property on CUDA ranks: cases the CUDA backend lacks "
           "kernels for were skipped: %s\n", unsupported_names[0] ?
           unsupported_names : "none");
  for (int op = 0; op < CORE_OP_COUNT && !on_cuda(); op++)
    if (!is_factory((core_op_id)op) && !seen[op])
      fail_msg("op %s never ran on DTensors in this test: add a case",
               core_op_name((core_op_id)op));
  printf("sharding property: %lld cases, %lld accepted in strict mode, %lld "
         "refused (auto mode redistributed them)\n", (long long)t.cases,
         (long long)t.strict_ok, (long long)t.strict_refused);
  assert_true(t.strict_ok > 0 && t.strict_refused > 0);
  assert_int_equal(dt_live_tensors(), 0);
}

int main(void) {
  const char *dev = getenv("DTORCH_TEST_DEVICE");
  if (dev && strcmp(dev, "cpu") != 0) {
    test_device = dev;
    setenv("DTORCH_DTENSOR_IN_SAME_DEVICE", "1", 1);
    dt_runtime_options o = {.device = dev, .num_ranks = 1};
    dt_runtime *probe = dt_runtime_create(&o);
    if (!probe) {
      printf("test_sharding_props: skipped, no \"%s\" runtime: %s\n", dev,
             dt_last_error());
      return 77;
    }
    dt_runtime_destroy(probe);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_op_every_placement),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
