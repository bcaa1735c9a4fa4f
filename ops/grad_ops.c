/* Backward kernels: the ops autograd needs that the forward ops cannot
 * compose — gelu_backward, slice_scatter (the backward of slice, narrow
 * and select), index_select_backward (an index_add into zeros) and
 * cross_entropy_backward. Each is an ordinary op: infer (errors naming
 * c->api, the argument and the values), a CPU kernel (the loops are in
 * kernels/cpu/grad.c) and a sharding rule; none is differentiable itself.
 * Indices and targets are data, checked by the kernels while they run. */
#include <string.h>

#include "ops/ops.h"
#include "ops/cuda_ops.h"

static dt_status need_float(const dt_op_call *c, const char *arg,
                            const dt_tensor *t) {
  if (!core_dtype_is_float(t->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: %s must have a floating dtype, "
                          "got %s", c->api, arg, core_dtype_name(t->dtype));
  return DT_OK;
}

static void zero_fill(dt_tensor *o) {
  cpu_fill(core_tensor_data(o), o->dtype, core_numel(o), 0.0);
}

/* ---- gelu_backward(grad, x): binary broadcasting and promotion */
dt_status ops_gelu_backward_infer(dt_op_call *c) {
  const dt_tensor *g = c->args[0].t, *x = c->args[1].t;
  dt_status st = need_float(c, "grad", g);
  if (st == DT_OK) st = need_float(c, "x", x);
  if (st != DT_OK) return st;
  core_meta *m = &c->meta[0];
  st = ops_broadcast_shapes(c, g->local.sizes, g->local.ndim, x->local.sizes,
                            x->local.ndim, m->sizes, &m->ndim);
  if (st != DT_OK) return st;
  m->dtype = core_result_type(g->dtype, g->local.ndim == 0, x->dtype,
                              x->local.ndim == 0);
  m->alias = -1;
  m->offset = 0;
  return DT_OK;
}

dt_status ops_gelu_backward_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]);
  cpu_view vg0 = ops_view_of(c->args[0].t), vx0 = ops_view_of(c->args[1].t);
  cpu_view vg = cpu_view_broadcast(&vg0, vo.ndim, vo.sizes);
  cpu_view vx = cpu_view_broadcast(&vx0, vo.ndim, vo.sizes);
  cpu_gelu_backward(cpu_compute_type(vo.dtype), &vo, &vg, &vx);
  return DT_OK;
}

/* pointwise over both; linear in grad: grad P(sum), x R → P(sum) */
void ops_gelu_backward_rule(const dt_op_call *c, ops_rule_set *rs) {
  ops_rule_pointwise(c, rs, 3u);
  ops_rule_partial(c, rs, 1u, 2u, DT_REDUCE_SUM, DT_REDUCE_SUM);
}

/* ---- slice_scatter(src, shape, dim, start, end, step) */
/* start and end normalised as slice does (negatives from the end, then
 * clamped to [0, n]); the number of elements the slice takes */
int64_t ops_slice_len(int64_t n, int64_t *start, int64_t end, int64_t step) {
  int64_t s = *start;
  if (s < 0) s += n;
  if (end < 0) end += n;
  s = s < 0 ? 0 : s > n ? n : s;
  end = end < s ? s : end > n ? n : end;
  *start = s;
  int64_t len = end - s;
  return len / step + (len % step != 0);
}

