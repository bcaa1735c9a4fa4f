/* Normalisation ops: softmax and log_softmax ("Ti": tensor, dim),
 * layer_norm ("Tttd": x, optional weight, optional bias, eps) and rms_norm
 * ("Ttd": x, optional weight, eps), the last two over x's last dim.
 *
 * infer checks dtypes (floating only, as PyTorch), the dim, the affine
 * parameters' shapes and eps; the CPU kernels live in kernels/cpu/norm.c. */
#include <math.h>

#include "kernels/cpu/reduce.h"
#include "ops/ops.h"
#include "ops/cuda_ops.h"

static dt_status need_float(const dt_op_call *c, const dt_tensor *t,
                            const char *arg) {
  if (!core_dtype_is_float(t->dtype))
    return core_error_set(DT_ERR_DTYPE,
                        "%s: %s must have a floating dtype, got %s (cast with "
                        "dt_cast first)", c->api, arg,
                        core_dtype_valid(t->dtype) ? core_dtype_name(t->dtype)
                                                 : "an invalid dtype");
  return DT_OK;
}

dt_status ops_softmax_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  int d;
  /* PyTorch returns an empty integer input as it is (no kernel runs) */
  bool empty_int = core_dtype_valid(a->dtype) && core_numel(a) == 0;
  dt_status st = empty_int ? DT_OK : need_float(c, a, "a");
  if (st == DT_OK) st = ops_wrap_dim(c, "dim", c->args[1].i, a->local.ndim, &d);
  if (st != DT_OK) return st;
  ops_meta_set(&c->meta[0], a->dtype, a->local.ndim, a->local.sizes);
  return DT_OK;
}

dt_status ops_softmax_cpu(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  int d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, a->local.ndim, &d);
  if (st != DT_OK) return st;
  cpu_view vo = ops_view_of(c->out[0]), va = ops_view_of(a);
  cpu_softmax(&vo, &va, d, c->op == CORE_OP_LOG_SOFTMAX);
  return DT_OK;
}

/* weight/bias: NULL, or 1-D of the last dim's size and any floating dtype
 * (PyTorch: a float16 x with float32 weight gives float16; the kernels
 * compute in float32 or float64 and round once) */
static dt_status check_param(const dt_op_call *c, const dt_tensor *x,
                             const dt_tensor *p, const char *arg) {
  if (!p) return DT_OK;
  int64_t last = x->local.sizes[x->local.ndim - 1];
  if (p->local.ndim != 1 || p->local.sizes[0] != last) {
    char sp[CORE_SHAPE_STR_LEN], sx[CORE_SHAPE_STR_LEN];
    return core_error_set(DT_ERR_SHAPE,
                        "%s: %s has shape %s; expected [%lld], the last dim "
                        "of x %s", c->api, arg,
                        core_shape_str(p->local.sizes, p->local.ndim, sp,
                                     sizeof sp),
                        (long long)last,
                        core_shape_str(x->local.sizes, x->local.ndim, sx,
                                     sizeof sx));
  }
  return need_float(c, p, arg);
}

/* x floating with at least one dim, eps finite and >= 0, params fit */
static dt_status norm_infer(dt_op_call *c, const dt_tensor *w,
                            const dt_tensor *b, double eps) {
  const dt_tensor *x = c->args[0].t;
  dt_status st = need_float(c, x, "x");
  if (st != DT_OK) return st;
  if (x->local.ndim == 0)
    return core_error_set(DT_ERR_SHAPE, "%s: x is 0-d; it needs a last dim to "
                        "normalise over", c->api);
  if (!isfinite(eps) || eps < 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: eps %g must be finite and >= 0", c->api, eps);
  st = check_param(c, x, w, "weight");
  if (st == DT_OK) st = check_param(c, x, b, "bias");
  if (st != DT_OK) return st;
  ops_meta_set(&c->meta[0], x->dtype, x->local.ndim, x->local.sizes);
  return DT_OK;
}

dt_status ops_layer_norm_infer(dt_op_call *c) {
  return norm_infer(c, c->args[1].t, c->args[2].t, c->args[3].d);
}

dt_status ops_layer_norm_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]), vx = ops_view_of(c->args[0].t);
  cpu_view vw = {0}, vb = {0};
  if (c->args[1].t) vw = ops_view_of(c->args[1].t);
  if (c->args[2].t) vb = ops_view_of(c->args[2].t);
  cpu_layer_norm(&vo, &vx, c->args[1].t ? &vw : NULL,
                 c->args[2].t ? &vb : NULL, c->args[3].d);
  return DT_OK;
}

