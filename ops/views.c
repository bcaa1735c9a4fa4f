/* View ops (O(1): the output aliases the input's storage with new sizes,
 * strides and offset; docs/architecture.md) and the copies that fall back when strides
 * forbid a view (reshape, flatten, contiguous, clone). */
#include <string.h>

#include "ops/ops.h"
#include "ops/cuda_ops.h"

/* the output aliases argument 0 with the given layout */
static void set_alias(dt_op_call *c, int ndim, const int64_t *sizes,
                      const int64_t *strides, int64_t offset) {
  const dt_tensor *a = c->args[0].t;
  core_meta *m = &c->meta[0];
  m->dtype = a->dtype;
  m->ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    m->sizes[i] = sizes[i];
    m->strides[i] = strides[i];
  }
  m->offset = offset;
  m->alias = 0;
}

static void set_copy(dt_op_call *c, int ndim, const int64_t *sizes) {
  ops_meta_set(&c->meta[0], c->args[0].t->dtype, ndim, sizes);
}

/* Resolves a requested shape against numel (one -1 allowed). */
static dt_status infer_shape(const dt_op_call *c, dt_shape req, int64_t numel,
                             int64_t *out) {
  char sr[CORE_SHAPE_STR_LEN];
  if (req.ndim < 0 || req.ndim > DT_MAX_DIMS)
    return core_error_set(DT_ERR_SHAPE, "%s: shape has %d dims (expected 0..%d)",
                        c->api, req.ndim, DT_MAX_DIMS);
  int infer = -1, ngiven = 0;
  int64_t given[DT_MAX_DIMS], known;
  for (int i = 0; i < req.ndim; i++) {
    if (req.dims[i] == -1) {
      if (infer >= 0)
        return core_error_set(DT_ERR_SHAPE, "%s: only one dim of %s may be -1",
                            c->api, core_shape_str(req.dims, req.ndim, sr, sizeof sr));
      infer = i;
    } else if (req.dims[i] < 0) {
      return core_error_set(DT_ERR_SHAPE, "%s: invalid size %lld at dim %d of %s",
                          c->api, (long long)req.dims[i], i,
                          core_shape_str(req.dims, req.ndim, sr, sizeof sr));
    } else {
      given[ngiven++] = req.dims[i];
    }
    out[i] = req.dims[i];
  }
  /* the product of the given sizes must fit int64, or it wraps and can
   * match numel (the inferred dim is at most numel: it fits then too) */
  if (!ops_sizes_fit(given, ngiven))
    return core_error_set(DT_ERR_SHAPE, "%s: shape %s is too large (the "
                        "product of its sizes passes 2^63)", c->api,
                        core_shape_str(req.dims, req.ndim, sr, sizeof sr));
  known = core_numel_of(given, ngiven);
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return core_error_set(DT_ERR_SHAPE, "%s: shape %s is invalid for input of "
                          "size %lld", c->api,
                          core_shape_str(req.dims, req.ndim, sr, sizeof sr),
                          (long long)numel);
    out[infer] = numel / known;
  } else if (known != numel) {
    return core_error_set(DT_ERR_SHAPE, "%s: shape %s is invalid for input of "
                        "size %lld", c->api,
                        core_shape_str(req.dims, req.ndim, sr, sizeof sr),
                        (long long)numel);
  }
  return DT_OK;
}

/* PyTorch's computeStride: strides for viewing (osz, ost) as nsz without a
 * copy, if possible. Dims of the old tensor are grouped into runs that are
 * contiguous among themselves; each run must map onto whole new dims. */
static bool view_strides(const int64_t *osz, const int64_t *ost, int on,
                         const int64_t *nsz, int nn, int64_t *nst) {
  int64_t one_sz = 1, one_st = 1;
  if (on == 0) { osz = &one_sz; ost = &one_st; on = 1; }
  if (core_numel_of(osz, on) == 0) {
    core_contiguous_strides(nsz, nn, nst);
    return true;
  }
  int vd = nn - 1;
  int64_t base = ost[on - 1], tnumel = 1, vnumel = 1;
  for (int td = on - 1; td >= 0; td--) {
    tnumel *= osz[td];
    if (td == 0 || (osz[td - 1] != 1 && ost[td - 1] != tnumel * base)) {
      while (vd >= 0 && (vnumel < tnumel || nsz[vd] == 1)) {
        nst[vd] = vnumel * base;
        vnumel *= nsz[vd];
        vd--;
      }
      if (vnumel != tnumel) return false;
      if (td > 0) {
        base = ost[td - 1];
        tnumel = 1;
        vnumel = 1;
      }
    }
  }
  return vd == -1;
}

