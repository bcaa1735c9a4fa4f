/* The op registry: infer, CPU kernel, rule and backward per op id,
 * generated from core/op_list.h. */
#include <math.h>

#include "ops/ops.h"
#include "runtime/backend.h"

const ops_def ops_defs[CORE_OP_COUNT] = {
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags) \
  [CORE_OP_##id] = {infer, cpu, rule, grad},
#include "core/op_list.h"
#undef CORE_OP
};
_Static_assert(sizeof ops_defs / sizeof *ops_defs == CORE_OP_COUNT,
               "op table size");

/* The CPU backend's kernel table (runtime/backend.h): registered when the
 * library loads, before any runtime exists; the engine reaches the ops
 * layer's kernels only through it. */
static const core_kernel_fn cpu_kernels[CORE_OP_COUNT] = {
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags) [CORE_OP_##id] = cpu,
#include "core/op_list.h"
#undef CORE_OP
};
__attribute__((constructor)) static void register_kernels(void) {
  runtime_backend_set_kernels(CORE_KEY_CPU, cpu_kernels);
  ops_cuda_register();
  runtime_backend_set_fallback(CORE_KEY_CUDA, ops_host_fallback);
}

dt_status ops_check_index_dtype(const dt_op_call *c, const char *arg,
                                const dt_tensor *t) {
  if (t->dtype != DT_INT32 && t->dtype != DT_INT64)
    return core_error_set(DT_ERR_DTYPE, "%s: %s must be int32 or int64, got %s",
                          c->api, arg, core_dtype_name(t->dtype));
  return DT_OK;
}

dt_status ops_alias_cpu(dt_op_call *c) {
  return core_error_set(DT_ERR_INTERNAL, "%s: view op %s made a fresh output",
                      c->api, core_op_name(c->op));
}

dt_status ops_broadcast_shapes(const dt_op_call *c, const int64_t *a, int na,
                               const int64_t *b, int nb, int64_t *out,
                               int *nout) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int ia = na - n + i, ib = nb - n + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char sa[CORE_SHAPE_STR_LEN], sb[CORE_SHAPE_STR_LEN];
      return core_error_set(
          DT_ERR_SHAPE,
          "%s: shapes %s and %s cannot be broadcast (dim %d: %lld vs %lld)",
          c->api, core_shape_str(a, na, sa, sizeof sa),
          core_shape_str(b, nb, sb, sizeof sb), i - n, (long long)da,
          (long long)db);
    }
    out[i] = da == 1 ? db : da;
  }
  if (!ops_sizes_fit(out, n)) { /* [0, 2^62, 1] with [4]: strides overflow */
    char sa[CORE_SHAPE_STR_LEN], sb[CORE_SHAPE_STR_LEN];
    return core_error_set(DT_ERR_SHAPE, "%s: broadcasting shapes %s and %s "
                        "gives a shape too large (the product of its sizes "
                        "passes 2^63)", c->api,
                        core_shape_str(a, na, sa, sizeof sa),
                        core_shape_str(b, nb, sb, sizeof sb));
  }
  *nout = n;
  return DT_OK;
}

dt_status ops_wrap_dim(const dt_op_call *c, const char *arg, int64_t dim,
                       int ndim, int *out) {
  int n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: %s %lld is out of range for a %d-d tensor "
                        "(expected [%d, %d])",
                        c->api, arg, (long long)dim, ndim, -n, n - 1);
  *out = (int)(dim < 0 ? dim + n : dim);
  return DT_OK;
}

bool ops_int_range(dt_dtype d, double *lo, double *hi) {
  switch (d) {
  case DT_INT32: *lo = -2147483648.0; *hi = 2147483647.0; return true;
  case DT_INT64: /* 2^63 - 1024: the largest double below 2^63 */
    *lo = -9223372036854775808.0; *hi = 9223372036854774784.0; return true;
  case DT_UINT8: *lo = 0; *hi = 255; return true;
  default: return false; /* floating dtypes and bool hold any double */
  }
}

dt_status ops_scalar_overflow(const dt_op_call *c, const char *arg, double v,
                              dt_dtype d) {
  return core_error_set(DT_ERR_INVALID_ARGUMENT,
                      "%s: %s %.15g cannot be converted to %s without "
                      "overflow", c->api, arg, v, core_dtype_name(d));
}

/* the largest finite value of a floating dtype below float64 */
static double float_max(dt_dtype d) {
  switch (d) {
  case DT_FLOAT16: return 65504.0;
  case DT_BFLOAT16: return 3.3895313892515355e38;
  case DT_FLOAT32: return 3.4028234663852886e38;
  default: return INFINITY;
  }
}

dt_status ops_check_scalar_exact(const dt_op_call *c, const char *arg, double v,
                                 dt_dtype d) {
  /* PyTorch: infinities and NaN pass; a finite value past the largest
   * finite one fails (f16 65505 fails, 65504 passes) */
  if (core_dtype_is_float(d) && isfinite(v) && fabs(v) > float_max(d))
    return ops_scalar_overflow(c, arg, v, d);
  return ops_check_scalar(c, arg, v, d);
}

dt_status ops_check_kind(const dt_op_call *c, const char *arg, double v,
                         int64_t k, bool inf_ok) {
  switch (k) {
  case DT_SCALAR_AUTO: case DT_SCALAR_FLOAT: return DT_OK;
  case DT_SCALAR_INT:
    /* [-2^63, 2^63): PyTorch's int64 scalar */
    if ((inf_ok && isinf(v)) ||
        (v == nearbyint(v) && v >= -9223372036854775808.0 &&
         v < 9223372036854775808.0))
      return DT_OK;
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s %.17g is of kind "
                          "DT_SCALAR_INT but is not an integer in [-2^63, 2^63)",
                          c->api, arg, v);
  case DT_SCALAR_BOOL:
    if (v == 0 || v == 1 || (inf_ok && isinf(v))) return DT_OK;
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s %.17g is of kind "
                          "DT_SCALAR_BOOL but is not 0 or 1", c->api, arg, v);
  default:
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: the kind of %s, %lld, "
                          "is not a dt_scalar_kind (DT_SCALAR_AUTO .. "
                          "DT_SCALAR_BOOL)", c->api, arg, (long long)k);
  }
}

double ops_wrap_int(double v, dt_dtype d) {
  if (d != DT_UINT8 && d != DT_INT32) return v;
  double w = trunc(v);
  int64_t i = w >= 9.2233720368547758e18 || w < -9.2233720368547758e18 || isnan(w)
                  ? 0 : (int64_t)w;
  return d == DT_UINT8 ? (double)(uint8_t)(uint64_t)i
                       : (double)(int32_t)(uint32_t)(uint64_t)i;
}

dt_status ops_check_scalar(const dt_op_call *c, const char *arg, double v,
                           dt_dtype d) {
  double lo, hi; /* the range of trunc(v), inclusive */
  if (!ops_int_range(d, &lo, &hi)) return DT_OK;
  if (d == DT_UINT8) lo = -255; /* wraps modulo 256, as PyTorch's int scalar */
  double t = trunc(v); /* NaN stays NaN and fails both comparisons */
  if (t >= lo && t <= hi) return DT_OK;
  return ops_scalar_overflow(c, arg, v, d);
}
