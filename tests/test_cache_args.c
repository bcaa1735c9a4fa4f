/* A cached DTensor op gives exactly what an uncached one gives. For every
 * op with a non-tensor argument (scalars, eps, p, smoothing, betas, step,
 * decay, dims, keepdim, shapes, dtypes), on float32 and int32 inputs where
 * the op takes them, on a 1-D mesh [2] and a 2-D mesh 2x2, with inputs
 * Replicate, Shard and Partial: the sharding cache is warmed with one
 * argument vector (a miss that stores an entry), then the op is called on
 * other DTensors of the same specs with another vector that crosses a
 * boundary the op's checks or its dtype decision care about (integral /
 * fractional, zero, negative, NaN, +-inf, out of int32 / uint8 range,
 * p < 0 / p > 1, smoothing < 0 / > 1). That call is compared with
 *   (a) the same call after dt_sharding_cache_clear() (uncached), and
 *   (b) the op on single-device tensors of the same values (the reference
 *       the op suites check against naive loops):
 * status, error message, dtype, shape, placements (against (a)) and
 * values must all agree. Every wrong (op, dtype, argument pair) case is
 * printed and counted; the test fails if any is. Runtimes redistribute
 * automatically, so every call runs (strict refusals are test_sharding's
 * subject). DTORCH_SWEEP=reduced (and the sanitizer builds) pairs each
 * vector with the first one only. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/call.h"
#include "op_cases.h"
#include "testutil.h"

#define NA 6   /* arguments per vector */
#define NV 12  /* vectors per case */
typedef dt_tensor *(*op_fn)(dt_tensor **x, const double *a);
typedef struct arg_case {
  const char *name;
  op_fn fn;
  int nin;
  tu_in_spec in[3];
  int nv;
  double v[NV][NA];
} arg_case;

static const double INF = INFINITY;
#define NAN_ NAN
#define F32(...) {DT_FLOAT32, DT_SHAPE(__VA_ARGS__), TU_V_ANY, 0}
#define POS(...) {DT_FLOAT32, DT_SHAPE(__VA_ARGS__), TU_V_POS, 0}
#define I32(...) {DT_INT32, DT_SHAPE(__VA_ARGS__), TU_V_SMALLINT, 0}
#define IDX(r, ...) {DT_INT64, DT_SHAPE(__VA_ARGS__), TU_V_INDEX, r}
#define BOOLS(...) {DT_BOOL, DT_SHAPE(__VA_ARGS__), TU_V_BOOL, 0}

/* ---- the ops: argument vector a[] to the public call */
#define SC(f) static dt_tensor *op_##f(dt_tensor **x, const double *a) { return dt_##f(x[0], a[0]); }
SC(add_scalar) SC(sub_scalar) SC(mul_scalar) SC(div_scalar) SC(pow_scalar)
SC(floor_divide_scalar) SC(remainder_scalar)
/* the typed forms: a[0] the scalar, a[1] its dt_scalar_kind */
#define SK(f) static dt_tensor *op_##f##_k(dt_tensor **x, const double *a) { \
    return dt_##f##_typed(x[0], a[0], (dt_scalar_kind)a[1]);                 \
  }
SK(add_scalar) SK(sub_scalar) SK(mul_scalar) SK(div_scalar) SK(pow_scalar)
SK(floor_divide_scalar) SK(remainder_scalar)
static dt_tensor *op_clamp(dt_tensor **x, const double *a) { return dt_clamp(x[0], a[0], a[1]); }
static dt_tensor *op_clamp_k(dt_tensor **x, const double *a) {
  return dt_clamp_typed(x[0], a[0], (dt_scalar_kind)a[1], a[2], (dt_scalar_kind)a[3]);
}
static dt_tensor *op_masked_fill(dt_tensor **x, const double *a) { return dt_masked_fill(x[0], x[1], a[0]); }
static dt_tensor *op_cast(dt_tensor **x, const double *a) { return dt_cast(x[0], (dt_dtype)a[0]); }
static dt_tensor *op_view(dt_tensor **x, const double *a) {
  return dt_view(x[0], (dt_shape){(int)a[0], {(int64_t)a[1], (int64_t)a[2], (int64_t)a[3]}});
}
static dt_tensor *op_reshape(dt_tensor **x, const double *a) {
  return dt_reshape(x[0], (dt_shape){(int)a[0], {(int64_t)a[1], (int64_t)a[2], (int64_t)a[3]}});
}
static dt_tensor *op_transpose(dt_tensor **x, const double *a) { return dt_transpose(x[0], (int)a[0], (int)a[1]); }
static dt_tensor *op_permute(dt_tensor **x, const double *a) {
  int d[3] = {(int)a[1], (int)a[2], (int)a[3]};
  return dt_permute(x[0], d, (int)a[0]);
}
static dt_tensor *op_slice(dt_tensor **x, const double *a) {
  return dt_slice(x[0], (int)a[0], (int64_t)a[1], (int64_t)a[2], (int64_t)a[3]);
}
static dt_tensor *op_narrow(dt_tensor **x, const double *a) {
  return dt_narrow(x[0], (int)a[0], (int64_t)a[1], (int64_t)a[2]);
}
static dt_tensor *op_select(dt_tensor **x, const double *a) { return dt_select(x[0], (int)a[0], (int64_t)a[1]); }
static dt_tensor *op_expand(dt_tensor **x, const double *a) {
  return dt_expand(x[0], (dt_shape){(int)a[0], {(int64_t)a[1], (int64_t)a[2], (int64_t)a[3]}});
}
static dt_tensor *op_squeeze(dt_tensor **x, const double *a) { return dt_squeeze(x[0], (int)a[0]); }
static dt_tensor *op_unsqueeze(dt_tensor **x, const double *a) { return dt_unsqueeze(x[0], (int)a[0]); }
static dt_tensor *op_flatten(dt_tensor **x, const double *a) { return dt_flatten(x[0], (int)a[0], (int)a[1]); }
/* a[0]: how many dims, a[1], a[2]: the dims, a[3]: keepdim (var: a[4] unbiased) */
#define RED(f) static dt_tensor *op_##f(dt_tensor **x, const double *a) { \
    int d[2] = {(int)a[1], (int)a[2]};                                  \
    return dt_##f(x[0], d, (int)a[0], a[3] != 0);                       \
  }
