/* Public entry points of the backward kernels (ops/grad_ops.c): the ops
 * autograd's formulas call that the forward ops cannot compose. Each
 * boxes its call and dispatches it like any other op, so they run on
 * single-device tensors and DTensors alike. */
#include "api/api.h"

dt_tensor *dt_gelu_backward(dt_tensor *grad, dt_tensor *x) {
  API_CHECK_TENSOR(grad, "dt_gelu_backward", "grad");
  API_CHECK_TENSOR(x, "dt_gelu_backward", "x");
  return api_call_tt(CORE_OP_GELU_BACKWARD, "dt_gelu_backward", grad, x);
}

dt_tensor *dt_slice_scatter(dt_tensor *src, dt_shape shape, int dim,
                            int64_t start, int64_t end, int64_t step) {
  API_CHECK_TENSOR(src, "dt_slice_scatter", "src");
  if (shape.ndim < 0 || shape.ndim > DT_MAX_DIMS) {
    core_error_set(DT_ERR_SHAPE, "dt_slice_scatter: shape has %d dims "
                   "(expected 0 to %d)", shape.ndim, DT_MAX_DIMS);
    return NULL;
  }
  dt_op_call c;
  core_call_init(&c, CORE_OP_SLICE_SCATTER, "dt_slice_scatter");
  core_call_tensor(&c, src);
  core_call_ints(&c, shape);
  core_call_int(&c, dim);
  core_call_int(&c, start);
  core_call_int(&c, end);
  core_call_int(&c, step);
  return dispatch_run1(&c);
}

dt_tensor *dt_index_select_backward(dt_tensor *grad, int dim, dt_tensor *index,
                                    int64_t size) {
  API_CHECK_TENSOR(grad, "dt_index_select_backward", "grad");
  API_CHECK_TENSOR(index, "dt_index_select_backward", "index");
  dt_op_call c;
  core_call_init(&c, CORE_OP_INDEX_SELECT_BACKWARD, "dt_index_select_backward");
  core_call_tensor(&c, grad);
  core_call_int(&c, dim);
  core_call_tensor(&c, index);
  core_call_int(&c, size);
  return dispatch_run1(&c);
}

dt_tensor *dt_cross_entropy_backward(dt_tensor *grad, dt_tensor *input,
                                     dt_tensor *target, dt_reduction reduction,
                                     int64_t ignore_index,
                                     double label_smoothing) {
  const char *fn = "dt_cross_entropy_backward";
  API_CHECK_TENSOR(grad, fn, "grad");
  API_CHECK_TENSOR(input, fn, "input");
  API_CHECK_TENSOR(target, fn, "target");
  dt_op_call c;
  core_call_init(&c, CORE_OP_CROSS_ENTROPY_BACKWARD, fn);
  core_call_tensor(&c, grad);
  core_call_tensor(&c, input);
  core_call_tensor(&c, target);
  core_call_int(&c, (int64_t)reduction);
  core_call_int(&c, ignore_index);
  core_call_double(&c, label_smoothing);
  return dispatch_run1(&c);
}