static dt_status view_or_copy(dt_op_call *c, dt_shape req, bool allow_copy) {
  const dt_tensor *a = c->args[0].t;
  int64_t sizes[DT_MAX_DIMS], strides[DT_MAX_DIMS];
  dt_status st = infer_shape(c, req, core_numel(a), sizes);
  if (st != DT_OK) return st;
  if (view_strides(a->local.sizes, a->local.strides, a->local.ndim, sizes,
                   req.ndim, strides)) {
    set_alias(c, req.ndim, sizes, strides, a->local.offset);
    return DT_OK;
  }
  if (!allow_copy) {
    char sa[CORE_SHAPE_STR_LEN], ss[CORE_SHAPE_STR_LEN];
    return core_error_set(DT_ERR_SHAPE,
                        "%s: view size %s is not compatible with input size %s "
                        "and strides %s (at least one dimension spans across "
                        "two contiguous subspaces); use dt_reshape instead",
                        c->api, core_shape_str(sizes, req.ndim, ss, sizeof ss),
                        core_shape_str(a->local.sizes, a->local.ndim, sa, sizeof sa),
                        core_shape_str(a->local.strides, a->local.ndim,
                                     (char[CORE_SHAPE_STR_LEN]){0}, CORE_SHAPE_STR_LEN));
  }
  set_copy(c, req.ndim, sizes);
  return DT_OK;
}

dt_status ops_view_infer(dt_op_call *c) {
  return view_or_copy(c, c->args[1].ints, false);
}
dt_status ops_reshape_infer(dt_op_call *c) {
  return view_or_copy(c, c->args[1].ints, true);
}

dt_status ops_flatten_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  int s, e, n = a->local.ndim;
  dt_status st = ops_wrap_dim(c, "start_dim", c->args[1].i, n, &s);
  if (st == DT_OK) st = ops_wrap_dim(c, "end_dim", c->args[2].i, n, &e);
  if (st != DT_OK) return st;
  if (n == 0) return view_or_copy(c, DT_SHAPE(1), true);
  if (s > e)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: start_dim %d must not come after end_dim %d",
                        c->api, s, e);
  dt_shape req = {.ndim = 0};
  for (int i = 0; i < s; i++) req.dims[req.ndim++] = a->local.sizes[i];
  /* the flattened size: a's numel fits int64, but with a size 0 elsewhere
   * the flattened dims alone may not (a shape the view ops refuse) */
  int64_t m;
  if (!core_numel_checked(a->local.sizes + s, e - s + 1, &m)) {
    char sa[CORE_SHAPE_STR_LEN];
    return core_error_set(DT_ERR_SHAPE, "%s: flattening dims %d..%d of shape %s "
                        "gives a size past 2^63", c->api, s, e,
                        core_shape_str(a->local.sizes, n, sa, sizeof sa));
  }
  req.dims[req.ndim++] = m;
  for (int i = e + 1; i < n; i++) req.dims[req.ndim++] = a->local.sizes[i];
  return view_or_copy(c, req, true);
}

dt_status ops_transpose_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  int d0, d1, n = a->local.ndim;
  dt_status st = ops_wrap_dim(c, "dim0", c->args[1].i, n, &d0);
  if (st == DT_OK) st = ops_wrap_dim(c, "dim1", c->args[2].i, n, &d1);
  if (st != DT_OK) return st;
  int64_t sz[DT_MAX_DIMS], sd[DT_MAX_DIMS];
  memcpy(sz, a->local.sizes, sizeof sz);
  memcpy(sd, a->local.strides, sizeof sd);
  if (n > 0) {
    sz[d0] = a->local.sizes[d1]; sz[d1] = a->local.sizes[d0];
    sd[d0] = a->local.strides[d1]; sd[d1] = a->local.strides[d0];
  }
  set_alias(c, n, sz, sd, a->local.offset);
  return DT_OK;
}

