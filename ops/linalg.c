/* Linear algebra ops: matmul (torch.matmul's rank rules with broadcast
 * batch dims) and linear (x·weightᵀ + bias).
 *
 * Both reduce to one shape: out [batch..., M, N] = A [batch..., M, K] ·
 * B [batch..., K, N]. Infer works out (batch, M, K, N) and which operand is
 * a vector (its M or N dim is then absent from the output); the kernels
 * build matching strided views with no copies — a 1-D operand becomes a
 * [1, K] or [K, 1] view, weightᵀ is a stride swap, broadcast batch dims get
 * stride 0 — and hand them to cpu_bmm (kernels/cpu/gemm.c). */
#include "kernels/cpu/gemm.h"
#include "ops/ops.h"
#include "ops/cuda_ops.h"

typedef struct mm_shape {
  int nbatch;
  int64_t batch[DT_MAX_DIMS];
  int64_t m, k, n;
  bool a_vec, b_vec;       /* 1-D operand: the output drops its M / N dim */
  /* linear's bias: none, fused per output column (1-D [out]; or one value:
   * 0-d / [1], stride 0), or any other shape broadcast to the output and
   * added after the product */
  enum { BIAS_NONE, BIAS_FUSED, BIAS_BROADCAST } bias;
  int64_t bias_stride;
} mm_shape;

/* Both operands: valid, the same dtype (PyTorch refuses mixed matmul), and
 * not bool (no bool GEMM in PyTorch either). */