static dt_status scatter_shape(const dt_op_call *c, const dt_tensor *src,
                               const dt_shape *s, int d) {
  char ss[CORE_SHAPE_STR_LEN], sh[CORE_SHAPE_STR_LEN];
#define SS core_shape_str(src->local.sizes, src->local.ndim, ss, sizeof ss)
#define SH core_shape_str(s->dims, s->ndim < 0 ? 0 : s->ndim, sh, sizeof sh)
  for (int i = 0; i < s->ndim; i++)
    if (s->dims[i] < 0)
      return core_error_set(DT_ERR_SHAPE, "%s: shape %s has a negative size "
                            "%lld at dim %d", c->api, SH,
                            (long long)s->dims[i], i);
  if (!ops_sizes_fit(s->dims, s->ndim))
    return core_error_set(DT_ERR_SHAPE, "%s: shape %s has more elements than "
                          "int64 can count", c->api, SH);
  for (int i = 0; i < s->ndim; i++)
    if (i != d && s->dims[i] != src->local.sizes[i])
      return core_error_set(DT_ERR_SHAPE, "%s: src shape %s and shape %s "
                            "differ at dim %d (%lld vs %lld); only dim %d "
                            "may differ", c->api, SS, SH, i,
                            (long long)src->local.sizes[i],
                            (long long)s->dims[i], d);
#undef SS
#undef SH
  return DT_OK;
}

dt_status ops_slice_scatter_infer(dt_op_call *c) {
  const dt_tensor *src = c->args[0].t;
  const dt_shape *s = &c->args[1].ints;
  int n = src->local.ndim, d;
  if (!core_dtype_valid(src->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: src has invalid dtype %d", c->api,
                          (int)src->dtype);
  if (n == 0)
    return core_error_set(DT_ERR_SHAPE, "%s: src is 0-d; a slice has at least "
                          "one dim", c->api);
  if (s->ndim != n)
    return core_error_set(DT_ERR_SHAPE, "%s: shape has %d dims but src has %d",
                          c->api, s->ndim, n);
  dt_status st = ops_wrap_dim(c, "dim", c->args[2].i, n, &d);
  if (st == DT_OK) st = scatter_shape(c, src, s, d);
  if (st != DT_OK) return st;
  int64_t start = c->args[3].i, end = c->args[4].i, step = c->args[5].i;
  if (step < 1)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: step must be "
                          "positive, got %lld", c->api, (long long)step);
  int64_t len = ops_slice_len(s->dims[d], &start, end, step);
  if (len != src->local.sizes[d])
    return core_error_set(DT_ERR_SHAPE, "%s: the slice start %lld, end %lld, "
                          "step %lld of dim %d (size %lld) takes %lld "
                          "elements but src has %lld there", c->api,
                          (long long)c->args[3].i, (long long)end,
                          (long long)step, d, (long long)s->dims[d],
                          (long long)len, (long long)src->local.sizes[d]);
  ops_meta_set(&c->meta[0], src->dtype, n, s->dims);
  return DT_OK;
}

/* zeros, then src copied into the slice of the output (whose dim `d` is
 * whole on every rank: the rule never shards it) */
dt_status ops_slice_scatter_cpu(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  const dt_tensor *src = c->args[0].t;
  int d = (int)(c->args[2].i < 0 ? c->args[2].i + o->local.ndim : c->args[2].i);
  int64_t start = c->args[3].i, step = c->args[5].i;
  zero_fill(o);
  ops_slice_len(o->local.sizes[d], &start, c->args[4].i, step);
  cpu_view vo = ops_view_of(o), vs = ops_view_of(src);
  if (core_numel(src) == 0) return DT_OK;
  vo.data += start * vo.strides[d] * (int64_t)core_dtype_size(o->dtype);
  vo.sizes[d] = vs.sizes[d];
  if (vs.sizes[d] > 1) vo.strides[d] *= step; /* in range: the slice fits */
  cpu_unary(CPU_COPY, cpu_compute_type(vo.dtype), &vo, &vs);
  return DT_OK;
}

/* R → R; src S(d ≠ dim) → S(d); P(sum) → P(sum) (zeros elsewhere keep the
 * sum of the terms) */
void ops_slice_scatter_rule(const dt_op_call *c, ops_rule_set *rs) {
  int n = c->args[0].t->local.ndim;
  int64_t d = c->args[2].i < 0 ? c->args[2].i + n : c->args[2].i;
  ops_rule_add(c, rs);
  ops_rule_shard_dims(c, rs, 0, n, (int)d, 0);
  if (c->args[0].t->dtype != DT_BOOL) /* a bool "sum" is an or */
    ops_rule_partial(c, rs, 1u, 0, DT_REDUCE_SUM, DT_REDUCE_SUM);
}

