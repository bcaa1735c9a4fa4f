/* nn ops: embedding, index_select, cross_entropy, dropout. Infer checks
 * shapes and dtypes; indices and targets are data, so their range is
 * checked by the kernels (kernels/cpu/nn.c) while they run, and a bad one
 * fails the call (the dispatcher releases the half-written output). */
#include <string.h>

#include "kernels/cpu/nn.h"
#include "ops/ops.h"
#include "ops/cuda_ops.h"

/* ---- embedding: indices [...] into weight [num, dim] → [..., dim] */
dt_status ops_embedding_infer(dt_op_call *c) {
  const dt_tensor *idx = c->args[0].t, *w = c->args[1].t;
  dt_status st = ops_check_index_dtype(c, "indices", idx);
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

/* A rank's part of a DTensor embedding whose table is row-sharded: it
 * looks up the indices that fall in its rows [lo, lo + rows) and writes
 * zeros for the others (the output is P(sum): the owner's row is the
 * only non-zero term). Indices are checked against the global table. */
static dt_status embedding_rows(dt_op_call *c, const dt_tensor *idx,
                                const dt_tensor *w) {
  int64_t lo = c->shard->off[1][0], rows = w->local.sizes[0];
  int64_t num = c->shard->global[1].dims[0], dim = w->local.sizes[1];
  int64_t n = core_numel(idx);
  size_t es = core_dtype_size(w->dtype), row = (size_t)dim * es;
  cpu_view vi = ops_view_of(idx);
  char *out = core_tensor_data(c->out[0]);
  const char *tab = core_tensor_data(w);
  for (int64_t p = 0; p < n; p++) {
    int64_t k = 0, rem = p, off = 0; /* index p of a possibly strided view */
    for (int d = vi.ndim - 1; d >= 0; d--) {
      int64_t at = rem % vi.sizes[d];
      rem /= vi.sizes[d];
      off += at * vi.strides[d];
    }
    k = vi.dtype == DT_INT32 ? ((const int32_t *)vi.data)[off]
                             : ((const int64_t *)vi.data)[off];
    if (k < 0 || k >= num)
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: index %lld (position "
                            "%lld of indices) is out of range for a table of "
                            "%lld rows (expected [0, %lld))", c->api,
                            (long long)k, (long long)p, (long long)num,
                            (long long)num);
    char *o = out + (size_t)p * row;
    if (k >= lo && k < lo + rows) {
      const char *src = tab + (size_t)(k - lo) * (size_t)w->local.strides[0] * es;
      if (w->local.strides[1] == 1) memcpy(o, src, row);
      else for (int64_t j = 0; j < dim; j++)
        memcpy(o + j * es, src + (size_t)(j * w->local.strides[1]) * es, es);
    } else {
      memset(o, 0, row); /* 0.0 in every float dtype and 0 in the ints */
    }
  }
  return DT_OK;
}

dt_status ops_embedding_cpu(dt_op_call *c) {
  const dt_tensor *idx = c->args[0].t, *w = c->args[1].t;
  if (c->shard && w->local.sizes[0] != c->shard->global[1].dims[0])
    return embedding_rows(c, idx, w);
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
  if (st == DT_OK) st = ops_check_index_dtype(c, "index", idx);
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
  ops_view_at_least_1d(&va);
  ops_view_at_least_1d(&vi);
  ops_view_at_least_1d(&vo);
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
  dt_status st = probs ? DT_OK : ops_check_index_dtype(c, "target", t);
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

/* A Replicate class-index target of a rank whose logits hold only some
 * positions: its rows of the target (the logits' offsets, dims past the
 * class dim shifted left by one) */
static void narrow_target(const dt_op_call *c, cpu_view *vt, const cpu_view *vx) {
  const int64_t *off = c->shard->off[0];
  int64_t at = 0;
  for (int d = 0; d < vx->ndim; d++) {
    if (d == 1) continue;
    int td = d == 0 ? 0 : d - 1;
    at += off[d] * vt->strides[td];
    vt->sizes[td] = vx->sizes[d];
  }
  vt->data = (char *)vt->data + at * (int64_t)core_dtype_size(vt->dtype);
}

/* A rank's part of a DTensor cross_entropy with reduction MEAN whose
 * positions are sharded: it sums its own losses and divides by the
 * global count (the output is P(sum)), which is the number of targets
 * that are not ignore_index in the whole target (Replicate: the rank holds
 * all of it), or the global number of positions for probability targets.
 * -1: not that case. */
static double ce_global_denominator(const dt_op_call *c, const cpu_view *vx,
                                    bool probs) {
  if (!c->shard || c->args[2].i != DT_REDUCTION_MEAN) return -1;
  const dt_shape *g = &c->shard->global[0];
  int64_t local = 1, global = 1;
  for (int d = 0; d < g->ndim; d++)
    if (d != 1 || g->ndim == 1) {
      local *= vx->sizes[d];
      global *= g->dims[d];
    }
  if (g->ndim == 1) return -1; /* [C] logits: one position, never sharded */
  if (local == global) return -1;
  if (probs) return (double)global;
  const dt_tensor *t = c->shard->whole[1];
  cpu_view vt = ops_view_of(t);
  int64_t n = core_numel(t), count = 0, ignore = c->args[3].i;
  for (int64_t p = 0; p < n; p++) {
    int64_t v = vt.dtype == DT_INT32 ? ((const int32_t *)vt.data)[p]
                                     : ((const int64_t *)vt.data)[p];
    count += v != ignore;
  }
  return (double)count;
}

dt_status ops_cross_entropy_cpu(dt_op_call *c) {
  const dt_tensor *x = c->args[0].t, *t = c->args[1].t;
  cpu_view vx = ops_view_of(x), vt = ops_view_of(t);
  bool probs = core_dtype_is_float(t->dtype);
  if (c->shard && !probs && vx.ndim > 1) {
    bool same = true;
    for (int d = 0; d < vx.ndim; d++)
      if (d != 1) same &= vt.sizes[d == 0 ? 0 : d - 1] == vx.sizes[d];
    if (!same) narrow_target(c, &vt, &vx);
  }
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
  if (!probs) ops_view_at_least_1d(&vt);
  dt_tensor *o = c->out[0];
  dt_reduction red = (dt_reduction)c->args[2].i;
  double denom = ce_global_denominator(c, &vx, probs);
  if (denom >= 0) red = DT_REDUCTION_SUM; /* then / the global count */
  cpu_ce_args a = {&vx, &vt, probs, red, c->args[3].i, c->args[4].d};
  int64_t pos, val;
  if (cpu_cross_entropy(core_tensor_data(o), o->dtype, &a, &pos, &val) != DT_OK)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: target %lld (position "
                        "%lld) is out of range for %lld classes (expected "
                        "[0, %lld) or ignore_index %lld)", c->api,
                        (long long)val, (long long)pos, (long long)vx.sizes[1],
                        (long long)vx.sizes[1], (long long)c->args[3].i);
  if (denom >= 0) {
    cpu_view vo = ops_view_of(o);
    cpu_binary_scalar(CPU_DIV, cpu_compute_type(vo.dtype), &vo, &vo, denom);
  }
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

/* A rank's part of a DTensor dropout: element (i0, ..., in) of its box
 * draws the random number of its GLOBAL index, so the mask equals the
 * single-device run's however the tensor is sharded. One run per row of
 * the box (its last dim is contiguous in the global order). */
static void dropout_shard(const dt_op_call *c, const cpu_view *vo,
                          const cpu_view *va, double p) {
  const dt_shape *g = &c->shard->global[0];
  const int64_t *off = c->shard->off[0];
  int n = vo->ndim;
  if (n == 0) {
    cpu_dropout(vo, va, p, (uint64_t)c->args[3].i, (uint64_t)c->args[4].i);
    return;
  }
  int64_t gstride[DT_MAX_DIMS], s = 1, idx[DT_MAX_DIMS] = {0};
  for (int d = n - 1; d >= 0; d--) {
    gstride[d] = s;
    s *= g->dims[d];
  }
  int64_t rows = core_numel_of(vo->sizes, n - 1);
  if (vo->sizes[n - 1] == 0) rows = 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t first = 0, oo = 0, ao = 0;
    for (int d = 0; d < n - 1; d++) {
      first += (off[d] + idx[d]) * gstride[d];
      oo += idx[d] * vo->strides[d];
      ao += idx[d] * va->strides[d];
    }
    first += off[n - 1];
    size_t eo = core_dtype_size(vo->dtype), ea = core_dtype_size(va->dtype);
    cpu_view ro = {.data = (char *)vo->data + oo * (int64_t)eo, .dtype = vo->dtype,
                   .ndim = 1, .sizes = {vo->sizes[n - 1]},
                   .strides = {vo->strides[n - 1]}};
    cpu_view ra = {.data = (char *)va->data + ao * (int64_t)ea, .dtype = va->dtype,
                   .ndim = 1, .sizes = {va->sizes[n - 1]},
                   .strides = {va->strides[n - 1]}};
    cpu_dropout(&ro, &ra, p, (uint64_t)c->args[3].i,
                (uint64_t)c->args[4].i + (uint64_t)first);
    for (int d = n - 2; d >= 0 && ++idx[d] == vo->sizes[d]; d--) idx[d] = 0;
  }
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
  else if (c->shard)
    dropout_shard(c, &vo, &va, p);
  else
    cpu_dropout(&vo, &va, p, (uint64_t)c->args[3].i, (uint64_t)c->args[4].i);
  return DT_OK;
}

/* ---- sharding rules (docs/sharding.md) */
/* embedding(indices, weight [num, dim]): indices sharded anyhow → the
 * output likewise; weight S(1) (column-wise) → S(last); weight S(0)
 * (row-wise) → P(sum): each rank looks up only its rows, zeros elsewhere */
void ops_embedding_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *idx = c->args[0].t;
  int n = idx->local.ndim;
  ops_rule_add(c, rs);
  ops_rule_shard_dims(c, rs, 0, n, -1, 0);
  ops_strategy *s = ops_rule_add(c, rs);
  if (!s) return;
  s->in[1] = ops_shard(1);
  s->out[0] = ops_shard(n);
  if (!(s = ops_rule_add(c, rs))) return;
  s->in[1] = ops_shard(0);
  s->out[0] = ops_partial(DT_REDUCE_SUM);
}

/* index_select(a, dim, index): a sharded off `dim` keeps it; a 1-D index
 * sharded → the output sharded on `dim` */
void ops_index_select_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *a = c->args[0].t, *idx = c->args[2].t;
  int n = a->local.ndim;
  int64_t dim = c->args[1].i < 0 ? c->args[1].i + n : c->args[1].i;
  ops_rule_add(c, rs);
  ops_rule_shard_dims(c, rs, 0, n, (int)dim, 0);
  if (idx->local.ndim == 1 && n > 0) {
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    s->in[2] = ops_shard(0);
    s->out[0] = ops_shard((int)dim);
  }
}