dt_status ops_rms_norm_infer(dt_op_call *c) {
  return norm_infer(c, c->args[1].t, NULL, c->args[2].d);
}

dt_status ops_rms_norm_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]), vx = ops_view_of(c->args[0].t);
  cpu_view vw = {0};
  if (c->args[1].t) vw = ops_view_of(c->args[1].t);
  cpu_rms_norm(&vo, &vx, c->args[1].t ? &vw : NULL, c->args[2].d);
  return DT_OK;
}

/* ---- sharding rules (docs/sharding.md): the normalised dim (softmax's
 * dim; the norms' last dim) must be whole on a rank, every other dim may
 * be sharded; the affine weight and bias stay Replicate. No Partial:
 * these ops are not linear. */
void ops_softmax_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *a = c->args[0].t;
  int n = a->local.ndim;
  int64_t dim = c->args[1].i < 0 ? c->args[1].i + n : c->args[1].i;
  ops_rule_add(c, rs);
  ops_rule_shard_dims(c, rs, 0, n, (int)dim, 0);
}

void ops_norm_rule(const dt_op_call *c, ops_rule_set *rs) {
  ops_rule_add(c, rs);
  ops_rule_shard_dims(c, rs, 0, c->args[0].t->local.ndim - 1, -1, 0);
}

/* ---- backward formulas (ops.h, "backward formulas") */
static const dt_shape last_dim = {1, {-1}};

/* (gxhat - mean(gxhat) [layer_norm only] - xhat mean(gxhat xhat)) rstd */
static dt_tensor *norm_input_grad(ops_grad_env *e, dt_tensor *gxhat,
                                  dt_tensor *xhat, dt_tensor *rstd, bool centre) {
  dt_tensor *d = gxhat;
  if (centre)
    d = ops_g_tt(e, CORE_OP_SUB, d, ops_g_reduce(e, CORE_OP_MEAN, gxhat, last_dim, true));
  dt_tensor *proj = ops_g_reduce(e, CORE_OP_MEAN, ops_g_tt(e, CORE_OP_MUL, gxhat, xhat),
                                 last_dim, true);
  d = ops_g_tt(e, CORE_OP_SUB, d, ops_g_tt(e, CORE_OP_MUL, xhat, proj));
  return ops_g_tt(e, CORE_OP_MUL, d, rstd);
}

static dt_status layer_norm_grad(ops_grad_env *e, const dt_op_call *f, dt_tensor *g,
                                 dt_tensor **gin, bool rms) {
  dt_tensor *x = f->args[0].t, *w = f->args[1].t, *b = rms ? NULL : f->args[2].t;
  double eps = rms ? f->args[2].d : f->args[3].d;
  dt_tensor *xc = x;
  if (!rms) xc = ops_g_tt(e, CORE_OP_SUB, x, ops_g_reduce(e, CORE_OP_MEAN, x, last_dim, true));
  dt_tensor *ms = ops_g_reduce(e, CORE_OP_MEAN, ops_g_tt(e, CORE_OP_MUL, xc, xc), last_dim, true);
  dt_tensor *rstd = ops_g_t(e, CORE_OP_RSQRT, ops_g_ts(e, CORE_OP_ADD_SCALAR, ms, eps));
  dt_tensor *xhat = ops_g_tt(e, CORE_OP_MUL, xc, rstd);
  if (w && e->needs[1])
    gin[1] = ops_g_sum_to(e, ops_g_tt(e, CORE_OP_MUL, g, xhat), w->local.sizes, w->local.ndim);
  if (b && e->needs[2]) gin[2] = ops_g_sum_to(e, g, b->local.sizes, b->local.ndim);
  if (e->needs[0])
    gin[0] = norm_input_grad(e, w ? ops_g_tt(e, CORE_OP_MUL, g, w) : g, xhat, rstd, !rms);
  return e->st;
}