/* ---- index_select_backward(grad, dim, index, size) */
dt_status ops_index_select_backward_infer(dt_op_call *c) {
  const dt_tensor *g = c->args[0].t, *idx = c->args[2].t;
  int64_t size = c->args[3].i;
  int n = g->local.ndim, d;
  dt_status st = need_float(c, "grad", g);
  if (st == DT_OK) st = ops_check_index_dtype(c, "index", idx);
  if (st == DT_OK) st = ops_wrap_dim(c, "dim", c->args[1].i, n, &d);
  if (st != DT_OK) return st;
  char si[CORE_SHAPE_STR_LEN], sg[CORE_SHAPE_STR_LEN];
  if (idx->local.ndim > 1)
    return core_error_set(DT_ERR_SHAPE, "%s: index must be 1-D or 0-d, got "
                          "shape %s", c->api,
                          core_shape_str(idx->local.sizes, idx->local.ndim, si,
                                         sizeof si));
  int64_t have = n ? g->local.sizes[d] : 1, ni = core_numel(idx);
  if (ni != have)
    return core_error_set(DT_ERR_SHAPE, "%s: index has %lld elements but grad "
                          "%s has %lld at dim %d", c->api, (long long)ni,
                          core_shape_str(g->local.sizes, n, sg, sizeof sg),
                          (long long)have, d);
  if (size < 0 || (n == 0 && size != 1))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: size %lld is invalid "
                          "(expected %s)", c->api, (long long)size,
                          n ? ">= 0" : "1 for a 0-d grad");
  int64_t sz[DT_MAX_DIMS];
  memcpy(sz, g->local.sizes, sizeof sz);
  if (n) sz[d] = size;
  if (!ops_sizes_fit(sz, n))
    return core_error_set(DT_ERR_SHAPE, "%s: size %lld makes an output with "
                          "more elements than int64 can count", c->api,
                          (long long)size);
  ops_meta_set(&c->meta[0], g->dtype, n, sz);
  return DT_OK;
}

dt_status ops_index_select_backward_cpu(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  const dt_tensor *g = c->args[0].t, *idx = c->args[2].t;
  int n = o->local.ndim;
  int d = (int)(c->args[1].i < 0 ? c->args[1].i + (n ? n : 1) : c->args[1].i);
  zero_fill(o);
  cpu_view vo = ops_view_of(o), vg = ops_view_of(g), vi = ops_view_of(idx);
  ops_view_at_least_1d(&vo);
  ops_view_at_least_1d(&vg);
  ops_view_at_least_1d(&vi);
  int64_t pos, val;
  if (cpu_index_add(&vo, d, &vi, &vg, &pos, &val) != DT_OK)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: index %lld (position "
                          "%lld of index) is out of range for dim %d of size "
                          "%lld (expected [0, %lld))", c->api, (long long)val,
                          (long long)pos, d, (long long)vo.sizes[d],
                          (long long)vo.sizes[d]);
  return DT_OK;
}

/* (grad R, index R) → R; grad S(d ≠ dim) → S(d); grad S(dim) with index
 * S(0) → P(sum) (each rank adds its part into full-size zeros); grad
 * P(sum), index R → P(sum) (linear in grad) */
void ops_index_select_backward_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *g = c->args[0].t, *idx = c->args[2].t;
  int n = g->local.ndim;
  int64_t d = c->args[1].i < 0 ? c->args[1].i + (n ? n : 1) : c->args[1].i;
  ops_rule_add(c, rs);
  ops_rule_shard_dims(c, rs, 0, n, (int)d, 0);
  if (idx->local.ndim == 1 && n > 0) {
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    s->in[0] = ops_shard((int)d);
    s->in[2] = ops_shard(0);
    s->out[0] = ops_partial(DT_REDUCE_SUM);
  }
  ops_rule_partial(c, rs, 1u, 4u, DT_REDUCE_SUM, DT_REDUCE_SUM);
}