static dt_status check_dtypes(const dt_op_call *c, const char *an,
                              const dt_tensor *a, const char *bn,
                              const dt_tensor *b) {
  if (!core_dtype_valid(a->dtype) || !core_dtype_valid(b->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: %s or %s has an invalid dtype "
                        "(%d, %d)", c->api, an, bn, (int)a->dtype,
                        (int)b->dtype);
  if (a->dtype != b->dtype)
    return core_error_set(DT_ERR_DTYPE, "%s: %s (%s) and %s (%s) must have the "
                        "same dtype; cast one of them first", c->api, an,
                        core_dtype_name(a->dtype), bn, core_dtype_name(b->dtype));
  /* PyTorch has no bool GEMM, but an empty inner dim needs none: the
   * result is all false (matmul of bool [2, 0] and [0, 3]) */
  bool inner_empty = a->local.ndim > 0 && a->local.sizes[a->local.ndim - 1] == 0;
  if (a->dtype == DT_BOOL && !inner_empty)
    return core_error_set(DT_ERR_DTYPE, "%s: %s and %s are bool; matrix "
                        "products need a numeric dtype", c->api, an, bn);
  return DT_OK;
}

static dt_status not_multipliable(const dt_op_call *c, const dt_tensor *a,
                                  const dt_tensor *b, const char *why,
                                  long long x, long long y) {
  char sa[CORE_SHAPE_STR_LEN], sb[CORE_SHAPE_STR_LEN];
  return core_error_set(DT_ERR_SHAPE, "%s: shapes %s and %s cannot be "
                      "multiplied (%s: %lld vs %lld)", c->api,
                      core_shape_str(a->local.sizes, a->local.ndim, sa, sizeof sa),
                      core_shape_str(b->local.sizes, b->local.ndim, sb, sizeof sb),
                      why, x, y);
}

/* torch.matmul's shape rules for a·b into *s. */
static dt_status matmul_shape(const dt_op_call *c, const dt_tensor *a,
                              const dt_tensor *b, mm_shape *s) {
  const int64_t *as = a->local.sizes, *bs = b->local.sizes;
  int na = a->local.ndim, nb = b->local.ndim;
  if (na == 0 || nb == 0) {
    char sa[CORE_SHAPE_STR_LEN], sb[CORE_SHAPE_STR_LEN];
    return core_error_set(DT_ERR_SHAPE, "%s: both arguments need at least 1 "
                        "dim, got shapes %s and %s (use dt_mul for scalars)",
                        c->api, core_shape_str(as, na, sa, sizeof sa),
                        core_shape_str(bs, nb, sb, sizeof sb));
  }
  s->a_vec = na == 1;
  s->b_vec = nb == 1;
  s->m = na == 1 ? 1 : as[na - 2];
  s->k = as[na - 1];
  int64_t kb = nb == 1 ? bs[0] : bs[nb - 2];
  s->n = nb == 1 ? 1 : bs[nb - 1];
  if (s->k != kb)
    return not_multipliable(c, a, b, "contracted dim", (long long)s->k,
                            (long long)kb);
  int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0;
  s->nbatch = ba > bb ? ba : bb;
  for (int i = 0; i < s->nbatch; i++) {
    int ia = ba - s->nbatch + i, ib = bb - s->nbatch + i;
    int64_t da = ia >= 0 ? as[ia] : 1, db = ib >= 0 ? bs[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return not_multipliable(c, a, b, "batch dims do not broadcast",
                              (long long)da, (long long)db);
    s->batch[i] = da == 1 ? db : da;
  }
  return DT_OK;
}

/* The output's shape: batch..., M unless a is a vector, N unless b is. */
static void mm_meta(core_meta *m, dt_dtype d, const mm_shape *s) {
  int64_t sz[DT_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < s->nbatch; i++) sz[n++] = s->batch[i];
  if (!s->a_vec) sz[n++] = s->m;
  if (!s->b_vec) sz[n++] = s->n;
  ops_meta_set(m, d, n, sz);
}

/* a 1-D view [K] as a [1, K] row (as_row) or a [K, 1] column */
static cpu_view vec_as_matrix(const cpu_view *v, bool as_row) {
  cpu_view r = *v;
  r.ndim = 2;
  int keep = as_row ? 1 : 0;
  r.sizes[keep] = v->sizes[0];
  r.strides[keep] = v->strides[0];
  r.sizes[1 - keep] = 1;
  r.strides[1 - keep] = 0;
  return r;
}

static dt_status gemm_error(const dt_op_call *c, dt_status st,
                            const mm_shape *s) {
  long long m = (long long)s->m, k = (long long)s->k, n = (long long)s->n;
  switch (st) {
  case DT_ERR_OUT_OF_MEMORY:
    return core_error_set(st, "%s: out of memory for the packing buffers of a "
                        "[%lld, %lld] x [%lld, %lld] product", c->api, m, k,
                        k, n);
  case DT_ERR_UNSUPPORTED:
    return core_error_set(st, "%s: a [%lld, %lld] x [%lld, %lld] product has a "
                        "dim beyond BLAS's 32-bit int", c->api, m, k, k, n);
  default:
    return core_error_set(st, "%s: dtype %s is not supported by the CPU GEMM",
                        c->api, core_dtype_name(c->out[0]->dtype));
  }
}

/* Runs out [batch..., M, N] = a2 · b2 (+ bias), where a2 / b2 are views of
 * rank >= 2 whose leading dims broadcast to the batch. */
static dt_status mm_run(dt_op_call *c, const mm_shape *s, const cpu_view *a2,
                        const cpu_view *b2, const dt_tensor *bias) {
  int nd = s->nbatch + 2;
  int64_t sz[DT_MAX_DIMS];
  for (int i = 0; i < s->nbatch; i++) sz[i] = s->batch[i];
  sz[nd - 2] = s->m;
  sz[nd - 1] = s->k;
  cpu_view va = cpu_view_broadcast(a2, nd, sz);
  sz[nd - 2] = s->k;
  sz[nd - 1] = s->n;
  cpu_view vb = cpu_view_broadcast(b2, nd, sz);
  sz[nd - 2] = s->m;
  cpu_view vo = ops_view_of(c->out[0]);
  vo.ndim = nd;
  for (int i = 0; i < nd; i++) vo.sizes[i] = sz[i];
  core_contiguous_strides(vo.sizes, nd, vo.strides);
  bool fused = bias && s->bias == BIAS_FUSED;
  const char *bp = fused ? core_tensor_data(bias) : NULL;
  dt_status st = cpu_bmm(&vo, &va, &vb, bp, fused ? s->bias_stride : 0);
  if (st != DT_OK) return gemm_error(c, st, s);
  if (bias && s->bias == BIAS_BROADCAST) { /* out += bias, broadcast */
    cpu_view o = ops_view_of(c->out[0]), b0 = ops_view_of(bias);
    cpu_view vbias = cpu_view_broadcast(&b0, o.ndim, o.sizes);
    dt_dtype ct = cpu_compute_type(o.dtype);
    cpu_binary(CPU_ADD, ct, o.dtype, true, &o, &o, &vbias);
  }
  return DT_OK;
}

/* ---- matmul */
dt_status ops_matmul_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t, *b = c->args[1].t;
  mm_shape s;
  dt_status st = matmul_shape(c, a, b, &s);
  if (st == DT_OK) st = check_dtypes(c, "a", a, "b", b);
  if (st != DT_OK) return st;
  mm_meta(&c->meta[0], a->dtype, &s);
  return DT_OK;
}

dt_status ops_matmul_cpu(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t, *b = c->args[1].t;
  mm_shape s;
  dt_status st = matmul_shape(c, a, b, &s);
  if (st != DT_OK) return st;
  cpu_view va = ops_view_of(a), vb = ops_view_of(b);
  if (s.a_vec) va = vec_as_matrix(&va, true);
  if (s.b_vec) vb = vec_as_matrix(&vb, false);
  return mm_run(c, &s, &va, &vb, NULL);
}

/* ---- linear: x [..., in] · weight [out, in]ᵀ (or [in]) + bias */
/* the bias against the output shape out (nout dims): fused when it is one
 * value or one per column, else broadcast; an error when it would grow
 * the output */
static dt_status linear_bias(const dt_op_call *c, const dt_tensor *bias,
                             const int64_t *out, int nout, mm_shape *s) {
  s->bias = BIAS_NONE;
  s->bias_stride = 0;
  if (!bias) return DT_OK;
  int bn = bias->local.ndim;
  const int64_t *bs = bias->local.sizes;
  int64_t cols = nout ? out[nout - 1] : 1;
  if (bn == 0 || (bn == 1 && (bs[0] == 1 || bs[0] == cols))) {
    s->bias = BIAS_FUSED;
    s->bias_stride = bn == 1 && bs[0] == cols && cols != 1 ? bias->local.strides[0] : 0;
    if (nout > 0 || bn == 0) return DT_OK;
  }
  int64_t sh[DT_MAX_DIMS];
  int n;
  dt_status st = ops_broadcast_shapes(c, bs, bn, out, nout, sh, &n);
  bool same = st == DT_OK && n == nout;
  for (int i = 0; same && i < n; i++) same = sh[i] == out[i];
  if (!same) {
    char sb[CORE_SHAPE_STR_LEN], so[CORE_SHAPE_STR_LEN];
    return core_error_set(DT_ERR_SHAPE, "%s: bias shape %s does not broadcast "
                          "to the output shape %s", c->api,
                          core_shape_str(bs, bn, sb, sizeof sb),
                          core_shape_str(out, nout, so, sizeof so));
  }
  if (s->bias == BIAS_NONE) s->bias = BIAS_BROADCAST;
  return DT_OK;
}

/* the shapes are formatted only when the call fails (this runs per call) */
static dt_status linear_shape(const dt_op_call *c, mm_shape *s) {
  const dt_tensor *x = c->args[0].t, *w = c->args[1].t, *bias = c->args[2].t;
  char sx[CORE_SHAPE_STR_LEN], sw[CORE_SHAPE_STR_LEN];
  int nx = x->local.ndim, nw = w->local.ndim;
  const int64_t *xs = x->local.sizes, *ws = w->local.sizes;
#define SX core_shape_str(xs, nx, sx, sizeof sx)
#define SW core_shape_str(ws, nw, sw, sizeof sw)
  if (nx == 0)
    return core_error_set(DT_ERR_SHAPE, "%s: x must have at least 1 dim "
                        "[..., in], got shape %s", c->api, SX);
  if (nw != 1 && nw != 2)
    return core_error_set(DT_ERR_SHAPE, "%s: weight must be 2-D [out, in] or "
                        "1-D [in], got shape %s", c->api, SW);
  int64_t in = ws[nw - 1];
  if (xs[nx - 1] != in)
    return core_error_set(DT_ERR_SHAPE, "%s: x %s and weight %s do not match: "
                        "x's last dim %lld != weight's in-features %lld",
                        c->api, SX, SW, (long long)xs[nx - 1], (long long)in);
  if (nw == 1 && bias && nx > 1) /* PyTorch goes through addmm and fails */
    return core_error_set(DT_ERR_SHAPE, "%s: a 1-D weight %s with a bias "
                        "needs a 1-D x, got %s (as PyTorch: addmm needs a "
                        "2-D weight)", c->api, SW, SX);
#undef SX
#undef SW
  s->a_vec = nx == 1;
  s->b_vec = nw == 1;
  s->m = nx == 1 ? 1 : xs[nx - 2];
  s->k = in;
  s->n = nw == 1 ? 1 : ws[0];
  s->nbatch = nx > 2 ? nx - 2 : 0;
  for (int i = 0; i < s->nbatch; i++) s->batch[i] = xs[i];
  int64_t out[DT_MAX_DIMS];
  int nout = 0;
  for (int i = 0; i < nx - 1; i++) out[nout++] = xs[i];
  if (nw == 2) out[nout++] = ws[0];
  return linear_bias(c, bias, out, nout, s);
}

dt_status ops_linear_infer(dt_op_call *c) {
  const dt_tensor *x = c->args[0].t, *w = c->args[1].t, *bias = c->args[2].t;
  mm_shape s;
  dt_status st = linear_shape(c, &s);
  if (st == DT_OK) st = check_dtypes(c, "x", x, "weight", w);
  if (st == DT_OK && bias && bias->dtype != x->dtype)
    st = core_error_set(DT_ERR_DTYPE, "%s: bias (%s) must have the dtype of x "
                      "and weight (%s)", c->api, core_dtype_name(bias->dtype),
                      core_dtype_name(x->dtype));
  if (st != DT_OK) return st;
  mm_meta(&c->meta[0], x->dtype, &s);
  return DT_OK;
}

dt_status ops_linear_cpu(dt_op_call *c) {
  const dt_tensor *x = c->args[0].t, *w = c->args[1].t, *bias = c->args[2].t;
  mm_shape s;
  dt_status st = linear_shape(c, &s);
  if (st != DT_OK) return st;
  cpu_view vx = ops_view_of(x), vw = ops_view_of(w);
  if (s.a_vec) vx = vec_as_matrix(&vx, true);
  if (s.b_vec) { /* a 1-D weight [in] is the column [in, 1] */
    cpu_view col = vec_as_matrix(&vw, false);
    return mm_run(c, &s, &vx, &col, bias);
  }
  /* weightᵀ as a view: BLAS reads it with a transpose flag, no copy */
  cpu_view wt = vw;
  wt.sizes[0] = vw.sizes[1];
  wt.sizes[1] = vw.sizes[0];
  wt.strides[0] = vw.strides[1];
  wt.strides[1] = vw.strides[0];
  return mm_run(c, &s, &vx, &wt, bias);
}

/* ---- sharding rules (docs/sharding.md)
 * out [batch..., M, N] = a [batch..., M, K] · b [batch..., K, N]:
 *   a S(M), b R → S(M);  a R, b S(N) → S(N);  a S(K), b S(K) → P(sum);
 *   a batch dim sharded (b's matching dim too, unless broadcast) → S(batch);
 *   P(sum|avg) times R on either side stays that Partial. */
static void add_strategy(const dt_op_call *c, ops_rule_set *rs, int ia,
                         dt_placement pa, int ib, dt_placement pb,
                         dt_placement out) {
  ops_strategy *s = ops_rule_add(c, rs);
  if (!s) return;
  if (ia >= 0) s->in[ia] = pa;
  if (ib >= 0) s->in[ib] = pb;
  s->out[0] = out;
}

static void partial_through(const dt_op_call *c, ops_rule_set *rs,
                            unsigned args, unsigned extra) {
  for (int r = DT_REDUCE_SUM; r <= DT_REDUCE_AVG; r++)
    for (int i = 0; i < 2; i++)
      if (args >> i & 1) {
        ops_strategy *s = ops_rule_add(c, rs);
        if (!s) return;
        s->in[i] = ops_partial((dt_reduce_op)r);
        if (extra) s->in[2] = ops_partial((dt_reduce_op)r); /* linear's bias */
        s->out[0] = ops_partial((dt_reduce_op)r);
      }
}

void ops_matmul_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *a = c->args[0].t, *b = c->args[1].t;
  int na = a->local.ndim, nb = b->local.ndim, no = c->meta[0].ndim;
  int am = na >= 2 ? na - 2 : -1, bn = nb >= 2 ? nb - 1 : -1;
  int om = na == 1 ? -1 : (nb == 1 ? no - 1 : no - 2), on = nb == 1 ? -1 : no - 1;
  ops_rule_add(c, rs);
  if (am >= 0) add_strategy(c, rs, 0, ops_shard(am), -1, DT_REPLICATE, ops_shard(om));
  if (bn >= 0) add_strategy(c, rs, -1, DT_REPLICATE, 1, ops_shard(bn), ops_shard(on));
  add_strategy(c, rs, 0, ops_shard(na - 1), 1, ops_shard(nb >= 2 ? nb - 2 : 0),
               ops_partial(DT_REDUCE_SUM));
  int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0;
  int nbatch = ba > bb ? ba : bb;
  for (int i = 0; i < nbatch; i++) {
    int ia = i - (nbatch - ba), ib = i - (nbatch - bb);
    int64_t size = c->meta[0].sizes[i];
    bool sa = ia >= 0 && a->local.sizes[ia] == size;
    bool sb = ib >= 0 && b->local.sizes[ib] == size;
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    if (sa) s->in[0] = ops_shard(ia);
    if (sb) s->in[1] = ops_shard(ib);
    s->out[0] = ops_shard(i);
  }
  if (a->dtype != DT_BOOL) partial_through(c, rs, 3u, 0);
}

