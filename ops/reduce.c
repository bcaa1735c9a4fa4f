/* Reduction ops: sum, mean, amax, amin, prod, argmax, argmin ("TIb": tensor,
 * dims, keepdim) and var ("TIbb": tensor, dims, unbiased, keepdim).
 *
 * infer turns the dims list into a bit mask of reduced dims (negative dims
 * count from the end, duplicates are an error, an empty list reduces every
 * dim), checks dtypes and empty extents, and gives the output shape; the
 * CPU kernel (kernels/cpu/reduce.c) computes into the contiguous output. */
#include "kernels/cpu/reduce.h"
#include "ops/ops.h"
#include "ops/cuda_ops.h"

/* the op list and the kernel enum are in the same order, one op at a time
 * (ops_reduce_cpu passes op - SUM as the kernel's op; so does the CUDA
 * binding for sum..prod, whose cuda_reduce codes follow CPU_REDUCE_*), and
 * var ends the reductions (dispatch/rank_op.c's is_reduction: SUM..VAR) */
#define SAME_ORDER(op, k)                                                     \
  _Static_assert(CORE_OP_##op - CORE_OP_SUM == (int)(k),                    \
                 #op " keeps its kernel's place after SUM");
SAME_ORDER(SUM, CPU_REDUCE_SUM) SAME_ORDER(MEAN, CPU_REDUCE_MEAN)
SAME_ORDER(AMAX, CPU_REDUCE_MAX) SAME_ORDER(AMIN, CPU_REDUCE_MIN)
SAME_ORDER(PROD, CPU_REDUCE_PROD) SAME_ORDER(ARGMAX, CPU_REDUCE_ARGMAX)
SAME_ORDER(ARGMIN, CPU_REDUCE_ARGMIN) SAME_ORDER(VAR, CPU_REDUCE_COUNT)
#undef SAME_ORDER
_Static_assert(DT_MAX_DIMS <= 32, "the reduced-dims mask is 32 bits");

/* The reduced dims of a as a bit mask; errors name c->api and the dim. */
static dt_status dims_mask(const dt_op_call *c, const dt_tensor *a,
                           dt_shape dims, uint32_t *mask) {
  int n = a->local.ndim;
  if (dims.ndim < 0 || dims.ndim > DT_MAX_DIMS)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: ndims %d is out of range (expected 0..%d)",
                        c->api, dims.ndim, DT_MAX_DIMS);
  if (dims.ndim == 0) {
    *mask = n ? (uint32_t)((1ull << n) - 1) : 0;
    return DT_OK;
  }
  uint32_t m = 0;
  for (int i = 0; i < dims.ndim; i++) {
    int d;
    dt_status st = ops_wrap_dim(c, "dim", dims.dims[i], n, &d);
    if (st != DT_OK) return st;
    if (m >> d & 1)
      return core_error_set(DT_ERR_INVALID_ARGUMENT,
                          "%s: dim %lld (dims[%d]) names dim %d, which "
                          "appears more than once in dims", c->api,
                          (long long)dims.dims[i], i, d);
    m |= 1u << d;
  }
  *mask = n ? m : 0; /* a 0-d tensor has no dims to reduce */
  return DT_OK;
}

/* Output shape: kept dims, and reduced dims as 1 when keepdim. */
static void reduced_shape(const dt_tensor *a, uint32_t mask, bool keepdim,
                          core_meta *m, dt_dtype dtype) {
  int64_t sz[DT_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < a->local.ndim; i++) {
    if (!(mask >> i & 1)) sz[nd++] = a->local.sizes[i];
    else if (keepdim) sz[nd++] = 1;
  }
  ops_meta_set(m, dtype, nd, sz);
}

