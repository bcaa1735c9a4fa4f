/* dtype tables and promotion. */
#include "core/dtype.h"

#include <math.h>

static const char *const dtype_names[] = {"float32", "float64", "float16",
                                          "bfloat16", "int32", "int64",
                                          "uint8", "bool"};
static const size_t dtype_sizes[] = {4, 8, 2, 2, 4, 8, 1, 1};
_Static_assert(sizeof dtype_names / sizeof *dtype_names == DT_DTYPE_COUNT,
               "dtype name table");
_Static_assert(sizeof dtype_sizes / sizeof *dtype_sizes == DT_DTYPE_COUNT,
               "dtype size table");

const char *core_dtype_name(dt_dtype d) {
  return core_dtype_valid(d) ? dtype_names[d] : "?";
}
size_t core_dtype_size(dt_dtype d) { return core_dtype_valid(d) ? dtype_sizes[d] : 0; }

/* rank within a category; the higher wins */
static int float_rank(dt_dtype d) {
  return d == DT_FLOAT16 || d == DT_BFLOAT16 ? 1 : d == DT_FLOAT32 ? 2 : 3;
}
static int int_rank(dt_dtype d) {
  return d == DT_UINT8 ? 1 : d == DT_INT32 ? 2 : 3;
}

dt_dtype core_promote_types(dt_dtype a, dt_dtype b) {
  if (a == b) return a;
  int ca = core_dtype_category(a), cb = core_dtype_category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if (float_rank(a) == 1 && float_rank(b) == 1) return DT_FLOAT32;
    return float_rank(a) >= float_rank(b) ? a : b;
  }
  return int_rank(a) >= int_rank(b) ? a : b;
}

dt_dtype core_result_type(dt_dtype a, bool a_is_0d, dt_dtype b, bool b_is_0d) {
  if (a_is_0d == b_is_0d) return core_promote_types(a, b);
  dt_dtype dim = a_is_0d ? b : a, zero = a_is_0d ? a : b;
  if (core_dtype_category(zero) > core_dtype_category(dim)) {
    /* the 0-d operand lifts the category; PyTorch uses its dtype there */
    return zero;
  }
  return dim;
}

dt_scalar_kind core_scalar_kind_of(double s, dt_scalar_kind k) {
  if (k != DT_SCALAR_AUTO) return k;
  bool integral = isfinite(s) && s == nearbyint(s) && fabs(s) < 9.2e18;
  return integral ? DT_SCALAR_INT : DT_SCALAR_FLOAT;
}

dt_dtype core_result_type_kind(dt_dtype t, dt_scalar_kind k) {
  if (core_dtype_is_float(t) || k == DT_SCALAR_BOOL) return t;
  if (k == DT_SCALAR_INT) return t == DT_BOOL ? DT_INT64 : t;
  return DT_FLOAT32; /* FLOAT (AUTO is resolved by the callers) */
}

dt_dtype core_result_type_scalar(dt_dtype t, double s) {
  return core_result_type_kind(t, core_scalar_kind_of(s, DT_SCALAR_AUTO));
}

size_t core_bool_other(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] > 1) return i;
  return n;
}

void core_bool_normalise(void *p, size_t n) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++) b[i] = b[i] != 0;
}

double core_load_double(const void *p, dt_dtype d) {
  switch (d) {
  case DT_FLOAT32: return *(const float *)p;
  case DT_FLOAT64: return *(const double *)p;
  case DT_FLOAT16: return core_f16_to_f32(*(const uint16_t *)p);
  case DT_BFLOAT16: return core_bf16_to_f32(*(const uint16_t *)p);
  case DT_INT32: return *(const int32_t *)p;
  case DT_INT64: return (double)*(const int64_t *)p;
  case DT_UINT8: return *(const uint8_t *)p;
  case DT_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
  default: return 0;
  }
}

void core_store_double(void *p, dt_dtype d, double v) {
  switch (d) {
  case DT_FLOAT32: *(float *)p = (float)v; break;
  case DT_FLOAT64: *(double *)p = v; break;
  case DT_FLOAT16: *(uint16_t *)p = core_f32_to_f16((float)v); break;
  case DT_BFLOAT16: *(uint16_t *)p = core_f32_to_bf16((float)v); break;
  case DT_INT32: *(int32_t *)p = (int32_t)(int64_t)v; break;
  case DT_INT64: *(int64_t *)p = (int64_t)v; break;
  case DT_UINT8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
  case DT_BOOL: *(uint8_t *)p = v != 0; break;
  default: break;
  }
}