/* linear(x [..., in], w [out, in] | [in], bias): batch dims of x; w S(0)
 * (column parallel) → S(last); x S(last), w S(in) → P(sum) with the bias
 * as P(sum) too (added once: a Replicate bias counts on coordinate 0
 * only, a communication-free adjustment). The bias follows the output
 * dims it is aligned with. */
static void bias_like_output(const dt_op_call *c, ops_strategy *s, int od) {
  const dt_tensor *bias = c->args[2].t;
  if (!bias || od < 0) return;
  int bd = od - (c->meta[0].ndim - bias->local.ndim);
  if (bd >= 0 && bias->local.sizes[bd] == c->meta[0].sizes[od])
    s->in[2] = ops_shard(bd);
}

void ops_linear_rule(const dt_op_call *c, ops_rule_set *rs) {
  const dt_tensor *x = c->args[0].t, *w = c->args[1].t;
  int nx = x->local.ndim, nw = w->local.ndim, no = c->meta[0].ndim;
  ops_rule_add(c, rs);
  for (int d = 0; d < nx - 1; d++) {
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    s->in[0] = ops_shard(d);
    s->out[0] = ops_shard(d);
    bias_like_output(c, s, d);
  }
  if (nw == 2) {
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    s->in[1] = ops_shard(0);
    s->out[0] = ops_shard(no - 1);
    bias_like_output(c, s, no - 1);
  }
  ops_strategy *s = ops_rule_add(c, rs);
  if (!s) return;
  s->in[0] = ops_shard(nx - 1);
  s->in[1] = ops_shard(nw - 1);
  s->in[2] = ops_partial(DT_REDUCE_SUM);
  s->out[0] = ops_partial(DT_REDUCE_SUM);
  if (x->dtype != DT_BOOL) partial_through(c, rs, 3u, 1u);
}