dt_status ops_permute_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  dt_shape p = c->args[1].ints;
  int n = a->local.ndim;
  if (p.ndim != n)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: dims has %d entries for a %d-d tensor", c->api,
                        p.ndim, n);
  bool seen[DT_MAX_DIMS] = {0};
  int64_t sz[DT_MAX_DIMS], sd[DT_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    int d;
    dt_status st = ops_wrap_dim(c, "dims entry", p.dims[i], n, &d);
    if (st != DT_OK) return st;
    if (seen[d])
      return core_error_set(DT_ERR_INVALID_ARGUMENT,
                          "%s: dim %d appears twice in dims", c->api, d);
    seen[d] = true;
    sz[i] = a->local.sizes[d];
    sd[i] = a->local.strides[d];
  }
  set_alias(c, n, sz, sd, a->local.offset);
  return DT_OK;
}

/* common: a copy of a's layout to edit */
typedef struct layout { int n; int64_t sz[DT_MAX_DIMS], sd[DT_MAX_DIMS], off; } layout;
static layout layout_of(const dt_tensor *a) {
  layout l = {.n = a->local.ndim, .off = a->local.offset};
  memcpy(l.sz, a->local.sizes, sizeof l.sz);
  memcpy(l.sd, a->local.strides, sizeof l.sd);
  return l;
}
static void remove_dim(layout *l, int d) {
  for (int i = d; i + 1 < l->n; i++) {
    l->sz[i] = l->sz[i + 1];
    l->sd[i] = l->sd[i + 1];
  }
  l->n--;
}

static dt_status need_dims(const dt_op_call *c, const dt_tensor *a) {
  if (a->local.ndim == 0)
    return core_error_set(DT_ERR_SHAPE, "%s: cannot be applied to a 0-d tensor",
                        c->api);
  return DT_OK;
}

dt_status ops_slice_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  int d;
  dt_status st = need_dims(c, a);
  if (st == DT_OK) st = ops_wrap_dim(c, "dim", c->args[1].i, a->local.ndim, &d);
  if (st != DT_OK) return st;
  int64_t start = c->args[2].i, end = c->args[3].i, step = c->args[4].i;
  if (step < 1)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: step must be positive, got %lld", c->api,
                        (long long)step);
  int64_t n = a->local.sizes[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = start < 0 ? 0 : start > n ? n : start;
  end = end < start ? start : end > n ? n : end;
  layout l = layout_of(a);
  int64_t len = end - start; /* 0 <= len <= n: no overflow below */
  l.off += start * l.sd[d];
  l.sz[d] = len / step + (len % step != 0);
  /* stride * step as PyTorch; it can only overflow when one element is
   * left (step > len), whose stride is never used: keep it then */
  int64_t stepped;
  if (!__builtin_mul_overflow(l.sd[d], step, &stepped)) l.sd[d] = stepped;
  set_alias(c, l.n, l.sz, l.sd, l.off);
  return DT_OK;
}

dt_status ops_narrow_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  int d;
  dt_status st = need_dims(c, a);
  if (st == DT_OK) st = ops_wrap_dim(c, "dim", c->args[1].i, a->local.ndim, &d);
  if (st != DT_OK) return st;
  int64_t n = a->local.sizes[d], start = c->args[2].i, len = c->args[3].i;
  if (start < 0 && start >= -n) start += n;
  if (start < 0 || len < 0 || start > n || len > n - start)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: start %lld and length %lld exceed dim %d of size "
                        "%lld", c->api, (long long)c->args[2].i,
                        (long long)len, d, (long long)n);
  layout l = layout_of(a);
  l.off += start * l.sd[d];
  l.sz[d] = len;
  set_alias(c, l.n, l.sz, l.sd, l.off);
  return DT_OK;
}

dt_status ops_select_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  int d;
  dt_status st = need_dims(c, a);
  if (st == DT_OK) st = ops_wrap_dim(c, "dim", c->args[1].i, a->local.ndim, &d);
  if (st != DT_OK) return st;
  int64_t n = a->local.sizes[d], i = c->args[2].i;
  if (i < -n || i >= n)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: index %lld is out of range for dim %d of size %lld",
                        c->api, (long long)i, d, (long long)n);
  if (i < 0) i += n;
  layout l = layout_of(a);
  l.off += i * l.sd[d];
  remove_dim(&l, d);
  set_alias(c, l.n, l.sz, l.sd, l.off);
  return DT_OK;
}

