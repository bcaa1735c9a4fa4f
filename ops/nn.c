/* nn ops: embedding, index_select, cross_entropy, dropout. Infer checks
 * shapes and dtypes; indices and targets are data, so their range is
 * checked by the kernels (kernels/cpu/nn.c) while they run, and a bad one
 * fails the call (the dispatcher releases the half-written output). */
#include "kernels/cpu/nn.h"
#include "ops/ops.h"

static dt_status check_index_dtype(const dt_op_call *c, const char *arg,
                                   const dt_tensor *t) {
  if (t->dtype != DT_INT32 && t->dtype != DT_INT64)
    return core_error_set(DT_ERR_DTYPE, "%s: %s must be int32 or int64, got %s",
                        c->api, arg, core_dtype_name(t->dtype));
  return DT_OK;
}

/* a 0-d view as [1], in place (kernels want at least one dim) */
static void at_least_1d(cpu_view *v) {
  if (v->ndim == 0) {
    v->ndim = 1;
    v->sizes[0] = 1;
    v->strides[0] = 1;
  }
}

/* ---- embedding: indices [...] into weight [num, dim] → [..., dim] */
dt_status ops_embedding_infer(dt_op_call *c) {
  const dt_tensor *idx = c->args[0].t, *w = c->args[1].t;
  dt_status st = check_index_dtype(c, "indices", idx);
  if (st != DT_OK) return st;
  char sw[CORE_SHAPE_STR_LEN];
  if (w->local.ndim != 2)
    return core_error_set(DT_ERR_SHAPE, "%s: weight must be 2-D [num, dim], got "
                        "shape %s", c->api,
                        core_shape_str(w->local.sizes, w->local.ndim, sw, sizeof sw));
  if (!core_dtype_valid(w->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: weight has invalid dtype %d",
                        c->api, (int)w->dtype);
  int n = idx->local.ndim;
  if (n + 1 > DT_MAX_DIMS)
    return core_error_set(DT_ERR_SHAPE, "%s: indices have %d dims; the output "
                        "would exceed %d", c->api, n, DT_MAX_DIMS);
  int64_t sz[DT_MAX_DIMS];
  for (int i = 0; i < n; i++) sz[i] = idx->local.sizes[i];
  sz[n] = w->local.sizes[1];
  ops_meta_set(&c->meta[0], w->dtype, n + 1, sz);
  return DT_OK;
}

dt_status ops_embedding_cpu(dt_op_call *c) {
  const dt_tensor *idx = c->args[0].t, *w = c->args[1].t;
  cpu_view vi = ops_view_of(idx), vw = ops_view_of(w);
  cpu_view vo = ops_view_of(c->out[0]); /* [..., dim] seen as [n, dim] */
  vo.ndim = 2;
  vo.sizes[0] = core_numel(idx);
  vo.sizes[1] = vw.sizes[1];
  vo.strides[0] = vw.sizes[1];
  vo.strides[1] = 1;
  int64_t pos, val;
  if (cpu_index_select(&vo, &vw, 0, &vi, &pos, &val) != DT_OK)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: index %lld (position "
                        "%lld of indices) is out of range for a table of "
                        "%lld rows (expected [0, %lld))", c->api,
                        (long long)val, (long long)pos,
                        (long long)vw.sizes[0], (long long)vw.sizes[0]);
  return DT_OK;
}

/* ---- index_select(a, dim, index [n] or []) */
dt_status ops_index_select_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t, *idx = c->args[2].t;
  int d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, a->local.ndim, &d);
  if (st == DT_OK) st = check_index_dtype(c, "index", idx);
  if (st != DT_OK) return st;
  /* the index shape is formatted only on the error paths */
  char si[CORE_SHAPE_STR_LEN];