/* ---- backward formulas (ops.h, "backward formulas") */
#define MM(a, b) ops_g_tt(e, CORE_OP_MATMUL, a, b)
#define T_(a) ops_g_tii(e, CORE_OP_TRANSPOSE, a, -2, -1)

static dt_tensor *reshape_to(ops_grad_env *e, dt_tensor *g, const dt_tensor *x) {
  return ops_g_sum_to(e, g, x->local.sizes, x->local.ndim);
}

/* a [.., M, K] @ b [K, N] with a batched: gb = flat(a)^T flat(g), one
 * matmul (no [.., K, N] intermediate to sum) */
static dt_tensor *flat_rows(ops_grad_env *e, dt_tensor *x) {
  return x && x->local.ndim > 2 ? ops_g_tii(e, CORE_OP_FLATTEN, x, 0, x->local.ndim - 2) : x;
}

static void matmul_grads(ops_grad_env *e, dt_tensor *a, dt_tensor *b, dt_tensor *g,
                         dt_tensor **ga, dt_tensor **gb) {
  int na = a->local.ndim, nb = b->local.ndim;
  if (na == 1 && nb == 1) { /* dot: g is 0-d */
    *ga = ops_g_tt(e, CORE_OP_MUL, g, b);
    *gb = ops_g_tt(e, CORE_OP_MUL, g, a);
    return;
  }
  dt_tensor *a2 = na == 1 ? ops_g_ti(e, CORE_OP_UNSQUEEZE, a, 0) : a;
  dt_tensor *b2 = nb == 1 ? ops_g_ti(e, CORE_OP_UNSQUEEZE, b, -1) : b;
  dt_tensor *g2 = na == 1 ? ops_g_ti(e, CORE_OP_UNSQUEEZE, g, -2) : g;
  if (nb == 1) g2 = ops_g_ti(e, CORE_OP_UNSQUEEZE, g2, -1);
  if (e->needs[0]) *ga = reshape_to(e, MM(g2, T_(b2)), a2);
  if (e->needs[1]) {
    if (na > 2 && nb == 2) *gb = MM(T_(flat_rows(e, a2)), flat_rows(e, g2));
    else *gb = reshape_to(e, MM(T_(a2), g2), b2);
  }
  if (*ga && na == 1) *ga = ops_g_tI(e, CORE_OP_RESHAPE, *ga, ops_g_shape(a));
  if (*gb && nb == 1) *gb = ops_g_tI(e, CORE_OP_RESHAPE, *gb, ops_g_shape(b));
}