dt_status ops_expand_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  dt_shape s = c->args[1].ints;
  int n = a->local.ndim;
  char sa[CORE_SHAPE_STR_LEN], ss[CORE_SHAPE_STR_LEN];
  if (s.ndim < n || s.ndim > DT_MAX_DIMS)
    return core_error_set(DT_ERR_SHAPE, "%s: cannot expand %s to %d dims (%s)",
                        c->api, core_shape_str(a->local.sizes, n, sa, sizeof sa),
                        s.ndim, s.ndim >= 0 && s.ndim <= DT_MAX_DIMS ?
                        core_shape_str(s.dims, s.ndim, ss, sizeof ss) : "?");
  layout l = {.n = s.ndim, .off = a->local.offset};
  for (int i = s.ndim - 1; i >= 0; i--) {
    int j = i - (s.ndim - n);
    int64_t want = s.dims[i];
    if (j < 0) { /* a new leading dim */
      if (want < 0)
        return core_error_set(DT_ERR_SHAPE, "%s: size -1 is not allowed for the "
                            "new leading dim %d of %s", c->api, i,
                            core_shape_str(s.dims, s.ndim, ss, sizeof ss));
      l.sz[i] = want;
      l.sd[i] = 0;
      continue;
    }
    int64_t have = a->local.sizes[j];
    if (want == -1) want = have;
    if (want != have && have != 1)
      return core_error_set(DT_ERR_SHAPE, "%s: the expanded size %lld must match "
                          "the existing size %lld at non-singleton dim %d "
                          "(shape %s → %s)", c->api, (long long)want,
                          (long long)have, i,
                          core_shape_str(a->local.sizes, n, sa, sizeof sa),
                          core_shape_str(s.dims, s.ndim, ss, sizeof ss));
    if (want < 0)
      return core_error_set(DT_ERR_SHAPE, "%s: invalid size %lld at dim %d",
                          c->api, (long long)want, i);
    l.sz[i] = want;
    l.sd[i] = want == have ? a->local.strides[j] : 0;
  }
  if (!ops_sizes_fit(l.sz, l.n))
    return core_error_set(DT_ERR_SHAPE, "%s: cannot expand %s to %s: the "
                        "product of the sizes passes 2^63", c->api,
                        core_shape_str(a->local.sizes, n, sa, sizeof sa),
                        core_shape_str(l.sz, l.n, ss, sizeof ss));
  set_alias(c, l.n, l.sz, l.sd, l.off);
  return DT_OK;
}

dt_status ops_squeeze_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  int d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, a->local.ndim, &d);
  if (st != DT_OK) return st;
  layout l = layout_of(a);
  if (l.n > 0 && l.sz[d] == 1) remove_dim(&l, d);
  set_alias(c, l.n, l.sz, l.sd, l.off);
  return DT_OK;
}

dt_status ops_squeeze_all_infer(dt_op_call *c) {
  layout l = layout_of(c->args[0].t);
  for (int i = l.n - 1; i >= 0; i--)
    if (l.sz[i] == 1) remove_dim(&l, i);
  set_alias(c, l.n, l.sz, l.sd, l.off);
  return DT_OK;
}

dt_status ops_unsqueeze_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  int d;
  if (a->local.ndim >= DT_MAX_DIMS)
    return core_error_set(DT_ERR_SHAPE, "%s: a tensor has at most %d dims",
                        c->api, DT_MAX_DIMS);
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, a->local.ndim + 1, &d);
  if (st != DT_OK) return st;
  layout l = layout_of(a);
  for (int i = l.n; i > d; i--) {
    l.sz[i] = l.sz[i - 1];
    l.sd[i] = l.sd[i - 1];
  }
  l.sz[d] = 1;
  l.sd[d] = d < l.n ? l.sz[d + 1] * l.sd[d + 1] : 1;
  l.n++;
  set_alias(c, l.n, l.sz, l.sd, l.off);
  return DT_OK;
}

dt_status ops_contiguous_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  if (core_tensor_is_contiguous(a)) {
    set_alias(c, a->local.ndim, a->local.sizes, a->local.strides,
              a->local.offset);
    return DT_OK;
  }
  set_copy(c, a->local.ndim, a->local.sizes);
  return DT_OK;
}

dt_status ops_clone_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  set_copy(c, a->local.ndim, a->local.sizes);
  return DT_OK;
}

/* ---- sharding rules (docs/sharding.md)
 * A view moves data without changing it: each input dim that survives as
 * one output dim keeps its Shard (map[d] >= 0); a dim that is sliced,
 * selected, squeezed, expanded or merged non-uniformly must be Replicate.
 * Every Partial kind passes through. The DTensor layer runs the view on
 * each rank's box and makes the result contiguous (its shards are boxes). */