#define SI core_shape_str(idx->local.sizes, idx->local.ndim, si, sizeof si)
  if (idx->local.ndim > 1)
    return core_error_set(DT_ERR_SHAPE, "%s: index must be 1-D or 0-d, got "
                        "shape %s", c->api, SI);
  if (!core_dtype_valid(a->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: a has invalid dtype %d", c->api,
                        (int)a->dtype);
  int64_t n = core_numel(idx);
  if (a->local.ndim == 0 && n != 1)
    return core_error_set(DT_ERR_SHAPE, "%s: a 0-d a takes exactly one index, "
                        "got index of shape %s", c->api, SI);
#undef SI
  int64_t sz[DT_MAX_DIMS];
  for (int i = 0; i < a->local.ndim; i++) sz[i] = a->local.sizes[i];
  if (a->local.ndim > 0) sz[d] = n;
  ops_meta_set(&c->meta[0], a->dtype, a->local.ndim, sz);
  return DT_OK;
}

dt_status ops_index_select_cpu(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t, *idx = c->args[2].t;
  int d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, a->local.ndim, &d);
  if (st != DT_OK) return st;
  cpu_view va = ops_view_of(a), vi = ops_view_of(idx);
  cpu_view vo = ops_view_of(c->out[0]);
  at_least_1d(&va);
  at_least_1d(&vi);
  at_least_1d(&vo);
  int64_t pos, val;
  if (cpu_index_select(&vo, &va, d, &vi, &pos, &val) != DT_OK)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: index %lld (position "
                        "%lld of index) is out of range for dim %d of size "
                        "%lld (expected [0, %lld))", c->api, (long long)val,
                        (long long)pos, d, (long long)va.sizes[d],
                        (long long)va.sizes[d]);
  return DT_OK;
}

/* ---- cross_entropy(logits [N, C, d...] | [C], target, reduction,
 * ignore_index, label_smoothing): target class indices [N, d...] (for [C]
 * logits: [] or [1]) or class probabilities of the logits' shape */
static dt_status ce_shapes(const dt_op_call *c, const dt_tensor *x,
                           const dt_tensor *t, bool probs) {
  int nx = x->local.ndim, nt = t->local.ndim;
  const int64_t *xs = x->local.sizes, *ts = t->local.sizes;
  bool ok;
  if (probs) {
    ok = nt == nx;
    for (int i = 0; ok && i < nx; i++) ok = ts[i] == xs[i];
  } else if (nx == 1) {
    ok = nt == 0 || (nt == 1 && ts[0] == 1);
  } else {
    ok = nt == nx - 1 && ts[0] == xs[0];
    for (int i = 2; ok && i < nx; i++) ok = ts[i - 1] == xs[i];
  }
  if (ok) return DT_OK;
  int64_t want[DT_MAX_DIMS];
  int nw = 0;
  for (int i = 0; i < nx; i++)
    if (probs || (i != 1 && nx > 1)) want[nw++] = xs[i];
  char sx[CORE_SHAPE_STR_LEN], st[CORE_SHAPE_STR_LEN], sw[CORE_SHAPE_STR_LEN];
  return core_error_set(DT_ERR_SHAPE, "%s: target shape %s does not match "
                        "logits %s (expected %s: %s)", c->api,
                        core_shape_str(ts, nt, st, sizeof st),
                        core_shape_str(xs, nx, sx, sizeof sx),
                        core_shape_str(want, nw, sw, sizeof sw),
                        probs ? "probabilities have the logits' shape"
                              : "class indices drop the class dim 1");
}

