/* Joining ops: cat and stack (schema "Li": a tensor list and a dim).
 *
 * Both make one fresh contiguous output and copy each input into its slice
 * of it with the strided copy kernel (any input strides, any input dtype →
 * the promoted output dtype). split and chunk are not ops: they are
 * composites of narrow (api/join.c).
 *
 * PyTorch rules kept here:
 * - cat: every input has the same ndim (>= 1) and the same sizes except in
 *   dim; dtypes promote (core_promote_types) over all inputs.
 * - cat's legacy rule: a 1-d input of shape [0] is skipped — it takes part
 *   in dtype promotion but not in the shape checks or the dim wrapping, so
 *   cat([empty(0), x]) == x for any x. If every input is skipped, dim is
 *   checked against a 1-d tensor and the result has shape [0].
 * - stack: every input has the same shape; dim is in [-(ndim+1), ndim]; the
 *   result has one more dim (so inputs have at most DT_MAX_DIMS - 1 dims). */
#include <string.h>

#include "ops/ops.h"
#include "ops/cuda_ops.h"

static bool cat_skipped(const dt_tensor *t) {
  return t->local.ndim == 1 && t->local.sizes[0] == 0;
}

/* The public entry points (api/join.c) validate the list itself:
 * n >= 1 and no NULL entry; here that is an invariant. */
static void assert_list(const dt_op_call *c) {
  CORE_ASSERT(c->args[0].list.n >= 1 && c->args[0].list.v);
  for (int i = 0; i < c->args[0].list.n; i++)
    CORE_ASSERT(c->args[0].list.v[i]);
}

static dt_dtype promoted(const dt_op_call *c) {
  dt_tensor *const *v = c->args[0].list.v;
  dt_dtype d = v[0]->dtype;
  for (int i = 1; i < c->args[0].list.n; i++)
    d = core_promote_types(d, v[i]->dtype);
  return d;
}

/* ---- cat */
dt_status ops_cat_infer(dt_op_call *c) {
  assert_list(c);
  dt_tensor *const *v = c->args[0].list.v;
  int n = c->args[0].list.n;
  for (int i = 0; i < n; i++)
    if (v[i]->local.ndim == 0)
      return core_error_set(DT_ERR_SHAPE, "%s: tensors[%d] is 0-d; a "
                          "zero-dimensional tensor cannot be concatenated "
                          "(use dt_stack)", c->api, i);
  int ref = -1; /* the first input that is not skipped */
  for (int i = 0; i < n && ref < 0; i++)
    if (!cat_skipped(v[i])) ref = i;
  core_meta *m = &c->meta[0];
  if (ref < 0) { /* every input is an empty [0]: so is the result, whatever
                  * dim says (PyTorch's legacy rule skips them all) */
    int64_t zero = 0;
    ops_meta_set(m, promoted(c), 1, &zero);
    return DT_OK;
  }
  int nd = v[ref]->local.ndim, d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, nd, &d);
  if (st != DT_OK) return st;
  const dt_tensor *r = v[ref];
  int64_t sizes[DT_MAX_DIMS], total = 0;
  memcpy(sizes, r->local.sizes, sizeof sizes);
  for (int i = 0; i < n; i++) {
    const dt_tensor *t = v[i];
    if (cat_skipped(t)) continue;
    bool ok = t->local.ndim == nd;
    for (int k = 0; ok && k < nd; k++)
      ok = k == d || t->local.sizes[k] == r->local.sizes[k];
    if (!ok) {
      char sr[CORE_SHAPE_STR_LEN], si[CORE_SHAPE_STR_LEN];
      return core_error_set(DT_ERR_SHAPE, "%s: tensors[%d] has shape %s but "
                          "tensors[%d] has shape %s; sizes must match except "
                          "in dim %d", c->api, i,
                          core_shape_str(t->local.sizes, t->local.ndim, si,
                                       sizeof si),
                          ref, core_shape_str(r->local.sizes, nd, sr, sizeof sr),
                          d);
    }
    total += t->local.sizes[d];
  }
  sizes[d] = total;
  ops_meta_set(m, promoted(c), nd, sizes);
  return DT_OK;
}

/* the part of out that starts `at` elements along dim `d` and has src's
 * sizes (drop_dim: src lacks dim d, as stack's inputs do) */