dt_status ops_linalg_grad(ops_grad_env *e, const dt_op_call *f,
                          dt_tensor *const *gout, dt_tensor **gin) {
  dt_tensor *g = gout[0], *a = f->args[0].t, *b = f->args[1].t;
  if (f->op == CORE_OP_MATMUL) {
    matmul_grads(e, a, b, g, &gin[0], &gin[1]);
    return e->st;
  }
  /* linear: y = x W^T + bias; x [.., in] (or [in]), W [out, in] */
  dt_tensor *bias = f->args[2].t;
  if (e->needs[0]) gin[0] = MM(g, b);
  if (e->needs[1]) {
    if (a->local.ndim == 1)
      gin[1] = MM(ops_g_ti(e, CORE_OP_UNSQUEEZE, g, -1), ops_g_ti(e, CORE_OP_UNSQUEEZE, a, 0));
    else
      gin[1] = MM(T_(flat_rows(e, g)), flat_rows(e, a));
  }
  if (bias && e->needs[2]) gin[2] = reshape_to(e, g, bias);
  return e->st;
}
#undef MM
#undef T_

/* ---- the CUDA bindings (the op list's cuda column; docs/cuda.md): a
 * boxed call turned into a launch on the rank's stream */
#if DTORCH_HAVE_CUDA
/* [.., m, k] @ [.., k, n] with equal batch dims, both dense */
dt_status ops_matmul_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t, *b = c->args[1].t;
  int na = a->local.ndim, nb = b->local.ndim;
  if (na < 2 || na != nb || !ops_cu_dense(a) || !ops_cu_dense(b) ||
      a->dtype != o->dtype || b->dtype != o->dtype)
    return ops_cu_unsupported(
        c, "broadcast, 1-d, strided or mixed-dtype operands");
  int64_t batch = 1;
  for (int d = 0; d < na - 2; d++) {
    if (a->local.sizes[d] != b->local.sizes[d])
      return ops_cu_unsupported(c, "broadcast batch dims");
    batch *= a->local.sizes[d];
  }
  int64_t m = a->local.sizes[na - 2], k = a->local.sizes[na - 1],
          n = b->local.sizes[nb - 1];
  char why[256];
  if (cuda_gemm(ops_cu_cr(o), (int)o->dtype, batch, m, n, k,
                core_tensor_data(a), core_tensor_data(b), core_tensor_data(o),
                why, sizeof why))
    return core_error_set(DT_ERR_DEVICE, "%s: %s", c->api, why);
  return DT_OK;
}

