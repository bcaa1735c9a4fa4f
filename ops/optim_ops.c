/* Fused optimiser updates: adam_moment ("TTsb": buf, x, beta, squared)
 * = beta buf + (1 - beta) (x or x²), and adamw_apply ("TTTsss": p, m, v,
 * step, eps, decay) = decay p - step m / (sqrt(v) + eps). The optimisers
 * (api/optim.c) use them so that an AdamW step reads each parameter's
 * state once instead of a dozen times. Inputs have one shape (no
 * broadcasting) and floating dtypes; the result takes the first input's
 * dtype. Sharding: pointwise over every input, no Partial (x² is not
 * linear; the update is not either). */
#include <math.h>

#include "ops/ops.h"
#include "ops/cuda_ops.h"

static dt_status same_float_shapes(dt_op_call *c, int n, const char *const *names) {
  const dt_tensor *a = c->args[0].t;
  for (int i = 0; i < n; i++) {
    const dt_tensor *t = c->args[i].t;
    if (!core_dtype_is_float(t->dtype))
      return core_error_set(DT_ERR_DTYPE, "%s: %s must have a floating dtype, got %s",
                            c->api, names[i], core_dtype_name(t->dtype));
    bool same = t->local.ndim == a->local.ndim;
    for (int d = 0; same && d < a->local.ndim; d++)
      same = t->local.sizes[d] == a->local.sizes[d];
    if (!same) {
      char sa[CORE_SHAPE_STR_LEN], st[CORE_SHAPE_STR_LEN];
      return core_error_set(DT_ERR_SHAPE, "%s: %s has shape %s, %s %s (they must "
                            "match)", c->api, names[i],
                            core_shape_str(t->local.sizes, t->local.ndim, st, sizeof st),
                            names[0], core_shape_str(a->local.sizes, a->local.ndim, sa, sizeof sa));
    }
  }
  core_meta *m = &c->meta[0];
  m->dtype = a->dtype;
  m->ndim = a->local.ndim;
  for (int d = 0; d < m->ndim; d++) m->sizes[d] = a->local.sizes[d];
  m->alias = -1;
  m->offset = 0;
  return DT_OK;
}

static dt_status finite_args(dt_op_call *c, int first, int n, const char *const *names) {
  for (int i = 0; i < n; i++)
    if (!isfinite(c->args[first + i].d))
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s must be finite, got %g",
                            c->api, names[i], c->args[first + i].d);
  return DT_OK;
}

dt_status ops_adam_moment_infer(dt_op_call *c) {
  static const char *const t[] = {"buf", "x"}, *s[] = {"beta"};
  dt_status st = finite_args(c, 2, 1, s);
  return st == DT_OK ? same_float_shapes(c, 2, t) : st;
}

dt_status ops_adam_moment_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]);
  cpu_view vb = ops_view_of(c->args[0].t), vx = ops_view_of(c->args[1].t);
  cpu_adam_moment(cpu_compute_type(vo.dtype), &vo, &vb, &vx, c->args[2].d, c->args[3].b);
  return DT_OK;
}

dt_status ops_adamw_apply_infer(dt_op_call *c) {
  static const char *const t[] = {"p", "m", "v"}, *s[] = {"step", "eps", "decay"};
  dt_status st = finite_args(c, 3, 3, s);
  return st == DT_OK ? same_float_shapes(c, 3, t) : st;
}

dt_status ops_adamw_apply_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]);
  cpu_view vp = ops_view_of(c->args[0].t), vm = ops_view_of(c->args[1].t),
           vv = ops_view_of(c->args[2].t);
  cpu_adamw_apply(cpu_compute_type(vo.dtype), &vo, &vp, &vm, &vv, c->args[3].d,
                  c->args[4].d, c->args[5].d);
  return DT_OK;
}

void ops_optim_rule(const dt_op_call *c, ops_rule_set *rs) {
  ops_rule_pointwise(c, rs, c->op == CORE_OP_ADAM_MOMENT ? 0x3u : 0x7u);
}

/* ---- the CUDA bindings (the op list's cuda column; docs/cuda.md): a
 * boxed call turned into a launch on the rank's stream */
#if DTORCH_HAVE_CUDA
/* the optimiser's fused updates: dense operands of the output's dtype */
static bool cu_dense_like(const dt_tensor *t, const dt_tensor *o) {
  return t->dtype == o->dtype && ops_cu_dense(t);
}

dt_status ops_adam_moment_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *buf = c->args[0].t, *x = c->args[1].t;
  if (!ops_cu_is_float(o->dtype) || !cu_dense_like(buf, o) ||
      !cu_dense_like(x, o))
    return ops_cu_unsupported(c, "strided or mixed-dtype operands");
  return cuda_adam_moment(ops_cu_stream(o), (int)o->dtype, core_numel(o),
                          core_tensor_data(o), core_tensor_data(buf),
                          core_tensor_data(x), c->args[2].d, c->args[3].b)
             ? ops_cu_launch_failed(c) : DT_OK;
}

dt_status ops_adamw_apply_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *p = c->args[0].t, *m = c->args[1].t,
            *v = c->args[2].t;
  if (!ops_cu_is_float(o->dtype) || !cu_dense_like(p, o) ||
      !cu_dense_like(m, o) || !cu_dense_like(v, o))
    return ops_cu_unsupported(c, "strided or mixed-dtype operands");
  return cuda_adamw_apply(ops_cu_stream(o), (int)o->dtype, core_numel(o),
                          core_tensor_data(o), core_tensor_data(p),
                          core_tensor_data(m), core_tensor_data(v),
                          c->args[3].d, c->args[4].d, c->args[5].d)
             ? ops_cu_launch_failed(c) : DT_OK;
}
#endif