static dt_status need_float(const dt_op_call *c, const dt_tensor *a,
                            const char *what) {
  if (!core_dtype_valid(a->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: a has invalid dtype %d", c->api,
                        (int)a->dtype);
  if (what && !core_dtype_is_float(a->dtype))
    return core_error_set(DT_ERR_DTYPE,
                        "%s: %s needs a floating dtype, got %s (cast with "
                        "dt_cast first)", c->api, what,
                        core_dtype_name(a->dtype));
  return DT_OK;
}

/* max/min/argmax/argmin have no identity: an empty extent is an error */
static dt_status need_nonempty(const dt_op_call *c, const dt_tensor *a,
                               uint32_t mask) {
  for (int i = 0; i < a->local.ndim; i++) {
    if (!(mask >> i & 1) || a->local.sizes[i] != 0) continue;
    char s[CORE_SHAPE_STR_LEN];
    return core_error_set(DT_ERR_SHAPE,
                        "%s: cannot reduce over a zero-size dimension (dim %d "
                        "of a tensor of shape %s); %s has no identity",
                        c->api, i,
                        core_shape_str(a->local.sizes, a->local.ndim, s,
                                     sizeof s),
                        core_op_name(c->op));
  }
  return DT_OK;
}

dt_status ops_reduce_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  uint32_t mask;
  bool mean = c->op == CORE_OP_MEAN;
  dt_status st = need_float(c, a, mean ? "mean" : NULL);
  if (st == DT_OK) st = dims_mask(c, a, c->args[1].ints, &mask);
  if (st != DT_OK) return st;
  dt_dtype r = a->dtype;
  switch (c->op) {
  case CORE_OP_SUM: case CORE_OP_PROD:
    if (!core_dtype_is_float(r)) r = DT_INT64; /* ints and bool, as PyTorch */
    break;
  case CORE_OP_AMAX: case CORE_OP_AMIN: case CORE_OP_ARGMAX: case CORE_OP_ARGMIN:
    if ((c->op == CORE_OP_ARGMAX || c->op == CORE_OP_ARGMIN) && r == DT_BOOL)
      return core_error_set(DT_ERR_DTYPE, "%s: bool input is not supported "
                            "(as in PyTorch); cast it to an integer dtype "
                            "first", c->api);
    st = need_nonempty(c, a, mask);
    if (st != DT_OK) return st;
    if (c->op == CORE_OP_ARGMAX || c->op == CORE_OP_ARGMIN) r = DT_INT64;
    break;
  default: break;
  }
  reduced_shape(a, mask, c->args[2].b, &c->meta[0], r);
  return DT_OK;
}

/* the reduction kernels' start: the mask of the reduced dims and the views
 * of out and of the input */
static dt_status reduce_views(dt_op_call *c, uint32_t *mask, cpu_view *vo,
                              cpu_view *va) {
  const dt_tensor *a = c->args[0].t;
  dt_status st = dims_mask(c, a, c->args[1].ints, mask);
  if (st != DT_OK) return st;
  *vo = ops_view_of(c->out[0]);
  *va = ops_view_of(a);
  return DT_OK;
}

dt_status ops_reduce_cpu(dt_op_call *c) {
  uint32_t mask;
  cpu_view vo, va;
  dt_status st = reduce_views(c, &mask, &vo, &va);
  if (st != DT_OK) return st;
  cpu_reduce((cpu_reduce_op)(c->op - CORE_OP_SUM), &vo, &va, mask);
  if (c->op == CORE_OP_MEAN && c->shard) {
    /* a rank's part of a DTensor mean over a sharded dim: its local mean
     * times (local count / global count) is its share of the global
     * mean, and the shares sum to it (the output is P(sum)) */
    double local = 1, global = 1;
    for (int d = 0; d < va.ndim; d++)
      if (mask >> d & 1) {
        local *= (double)va.sizes[d];
        global *= (double)c->shard->global[0].dims[d];
      }
    if (local != global && global > 0)
      cpu_binary_scalar(CPU_MUL, cpu_compute_type(vo.dtype), &vo, &vo,
                        local / global);
  }
  return DT_OK;
}

bool ops_reduce_mean_of_nothing(const dt_op_call *c) {
  uint32_t mask;
  const dt_tensor *a = c->args[0].t;
  if (c->op != CORE_OP_MEAN || !c->shard ||
      dims_mask(c, a, c->args[1].ints, &mask) != DT_OK)
    return false;
  const dt_shape *g = &c->shard->global[0];
  for (int d = 0; d < g->ndim; d++)
    if (mask >> d & 1 && g->dims[d] == 0) return true;
  return false;
}

