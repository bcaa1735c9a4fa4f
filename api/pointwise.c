/* Public entry points of the pointwise ops. */
#include "api/api.h"

#define BIN(fn, OP) \
  dt_tensor *fn(dt_tensor *a, dt_tensor *b) { return dt_call_tt(OP, #fn, a, b); }
BIN(dt_add, DT_OP_ADD)
BIN(dt_sub, DT_OP_SUB)
BIN(dt_mul, DT_OP_MUL)
BIN(dt_div, DT_OP_DIV)
BIN(dt_pow, DT_OP_POW)
BIN(dt_maximum, DT_OP_MAXIMUM)
BIN(dt_minimum, DT_OP_MINIMUM)
BIN(dt_eq, DT_OP_EQ)
BIN(dt_ne, DT_OP_NE)
BIN(dt_lt, DT_OP_LT)
BIN(dt_le, DT_OP_LE)
BIN(dt_gt, DT_OP_GT)
BIN(dt_ge, DT_OP_GE)
BIN(dt_logical_and, DT_OP_LOGICAL_AND)
BIN(dt_logical_or, DT_OP_LOGICAL_OR)

#define SCA(fn, OP) \
  dt_tensor *fn(dt_tensor *a, double s) { return dt_call_ts(OP, #fn, a, s); }
SCA(dt_add_scalar, DT_OP_ADD_SCALAR)
SCA(dt_sub_scalar, DT_OP_SUB_SCALAR)
SCA(dt_mul_scalar, DT_OP_MUL_SCALAR)
SCA(dt_div_scalar, DT_OP_DIV_SCALAR)
SCA(dt_pow_scalar, DT_OP_POW_SCALAR)

#define UN(fn, OP) dt_tensor *fn(dt_tensor *a) { return dt_call_t(OP, #fn, a); }
UN(dt_neg, DT_OP_NEG)
UN(dt_abs, DT_OP_ABS)
UN(dt_exp, DT_OP_EXP)
UN(dt_log, DT_OP_LOG)
UN(dt_sqrt, DT_OP_SQRT)
UN(dt_rsqrt, DT_OP_RSQRT)
UN(dt_sin, DT_OP_SIN)
UN(dt_cos, DT_OP_COS)
UN(dt_tanh, DT_OP_TANH)
UN(dt_sigmoid, DT_OP_SIGMOID)
UN(dt_relu, DT_OP_RELU)
UN(dt_silu, DT_OP_SILU)
UN(dt_gelu, DT_OP_GELU)
UN(dt_gelu_tanh, DT_OP_GELU_TANH)
UN(dt_logical_not, DT_OP_LOGICAL_NOT)

dt_tensor *dt_clamp(dt_tensor *a, double lo, double hi) {
  DT_CHECK_TENSOR(a, "dt_clamp", "a");
  dt_op_call c;
  dt_call_init(&c, DT_OP_CLAMP, "dt_clamp");
  dt_call_tensor(&c, a);
  dt_call_double(&c, lo);
  dt_call_double(&c, hi);
  return dt_dispatch1(&c);
}

dt_tensor *dt_where(dt_tensor *cond, dt_tensor *a, dt_tensor *b) {
  DT_CHECK_TENSOR(cond, "dt_where", "cond");
  DT_CHECK_TENSOR(a, "dt_where", "a");
  DT_CHECK_TENSOR(b, "dt_where", "b");
  dt_op_call c;
  dt_call_init(&c, DT_OP_WHERE, "dt_where");
  dt_call_tensor(&c, cond);
  dt_call_tensor(&c, a);
  dt_call_tensor(&c, b);
  return dt_dispatch1(&c);
}

dt_tensor *dt_masked_fill(dt_tensor *a, dt_tensor *mask, double value) {
  DT_CHECK_TENSOR(a, "dt_masked_fill", "a");
  DT_CHECK_TENSOR(mask, "dt_masked_fill", "mask");
  dt_op_call c;
  dt_call_init(&c, DT_OP_MASKED_FILL, "dt_masked_fill");
  dt_call_tensor(&c, a);
  dt_call_tensor(&c, mask);
  dt_call_double(&c, value);
  return dt_dispatch1(&c);
}

dt_tensor *dt_cast(dt_tensor *a, dt_dtype dtype) {
  DT_CHECK_TENSOR(a, "dt_cast", "a");
  dt_op_call c;
  dt_call_init(&c, DT_OP_CAST, "dt_cast");
  dt_call_tensor(&c, a);
  dt_call_dtype(&c, dtype);
  return dt_dispatch1(&c);
}