dt_status ops_norm_grad(ops_grad_env *e, const dt_op_call *f,
                        dt_tensor *const *gout, dt_tensor **gin) {
  dt_tensor *g = gout[0], *a = f->args[0].t;
  switch (f->op) {
  case CORE_OP_SOFTMAX: { /* y (g - sum(g y)) */
    int64_t dim = f->args[1].i;
    dt_shape d = {1, {dim}};
    dt_tensor *y = ops_g_ti(e, CORE_OP_SOFTMAX, a, dim);
    dt_tensor *gy = ops_g_tt(e, CORE_OP_MUL, g, y);
    gin[0] = ops_g_tt(e, CORE_OP_SUB, gy,
                      ops_g_tt(e, CORE_OP_MUL, y, ops_g_reduce(e, CORE_OP_SUM, gy, d, true)));
    return e->st;
  }
  case CORE_OP_LOG_SOFTMAX: { /* g - exp(y) sum(g) */
    int64_t dim = f->args[1].i;
    dt_shape d = {1, {dim}};
    dt_tensor *p = ops_g_ti(e, CORE_OP_SOFTMAX, a, dim);
    gin[0] = ops_g_tt(e, CORE_OP_SUB, g,
                      ops_g_tt(e, CORE_OP_MUL, p, ops_g_reduce(e, CORE_OP_SUM, g, d, true)));
    return e->st;
  }
  case CORE_OP_LAYER_NORM: return layer_norm_grad(e, f, g, gin, false);
  default: return layer_norm_grad(e, f, g, gin, true);
  }
}

/* ---- the CUDA bindings (the op list's cuda column; docs/cuda.md): a
 * boxed call turned into a launch on the rank's stream */
#if DTORCH_HAVE_CUDA
dt_status ops_softmax_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  int d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, a->local.ndim, &d);
  if (st != DT_OK) return st;
  if (a->dtype != o->dtype || !ops_cu_is_float(a->dtype))
    return ops_cu_unsupported(c, "mixed dtypes");
  cuda_rows g = ops_cu_rows(a, a->local.ndim ? 1u << d : 0, true);
  return cuda_softmax(ops_cu_stream(o), c->op == CORE_OP_LOG_SOFTMAX,
                      (int)o->dtype, &g, core_tensor_data(o),
                      core_tensor_data(a))
             ? ops_cu_launch_failed(c) : DT_OK;
}

/* layer_norm (x, w, b, eps) and rms_norm (x, w, eps) over the last dim */
dt_status ops_norm_cuda(dt_op_call *c) {
  bool rms = c->op == CORE_OP_RMS_NORM;
  dt_tensor *o = c->out[0], *x = c->args[0].t, *w = c->args[1].t,
            *b = rms ? NULL : c->args[2].t;
  double eps = c->args[rms ? 2 : 3].d;
  if (x->dtype != o->dtype || !ops_cu_is_float(x->dtype) || x->local.ndim < 1 ||
      (w && (w->dtype != x->dtype || !ops_cu_dense(w))) ||
      (b && (b->dtype != x->dtype || !ops_cu_dense(b))))
    return ops_cu_unsupported(c, "mixed dtypes, strided weights or 0-d inputs");
  cuda_rows g = ops_cu_rows(x, 1u << (x->local.ndim - 1), true);
  return cuda_norm(ops_cu_stream(o), rms, (int)o->dtype, &g,
                   core_tensor_data(o), core_tensor_data(x),
                   w ? core_tensor_data(w) : NULL,
                   b ? core_tensor_data(b) : NULL, eps)
             ? ops_cu_launch_failed(c)
             : DT_OK;
}
#endif