dt_status ops_var_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  uint32_t mask;
  dt_status st = need_float(c, a, "var");
  if (st == DT_OK) st = dims_mask(c, a, c->args[1].ints, &mask);
  if (st != DT_OK) return st;
  reduced_shape(a, mask, c->args[3].b, &c->meta[0], a->dtype);
  return DT_OK;
}

dt_status ops_var_cpu(dt_op_call *c) {
  uint32_t mask;
  cpu_view vo, va;
  dt_status st = reduce_views(c, &mask, &vo, &va);
  if (st == DT_OK) cpu_var(&vo, &va, mask, c->args[2].b ? 1 : 0);
  return st;
}

/* ---- sharding rule (docs/sharding.md)
 * A kept dim keeps its Shard (moved left past the reduced dims unless
 * keepdim). A reduced dim may be sharded when the reduction is one a
 * Partial can finish: sum and mean → P(sum) (mean's rank kernel divides
 * by the global count, so uneven shards stay exact), amax → P(max), amin
 * → P(min), prod → P(prod); argmax/argmin/var over a sharded dim need
 * communication, so that dim must be Replicate. Partial inputs pass
 * through the reductions they commute with. */
static int reduce_partial(core_op_id op) {
  switch (op) {
  case CORE_OP_SUM: case CORE_OP_MEAN: return DT_REDUCE_SUM;
  case CORE_OP_AMAX: return DT_REDUCE_MAX;
  case CORE_OP_AMIN: return DT_REDUCE_MIN;
  case CORE_OP_PROD: return DT_REDUCE_PROD;
  default: return -1;
  }
}

void ops_reduce_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *a = c->args[0].t;
  uint32_t mask;
  if (dims_mask(c, a, c->args[1].ints, &mask) != DT_OK) return;
  bool keep = c->op == CORE_OP_VAR ? c->args[3].b : c->args[2].b;
  int kind = reduce_partial(c->op);
  ops_rule_add(c, rs);
  for (int d = 0; d < a->local.ndim; d++) {
    bool reduced = mask >> d & 1;
    if (reduced && kind < 0) continue;
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    s->in[0] = ops_shard(d);
    s->out[0] = reduced ? ops_partial((dt_reduce_op)kind)
                        : ops_shard(keep ? d : d - __builtin_popcount(mask & ((1u << d) - 1)));
  }
  if (a->dtype == DT_BOOL) return;
  if (c->op == CORE_OP_SUM || c->op == CORE_OP_MEAN) {
    ops_rule_partial(c, rs, 1u, 0, DT_REDUCE_SUM, DT_REDUCE_SUM);
    ops_rule_partial(c, rs, 1u, 0, DT_REDUCE_AVG, DT_REDUCE_AVG);
  } else if (c->op == CORE_OP_AMAX || c->op == CORE_OP_AMIN) {
    ops_rule_partial(c, rs, 1u, 0, (dt_reduce_op)kind, (dt_reduce_op)kind);
  }
}

/* ---- backward formulas (ops.h, "backward formulas") */
/* the reduced dims of a reduction call (an empty list: all) as a mask */
static int reduced_mask(const dt_op_call *f, int nd, int64_t *count) {
  const dt_shape *dims = &f->args[1].ints;
  const dt_tensor *a = f->args[0].t;
  int mask = 0;
  for (int i = 0; i < dims->ndim; i++)
    mask |= 1 << (dims->dims[i] < 0 ? dims->dims[i] + nd : dims->dims[i]);
  if (!dims->ndim) mask = (1 << nd) - 1;
  *count = 1;
  for (int d = 0; d < nd; d++)
    if (mask >> d & 1) *count *= a->local.sizes[d];
  return mask;
}

