/* Public entry points of the pointwise ops. */
#include "api/api.h"

#define BIN(fn, OP) \
  dt_tensor *fn(dt_tensor *a, dt_tensor *b) { return api_call_tt(OP, #fn, a, b); }
BIN(dt_add, CORE_OP_ADD)
BIN(dt_sub, CORE_OP_SUB)
BIN(dt_mul, CORE_OP_MUL)
BIN(dt_div, CORE_OP_DIV)
BIN(dt_pow, CORE_OP_POW)
BIN(dt_maximum, CORE_OP_MAXIMUM)
BIN(dt_minimum, CORE_OP_MINIMUM)
BIN(dt_floor_divide, CORE_OP_FLOOR_DIVIDE)
BIN(dt_remainder, CORE_OP_REMAINDER)
BIN(dt_eq, CORE_OP_EQ)
BIN(dt_ne, CORE_OP_NE)
BIN(dt_lt, CORE_OP_LT)
BIN(dt_le, CORE_OP_LE)
BIN(dt_gt, CORE_OP_GT)
BIN(dt_ge, CORE_OP_GE)
BIN(dt_logical_and, CORE_OP_LOGICAL_AND)
BIN(dt_logical_or, CORE_OP_LOGICAL_OR)

#define SCA(fn, OP)                                                        \
  dt_tensor *fn(dt_tensor *a, double s) {                                  \
    return api_call_ts(OP, #fn, a, s, DT_SCALAR_AUTO);                     \
  }                                                                        \
  dt_tensor *fn##_typed(dt_tensor *a, double s, dt_scalar_kind kind) {     \
    return api_call_ts(OP, #fn "_typed", a, s, kind);                      \
  }
SCA(dt_add_scalar, CORE_OP_ADD_SCALAR)
SCA(dt_sub_scalar, CORE_OP_SUB_SCALAR)
SCA(dt_mul_scalar, CORE_OP_MUL_SCALAR)
SCA(dt_div_scalar, CORE_OP_DIV_SCALAR)
SCA(dt_pow_scalar, CORE_OP_POW_SCALAR)
SCA(dt_floor_divide_scalar, CORE_OP_FLOOR_DIVIDE_SCALAR)
SCA(dt_remainder_scalar, CORE_OP_REMAINDER_SCALAR)

#define UN(fn, OP) dt_tensor *fn(dt_tensor *a) { return api_call_t(OP, #fn, a); }
UN(dt_neg, CORE_OP_NEG)
UN(dt_abs, CORE_OP_ABS)
UN(dt_exp, CORE_OP_EXP)
UN(dt_log, CORE_OP_LOG)
UN(dt_sqrt, CORE_OP_SQRT)
UN(dt_rsqrt, CORE_OP_RSQRT)
UN(dt_sin, CORE_OP_SIN)
UN(dt_cos, CORE_OP_COS)
UN(dt_tanh, CORE_OP_TANH)
UN(dt_sigmoid, CORE_OP_SIGMOID)
UN(dt_relu, CORE_OP_RELU)
UN(dt_silu, CORE_OP_SILU)
UN(dt_gelu, CORE_OP_GELU)
UN(dt_gelu_tanh, CORE_OP_GELU_TANH)
UN(dt_logical_not, CORE_OP_LOGICAL_NOT)

static dt_tensor *clamp(const char *api, dt_tensor *a, double lo,
                        dt_scalar_kind klo, double hi, dt_scalar_kind khi) {
  API_CHECK_TENSOR(a, api, "a");
  dt_op_call c;
  core_call_init(&c, CORE_OP_CLAMP, api);
  core_call_tensor(&c, a);
  core_call_double(&c, lo);
  core_call_int(&c, (int)klo);
  core_call_double(&c, hi);
  core_call_int(&c, (int)khi);
  return dispatch_run1(&c);
}
dt_tensor *dt_clamp(dt_tensor *a, double lo, double hi) {
  return clamp("dt_clamp", a, lo, DT_SCALAR_AUTO, hi, DT_SCALAR_AUTO);
}
dt_tensor *dt_clamp_typed(dt_tensor *a, double lo, dt_scalar_kind klo, double hi,
                          dt_scalar_kind khi) {
  return clamp("dt_clamp_typed", a, lo, klo, hi, khi);
}

dt_tensor *dt_where(dt_tensor *cond, dt_tensor *a, dt_tensor *b) {
  API_CHECK_TENSOR(cond, "dt_where", "cond");
  API_CHECK_TENSOR(a, "dt_where", "a");
  API_CHECK_TENSOR(b, "dt_where", "b");
  dt_op_call c;
  core_call_init(&c, CORE_OP_WHERE, "dt_where");
  core_call_tensor(&c, cond);
  core_call_tensor(&c, a);
  core_call_tensor(&c, b);
  return dispatch_run1(&c);
}

dt_tensor *dt_masked_fill(dt_tensor *a, dt_tensor *mask, double value) {
  API_CHECK_TENSOR(a, "dt_masked_fill", "a");
  API_CHECK_TENSOR(mask, "dt_masked_fill", "mask");
  dt_op_call c;
  core_call_init(&c, CORE_OP_MASKED_FILL, "dt_masked_fill");
  core_call_tensor(&c, a);
  core_call_tensor(&c, mask);
  core_call_double(&c, value);
  return dispatch_run1(&c);
}

dt_tensor *dt_cast(dt_tensor *a, dt_dtype dtype) {
  API_CHECK_TENSOR(a, "dt_cast", "a");
  dt_op_call c;
  core_call_init(&c, CORE_OP_CAST, "dt_cast");
  core_call_tensor(&c, a);
  core_call_dtype(&c, dtype);
  return dispatch_run1(&c);
}