static cpu_view out_slice(const cpu_view *out, int d, int64_t at,
                          const cpu_view *src, bool drop_dim) {
  cpu_view s = *out;
  s.data = out->data + at * out->strides[d] *
                           (int64_t)cpu_dtype_size(out->dtype);
  if (drop_dim) {
    s.ndim = out->ndim - 1;
    for (int k = d; k < s.ndim; k++) s.strides[k] = out->strides[k + 1];
  }
  for (int k = 0; k < s.ndim; k++) s.sizes[k] = src->sizes[k];
  return s;
}

/* cat's and stack's kernel: each input into its slice of out along the
 * wrapped dim, one after the other (stack: one index each, the slice
 * without the dim; cat: its length, skipping legacy empty inputs) */
static dt_status join_cpu(dt_op_call *c, bool stack) {
  dt_tensor *const *v = c->args[0].list.v;
  int n = c->args[0].list.n;
  cpu_view vo = ops_view_of(c->out[0]);
  if (core_numel(c->out[0]) == 0) return DT_OK;
  int d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, vo.ndim, &d);
  if (st != DT_OK) return st;
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    if (!stack && cat_skipped(v[i])) continue;
    cpu_view vi = ops_view_of(v[i]);
    if (core_numel(v[i]) > 0) {
      cpu_view vs = out_slice(&vo, d, at, &vi, stack);
      cpu_unary(CPU_COPY, ops_copy_type(vo.dtype, vi.dtype), &vs, &vi);
    }
    at += stack ? 1 : vi.sizes[d];
  }
  CORE_ASSERT(at == vo.sizes[d]);
  return DT_OK;
}

dt_status ops_cat_cpu(dt_op_call *c) { return join_cpu(c, false); }

/* ---- stack */
dt_status ops_stack_infer(dt_op_call *c) {
  assert_list(c);
  dt_tensor *const *v = c->args[0].list.v;
  int n = c->args[0].list.n, nd = v[0]->local.ndim, d;
  if (nd >= DT_MAX_DIMS)
    return core_error_set(DT_ERR_SHAPE, "%s: inputs have %d dims; the result "
                        "would exceed the maximum of %d", c->api, nd,
                        DT_MAX_DIMS);
  int64_t dim = c->args[1].i;
  if (dim < -(nd + 1) || dim > nd)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: dim %lld is out of "
                        "range for stacking %d-d tensors (expected [%d, %d])",
                        c->api, (long long)dim, nd, -(nd + 1), nd);
  d = (int)(dim < 0 ? dim + nd + 1 : dim);
  for (int i = 1; i < n; i++) {
    const dt_tensor *t = v[i];
    bool ok = t->local.ndim == nd &&
              !memcmp(t->local.sizes, v[0]->local.sizes,
                      sizeof(int64_t) * (size_t)nd);
    if (!ok) {
      char s0[CORE_SHAPE_STR_LEN], si[CORE_SHAPE_STR_LEN];
      return core_error_set(DT_ERR_SHAPE, "%s: stack expects each tensor to be "
                          "equal size, but tensors[0] has shape %s and "
                          "tensors[%d] has shape %s", c->api,
                          core_shape_str(v[0]->local.sizes, nd, s0, sizeof s0),
                          i, core_shape_str(t->local.sizes, t->local.ndim, si,
                                          sizeof si));
    }
  }
  int64_t sizes[DT_MAX_DIMS];
  for (int k = 0, j = 0; k <= nd; k++)
    sizes[k] = k == d ? n : v[0]->local.sizes[j++];
  ops_meta_set(&c->meta[0], promoted(c), nd + 1, sizes);
  return DT_OK;
}

dt_status ops_stack_cpu(dt_op_call *c) { return join_cpu(c, true); }

/* ---- sharding rules (docs/sharding.md): every input sharded on one dim
 * other than the joined one keeps it (the inputs agree on its size);
 * stack moves dims at or after `dim` right by one; every Partial kind
 * passes through. An input skipped by cat's legacy rule (an empty [0])
 * has other dims than the rest: then only Replicate. */