/* g (the reduction's output gradient) brought back to a's shape */
static dt_tensor *expand_back(ops_grad_env *e, const dt_op_call *f, dt_tensor *g,
                              int mask) {
  const dt_tensor *a = f->args[0].t;
  int nd = a->local.ndim;
  dt_shape kept = ops_g_shape(a), full = ops_g_shape(a);
  for (int d = 0; d < nd; d++)
    if (mask >> d & 1) kept.dims[d] = 1;
  bool keep = f->op == CORE_OP_VAR ? f->args[3].b : f->args[2].b;
  if (!keep) g = ops_g_tI(e, CORE_OP_RESHAPE, g, kept);
  return ops_g_tI(e, CORE_OP_EXPAND, g, full);
}

/* all the reduced dims, for a keepdim reduction */
static dt_shape mask_dims(int mask, int nd) {
  dt_shape s = {0};
  for (int d = 0; d < nd; d++)
    if (mask >> d & 1) s.dims[s.ndim++] = d;
  return s;
}

/* prod: the product of the others; 0 where another is 0; exact with zeros */
static dt_tensor *prod_grad(ops_grad_env *e, dt_tensor *a, dt_tensor *gx,
                            dt_shape dims) {
  dt_tensor *zero = ops_g_const(e, a, 0);
  dt_tensor *isz = ops_g_tt(e, CORE_OP_EQ, a, zero);
  dt_tensor *nz = ops_g_reduce(e, CORE_OP_SUM, ops_g_cast(e, isz, a->dtype), dims, true);
  dt_tensor *p1 = ops_g_reduce(e, CORE_OP_PROD, ops_g_masked_fill(e, a, isz, 1), dims, true);
  /* a != 0: p1 / a when no zero, else 0; a == 0: p1 when it is the only zero */
  dt_tensor *others = ops_g_tt(e, CORE_OP_DIV, p1, ops_g_masked_fill(e, a, isz, 1));
  dt_tensor *none = ops_g_tt(e, CORE_OP_NE, nz, zero);
  dt_tensor *one = ops_g_const(e, a, 1);
  dt_tensor *r = ops_g_masked_fill(e, others, ops_g_tt(e, CORE_OP_LOGICAL_AND, none,
                                                        ops_g_t(e, CORE_OP_LOGICAL_NOT, isz)), 0);
  r = ops_g_masked_fill(e, r, ops_g_tt(e, CORE_OP_LOGICAL_AND, isz,
                                        ops_g_tt(e, CORE_OP_NE, nz, one)), 0);
  return ops_g_tt(e, CORE_OP_MUL, gx, r);
}

dt_status ops_reduce_grad(ops_grad_env *e, const dt_op_call *f,
                          dt_tensor *const *gout, dt_tensor **gin) {
  dt_tensor *a = f->args[0].t;
  int nd = a->local.ndim;
  int64_t n;
  int mask = reduced_mask(f, nd, &n);
  dt_tensor *gx = expand_back(e, f, gout[0], mask);
  dt_shape dims = mask_dims(mask, nd);
  switch (f->op) {
  case CORE_OP_SUM: gin[0] = gx; break;
  case CORE_OP_MEAN: gin[0] = ops_g_ts(e, CORE_OP_DIV_SCALAR, gx, (double)n); break;
  case CORE_OP_AMAX:
  case CORE_OP_AMIN: { /* ties share the gradient evenly (PyTorch) */
    dt_tensor *m = ops_g_reduce(e, f->op, a, dims, true);
    dt_tensor *hit = ops_g_cast(e, ops_g_tt(e, CORE_OP_EQ, a, m), a->dtype);
    dt_tensor *cnt = ops_g_reduce(e, CORE_OP_SUM, hit, dims, true);
    gin[0] = ops_g_tt(e, CORE_OP_DIV, ops_g_tt(e, CORE_OP_MUL, gx, hit), cnt);
    break;
  }
  case CORE_OP_PROD: gin[0] = prod_grad(e, a, gx, dims); break;
  case CORE_OP_VAR: { /* 2 (a - mean) / (n - correction) */
    dt_tensor *mu = ops_g_reduce(e, CORE_OP_MEAN, a, dims, true);
    double den = (double)n - (f->args[2].b ? 1 : 0); /* unbiased */
    dt_tensor *d = ops_g_ts(e, CORE_OP_MUL_SCALAR, ops_g_tt(e, CORE_OP_SUB, a, mu), 2 / den);
    gin[0] = ops_g_tt(e, CORE_OP_MUL, gx, d);
    break;
  }
  default: break;
  }
  return e->st;
}

