/* Backward building blocks shared by the op families' formulas (ops.h,
 * "backward formulas"): boxed calls run through the autograd layer's
 * environment, results borrowed from its arena, failures kept in e->st. */
#include <stdarg.h>

#include "ops/ops.h"

dt_status ops_grad_none(ops_grad_env *e, const dt_op_call *fwd,
                        dt_tensor *const *gout, dt_tensor **gin) {
  (void)e;
  (void)gout;
  (void)gin;
  /* never reached: the autograd layer records no node for these ops */
  return core_error_set(DT_ERR_INTERNAL, "%s: %s is not differentiable",
                        fwd->api, core_op_name(fwd->op));
}

static dt_tensor *run(ops_grad_env *e, dt_op_call *c) {
  if (e->st != DT_OK) return NULL;
  dt_tensor *t = e->run(e, c);
  if (!t) {
    e->st = core_last_status();
    if (e->st == DT_OK) e->st = DT_ERR_INTERNAL;
  }
  return t;
}

dt_tensor *ops_g_call(ops_grad_env *e, core_op_id op, const char *sig, ...) {
  if (e->st != DT_OK) return NULL;
  dt_op_call c;
  core_call_init(&c, op, "dt_backward");
  va_list ap;
  va_start(ap, sig);
  bool ok = true;
  for (const char *p = sig; *p && ok; p++) {
    switch (*p) {
    case 'T': {
      dt_tensor *t = va_arg(ap, dt_tensor *);
      ok = t != NULL;
      core_call_tensor(&c, t);
      break;
    }
    case 's': core_call_double(&c, va_arg(ap, double)); break;
    case 'k': core_call_int(&c, va_arg(ap, int)); break; /* a dt_scalar_kind */
    case 'i': core_call_int(&c, va_arg(ap, int64_t)); break;
    case 'I': core_call_ints(&c, va_arg(ap, dt_shape)); break;
    case 'b': core_call_bool(&c, va_arg(ap, int) != 0); break;
    default: core_call_dtype(&c, (dt_dtype)va_arg(ap, int)); break; /* 'D' */
    }
  }
  va_end(ap);
  return ok ? run(e, &c) : NULL;
}

dt_tensor *ops_g_t(ops_grad_env *e, core_op_id op, dt_tensor *a) {
  return ops_g_call(e, op, "T", a);
}

dt_tensor *ops_g_tt(ops_grad_env *e, core_op_id op, dt_tensor *a, dt_tensor *b) {
  return ops_g_call(e, op, "TT", a, b);
}

dt_tensor *ops_g_ttt(ops_grad_env *e, core_op_id op, dt_tensor *a, dt_tensor *b,
                     dt_tensor *x) {
  return ops_g_call(e, op, "TTT", a, b, x);
}

dt_tensor *ops_g_ts(ops_grad_env *e, core_op_id op, dt_tensor *a, double s) {
  /* AUTO: the kind the untyped dt_*_scalar give (a gradient formula's
   * constants meet float tensors, whose dtype no kind changes) */
  return ops_g_call(e, op, "Tsk", a, s, (int)DT_SCALAR_AUTO);
}

dt_tensor *ops_g_ti(ops_grad_env *e, core_op_id op, dt_tensor *a, int64_t i) {
  return ops_g_call(e, op, "Ti", a, i);
}

dt_tensor *ops_g_tii(ops_grad_env *e, core_op_id op, dt_tensor *a, int64_t i,
                     int64_t j) {
  return ops_g_call(e, op, "Tii", a, i, j);
}

dt_tensor *ops_g_tI(ops_grad_env *e, core_op_id op, dt_tensor *a, dt_shape s) {
  return ops_g_call(e, op, "TI", a, s);
}

dt_tensor *ops_g_reduce(ops_grad_env *e, core_op_id op, dt_tensor *a,
                        dt_shape dims, bool keepdim) {
  return ops_g_call(e, op, "TIb", a, dims, (int)keepdim);
}

dt_tensor *ops_g_masked_fill(ops_grad_env *e, dt_tensor *a, dt_tensor *mask,
                             double v) {
  return ops_g_call(e, CORE_OP_MASKED_FILL, "TTs", a, mask, v);
}

dt_tensor *ops_g_cast(ops_grad_env *e, dt_tensor *a, dt_dtype d) {
  if (a && a->dtype == d) return a;
  return ops_g_call(e, CORE_OP_CAST, "TD", a, (int)d);
}

dt_shape ops_g_shape(const dt_tensor *a) {
  dt_shape s = {.ndim = a->local.ndim};
  for (int d = 0; d < s.ndim; d++) s.dims[d] = a->local.sizes[d];
  return s;
}

/* two sums and no reshape: a reshape of [1, n] S(1) to [n] would have to
 * gather (the shard is not on the group's leading dim) */
dt_tensor *ops_g_sum_to(ops_grad_env *e, dt_tensor *g, const int64_t *sizes,
                        int ndim) {
  if (!g) return NULL;
  int gn = g->local.ndim, lead = gn - ndim;
  dt_shape inner = {0}, outer = {0};
  for (int d = lead; d < gn; d++)
    if (sizes[d - lead] == 1 && g->local.sizes[d] != 1) inner.dims[inner.ndim++] = d;
  for (int d = 0; d < lead; d++) outer.dims[outer.ndim++] = d;
  if (inner.ndim) g = ops_g_reduce(e, CORE_OP_SUM, g, inner, true);
  if (outer.ndim) g = ops_g_reduce(e, CORE_OP_SUM, g, outer, false);
  return g;
}

dt_tensor *ops_g_narrow(ops_grad_env *e, dt_tensor *a, int64_t dim,
                        int64_t start, int64_t len) {
  return ops_g_call(e, CORE_OP_NARROW, "Tiii", a, dim, start, len);
}

dt_tensor *ops_g_const(ops_grad_env *e, const dt_tensor *like, double v) {
  if (!like || e->st != DT_OK) return NULL;
  dt_tensor *t = e->constant(e, like, v);
  if (!t) {
    e->st = core_last_status();
    if (e->st == DT_OK) e->st = DT_ERR_INTERNAL;
  }
  return t;
}

dt_tensor *ops_g_slice_scatter(ops_grad_env *e, dt_tensor *src, dt_shape shape,
                               int64_t dim, int64_t start, int64_t end,
                               int64_t step) {
  return ops_g_call(e, CORE_OP_SLICE_SCATTER, "TIiiii", src, shape, dim, start, end, step);
}
