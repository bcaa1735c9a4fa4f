/* dtypes: sizes, names, categories and PyTorch's type promotion. */
#ifndef CORE_DTYPE_H
#define CORE_DTYPE_H

#include <stdbool.h>

#include "dtorch/dtorch.h"
#include "core/half.h"

static inline bool core_dtype_valid(dt_dtype d) {
  return (unsigned)d < DT_DTYPE_COUNT;
}
static inline bool core_dtype_is_float(dt_dtype d) {
  return d == DT_FLOAT32 || d == DT_FLOAT64 || d == DT_FLOAT16 ||
         d == DT_BFLOAT16;
}
static inline bool core_dtype_is_int(dt_dtype d) {
  return d == DT_INT32 || d == DT_INT64 || d == DT_UINT8;
}

/* Category for promotion: bool < integer < floating. */
static inline int core_dtype_category(dt_dtype d) {
  return d == DT_BOOL ? 0 : core_dtype_is_int(d) ? 1 : 2;
}

/* promote_types(a, b) as PyTorch (f16 + bf16 -> f32, u8 + i32 -> i32). */
dt_dtype core_promote_types(dt_dtype a, dt_dtype b);

/* result_type of two tensor operands: a 0-d tensor only decides the dtype
 * when the other operand is of a lower category (PyTorch's rule). */
dt_dtype core_result_type(dt_dtype a, bool a_is_0d, dt_dtype b, bool b_is_0d);

/* result_type(tensor, scalar): integral scalars keep integer tensors,
 * other scalars turn bool/int tensors into float32 (the AUTO kind). */
dt_dtype core_result_type_scalar(dt_dtype t, double s);
/* the kind a scalar of kind k counts as: AUTO is INT for an integral
 * value below 2^63, FLOAT otherwise; the others are themselves */
dt_scalar_kind core_scalar_kind_of(double s, dt_scalar_kind k);
/* result_type(tensor, scalar of kind k) as PyTorch's for a Python int,
 * float or bool (dtorch.h, dt_add_scalar_typed) */
dt_dtype core_result_type_kind(dt_dtype t, dt_scalar_kind k);

/* Reads element i of a buffer of dtype d as a double, and writes one. */
double core_load_double(const void *p, dt_dtype d);
void core_store_double(void *p, dt_dtype d, double v);

/* A bool element is one byte, 0 or 1: the kernels rely on it (eq compares
 * bytes, logical_and ands them). Bytes from outside (dt_from_host, a
 * safetensors BOOL tensor) may hold any value; nonzero is true, as C's
 * conversion to _Bool and numpy's astype(bool) read them.
 * core_bool_other: the index of the first byte of p[0..n) that is
 * neither 0 nor 1, or n when there is none. core_bool_normalise: every
 * nonzero byte of p[0..n) becomes 1. */
size_t core_bool_other(const void *p, size_t n);
void core_bool_normalise(void *p, size_t n);

/* ---- the implementations behind public entry points (api/) */
/* dt_dtype_name (dtorch.h) */
const char *core_dtype_name(dt_dtype d);
/* dt_dtype_size (dtorch.h) */
size_t core_dtype_size(dt_dtype d);

#endif