/* ---- the CUDA bindings (the op list's cuda column; docs/cuda.md): a
 * boxed call turned into a launch on the rank's stream */
#if DTORCH_HAVE_CUDA
/* cuda_reduce's op codes follow the op list's order */
_Static_assert(CORE_OP_MEAN == CORE_OP_SUM + 1 &&
                   CORE_OP_AMAX == CORE_OP_SUM + 2 &&
                   CORE_OP_AMIN == CORE_OP_SUM + 3 &&
                   CORE_OP_PROD == CORE_OP_SUM + 4,
               "sum, mean, amax, amin, prod in order");

/* the reduced dims of args[1] as a mask (none: all of them) */
static uint32_t cu_reduced_mask(dt_op_call *c, const dt_tensor *a) {
  dt_shape dims = c->args[1].ints;
  int n = a->local.ndim;
  uint32_t mask = dims.ndim ? 0 : (uint32_t)((1ull << n) - 1);
  for (int i = 0; i < dims.ndim; i++) { /* infer checked them */
    int d = 0;
    (void)ops_wrap_dim(c, "dim", dims.dims[i], n, &d);
    mask |= 1u << d;
  }
  return mask;
}

dt_status ops_var_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  if (a->dtype != o->dtype || !ops_cu_is_float(a->dtype))
    return ops_cu_unsupported(c, "integer dtypes");
  cuda_rows g = ops_cu_rows(a, cu_reduced_mask(c, a), false);
  return cuda_var(ops_cu_stream(o), (int)o->dtype, &g, c->args[2].b ? 1 : 0,
                  core_tensor_data(o), core_tensor_data(a))
             ? ops_cu_launch_failed(c) : DT_OK;
}

dt_status ops_argext_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  if (!ops_cu_is_float(a->dtype) || o->dtype != DT_INT64)
    return ops_cu_unsupported(c, "integer dtypes");
  cuda_rows g = ops_cu_rows(a, cu_reduced_mask(c, a), false);
  return cuda_argext(ops_cu_stream(o), c->op == CORE_OP_ARGMAX, (int)a->dtype,
                     &g, core_tensor_data(o), core_tensor_data(a))
             ? ops_cu_launch_failed(c)
             : DT_OK;
}

dt_status ops_reduce_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  if (a->dtype != o->dtype || !ops_cu_is_float(a->dtype))
    return ops_cu_unsupported(c, "integer dtypes");
  uint32_t mask = cu_reduced_mask(c, a);
  cuda_rows g = ops_cu_rows(a, mask, false);
  if (cuda_reduce(ops_cu_stream(o), (int)(c->op - CORE_OP_SUM), (int)o->dtype,
                  &g, core_tensor_data(o), core_tensor_data(a)))
    return ops_cu_launch_failed(c);
  if (c->op != CORE_OP_MEAN || !c->shard) return DT_OK;
  /* a rank's part of a DTensor mean over a sharded dim: its local mean
   * times local / global count (the shares sum to the global mean, the
   * output being P(sum)), as the CPU's ops_reduce_cpu */
  double local = 1, global = 1;
  for (int d = 0; d < a->local.ndim; d++)
    if (mask >> d & 1) {
      local *= (double)a->local.sizes[d];
      global *= (double)c->shard->global[0].dims[d];
    }
  if (local == global || global <= 0) return DT_OK;
  cuda_operand oo = ops_cu_operand(o, o);
  return cuda_scalar(ops_cu_stream(o), CUDA_MUL, (int)o->dtype, o->local.ndim,
                     o->local.sizes, core_tensor_data(o), &oo, local / global)
             ? ops_cu_launch_failed(c) : DT_OK;
}
#endif