/* ---- cross_entropy_backward(grad, input, target, reduction,
 * ignore_index, label_smoothing) → the gradient w.r.t. input */
/* the positions' shape of input [N, C, d...] ([] for [C]): the shape of a
 * NONE loss and of class-index targets */
static int positions(const dt_tensor *x, int64_t *sz) {
  int n = 0;
  for (int i = 0; x->local.ndim > 1 && i < x->local.ndim; i++)
    if (i != 1) sz[n++] = x->local.sizes[i];
  return n;
}

static bool same_shape(const int64_t *a, int na, const int64_t *b, int nb) {
  if (na != nb) return false;
  for (int i = 0; i < na; i++)
    if (a[i] != b[i]) return false;
  return true;
}

static dt_status ce_bw_shapes(const dt_op_call *c, const dt_tensor *x,
                              const dt_tensor *t, bool probs) {
  int64_t pos[DT_MAX_DIMS];
  int np = positions(x, pos), nt = t->local.ndim;
  const int64_t *ts = t->local.sizes;
  bool ok = probs ? same_shape(ts, nt, x->local.sizes, x->local.ndim)
            : x->local.ndim == 1 ? nt == 0 || (nt == 1 && ts[0] == 1)
            : same_shape(ts, nt, pos, np);
  if (ok) return DT_OK;
  char sx[CORE_SHAPE_STR_LEN], st[CORE_SHAPE_STR_LEN], sw[CORE_SHAPE_STR_LEN];
  return core_error_set(DT_ERR_SHAPE, "%s: target shape %s does not match "
                        "input %s (expected %s: %s)", c->api,
                        core_shape_str(ts, nt, st, sizeof st),
                        core_shape_str(x->local.sizes, x->local.ndim, sx, sizeof sx),
                        probs ? sx : core_shape_str(pos, np, sw, sizeof sw),
                        probs ? "probabilities have the input's shape"
                              : "class indices drop the class dim 1");
}

static dt_status ce_bw_grad_shape(const dt_op_call *c, const dt_tensor *g,
                                  const dt_tensor *x, int64_t red) {
  int64_t pos[DT_MAX_DIMS];
  int np = red == DT_REDUCTION_NONE ? positions(x, pos) : 0;
  if (same_shape(g->local.sizes, g->local.ndim, pos, np)) return DT_OK;
  char sg[CORE_SHAPE_STR_LEN], sw[CORE_SHAPE_STR_LEN];
  return core_error_set(DT_ERR_SHAPE, "%s: grad shape %s does not match the "
                        "loss shape %s (reduction %s)", c->api,
                        core_shape_str(g->local.sizes, g->local.ndim, sg, sizeof sg),
                        core_shape_str(pos, np, sw, sizeof sw),
                        red == DT_REDUCTION_NONE ? "NONE"
                        : red == DT_REDUCTION_SUM ? "SUM" : "MEAN");
}

dt_status ops_cross_entropy_backward_infer(dt_op_call *c) {
  const dt_tensor *g = c->args[0].t, *x = c->args[1].t, *t = c->args[2].t;
  int64_t red = c->args[3].i;
  double eps = c->args[5].d;
  bool probs = core_dtype_is_float(t->dtype);
  dt_status st = need_float(c, "grad", g);
  if (st == DT_OK) st = need_float(c, "input", x);
  if (st == DT_OK && !probs) st = ops_check_index_dtype(c, "target", t);
  if (st != DT_OK) return st;
  if (red != DT_REDUCTION_MEAN && red != DT_REDUCTION_SUM &&
      red != DT_REDUCTION_NONE)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: reduction %lld is not "
                          "a dt_reduction (MEAN, SUM or NONE)", c->api,
                          (long long)red);
  if (!(eps >= 0 && eps <= 1))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: label_smoothing %g is "
                          "outside [0, 1]", c->api, eps);
  if (x->local.ndim == 0)
    return core_error_set(DT_ERR_SHAPE, "%s: input is 0-d; expected [C] or "
                          "[N, C, d1, ...]", c->api);
  if ((st = ce_bw_shapes(c, x, t, probs)) != DT_OK) return st;
  if ((st = ce_bw_grad_shape(c, g, x, red)) != DT_OK) return st;
  ops_meta_set(&c->meta[0], x->dtype, x->local.ndim, x->local.sizes);
  return DT_OK;
}