dt_status ops_cross_entropy_infer(dt_op_call *c) {
  const dt_tensor *x = c->args[0].t, *t = c->args[1].t;
  int64_t red = c->args[2].i;
  double eps = c->args[4].d;
  if (!core_dtype_is_float(x->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: logits must have a floating dtype, "
                        "got %s", c->api, core_dtype_name(x->dtype));
  bool probs = core_dtype_is_float(t->dtype);
  dt_status st = probs ? DT_OK : check_index_dtype(c, "target", t);
  if (st != DT_OK) return st;
  if (red != DT_REDUCTION_MEAN && red != DT_REDUCTION_SUM &&
      red != DT_REDUCTION_NONE)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: reduction %lld is not a "
                        "dt_reduction (MEAN, SUM or NONE)", c->api,
                        (long long)red);
  if (!(eps >= 0 && eps <= 1))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: label_smoothing %g is "
                          "outside [0, 1]", c->api, eps);
  if (x->local.ndim == 0)
    return core_error_set(DT_ERR_SHAPE, "%s: logits are 0-d; expected [C] or "
                          "[N, C, d1, ...]", c->api);
  if ((st = ce_shapes(c, x, t, probs)) != DT_OK) return st;
  /* NONE: one loss per position ([N, d...]; [] for [C] logits) */
  int64_t sz[DT_MAX_DIMS];
  int n = 0;
  for (int i = 0; x->local.ndim > 1 && i < x->local.ndim; i++)
    if (i != 1) sz[n++] = x->local.sizes[i];
  ops_meta_set(&c->meta[0], x->dtype, red == DT_REDUCTION_NONE ? n : 0, sz);
  return DT_OK;
}

dt_status ops_cross_entropy_cpu(dt_op_call *c) {
  const dt_tensor *x = c->args[0].t, *t = c->args[1].t;
  cpu_view vx = ops_view_of(x), vt = ops_view_of(t);
  bool probs = core_dtype_is_float(t->dtype);
  if (vx.ndim == 1) { /* [C] as [1, C]: its target [] / [1] or [C] alike */
    vx.ndim = 2;
    vx.sizes[1] = vx.sizes[0];
    vx.strides[1] = vx.strides[0];
    vx.sizes[0] = 1;
    vx.strides[0] = 0;
    if (probs) vt = vx.data == vt.data ? vx : (cpu_view){
        .data = vt.data, .dtype = vt.dtype, .ndim = 2,
        .sizes = {1, vt.sizes[0]}, .strides = {0, vt.strides[0]}};
  }
  if (!probs) at_least_1d(&vt);
  dt_tensor *o = c->out[0];
  cpu_ce_args a = {&vx, &vt, probs, (dt_reduction)c->args[2].i, c->args[3].i,
                   c->args[4].d};
  int64_t pos, val;
  if (cpu_cross_entropy(core_tensor_data(o), o->dtype, &a, &pos, &val) != DT_OK)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: target %lld (position "
                        "%lld) is out of range for %lld classes (expected "
                        "[0, %lld) or ignore_index %lld)", c->api,
                        (long long)val, (long long)pos, (long long)vx.sizes[1],
                        (long long)vx.sizes[1], (long long)c->args[3].i);
  return DT_OK;
}

/* ---- dropout(a, p, train, seed, offset) */
dt_status ops_dropout_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  double p = c->args[1].d;
  if (!(p >= 0.0 && p <= 1.0))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: p %g is outside [0, 1]",
                        c->api, p);
  if (!core_dtype_is_float(a->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: a must have a floating dtype, got "
                        "%s", c->api, core_dtype_name(a->dtype));
  ops_meta_set(&c->meta[0], a->dtype, a->local.ndim, a->local.sizes);
  return DT_OK;
}

dt_status ops_dropout_cpu(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  double p = c->args[1].d;
  bool train = c->args[2].b;
  cpu_view vo = ops_view_of(o), va = ops_view_of(c->args[0].t);
  if (!train || p == 0.0)
    cpu_unary(CPU_COPY, cpu_compute_type(vo.dtype), &vo, &va);
  else if (p == 1.0)
    cpu_fill(vo.data, vo.dtype, core_numel(o), 0.0);
  else
    cpu_dropout(&vo, &va, p, (uint64_t)c->args[3].i, (uint64_t)c->args[4].i);
  return DT_OK;
}