static void join_rule(const dt_op_call *c, ops_rule_set *rs, bool stack) {
  dt_tensor *const *v = c->args[0].list.v;
  int n = c->args[0].list.n, nd = v[0]->local.ndim;
  ops_rule_add(c, rs);
  for (int i = 1; i < n; i++)
    if (v[i]->local.ndim != nd) return;
  if (nd == 0 && !stack) return;
  int64_t dim = c->args[1].i;
  dim = dim < 0 ? dim + nd + (stack ? 1 : 0) : dim;
  for (int d = 0; d < nd; d++) {
    if (!stack && d == dim) continue;
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    s->in[0] = ops_shard(d);
    s->out[0] = ops_shard(stack && d >= dim ? d + 1 : d);
  }
  for (int r = DT_REDUCE_SUM; r <= DT_REDUCE_PROD; r++)
    ops_rule_partial(c, rs, 1u, 0, (dt_reduce_op)r, (dt_reduce_op)r);
}

void ops_cat_rule(const dt_op_call *c, ops_rule_set *rs) { join_rule(c, rs, false); }
void ops_stack_rule(const dt_op_call *c, ops_rule_set *rs) { join_rule(c, rs, true); }

/* ---- backward formulas (ops.h, "backward formulas"): each input gets its
 * slab of the gradient */
dt_status ops_join_grad(ops_grad_env *e, const dt_op_call *f,
                        dt_tensor *const *gout, dt_tensor **gin) {
  dt_tensor *g = gout[0];
  int n = f->args[0].list.n, nd = g->local.ndim;
  int64_t dim = f->args[1].i < 0 ? f->args[1].i + nd : f->args[1].i, off = 0;
  for (int k = 0; k < n; k++) {
    const dt_tensor *x = f->args[0].list.v[k];
    if (f->op == CORE_OP_STACK) {
      if (e->needs[k]) gin[k] = ops_g_tii(e, CORE_OP_SELECT, g, dim, k);
      continue;
    }
    int64_t len = x->local.ndim ? x->local.sizes[dim] : 0;
    if (e->needs[k]) gin[k] = ops_g_narrow(e, g, dim, off, len);
    off += len;
  }
  return e->st;
}

/* ---- the CUDA bindings (the op list's cuda column; docs/cuda.md): a
 * boxed call turned into a launch on the rank's stream */
#if DTORCH_HAVE_CUDA
/* stack(list, dim): input i copied into index i of the new dim */
dt_status ops_stack_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  int n = o->local.ndim, d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, n, &d);
  if (st != DT_OK) return st;
  size_t es = core_dtype_size(o->dtype);
  for (int i = 0; i < c->args[0].list.n; i++) {
    const dt_tensor *a = c->args[0].list.v[i];
    if (a->local.ndim != n - 1) return ops_cu_unsupported(c, "this input");
    cuda_operand so = {.data = (char *)core_tensor_data(o) +
                               (size_t)i * (size_t)o->local.strides[d] * es},
                 sa = {.data = core_tensor_data(a)};
    for (int k = 0, j = 0; k < n; k++)
      if (k != d) so.strides[j++] = o->local.strides[k];
    memcpy(sa.strides, a->local.strides, sizeof(int64_t) * (size_t)(n - 1));
    if (core_numel(a) &&
        cuda_copy_strided(ops_cu_stream(o), (int)o->dtype, (int)a->dtype, n - 1,
                          a->local.sizes, &so, &sa))
      return ops_cu_launch_failed(c);
  }
  return DT_OK;
}

/* cat(list, dim): each input copied into its slice of the output */
dt_status ops_cat_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  int n = o->local.ndim, d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, n, &d);
  if (st != DT_OK) return st;
  int64_t at = 0;
  for (int i = 0; i < c->args[0].list.n; i++) {
    const dt_tensor *a = c->args[0].list.v[i];
    if (a->local.ndim != n) continue; /* PyTorch's legacy empty 1-d input */
    cuda_operand so = {.data = (char *)core_tensor_data(o) +
                               at * o->local.strides[d] *
                                   (int64_t)core_dtype_size(o->dtype)},
                 sa = {.data = core_tensor_data(a)};
    memcpy(so.strides, o->local.strides, sizeof(int64_t) * (size_t)n);
    memcpy(sa.strides, a->local.strides, sizeof(int64_t) * (size_t)n);
    if (cuda_copy_strided(ops_cu_stream(o), (int)o->dtype, (int)a->dtype, n,
                          a->local.sizes, &so, &sa))
      return ops_cu_launch_failed(c);
    at += a->local.sizes[d];
  }
  return DT_OK;
}
#endif