/* [C] as [1, C] (its target, [] / [1] or [C], alike) */
static void as_rows(cpu_view *v) {
  v->ndim = 2;
  v->sizes[1] = v->sizes[0];
  v->strides[1] = v->strides[0];
  v->sizes[0] = 1;
  v->strides[0] = 0;
}

/* A Replicate class-index target of a rank whose input holds only some
 * positions (MEAN: the rule keeps the target whole for the global count):
 * its rows (the input's offsets, dims past the class dim shifted left) */
static void narrow_target(const dt_op_call *c, cpu_view *vt, const cpu_view *vx) {
  const int64_t *off = c->shard->off[1];
  int64_t at = 0;
  for (int d = 0; d < vx->ndim; d++) {
    if (d == 1) continue;
    int td = d == 0 ? 0 : d - 1;
    if (vt->sizes[td] == vx->sizes[d]) continue;
    at += off[d] * vt->strides[td];
    vt->sizes[td] = vx->sizes[d];
  }
  vt->data += at * (int64_t)core_dtype_size(vt->dtype);
}

/* MEAN's denominator, global when the op runs as a rank's part of a
 * DTensor op: the positions of the whole input (probabilities) or the
 * class-index targets of the whole target that are not ignore_index (the
 * rule keeps such a target Replicate, so the rank holds all of it) */
static double ce_bw_denominator(const dt_op_call *c, bool probs) {
  const dt_tensor *x = c->args[1].t, *t = c->args[2].t;
  const int64_t *xs = c->shard ? c->shard->global[1].dims : x->local.sizes;
  int nx = x->local.ndim;
  if (probs) { /* [C]: one position */
    int64_t n = 1;
    for (int d = 0; nx > 1 && d < nx; d++)
      if (d != 1) n *= xs[d];
    return (double)n;
  }
  cpu_view vt = ops_view_of(c->shard ? c->shard->whole[2] : t);
  ops_view_at_least_1d(&vt);
  return (double)cpu_count_not_equal(&vt, c->args[4].i);
}

dt_status ops_cross_entropy_backward_cpu(dt_op_call *c) {
  const dt_tensor *g = c->args[0].t, *x = c->args[1].t, *t = c->args[2].t;
  cpu_view vx = ops_view_of(x), vt = ops_view_of(t), vo = ops_view_of(c->out[0]);
  cpu_view vg = ops_view_of(g);
  bool probs = core_dtype_is_float(t->dtype);
  int64_t red = c->args[3].i;
  if (c->shard && !probs && vx.ndim > 1) narrow_target(c, &vt, &vx);
  if (vx.ndim == 1) {
    as_rows(&vx);
    as_rows(&vo);
    if (probs) as_rows(&vt);
  }
  if (!probs) ops_view_at_least_1d(&vt);
  ops_view_at_least_1d(&vg);
  cpu_ce_grad_args a = {&vx, &vt, probs, c->args[4].i, c->args[5].d,
                        red == DT_REDUCTION_NONE ? &vg : NULL, 0};
  if (red != DT_REDUCTION_NONE) {
    cpu_load(&a.scale, DT_FLOAT64, vg.data, vg.dtype, 0, 1);
    if (red == DT_REDUCTION_MEAN) a.scale /= ce_bw_denominator(c, probs);
  }
  int64_t pos, val;
  if (cpu_cross_entropy_backward(&vo, &a, &pos, &val) != DT_OK)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: target %lld (position "
                          "%lld) is out of range for %lld classes (expected "
                          "[0, %lld) or ignore_index %lld)", c->api,
                          (long long)val, (long long)pos, (long long)vx.sizes[1],
                          (long long)vx.sizes[1], (long long)c->args[4].i);
  return DT_OK;
}