/* cross_entropy(logits [N, C, d...], target, reduction, ...): positions
 * (N and the d dims, never the class dim) may be sharded, the target
 * sharded alike. NONE → the losses sharded alike; SUM → P(sum); MEAN →
 * P(sum) too, each rank dividing its sum by the global count: class-index
 * targets must then be Replicate (the count of non-ignored targets needs
 * all of them; the rank reads its rows from its copy). [C] logits: only
 * Replicate. */
void ops_cross_entropy_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *x = c->args[0].t, *t = c->args[1].t;
  int n = x->local.ndim;
  bool probs = core_dtype_is_float(t->dtype);
  int64_t red = c->args[2].i;
  ops_rule_add(c, rs);
  if (n < 2) return;
  for (int d = 0; d < n; d++) {
    if (d == 1) continue;
    int td = probs ? d : (d == 0 ? 0 : d - 1);
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    s->in[0] = ops_shard(d);
    s->in[1] = red == DT_REDUCTION_MEAN && !probs ? DT_REPLICATE : ops_shard(td);
    s->out[0] = red == DT_REDUCTION_NONE ? ops_shard(d == 0 ? 0 : d - 1)
                                         : ops_partial(DT_REDUCE_SUM);
  }
}

/* ---- backward formulas (ops.h, "backward formulas") */
static dt_tensor *index_add_back(ops_grad_env *e, dt_tensor *g, int64_t dim,
                                 dt_tensor *idx, int64_t size) {
  return ops_g_call(e, CORE_OP_INDEX_SELECT_BACKWARD, "TiTi", g, dim, idx, size);
}