/* x [.., in] @ weight [out, in]^T (+ bias [out]): cuBLAS reads the weight
 * transposed, then the bias is added in place */
dt_status ops_linear_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *x = c->args[0].t, *w = c->args[1].t,
            *bias = c->args[2].t;
  if (x->local.ndim < 1 || w->local.ndim != 2 || !ops_cu_dense(x) ||
      !ops_cu_dense(w) || x->dtype != o->dtype || w->dtype != o->dtype ||
      (bias && bias->dtype != o->dtype))
    return ops_cu_unsupported(c,
                              "a 1-d weight, strided or mixed-dtype operands");
  int64_t k = w->local.sizes[1], n = w->local.sizes[0];
  int64_t m = n ? core_numel(o) / n : 0;
  char why[256];
  if (m && n && !k && /* no inputs: the sums are 0 */
      cuda_fill(ops_cu_stream(o), (int)o->dtype, core_numel(o),
                core_tensor_data(o), 0))
    return ops_cu_launch_failed(c);
  if (m && n && k && cuda_gemm_nt(ops_cu_cr(o), (int)o->dtype, m, n, k,
                                  core_tensor_data(x), core_tensor_data(w),
                                  core_tensor_data(o), why, sizeof why))
    return core_error_set(DT_ERR_DEVICE, "%s: %s", c->api, why);
  if (!bias || !core_numel(o)) return DT_OK;
  cuda_operand oo = ops_cu_operand(o, o), ob = ops_cu_operand(bias, o);
  return cuda_binary(ops_cu_stream(o), CUDA_ADD, (int)o->dtype, o->local.ndim,
                     o->local.sizes, core_tensor_data(o), &oo, &ob)
             ? ops_cu_launch_failed(c) : DT_OK;
}
#endif