/* Mirrors cross_entropy's rule: positions (N and the d dims, never the
 * class dim) sharded alike in input and target → the gradient sharded
 * alike, with grad Replicate (SUM, MEAN: a scalar) or sharded as the NONE
 * losses; MEAN keeps class-index targets Replicate (the global count
 * needs them all). Linear in grad: grad P(sum), the rest R → P(sum). */
void ops_cross_entropy_backward_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *x = c->args[1].t, *t = c->args[2].t;
  int n = x->local.ndim;
  bool probs = core_dtype_is_float(t->dtype);
  int64_t red = c->args[3].i;
  ops_rule_add(c, rs);
  for (int d = 0; n >= 2 && d < n; d++) {
    if (d == 1) continue;
    int pd = d == 0 ? 0 : d - 1; /* the dim in the positions' shape */
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    s->in[0] = red == DT_REDUCTION_NONE ? ops_shard(pd) : DT_REPLICATE;
    s->in[1] = ops_shard(d);
    s->in[2] = probs ? ops_shard(d)
               : red == DT_REDUCTION_MEAN ? DT_REPLICATE : ops_shard(pd);
    s->out[0] = ops_shard(d);
  }
  ops_rule_partial(c, rs, 1u, 6u, DT_REDUCE_SUM, DT_REDUCE_SUM);
}

/* ---- the CUDA bindings (the op list's cuda column; docs/cuda.md): a
 * boxed call turned into a launch on the rank's stream */
#if DTORCH_HAVE_CUDA
/* slice_scatter (autograd's slice backward): zeros, then src into the
 * slice [start, end) by step of dim */
dt_status ops_slice_scatter_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *src = c->args[0].t;
  int n = o->local.ndim, d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[2].i, n, &d);
  if (st != DT_OK) return st;
  if (cuda_fill(ops_cu_stream(o), (int)o->dtype, core_numel(o),
                core_tensor_data(o), 0))
    return ops_cu_launch_failed(c);
  if (!core_numel(src)) return DT_OK;
  int64_t start = c->args[3].i, step = c->args[5].i;
  ops_slice_len(o->local.sizes[d], &start, c->args[4].i, step);
  cuda_operand so = {.data = (char *)core_tensor_data(o) +
                             (size_t)(start * o->local.strides[d]) *
                                 core_dtype_size(o->dtype)},
               ss = {.data = core_tensor_data(src)};
  memcpy(so.strides, o->local.strides, sizeof(int64_t) * (size_t)n);
  so.strides[d] *= step;
  memcpy(ss.strides, src->local.strides, sizeof(int64_t) * (size_t)n);
  return cuda_copy_strided(ops_cu_stream(o), (int)o->dtype, (int)src->dtype, n,
                           src->local.sizes, &so, &ss)
             ? ops_cu_launch_failed(c) : DT_OK;
}

/* index_select_backward(grad, dim, index, size): zeros, then index_add
 * in index order (the CPU's bits, kernels/cuda/grad.cu); every index is
 * checked, also when the output is empty */