RED(sum) RED(mean) RED(amax) RED(amin) RED(prod) RED(argmax) RED(argmin)
static dt_tensor *op_var(dt_tensor **x, const double *a) {
  int d[2] = {(int)a[1], (int)a[2]};
  return dt_var(x[0], d, (int)a[0], a[4] != 0, a[3] != 0);
}
static dt_tensor *op_softmax(dt_tensor **x, const double *a) { return dt_softmax(x[0], (int)a[0]); }
static dt_tensor *op_log_softmax(dt_tensor **x, const double *a) { return dt_log_softmax(x[0], (int)a[0]); }
static dt_tensor *op_layer_norm(dt_tensor **x, const double *a) { return dt_layer_norm(x[0], x[1], x[2], a[0]); }
static dt_tensor *op_rms_norm(dt_tensor **x, const double *a) { return dt_rms_norm(x[0], x[1], a[0]); }
static dt_tensor *op_index_select(dt_tensor **x, const double *a) { return dt_index_select(x[0], (int)a[0], x[1]); }
static dt_tensor *op_ce(dt_tensor **x, const double *a) {
  return dt_cross_entropy_smoothed(x[0], x[1], (dt_reduction)a[0], (int64_t)a[1], a[2]);
}
static dt_tensor *op_dropout(dt_tensor **x, const double *a) {
  dt_manual_seed((uint64_t)a[2]); /* the seeds: the same stream for every call */
  return dt_dropout(x[0], a[0], a[1] != 0);
}
static dt_tensor *op_cat(dt_tensor **x, const double *a) { return dt_cat(x, 2, (int)a[0]); }
static dt_tensor *op_stack(dt_tensor **x, const double *a) { return dt_stack(x, 2, (int)a[0]); }
static dt_tensor *op_slice_scatter(dt_tensor **x, const double *a) {
  return dt_slice_scatter(x[0], DT_SHAPE((int64_t)a[0], 7), (int)a[1], (int64_t)a[2],
                          (int64_t)a[3], (int64_t)a[4]);
}
static dt_tensor *op_isb(dt_tensor **x, const double *a) {
  return dt_index_select_backward(x[0], (int)a[0], x[1], (int64_t)a[1]);
}
static dt_tensor *op_ce_bw(dt_tensor **x, const double *a) {
  return dt_cross_entropy_backward(x[0], x[1], x[2], (dt_reduction)a[0], (int64_t)a[1], a[2]);
}
static dt_tensor *op_adam_moment(dt_tensor **x, const double *a) { return dt_adam_moment(x[0], x[1], a[0], a[1] != 0); }
static dt_tensor *op_adamw_apply(dt_tensor **x, const double *a) {
  return dt_adamw_apply(x[0], x[1], x[2], a[0], a[1], a[2]);
}