static void rule_from_map(const dt_op_call *c, ops_rule_set *rs,
                          const int *map) {
  ops_rule_add(c, rs);
  for (int d = 0; d < c->args[0].t->local.ndim; d++) {
    if (map[d] < 0) continue;
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    s->in[0] = ops_shard(d);
    s->out[0] = ops_shard(map[d]);
  }
  for (int r = DT_REDUCE_SUM; r <= DT_REDUCE_PROD; r++)
    ops_rule_partial(c, rs, 1u, 0, (dt_reduce_op)r, (dt_reduce_op)r);
}

static void identity_map(int n, int *map) {
  for (int d = 0; d < n; d++) map[d] = d;
}

void ops_same_rule(const dt_op_call *c, ops_rule_set *rs) {
  int map[DT_MAX_DIMS];
  identity_map(c->args[0].t->local.ndim, map);
  rule_from_map(c, rs, map);
}

void ops_transpose_rule(const dt_op_call *c, ops_rule_set *rs) {
  int n = c->args[0].t->local.ndim, map[DT_MAX_DIMS];
  identity_map(n, map);
  if (n > 0) {
    int d0 = (int)(c->args[1].i < 0 ? c->args[1].i + n : c->args[1].i);
    int d1 = (int)(c->args[2].i < 0 ? c->args[2].i + n : c->args[2].i);
    map[d0] = d1;
    map[d1] = d0;
  }
  rule_from_map(c, rs, map);
}

void ops_permute_rule(const dt_op_call *c, ops_rule_set *rs) {
  int n = c->args[0].t->local.ndim, map[DT_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    int64_t p = c->args[1].ints.dims[i];
    map[p < 0 ? p + n : p] = i;
  }
  rule_from_map(c, rs, map);
}

/* slice and narrow: the cut dim must be whole on every rank */
void ops_slice_rule(const dt_op_call *c, ops_rule_set *rs) {
  int n = c->args[0].t->local.ndim, map[DT_MAX_DIMS];
  identity_map(n, map);
  int64_t d = c->args[1].i < 0 ? c->args[1].i + n : c->args[1].i;
  map[d] = -1;
  rule_from_map(c, rs, map);
}

void ops_select_rule(const dt_op_call *c, ops_rule_set *rs) {
  int n = c->args[0].t->local.ndim, map[DT_MAX_DIMS];
  int64_t sel = c->args[1].i < 0 ? c->args[1].i + n : c->args[1].i;
  for (int d = 0; d < n; d++) map[d] = d == sel ? -1 : d - (d > sel);
  rule_from_map(c, rs, map);
}

void ops_expand_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *a = c->args[0].t;
  int n = a->local.ndim, lead = c->meta[0].ndim - n, map[DT_MAX_DIMS];
  for (int d = 0; d < n; d++)
    map[d] = a->local.sizes[d] == c->meta[0].sizes[d + lead] ? d + lead : -1;
  rule_from_map(c, rs, map);
}

/* squeeze(dim) and squeeze_all: a removed size-1 dim must be Replicate */
void ops_squeeze_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *a = c->args[0].t;
  int n = a->local.ndim, map[DT_MAX_DIMS], k = 0;
  int64_t only = c->op == CORE_OP_SQUEEZE
                     ? (c->args[1].i < 0 ? c->args[1].i + n : c->args[1].i)
                     : -1;
  for (int d = 0; d < n; d++) {
    bool gone = a->local.sizes[d] == 1 && (only < 0 || only == d);
    map[d] = gone ? -1 : k++;
  }
  rule_from_map(c, rs, map);
}

void ops_unsqueeze_rule(const dt_op_call *c, ops_rule_set *rs) {
  int n = c->args[0].t->local.ndim, map[DT_MAX_DIMS];
  int64_t u = c->args[1].i < 0 ? c->args[1].i + n + 1 : c->args[1].i;
  for (int d = 0; d < n; d++) map[d] = d >= u ? d + 1 : d;
  rule_from_map(c, rs, map);
}

/* view, reshape, flatten: walk the input and output shapes in groups of
 * equal products. The leading dim of an input group keeps its Shard on
 * the leading dim of the output group when the shard boundaries land on
 * the same flat positions: chunk(n_in, k) * rest_in == chunk(n_out, k) *
 * rest_out (k = the mesh dim's size; with uneven shards that often
 * fails, and the dim must be Replicate). The DTensor layer checks every
 * rank's box once more on n-D meshes. */