/* the weight of an embedding: rows gathered back, duplicates summed */
static dt_tensor *embedding_grad(ops_grad_env *e, dt_tensor *g, dt_tensor *idx,
                                 const dt_tensor *w) {
  int64_t n = 1;
  for (int d = 0; d < idx->local.ndim; d++) n *= idx->local.sizes[d];
  dt_tensor *g2 = ops_g_tI(e, CORE_OP_RESHAPE, g, (dt_shape){2, {n, w->local.sizes[1]}});
  dt_tensor *i1 = ops_g_tI(e, CORE_OP_RESHAPE, idx, (dt_shape){1, {n}});
  return index_add_back(e, g2, 0, i1, w->local.sizes[0]);
}

/* cross_entropy: the logits' gradient is one kernel; probability targets
 * get -(1 - smoothing) log_softmax(x) times g (per position) */
static void cross_entropy_grad(ops_grad_env *e, const dt_op_call *f, dt_tensor *g,
                               dt_tensor **gin) {
  dt_tensor *x = f->args[0].t, *t = f->args[1].t;
  dt_reduction red = (dt_reduction)f->args[2].i;
  if (e->needs[0])
    gin[0] = ops_g_call(e, CORE_OP_CROSS_ENTROPY_BACKWARD, "TTTiis", g, x, t,
                        f->args[2].i, f->args[3].i, f->args[4].d);
  if (!e->needs[1]) return;
  int64_t cd = x->local.ndim == 1 ? 0 : 1, pos = 1;
  for (int d = 0; d < x->local.ndim; d++)
    if (d != cd) pos *= x->local.sizes[d];
  dt_tensor *gb = g;
  if (red == DT_REDUCTION_NONE) gb = ops_g_ti(e, CORE_OP_UNSQUEEZE, g, cd);
  if (red == DT_REDUCTION_MEAN) gb = ops_g_ts(e, CORE_OP_DIV_SCALAR, g, (double)pos);
  dt_tensor *lsm = ops_g_ti(e, CORE_OP_LOG_SOFTMAX, x, cd);
  gin[1] = ops_g_tt(e, CORE_OP_MUL, ops_g_ts(e, CORE_OP_MUL_SCALAR, lsm, -(1 - f->args[4].d)), gb);
}