/* the boundaries of a scalar meeting a float or an integer tensor */
#define SCALARS {1}, {1.5}, {0}, {-2}, {-0.5}, {NAN_}, {INF}, {-INF}, {3e9}, {2147483648.0}, {300}, {2}
#define SCALAR_CASE(f)                                          \
  {#f, op_##f, 1, {F32(5, 4)}, 12, {SCALARS}},                  \
  {#f "/int32", op_##f, 1, {I32(5, 4)}, 12, {SCALARS}}
/* the same value of each kind, and the boundaries a kind adds: a bool
 * scalar, an int one that is not integral, a wrap to 0, a bad kind */
#define I_ DT_SCALAR_INT
#define F_ DT_SCALAR_FLOAT
#define B_ DT_SCALAR_BOOL
#define KINDS {1, I_}, {1, F_}, {1, B_}, {0, B_}, {1, DT_SCALAR_AUTO}, {2, F_}, \
  {-2, I_}, {1.5, F_}, {1.5, I_}, {4294967296.0, I_}, {0, F_}, {1, 9}
#define U8(...) {DT_UINT8, DT_SHAPE(__VA_ARGS__), TU_V_INDEX, 200}
#define KIND_CASE(f)                                            \
  {#f "_typed", op_##f##_k, 1, {F32(5, 4)}, 12, {KINDS}},       \
  {#f "_typed/int32", op_##f##_k, 1, {I32(5, 4)}, 12, {KINDS}}, \
  {#f "_typed/uint8", op_##f##_k, 1, {U8(5, 4)}, 12, {KINDS}},  \
  {#f "_typed/bool", op_##f##_k, 1, {BOOLS(5, 4)}, 12, {KINDS}}
#define CLAMP_KINDS {-1, I_, 1, I_}, {-1, F_, 1, I_}, {0, B_, 1, B_}, {-INF, I_, 1, F_}, \
  {-INF, F_, INF, F_}, {0, I_, 1, B_}, {0.5, I_, 1, I_}, {-1, I_, 2, 7}
#define EPS {1e-5}, {0}, {-1}, {NAN_}, {INF}, {1e-5}
#define DIMS2 {1, 0, 0, 0}, {1, 1, 0, 1}, {2, 0, 1, 0}, {1, -1, 0, 1}, {1, 2, 0, 0}, {0, 0, 0, 0}, {1, -3, 0, 0}

static const arg_case cases[] = {
  SCALAR_CASE(add_scalar), SCALAR_CASE(sub_scalar), SCALAR_CASE(mul_scalar),
  SCALAR_CASE(div_scalar), SCALAR_CASE(pow_scalar), SCALAR_CASE(floor_divide_scalar),
  SCALAR_CASE(remainder_scalar),
  {"clamp", op_clamp, 1, {F32(5, 4)}, 8,
   {{-1, 1}, {-0.5, 0.75}, {NAN_, 1}, {-INF, INF}, {-3e9, 3e9}, {0.5, 0.25}, {-1, NAN_}, {-1.5, 1.5}}},
  {"clamp/int32", op_clamp, 1, {I32(5, 4)}, 8,
   {{-1, 1}, {-0.5, 0.75}, {NAN_, 1}, {-INF, INF}, {-3e9, 3e9}, {0.5, 0.25}, {-1, NAN_}, {-1.5, 1.5}}},
  {"masked_fill", op_masked_fill, 2, {F32(5, 4), BOOLS(5, 4)}, 7,
   {{9}, {1.5}, {NAN_}, {INF}, {-INF}, {3e9}, {0}}},
  {"masked_fill/int32", op_masked_fill, 2, {I32(5, 4), BOOLS(5, 4)}, 8,
   {{9}, {1.5}, {NAN_}, {INF}, {-INF}, {3e9}, {2147483648.0}, {-7}}},
  {"cast", op_cast, 1, {F32(5, 4)}, 5,
   {{DT_FLOAT64}, {DT_INT32}, {DT_BOOL}, {DT_FLOAT16}, {DT_INT64}}},
  {"cast/int32", op_cast, 1, {I32(5, 4)}, 5,
   {{DT_FLOAT32}, {DT_UINT8}, {DT_BOOL}, {DT_INT64}, {DT_FLOAT64}}},
  {"view", op_view, 1, {F32(4, 6)}, 6,
   {{2, 6, 4}, {1, -1}, {3, 2, 3, 4}, {2, 5, 5}, {2, -1, -1}, {2, 8, 3}}},
  {"reshape/int32", op_reshape, 1, {I32(4, 6)}, 6,
   {{2, 6, 4}, {1, -1}, {3, 2, 3, 4}, {2, 5, 5}, {2, -1, -1}, {2, 3, 8}}},
  {"transpose", op_transpose, 1, {F32(5, 4)}, 5, {{0, 1}, {1, 0}, {0, 0}, {-1, 0}, {2, 0}}},
  {"permute", op_permute, 1, {F32(2, 3, 4)}, 5,
   {{3, 2, 0, 1}, {3, 0, 1, 2}, {3, 0, 0, 1}, {2, 0, 1}, {3, 0, 1, 3}}},
  {"slice", op_slice, 1, {F32(5, 6)}, 6,
   {{1, 1, 5, 2}, {0, 0, 5, 1}, {1, -3, 6, 1}, {1, 0, 6, 0}, {2, 0, 1, 1}, {1, 4, 2, 1}}},
  {"narrow", op_narrow, 1, {F32(5, 6)}, 5, {{0, 1, 2}, {1, 0, 6}, {1, 4, 3}, {0, -1, 1}, {3, 0, 1}}},
  {"select", op_select, 1, {F32(5, 6)}, 5, {{1, 2}, {0, 4}, {0, 5}, {1, -1}, {2, 0}}},
  {"expand", op_expand, 1, {F32(5, 1)}, 5, {{2, 5, 4}, {3, 2, 5, 4}, {2, -1, 3}, {2, 4, 4}, {1, 5}}},
  {"squeeze", op_squeeze, 1, {F32(5, 1)}, 4, {{1}, {0}, {-1}, {2}}},
  {"unsqueeze/int32", op_unsqueeze, 1, {I32(5, 4)}, 5, {{0}, {1}, {2}, {-1}, {3}}},
  {"flatten", op_flatten, 1, {F32(2, 3, 4)}, 5, {{0, 1}, {1, 2}, {0, 2}, {2, 1}, {0, 3}}},
  {"sum", op_sum, 1, {F32(5, 4)}, 7, {DIMS2}},
  {"sum/int32", op_sum, 1, {I32(5, 4)}, 7, {DIMS2}},
  {"mean", op_mean, 1, {F32(5, 4)}, 7, {DIMS2}},
  {"mean/int32", op_mean, 1, {I32(5, 4)}, 2, {{1, 0, 0, 0}, {1, 1, 0, 1}}},
  {"amax/int32", op_amax, 1, {I32(5, 4)}, 7, {DIMS2}},
  {"amin", op_amin, 1, {F32(5, 4)}, 7, {DIMS2}},
  {"prod", op_prod, 1, {F32(5, 4)}, 7, {DIMS2}},
  {"argmax", op_argmax, 1, {F32(5, 4)}, 7, {DIMS2}},
  {"argmin/int32", op_argmin, 1, {I32(5, 4)}, 7, {DIMS2}},
  {"var", op_var, 1, {F32(5, 4)}, 6,
   {{1, 0, 0, 0, 1}, {1, 1, 0, 1, 0}, {2, 0, 1, 0, 1}, {1, 2, 0, 0, 1}, {1, -1, 0, 0, 0}, {1, 0, 0, 1, 1}}},
  {"softmax", op_softmax, 1, {F32(5, 4)}, 4, {{1}, {0}, {-1}, {2}}},
  {"log_softmax", op_log_softmax, 1, {F32(5, 4)}, 4, {{0}, {1}, {-2}, {-3}}},
  {"layer_norm", op_layer_norm, 3, {F32(5, 4), F32(4), F32(4)}, 6, {EPS}},
  {"rms_norm", op_rms_norm, 2, {F32(5, 4), F32(4)}, 6, {EPS}},
  {"index_select", op_index_select, 2, {F32(5, 4), IDX(4, 3)}, 4, {{0}, {1}, {-1}, {2}}},
  {"cross_entropy", op_ce, 2, {F32(6, 4), IDX(4, 6)}, 10,
   {{DT_REDUCTION_MEAN, -100, 0}, {DT_REDUCTION_MEAN, -100, 0.1}, {DT_REDUCTION_MEAN, -100, -0.1},
    {DT_REDUCTION_MEAN, -100, 1.5}, {DT_REDUCTION_MEAN, -100, NAN_}, {DT_REDUCTION_SUM, 1, 1},
    {DT_REDUCTION_NONE, 2, 0.2}, {DT_REDUCTION_SUM, -100, INF}, {7, -100, 0}, {DT_REDUCTION_SUM, 1, 0}}},
  {"cross_entropy/probs", op_ce, 2, {F32(6, 4), POS(6, 4)}, 6,
   {{DT_REDUCTION_MEAN, -100, 0.1}, {DT_REDUCTION_MEAN, -100, -0.1}, {DT_REDUCTION_SUM, -100, 1.5},
    {DT_REDUCTION_NONE, -100, NAN_}, {DT_REDUCTION_SUM, -100, 0}, {DT_REDUCTION_MEAN, -100, 1}}},
  {"dropout", op_dropout, 1, {F32(5, 6)}, 9,
   {{0.4, 1, 7}, {0.4, 1, 8}, {0, 1, 7}, {1, 1, 7}, {-0.1, 1, 7}, {1.5, 1, 7}, {NAN_, 1, 7},
    {0.4, 0, 7}, {INF, 1, 7}}},
  {"cat", op_cat, 2, {F32(4, 3), F32(4, 3)}, 5, {{1}, {0}, {-1}, {2}, {-3}}},
  {"stack/int32", op_stack, 2, {I32(4, 3), I32(4, 3)}, 5, {{0}, {1}, {2}, {-1}, {3}}},
  {"slice_scatter", op_slice_scatter, 1, {F32(5, 3)}, 5,
   {{5, 1, 1, 6, 2}, {5, 1, 0, 3, 1}, {5, 1, 1, 6, 0}, {4, 1, 1, 6, 2}, {5, 2, 1, 6, 2}}},
  {"index_select_backward", op_isb, 2, {F32(4, 3), IDX(5, 4)}, 4, {{0, 5}, {0, 6}, {1, 5}, {0, 3}}},
  {"cross_entropy_backward", op_ce_bw, 3, {F32(), F32(6, 4), IDX(4, 6)}, 8,
   {{DT_REDUCTION_MEAN, -100, 0}, {DT_REDUCTION_MEAN, -100, 0.1}, {DT_REDUCTION_MEAN, -100, -0.1},
    {DT_REDUCTION_MEAN, -100, 1.5}, {DT_REDUCTION_MEAN, -100, NAN_}, {DT_REDUCTION_SUM, 1, 0.2},
    {DT_REDUCTION_MEAN, 2, INF}, {DT_REDUCTION_SUM, -100, 1}}},
  {"adam_moment", op_adam_moment, 2, {F32(5, 4), F32(5, 4)}, 8,
   {{0.9, 0}, {0.999, 1}, {NAN_, 0}, {INF, 1}, {-INF, 0}, {0, 1}, {1, 0}, {1.5, 1}}},
  {"adamw_apply", op_adamw_apply, 3, {F32(5, 4), F32(5, 4), POS(5, 4)}, 10,
   {{1e-3, 1e-8, 0.99}, {2e-3, 1e-8, 0.99}, {NAN_, 1e-8, 0.99}, {INF, 1e-8, 0.99},
    {1e-3, NAN_, 0.99}, {1e-3, INF, 0.99}, {1e-3, 1e-8, NAN_}, {1e-3, 1e-8, -INF},
    {1e-3, 0, 1}, {-1e-3, -1, 0}}},
  /* the scalar kinds (last: the cases above keep their seeds) */
  KIND_CASE(add_scalar), KIND_CASE(sub_scalar), KIND_CASE(mul_scalar),
  KIND_CASE(div_scalar), KIND_CASE(pow_scalar), KIND_CASE(floor_divide_scalar),
  KIND_CASE(remainder_scalar),
  {"clamp_typed", op_clamp_k, 1, {F32(5, 4)}, 8, {CLAMP_KINDS}},
  {"clamp_typed/int32", op_clamp_k, 1, {I32(5, 4)}, 8, {CLAMP_KINDS}},
  {"clamp_typed/uint8", op_clamp_k, 1, {U8(5, 4)}, 8, {CLAMP_KINDS}},
  {"clamp_typed/bool", op_clamp_k, 1, {BOOLS(5, 4)}, 8, {CLAMP_KINDS}},
};
#define NCASES (int)(sizeof cases / sizeof *cases)

/* ---- one call's outcome */
typedef struct outcome {
  dt_status st;
  char msg[640];
  dt_dtype dtype;
  dt_shape shape;
  dt_placement pl[DT_MAX_DIMS];
  double *v;
} outcome;

/* placements of input i for pattern p on an nd-dim mesh: Shards only on
 * dims the input has, Partials only for floats (a Partial int input is
 * not a thing dt_from_host makes here) */
enum { NPAT = 5 };
static void pattern(int p, int nd, const tu_in_spec *in, dt_placement *pl) {
  bool fl = in->dtype == DT_FLOAT32;
  int last = in->shape.ndim - 1;
  for (int d = 0; d < nd; d++) pl[d] = DT_REPLICATE;
  switch (p) {
  case 1: if (last >= 0) pl[0] = DT_SHARD(0); break;
  case 2: if (last >= 0) pl[nd - 1] = DT_SHARD(last); if (nd > 1 && last > 0) pl[0] = DT_SHARD(0); break;
  case 3: if (fl) pl[0] = DT_PARTIAL(DT_REDUCE_SUM); if (nd > 1 && last >= 0) pl[1] = DT_SHARD(0); break;
  case 4: if (fl) pl[nd - 1] = DT_PARTIAL(DT_REDUCE_MAX); break;
  default: break;
  }
}

typedef struct setup {
  const arg_case *c;
  double *vals[3];
  dt_mesh *mesh;      /* NULL: single device */
  int pat, nd;
} setup;

static outcome run(const setup *s, const double *a) {
  dt_tensor *in[3] = {NULL, NULL, NULL};
  for (int i = 0; i < s->c->nin; i++) {
    dt_placement pl[DT_MAX_DIMS];
    pattern(s->pat, s->nd, &s->c->in[i], pl);
    in[i] = tu_case_tensor(s->vals[i], &s->c->in[i], s->mesh, s->mesh ? pl : NULL, false);
  }
  outcome o = {.st = DT_OK};
  dt_tensor *out = s->c->fn(in, a);
  if (!out) {
    o.st = dt_last_status();
    snprintf(o.msg, sizeof o.msg, "%s", dt_last_error());
  } else {
    o.dtype = dt_tensor_dtype(out);
    o.shape = dt_tensor_shape(out);
    for (int d = 0; s->mesh && d < s->nd; d++) o.pl[d] = dt_tensor_placement(out, d);
    o.v = tu_values(out);
  }
  dt_tensor_release(out);
  for (int i = 0; i < s->c->nin; i++) dt_tensor_release(in[i]);
  return o;
}

static bool same_value(double got, double want, dt_dtype d) {
  if (isnan(want)) return isnan(got);
  if (isinf(want) || !(d == DT_FLOAT32 || d == DT_FLOAT64 || d == DT_FLOAT16))
    return got == want;
  return fabs(got - want) <= 2e-3 + 2e-3 * fabs(want);
}

/* why x differs from want ("" when it does not); placements compared only
 * between two DTensor outcomes */
static void differ(const outcome *x, const outcome *want, bool placements, int nd,
                   char *why, size_t len) {
  why[0] = 0;
  if (x->st != want->st || strcmp(x->msg, want->msg)) {
    snprintf(why, len, "status %d \"%.200s\", want %d \"%.200s\"", (int)x->st, x->msg,
             (int)want->st, want->msg);
    return;
  }
  if (x->st != DT_OK) return;
  if (x->dtype != want->dtype) {
    snprintf(why, len, "dtype %s, want %s", dt_dtype_name(x->dtype), dt_dtype_name(want->dtype));
    return;
  }
  if (x->shape.ndim != want->shape.ndim ||
      memcmp(x->shape.dims, want->shape.dims, sizeof(int64_t) * (size_t)x->shape.ndim)) {
    snprintf(why, len, "shape differs (ndim %d, want %d)", x->shape.ndim, want->shape.ndim);
    return;
  }
  for (int d = 0; placements && d < nd; d++)
    if (memcmp(&x->pl[d], &want->pl[d], sizeof x->pl[d])) {
      snprintf(why, len, "placement on mesh dim %d differs", d);
      return;
    }
  int64_t n = tu_shape_numel(x->shape);
  for (int64_t i = 0; i < n; i++)
    if (!same_value(x->v[i], want->v[i], x->dtype)) {
      snprintf(why, len, "element %lld is %.9g, want %.9g", (long long)i, x->v[i], want->v[i]);
      return;
    }
}

static void args_str(const double *a, char *buf, size_t len) {
  snprintf(buf, len, "(%g, %g, %g, %g, %g)", a[0], a[1], a[2], a[3], a[4]);
}

/* the sanitizer builds take the reduced sweep whatever the environment
 * says (the full one runs ~10 s here, several minutes under them) */
static bool reduced_sweep(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  const char *e = getenv("DTORCH_SWEEP");
  return e && !strcmp(e, "reduced");
#endif
}

typedef struct tally { int64_t calls, wrong_calls; int wrong_cases, cases; } tally;

/* every ordered pair (warm i, then j) of case c on one mesh and pattern;
 * wrong[j * NV + i] is set for each pair that went wrong */
static void sweep_pairs(setup *s, const outcome *single, bool *wrong, tally *t,
                        const char *cfg) {
  const arg_case *c = s->c;
  for (int i = 0; i < c->nv; i++)
    for (int j = 0; j < c->nv; j++) {
      if (reduced_sweep() && i && j) continue;
      dt_sharding_cache_clear();
      outcome warm = run(s, c->v[i]);
      free(warm.v);
      outcome hit = run(s, c->v[j]); /* a hit wherever the key matches */
      dt_sharding_cache_clear();
      outcome cold = run(s, c->v[j]);
      char why[600], a[96], b[96];
      differ(&hit, &cold, true, s->nd, why, sizeof why);
      const char *against = "uncached";
      if (!why[0]) {
        differ(&hit, &single[j], false, s->nd, why, sizeof why);
        against = "single device";
      }
      t->calls++;
      if (why[0]) {
        t->wrong_calls++;
        if (!wrong[j * NV + i]) {
          args_str(c->v[i], a, sizeof a);
          args_str(c->v[j], b, sizeof b);
          printf("WRONG %s on %s pattern %d: after %s, %s vs %s: %s\n", c->name, cfg,
                 s->pat, a, b, against, why);
        }
        wrong[j * NV + i] = true;
      }
      free(hit.v);
      free(cold.v);
    }
}

static void sweep_case(int ci, dt_mesh *const *meshes, const char *const *names,
                       tally *t) {
  const arg_case *c = &cases[ci];
  setup s = {.c = c};
  for (int i = 0; i < c->nin; i++) s.vals[i] = tu_case_values(&c->in[i], 77u * (uint64_t)ci + (uint64_t)i);
  outcome single[NV];
  for (int j = 0; j < c->nv; j++) single[j] = run(&s, c->v[j]);
  bool wrong[NV * NV] = {false};
  for (int k = 0; k < 2; k++) {
    s.mesh = meshes[k];
    s.nd = k + 1;
    for (s.pat = 0; s.pat < NPAT; s.pat++) sweep_pairs(&s, single, wrong, t, names[k]);
  }
  for (int p = 0; p < NV * NV; p++) t->wrong_cases += wrong[p];
  t->cases += reduced_sweep() ? 2 * c->nv - 1 : c->nv * c->nv;
  for (int j = 0; j < c->nv; j++) free(single[j].v);
  for (int i = 0; i < c->nin; i++) free(s.vals[i]);
}

static void test_cached_equals_uncached(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4, .auto_redistribute = true});
  assert_non_null(rt);
  dt_mesh *meshes[2] = {dt_mesh_init(rt, "cpu", DT_SHAPE(2), NULL),
                        dt_mesh_init(rt, "cpu", DT_SHAPE(2, 2), NULL)};
  assert_non_null(meshes[0]);
  assert_non_null(meshes[1]);
  const char *names[2] = {"mesh(2)", "mesh(2x2)"};
  tally t = {0};
  dt_op_counter *ran = dt_op_counter_push();
  for (int ci = 0; ci < NCASES; ci++) sweep_case(ci, meshes, names, &t);
  dt_op_counter_pop(ran);
  /* every op with a non-tensor argument is among the cases (factories
   * have their own test: they take no cache entry) */
  for (int op = 0; op < CORE_OP_COUNT; op++) {
    const char *sch = core_op_schema((core_op_id)op);
    bool args = strspn(sch, "TtL") < strlen(sch), factory = !strchr(sch, 'T') && !strchr(sch, 'L');
    if (args && !factory && dt_op_counter_get(ran, core_op_name((core_op_id)op)) == 0)
      fail_msg("op %s has a non-tensor argument and no case here: add one",
               core_op_name((core_op_id)op));
  }
  dt_op_counter_free(ran);
  printf("cache property: %d (op, dtype, argument pair) cases, %lld calls after a "
         "warm-up; wrong: %d cases (%lld calls)\n", t.cases, (long long)t.calls,
         t.wrong_cases, (long long)t.wrong_calls);
  for (int k = 0; k < 2; k++) dt_mesh_release(meshes[k]);
  dt_runtime_destroy(rt);
  assert_int_equal(t.wrong_cases, 0);
  assert_int_equal(dt_live_tensors(), 0);
}

/* what the fix must keep: a training loop's scalar ops, whose scalar or
 * step changes every call, hit after their first call */
static void test_changing_scalars_still_hit(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  dt_mesh *m = dt_mesh_init(rt, "cpu", DT_SHAPE(2, 2), NULL);
  dt_tensor_options o = {.mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)};
  dt_tensor *p = dt_ones(DT_SHAPE(4, 6), &o), *g = dt_ones(DT_SHAPE(4, 6), &o);
  assert_non_null(p);
  assert_non_null(g);
  dt_sharding_cache_clear();
  for (int step = 1; step <= 20; step++) {
    dt_tensor *outs[4] = {dt_add_scalar(p, 0.5 * step), dt_mul_scalar(g, 1.0 / step),
                          /* beta 0 on the first step, as the optimiser does */
                          dt_adam_moment(g, p, step == 1 ? 0 : 0.9 + 0.001 * step, step & 1),
                          NULL};
    outs[3] = dt_adamw_apply(p, g, outs[0], 1e-3 / step, 1e-8, 1 - 1e-4 * step);
    for (int i = 0; i < 4; i++) {
      if (!outs[i]) fail_msg("step %d: %s", step, dt_last_error());
      dt_tensor_release(outs[i]);
    }
    dt_cache_stats s = dt_sharding_cache_stats();
    /* adam_moment's bool `squared` alternates: two entries */
    if (step >= 2 && s.misses != 5)
      fail_msg("step %d: %lld misses, want 5 (every call after the first of "
               "each kind hits)", step, (long long)s.misses);
  }
  dt_tensor_release(p);
  dt_tensor_release(g);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

/* Factories on a mesh run their infer on every call (api/tensor.c) and
 * take no cache entry: dt_full's value and dt_arange's range, varied
 * across the same boundaries, match one device. */
static outcome factory_call(int which, const double *a, dt_mesh *m) {
  dt_placement pl[2] = {DT_SHARD(0), DT_REPLICATE};
  dt_tensor_options o = {.dtype = (dt_dtype)a[3], .mesh = m, .placements = m ? pl : NULL};
  dt_tensor *t = which ? dt_arange(a[0], a[1], a[2], &o) : dt_full(DT_SHAPE(4, 2), a[0], &o);
  outcome r = {.st = t ? DT_OK : dt_last_status()};
  if (!t) {
    snprintf(r.msg, sizeof r.msg, "%s", dt_last_error());
    return r;
  }
  r.dtype = dt_tensor_dtype(t);
  r.shape = dt_tensor_shape(t);
  r.v = tu_values(t);
  dt_tensor_release(t);
  return r;
}

static void test_factories_on_a_mesh(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  dt_mesh *m = dt_mesh_init(rt, "cpu", DT_SHAPE(2), NULL);
  dt_runtime_set_current(rt);
  static const double args[2][6][4] = {
    {{2, 0, 0, DT_INT32}, {1.5, 0, 0, DT_INT32}, {3e9, 0, 0, DT_INT32}, {NAN, 0, 0, DT_INT32},
     {300, 0, 0, DT_UINT8}, {INFINITY, 0, 0, DT_FLOAT32}},
    {{0, 4, 1, DT_FLOAT32}, {0, 6, 1, DT_FLOAT32}, {0, 5, 0, DT_FLOAT32}, {0, 3, 0.5, DT_INT32},
     {0, 3e9, 1e9, DT_INT32}, {6, 0, -1, DT_INT64}}};
  for (int which = 0; which < 2; which++)
    for (int i = 0; i < 6; i++) {
      outcome on_mesh = factory_call(which, args[which][i], m);
      outcome single = factory_call(which, args[which][i], NULL);
      char why[600];
      differ(&on_mesh, &single, false, 1, why, sizeof why);
      if (why[0]) fail_msg("%s call %d: %s", which ? "dt_arange" : "dt_full", i, why);
      free(on_mesh.v);
      free(single.v);
    }
  dt_runtime_set_current(NULL);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

/* ---- the other caches of the hot path */

/* the values of t (a DTensor or not) next to want[n]; fails naming what */
static void expect_values(dt_tensor *t, const double *want, int64_t n, const char *what) {
  if (!t) fail_msg("%s: %s", what, dt_last_error());
  double *v = tu_values(t);
  for (int64_t i = 0; i < n; i++)
    if (!same_value(v[i], want[i], DT_FLOAT32))
      fail_msg("%s: element %lld is %.9g, want %.9g", what, (long long)i, v[i], want[i]);
  free(v);
}

/* Collective groups: a mesh caches its dim groups; the runtime's registry
 * hands out one group per ordered rank list. A 1-D mesh over runtime
 * ranks {1, 0} must not reuse the group of {0, 1} (made first by a 2x2
 * mesh's dim 1): its member 0 is rank 1. Each gather (S(0) to R) is
 * compared with the host values, gathered in mesh order. */
static void test_group_cache_keeps_rank_order(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  dt_mesh *grid = dt_mesh_init(rt, "cpu", DT_SHAPE(2, 2), NULL);
  static const int fwd[] = {0, 1}, rev[] = {1, 0};
  dt_mesh *a = dt_mesh_create(rt, "cpu", DT_SHAPE(2), fwd, NULL);
  dt_mesh *b = dt_mesh_create(rt, "cpu", DT_SHAPE(2), rev, NULL);
  assert_non_null(grid);
  assert_non_null(a);
  assert_non_null(b);
  double v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  tu_in_spec in = {DT_FLOAT32, DT_SHAPE(4, 2), TU_V_ANY, 0};
  /* (mesh, the mesh dim sharding rows): the grid's dim 0 groups are
   * cached before its dim 1 gathers, the {0, 1} group before {1, 0} */
  struct { dt_mesh *m; int md; } steps[] = {{grid, 0}, {grid, 1}, {a, 0}, {b, 0},
                                            {grid, 1}, {a, 0}, {grid, 0}, {b, 0}};
  for (int k = 0; k < 8; k++) {
    dt_mesh *m = steps[k].m;
    dt_placement sh[2] = {DT_REPLICATE, DT_REPLICATE}, rep[2] = {DT_REPLICATE, DT_REPLICATE};
    sh[steps[k].md] = DT_SHARD(0);
    dt_tensor *x = tu_case_tensor(v, &in, m, sh, false);
    dt_tensor *y = dt_redistribute(x, m, rep);
    char what[64];
    snprintf(what, sizeof what, "gather %d (mesh of %d dims, dim %d)", k,
             dt_mesh_ndim(m), steps[k].md);
    expect_values(y, v, 8, what);
    dt_tensor_release(x);
    dt_tensor_release(y);
  }
  dt_mesh_release(a);
  dt_mesh_release(b);
  dt_mesh_release(grid);
  dt_runtime_destroy(rt);
}

/* Autograd nodes keep a copy of their call: two nodes of one graph whose
 * ops differ only in a scalar, eps or smoothing (the second a cache hit
 * in the forward and in the backward) each get their own gradient. The
 * DTensor gradients equal the single-device graph's. */
static dt_tensor *ag_loss(dt_tensor *x, dt_tensor *t) {
  dt_tensor *a = dt_mul_scalar(x, 2), *b = dt_mul_scalar(x, -3.5);
  dt_tensor *n1 = dt_layer_norm(a, NULL, NULL, 1e-5), *n2 = dt_layer_norm(b, NULL, NULL, 4.0);
  dt_tensor *s = dt_add(n1, n2);
  dt_tensor *l1 = dt_cross_entropy_smoothed(s, t, DT_REDUCTION_MEAN, -100, 0);
  dt_tensor *l2 = dt_cross_entropy_smoothed(s, t, DT_REDUCTION_MEAN, -100, 0.6);
  dt_tensor *l3 = dt_mul_scalar(l2, 0.25);
  dt_tensor *loss = dt_add(l1, l3);
  dt_tensor *tmp[] = {a, b, n1, n2, s, l1, l2, l3};
  for (int i = 0; i < 8; i++) dt_tensor_release(tmp[i]);
  return loss;
}

static void test_autograd_nodes_keep_their_arguments(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2, .auto_redistribute = true});
  dt_mesh *m = dt_mesh_init(rt, "cpu", DT_SHAPE(2), NULL);
  tu_in_spec xs = F32(6, 4), ts = IDX(4, 6);
  double *xv = tu_case_values(&xs, 5), *tv = tu_case_values(&ts, 6);
  double grads[2][24];
  for (int k = 0; k < 2; k++) { /* single device, then the mesh */
    dt_placement pl[1] = {DT_SHARD(0)};
    dt_tensor *x = tu_case_tensor(xv, &xs, k ? m : NULL, k ? pl : NULL, true);
    dt_tensor *t = tu_case_tensor(tv, &ts, k ? m : NULL, k ? pl : NULL, false);
    dt_sharding_cache_clear();
    dt_tensor *loss = ag_loss(x, t);
    if (!loss || dt_backward(loss) != DT_OK) fail_msg("backward %d: %s", k, dt_last_error());
    dt_tensor *g = dt_grad(x);
    assert_non_null(g);
    double *v = tu_values(g);
    memcpy(grads[k], v, sizeof grads[k]);
    free(v);
    dt_tensor *tmp[] = {g, loss, x, t};
    for (int i = 0; i < 4; i++) dt_tensor_release(tmp[i]);
  }
  for (int i = 0; i < 24; i++)
    if (!same_value(grads[1][i], grads[0][i], DT_FLOAT32))
      fail_msg("grad element %d: mesh %.9g, single device %.9g", i, grads[1][i], grads[0][i]);
  free(xv);
  free(tv);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "test_cache_args: watchdog: no progress in 540 s\n";
  (void)!write(2, m, sizeof m - 1);
  _exit(1);
}

int main(void) {
  signal(SIGALRM, on_alarm);
  alarm(540);
  const char *only = getenv("TEST_ONLY"); /* a test's name, to run it alone */
  if (only) cmocka_set_test_filter(only);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cached_equals_uncached),
      cmocka_unit_test(test_changing_scalars_still_hit),
      cmocka_unit_test(test_factories_on_a_mesh),
      cmocka_unit_test(test_group_cache_keeps_rank_order),
      cmocka_unit_test(test_autograd_nodes_keep_their_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
