/* Factories: empty, full (zeros, ones and the _like forms are full),
 * from_host. Schema args: shape 'I', dtype 'D', then per op. */
#include <math.h>
#include <string.h>

#include "ops/ops.h"
#include "ops/cuda_ops.h"

dt_status ops_factory_infer(dt_op_call *c) {
  int ishape = c->op == CORE_OP_FROM_HOST ? 1 : 0;
  dt_shape s = c->args[ishape].ints;
  dt_dtype d = c->args[ishape + 1].dtype;
  if (!core_dtype_valid(d))
    return core_error_set(DT_ERR_DTYPE, "%s: dtype %d is not a valid dt_dtype",
                        c->api, (int)d);
  if (s.ndim < 0 || s.ndim > DT_MAX_DIMS)
    return core_error_set(DT_ERR_SHAPE, "%s: shape has %d dims (expected 0..%d)",
                        c->api, s.ndim, DT_MAX_DIMS);
  for (int i = 0; i < s.ndim; i++)
    if (s.dims[i] < 0) {
      char b[CORE_SHAPE_STR_LEN];
      return core_error_set(DT_ERR_SHAPE,
                          "%s: negative size %lld at dim %d of shape %s",
                          c->api, (long long)s.dims[i], i,
                          core_shape_str(s.dims, s.ndim, b, sizeof b));
    }
  if (!ops_sizes_fit(s.dims, s.ndim)) {
    char b[CORE_SHAPE_STR_LEN];
    return core_error_set(DT_ERR_SHAPE, "%s: shape %s is too large (the "
                        "product of its sizes passes 2^63)", c->api,
                        core_shape_str(s.dims, s.ndim, b, sizeof b));
  }
  if ((c->op == CORE_OP_RAND || c->op == CORE_OP_RANDN) && !core_dtype_is_float(d))
    return core_error_set(DT_ERR_DTYPE, "%s: random values need a floating "
                        "dtype, got %s", c->api, core_dtype_name(d));
  if (c->op == CORE_OP_FULL) {
    dt_status st = ops_check_scalar(c, "value", c->args[2].d, d);
    if (st != DT_OK) return st;
  }
  ops_meta_set(&c->meta[0], d, s.ndim, s.dims);
  return DT_OK;
}

dt_status ops_empty_cpu(dt_op_call *c) {
  (void)c;
  return DT_OK;
}

dt_status ops_full_cpu(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  cpu_fill(core_tensor_data(o), o->dtype, core_numel(o), c->args[2].d);
  return DT_OK;
}

dt_status ops_random_cpu(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  cpu_rand_fill(core_tensor_data(o), o->dtype, core_numel(o),
                (uint64_t)c->args[2].i, (uint64_t)c->args[3].i,
                c->op == CORE_OP_RANDN);
  return DT_OK;
}

dt_status ops_from_host_cpu(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  size_t n = (size_t)core_numel(o) * core_dtype_size(o->dtype);
  if (n) memcpy(core_tensor_data(o), c->args[0].p, n);
  return DT_OK;
}

dt_status ops_arange_infer(dt_op_call *c) {
  double start = c->args[0].d, end = c->args[1].d, step = c->args[2].d;
  dt_dtype d = c->args[3].dtype;
  if (!core_dtype_valid(d))
    return core_error_set(DT_ERR_DTYPE, "%s: dtype %d is not a valid dt_dtype",
                        c->api, (int)d);
  if (!isfinite(start) || !isfinite(end) || !isfinite(step))
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: start %g, end %g and step %g must be finite",
                        c->api, start, end, step);
  if (step == 0 || (step > 0 && end < start) || (step < 0 && end > start))
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: step %g does not lead from start %g to end %g",
                        c->api, step, start, end);
  double len = ceil((end - start) / step);
  if (len > 9e15)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: %g elements is too many", c->api, len);
  int64_t n = (int64_t)len;
  if (n > 0) { /* the kernel stores start + i * step: the ends bound all */
    dt_status st = ops_check_scalar(c, "start", start, d);
    if (st == DT_OK)
      st = ops_check_scalar(c, "last value", start + (double)(n - 1) * step,
                            d);
    if (st != DT_OK) return st;
  }
  ops_meta_set(&c->meta[0], d, 1, &n);
  return DT_OK;
}

dt_status ops_arange_cpu(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  double start = c->args[0].d, step = c->args[2].d;
  char *p = core_tensor_data(o);
  size_t es = core_dtype_size(o->dtype);
  int64_t n = core_numel(o);
  for (int64_t i = 0; i < n; i++)
    core_store_double(p + (size_t)i * es, o->dtype, start + (double)i * step);
  return DT_OK;
}

/* ---- the CUDA bindings (the op list's cuda column; docs/cuda.md): a
 * boxed call turned into a launch on the rank's stream */
#if DTORCH_HAVE_CUDA
dt_status ops_empty_cuda(dt_op_call *c) {
  (void)c;
  return DT_OK;
}

dt_status ops_full_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  return cuda_fill(ops_cu_stream(o), (int)o->dtype, core_numel(o),
                   core_tensor_data(o), c->args[2].d)
             ? ops_cu_launch_failed(c) : DT_OK;
}

dt_status ops_random_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  if (!ops_cu_is_float(o->dtype))
    return ops_cu_unsupported(c, "integer dtypes");
  return cuda_rand_fill(ops_cu_stream(o), core_tensor_data(o), (int)o->dtype,
                        core_numel(o), (uint64_t)c->args[2].i,
                        (uint64_t)c->args[3].i, c->op == CORE_OP_RANDN)
             ? ops_cu_launch_failed(c) : DT_OK;
}

/* the host data is a staging copy the record frees after the kernel: a
 * copy from pageable memory returns once the source has been read */
dt_status ops_from_host_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  size_t n = (size_t)core_numel(o) * core_dtype_size(o->dtype);
  return ops_cu_rt(o)->backend->copy(ops_cu_rt(o), ops_cu_rank(o),
                                     core_tensor_data(o), c->args[0].p, n,
                                     RUNTIME_COPY_H2D);
}

dt_status ops_arange_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  return cuda_arange(ops_cu_stream(o), (int)o->dtype, core_numel(o),
                     core_tensor_data(o), c->args[0].d, c->args[2].d)
             ? ops_cu_launch_failed(c) : DT_OK;
}
#endif