dt_status ops_nn_grad(ops_grad_env *e, const dt_op_call *f,
                      dt_tensor *const *gout, dt_tensor **gin) {
  dt_tensor *g = gout[0];
  switch (f->op) {
  case CORE_OP_EMBEDDING:
    if (e->needs[1]) gin[1] = embedding_grad(e, g, f->args[0].t, f->args[1].t);
    break;
  case CORE_OP_INDEX_SELECT: {
    dt_tensor *a = f->args[0].t;
    int64_t dim = f->args[1].i < 0 ? f->args[1].i + a->local.ndim : f->args[1].i;
    int64_t size = a->local.ndim ? a->local.sizes[dim] : 1;
    gin[0] = index_add_back(e, g, f->args[1].i, f->args[2].t, size);
    break;
  }
  case CORE_OP_CROSS_ENTROPY: cross_entropy_grad(e, f, g, gin); break;
  default: { /* dropout: the same mask (the same random stream) on g */
    if (!f->args[2].b) {
      gin[0] = g;
      break;
    }
    dt_op_call c = *f;
    c.args[0].t = g;
    c.api = "dt_backward";
    c.nout = 0;
    gin[0] = e->st == DT_OK ? e->run(e, &c) : NULL;
    if (!gin[0]) e->st = core_last_status();
    break;
  }
  }
  return e->st;
}