void ops_reshape_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *a = c->args[0].t;
  const int64_t *is = a->local.sizes, *os = c->meta[0].sizes;
  int ni = a->local.ndim, no = c->meta[0].ndim, map[DT_MAX_DIMS];
  for (int d = 0; d < ni; d++) map[d] = -1;
  int64_t numel = core_numel_of(is, ni), k = rs->mesh_size;
  for (int i = 0, j = 0; numel > 0 && i < ni && j < no;) {
    int i0 = i, j0 = j;
    int64_t pi = is[i++], po = os[j++];
    while (pi != po) {
      if (pi < po) pi *= is[i++];
      else po *= os[j++];
    }
    /* absorb trailing size-1 dims into the group */
    while (i < ni && is[i] == 1 && (j >= no || os[j] != 1)) i++;
    while (j < no && os[j] == 1 && (i >= ni || is[i] != 1)) j++;
    int64_t rin = pi / is[i0], rout = po / os[j0];
    if (is[i0] > 1 && os[j0] > 1 &&
        ops_chunk(is[i0], k) * rin == ops_chunk(os[j0], k) * rout)
      map[i0] = j0;
  }
  rule_from_map(c, rs, map);
}

/* ---- backward formulas (ops.h, "backward formulas") */
static int64_t wrap(int64_t d, int64_t n) { return d < 0 ? d + n : d; }

dt_status ops_view_grad(ops_grad_env *e, const dt_op_call *f,
                        dt_tensor *const *gout, dt_tensor **gin) {
  dt_tensor *g = gout[0], *a = f->args[0].t;
  dt_shape shape = ops_g_shape(a);
  int nd = a->local.ndim;
  switch (f->op) {
  case CORE_OP_TRANSPOSE:
    gin[0] = ops_g_tii(e, CORE_OP_TRANSPOSE, g, f->args[1].i, f->args[2].i);
    break;
  case CORE_OP_PERMUTE: { /* the inverse permutation */
    dt_shape inv = {.ndim = nd};
    for (int i = 0; i < nd; i++) inv.dims[wrap(f->args[1].ints.dims[i], nd)] = i;
    gin[0] = ops_g_tI(e, CORE_OP_PERMUTE, g, inv);
    break;
  }
  case CORE_OP_EXPAND: gin[0] = ops_g_sum_to(e, g, a->local.sizes, nd); break;
  case CORE_OP_SLICE:
    gin[0] = ops_g_slice_scatter(e, g, shape, f->args[1].i, f->args[2].i,
                                 f->args[3].i, f->args[4].i);
    break;
  case CORE_OP_NARROW: {
    int64_t dim = wrap(f->args[1].i, nd), start = wrap(f->args[2].i, shape.dims[dim]);
    gin[0] = ops_g_slice_scatter(e, g, shape, dim, start, start + f->args[3].i, 1);
    break;
  }
  case CORE_OP_SELECT: {
    int64_t dim = wrap(f->args[1].i, nd), idx = wrap(f->args[2].i, shape.dims[dim]);
    gin[0] = ops_g_slice_scatter(e, ops_g_ti(e, CORE_OP_UNSQUEEZE, g, dim), shape,
                                 dim, idx, idx + 1, 1);
    break;
  }
  case CORE_OP_CONTIGUOUS:
  case CORE_OP_CLONE: gin[0] = g; break;
  default: /* view, reshape, flatten, squeeze, unsqueeze: the same elements */
    gin[0] = ops_g_tI(e, CORE_OP_RESHAPE, g, shape);
    break;
  }
  return e->st;
}

/* ---- the CUDA bindings (the op list's cuda column; docs/cuda.md): a
 * boxed call turned into a launch on the rank's stream */
#if DTORCH_HAVE_CUDA
/* cast, and the copies of reshape / contiguous / clone: a's elements in
 * its row-major order into the dense output */
dt_status ops_copy_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  cuda_operand oa = {.data = core_tensor_data(a)};
  memcpy(oa.strides, a->local.strides, sizeof(int64_t) * (size_t)a->local.ndim);
  return cuda_copy_cast(ops_cu_stream(o), (int)o->dtype, (int)a->dtype,
                        a->local.ndim, a->local.sizes, core_tensor_data(o), &oa)
             ? ops_cu_launch_failed(c) : DT_OK;
}
#endif
