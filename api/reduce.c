/* Public entry points of the reductions (sum, mean, amax, amin, prod,
 * argmax, argmin, var) and of the normalisations (softmax, log_softmax,
 * layer_norm, rms_norm). They check what the boxed call cannot carry (the
 * dims pointer and count), box the call and dispatch it; the ops' infer
 * functions check the rest. */
#include "api/api.h"

/* dims/ndims → the boxed int list; false (error set) when they are bad */
static bool dims_arg(const char *api, const int *dims, int ndims,
                     dt_shape *out) {
  if (ndims < 0 || ndims > DT_MAX_DIMS) {
    core_error_set(DT_ERR_INVALID_ARGUMENT,
                 "%s: ndims %d is out of range (expected 0..%d)", api, ndims,
                 DT_MAX_DIMS);
    return false;
  }
  if (!dims && ndims > 0) {
    core_error_set(DT_ERR_INVALID_ARGUMENT,
                 "%s: dims is NULL but ndims is %d", api, ndims);
    return false;
  }
  out->ndim = ndims;
  for (int i = 0; i < ndims; i++) out->dims[i] = dims[i];
  return true;
}

/* sum/mean/amax/amin/prod/argmax/argmin and var (var adds `unbiased`) */
static dt_tensor *reduce_call(core_op_id op, const char *api, dt_tensor *a,
                              const int *dims, int ndims, bool unbiased,
                              bool keepdim) {
  API_CHECK_TENSOR(a, api, "a");
  dt_shape s;
  if (!dims_arg(api, dims, ndims, &s)) return NULL;
  dt_op_call c;
  core_call_init(&c, op, api);
  core_call_tensor(&c, a);
  core_call_ints(&c, s);
  if (op == CORE_OP_VAR) core_call_bool(&c, unbiased);
  core_call_bool(&c, keepdim);
  return dispatch_run1(&c);
}

#define REDUCE(fn, OP)                                                      \
  dt_tensor *fn(dt_tensor *a, const int *dims, int ndims, bool keepdim) {   \
    return reduce_call(OP, #fn, a, dims, ndims, false, keepdim);            \
  }
REDUCE(dt_sum, CORE_OP_SUM)
REDUCE(dt_mean, CORE_OP_MEAN)
REDUCE(dt_amax, CORE_OP_AMAX)
REDUCE(dt_amin, CORE_OP_AMIN)
REDUCE(dt_prod, CORE_OP_PROD)
REDUCE(dt_argmax, CORE_OP_ARGMAX)
REDUCE(dt_argmin, CORE_OP_ARGMIN)

dt_tensor *dt_var(dt_tensor *a, const int *dims, int ndims, bool unbiased,
                  bool keepdim) {
  return reduce_call(CORE_OP_VAR, "dt_var", a, dims, ndims, unbiased, keepdim);
}

dt_tensor *dt_softmax(dt_tensor *a, int dim) {
  return api_call_ti(CORE_OP_SOFTMAX, "dt_softmax", a, 1, (int64_t[]){dim});
}
dt_tensor *dt_log_softmax(dt_tensor *a, int dim) {
  return api_call_ti(CORE_OP_LOG_SOFTMAX, "dt_log_softmax", a, 1,
                     (int64_t[]){dim});
}

/* weight and bias are optional: NULL means no affine part */
dt_tensor *dt_layer_norm(dt_tensor *x, dt_tensor *weight, dt_tensor *bias,
                         double eps) {
  API_CHECK_TENSOR(x, "dt_layer_norm", "x");
  dt_op_call c;
  core_call_init(&c, CORE_OP_LAYER_NORM, "dt_layer_norm");
  core_call_tensor(&c, x);
  core_call_tensor(&c, weight);
  core_call_tensor(&c, bias);
  core_call_double(&c, eps);
  return dispatch_run1(&c);
}

dt_tensor *dt_rms_norm(dt_tensor *x, dt_tensor *weight, double eps) {
  API_CHECK_TENSOR(x, "dt_rms_norm", "x");
  dt_op_call c;
  core_call_init(&c, CORE_OP_RMS_NORM, "dt_rms_norm");
  core_call_tensor(&c, x);
  core_call_tensor(&c, weight);
  core_call_double(&c, eps);
  return dispatch_run1(&c);
}