/* ---- the CUDA bindings (the op list's cuda column; docs/cuda.md): a
 * boxed call turned into a launch on the rank's stream */
#if DTORCH_HAVE_CUDA
/* Gathers along dim (embedding, index_select): the kernel marks the first
 * bad index in a device word, read back here (the rank waits for its
 * stream: these ops' callers wait for their outputs anyway, to report a
 * bad index as the CPU does). *pos = -1 when every index was in range. */
static dt_status cu_gather(dt_op_call *c, int ndim, const int64_t *sizes,
                           const cuda_operand *a, int dim, int64_t a_dim,
                           const dt_tensor *idx, int64_t istride, int64_t *pos,
                           int64_t *val) {
  dt_tensor *o = c->out[0];
  dt_runtime *rt = ops_cu_rt(o);
  int rank = ops_cu_rank(o);
  const runtime_backend *be = rt->backend;
  const char *err;
  void *bad = be->alloc(rt, rank, sizeof(uint64_t), &err);
  if (!bad) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: %s", c->api, err);
  dt_status st = DT_OK;
  *pos = -1;
  if (cuda_fill(ops_cu_stream(o), (int)DT_INT64, 1, bad, -1) ||
      cuda_index_select(ops_cu_stream(o), (int)o->dtype, ndim, sizes,
                        core_tensor_data(o), a, dim, a_dim,
                        core_tensor_data(idx), idx->dtype == DT_INT64,
                        istride, bad))
    st = ops_cu_launch_failed(c);
  if (st == DT_OK) st = ops_cu_read_bad_index(c, bad, idx, istride, pos, val);
  be->free(rt, rank, bad);
  return st;
}

/* embedding(indices, weight [V, D]): rows of the table; a row-sharded
 * table (vocabulary parallel) is the host fallback's */
dt_status ops_embedding_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *idx = c->args[0].t, *w = c->args[1].t;
  if (w->local.ndim != 2 || w->dtype != o->dtype || !ops_cu_dense(idx) ||
      (c->shard && w->local.sizes[0] != c->shard->global[1].dims[0]))
    return ops_cu_unsupported(c, "a sharded table or strided indices");
  int64_t n = core_numel(idx), sizes[2] = {n, w->local.sizes[1]};
  cuda_operand a = {.data = core_tensor_data(w),
                    .strides = {w->local.strides[0], w->local.strides[1]}};
  int64_t pos, val;
  dt_status st = cu_gather(c, 2, sizes, &a, 0, w->local.sizes[0], idx, 1, &pos,
                           &val);
  if (st == DT_OK && pos >= 0)
    st = core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: index %lld (position "
                        "%lld of indices) is out of range for a table of "
                        "%lld rows (expected [0, %lld))", c->api,
                        (long long)val, (long long)pos,
                        (long long)w->local.sizes[0],
                        (long long)w->local.sizes[0]);
  return st;
}