dt_status ops_index_select_backward_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *g = c->args[0].t, *idx = c->args[2].t;
  int n = o->local.ndim, d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, n ? n : 1, &d);
  if (st != DT_OK) return st;
  if (g->dtype != o->dtype || !ops_cu_dense(g) || !ops_cu_dense(o) ||
      !ops_cu_is_float(o->dtype))
    return ops_cu_unsupported(c, "a strided grad");
  int64_t outer = 1, inner = 1, size = n ? o->local.sizes[d] : 1;
  for (int k = 0; k < n; k++) {
    if (k < d) outer *= o->local.sizes[k];
    if (k > d) inner *= o->local.sizes[k];
  }
  int64_t ni = core_numel(idx), pos = -1, val = 0;
  int64_t istride = idx->local.ndim ? idx->local.strides[0] : 1;
  if (ni > INT32_MAX) /* CUB's sort counts items in an int */
    return ops_cu_unsupported(c, "more than 2^31 - 1 indices");
  if (core_numel(o) && cuda_fill(ops_cu_stream(o), (int)o->dtype, core_numel(o),
                                 core_tensor_data(o), 0))
    return ops_cu_launch_failed(c);
  char *scratch = ops_cu_bad_scratch(c, cuda_index_add_scratch(ni), 0);
  if (!scratch) return core_last_status();
  if (cuda_index_add(ops_cu_stream(o), (int)o->dtype, outer, size, inner,
                     core_tensor_data(o), core_tensor_data(g), ni,
                     core_tensor_data(idx), idx->dtype == DT_INT64, istride,
                     scratch))
    st = ops_cu_launch_failed(c);
  if (st == DT_OK)
    st = ops_cu_read_bad_index(c, scratch, idx, istride, &pos, &val);
  ops_cu_rt(o)->backend->free(ops_cu_rt(o), ops_cu_rank(o), scratch);
  return st == DT_OK && pos >= 0 ? ops_cu_index_error(c, val, pos, d, size)
                                 : st;
}

/* cross_entropy_backward(grad, input, target, reduction, ignore_index,
 * label_smoothing) for [N, C] / [C] logits with class-index targets on one
 * rank's whole positions, as ops_cross_entropy_cuda; the rest is the host
 * fallback's */
dt_status ops_cross_entropy_backward_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *g = c->args[0].t, *x = c->args[1].t,
            *t = c->args[2].t;
  int nx = x->local.ndim;
  if (c->shard || core_dtype_is_float(t->dtype) || nx > 2 ||
      x->dtype != o->dtype || g->dtype != o->dtype ||
      !ops_cu_is_float(x->dtype))
    return ops_cu_unsupported(c, "probability targets, more than 2 dims, mixed "
                              "dtypes or a DTensor shard");
  int64_t m = nx == 2 ? x->local.sizes[0] : 1, nc = x->local.sizes[nx - 1];
  int64_t ts = t->local.ndim ? t->local.strides[0] : 0;
  int64_t gs = g->local.ndim ? g->local.strides[0] : 0;
  int64_t red = c->args[3].i, pos = -1, val = 0;
  char *scratch = ops_cu_bad_scratch(c, 16, 8);
  if (!scratch) return core_last_status();
  dt_status st = DT_OK;
  if (cuda_cross_entropy_backward(
          ops_cu_stream(o), (int)x->dtype, t->dtype == DT_INT64, m, nc,
          nx == 2 ? x->local.strides[0] : 0, x->local.strides[nx - 1],
          core_tensor_data(x), core_tensor_data(t), ts, c->args[4].i,
          c->args[5].d, red == DT_REDUCTION_MEAN ? 0
                        : red == DT_REDUCTION_SUM ? 1 : 2,
          core_tensor_data(g), gs, core_tensor_data(o),
          nx == 2 ? o->local.strides[0] : 0, o->local.strides[nx - 1],
          scratch))
    st = ops_cu_launch_failed(c);
  if (st == DT_OK)
    st = ops_cu_read_bad_index(c, scratch + 8, t, ts, &pos, &val);
  ops_cu_rt(o)->backend->free(ops_cu_rt(o), ops_cu_rank(o), scratch);
  if (st == DT_OK && pos >= 0)
    st = ops_cu_target_error(c, val, pos, nc, c->args[4].i);
  return st;
}
#endif