dt_status ops_index_select_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t, *idx = c->args[2].t;
  int n = a->local.ndim, d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, n ? n : 1, &d);
  if (st != DT_OK) return st;
  if (a->dtype != o->dtype || idx->local.ndim > 1)
    return ops_cu_unsupported(c, "this index");
  int nd = n ? n : 1;
  int64_t sizes[CUDA_MAX_DIMS];
  cuda_operand oa = {.data = core_tensor_data(a)};
  for (int k = 0; k < nd; k++) {
    sizes[k] = n ? a->local.sizes[k] : 1;
    oa.strides[k] = n ? a->local.strides[k] : 1;
  }
  int64_t a_dim = sizes[d];
  sizes[d] = core_numel(idx);
  int64_t istride = idx->local.ndim ? idx->local.strides[0] : 1, pos, val;
  st = cu_gather(c, nd, sizes, &oa, d, a_dim, idx, istride, &pos, &val);
  return st == DT_OK && pos >= 0 ? ops_cu_index_error(c, val, pos, d, a_dim)
                                 : st;
}

/* cross_entropy of [N, C] or [C] logits with class-index targets on one
 * rank's whole positions; probability targets, more dims and a DTensor
 * rank's share (its global mean) are the host fallback's. A bad target is
 * read back (the rank waits) for the CPU's error. */
dt_status ops_cross_entropy_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *x = c->args[0].t, *t = c->args[1].t;
  int nx = x->local.ndim;
  if (c->shard || core_dtype_is_float(t->dtype) || nx > 2 ||
      x->dtype != o->dtype || !ops_cu_is_float(x->dtype))
    return ops_cu_unsupported(c, "probability targets, more than 2 dims or a "
                              "DTensor shard");
  int64_t m = nx == 2 ? x->local.sizes[0] : 1;
  int64_t nc = x->local.sizes[nx - 1];
  int64_t rs = nx == 2 ? x->local.strides[0] : 0, cs = x->local.strides[nx - 1];
  int64_t ts = t->local.ndim ? t->local.strides[0] : 0;
  int64_t os = o->local.ndim ? o->local.strides[0] : 0;
  dt_runtime *rt = ops_cu_rt(o);
  int rank = ops_cu_rank(o);
  const runtime_backend *be = rt->backend;
  const char *err;
  size_t bytes = (size_t)m * 16 + 8;
  char *scratch = be->alloc(rt, rank, bytes, &err);
  if (!scratch)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: %s", c->api, err);
  dt_status st = DT_OK;
  char *bad = scratch + (size_t)m * 16;
  int64_t pos = -1, val = 0;
  if (cuda_fill(ops_cu_stream(o), (int)DT_INT64, 1, bad, -1) ||
      cuda_cross_entropy(ops_cu_stream(o), (int)x->dtype, t->dtype == DT_INT64,
                         m, nc, rs, cs, core_tensor_data(x),
                         core_tensor_data(t), ts, c->args[3].i, c->args[4].d,
                         (int)c->args[2].i, core_tensor_data(o), os, scratch))
    st = ops_cu_launch_failed(c);
  if (st == DT_OK) st = ops_cu_read_bad_index(c, bad, t, ts, &pos, &val);
  if (st == DT_OK && pos >= 0)
    st = ops_cu_target_error(c, val, pos, nc, c->args[3].i);
  be->free(rt, rank, scratch);
  return st;
}

/* dropout(x, p, train, seed, offset): the CPU backend's mask */
dt_status ops_dropout_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  double p = c->args[1].d;
  if (a->dtype != o->dtype || !ops_cu_is_float(a->dtype))
    return ops_cu_unsupported(c, "integer dtypes");
  if (c->shard) return ops_cu_unsupported(c, "DTensor shards");
  if (!c->args[2].b || p == 0.0) return ops_copy_cuda(c);
  if (p == 1.0)
    return cuda_fill(ops_cu_stream(o), (int)o->dtype, core_numel(o),
                     core_tensor_data(o), 0.0)
               ? ops_cu_launch_failed(c)
               : DT_OK;
  cuda_operand oa = ops_cu_operand(a, o);
  return cuda_dropout(ops_cu_stream(o), (int)o->dtype, o->local.ndim,
                      o->local.sizes, core_tensor_data(o), &oa, p,
                      (uint64_t)c->args[3].i, (uint64_t)c->args[4].i)
             ? ops_cu_launch_failed(c) : DT_OK;
}
#endif
