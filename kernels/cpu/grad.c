/* Kernels of the backward ops (ops/grad_ops.c): gelu's derivative times a
 * gradient, index_add along a dim (index_select's backward) and the
 * gradient of cross-entropy. Pointers, sizes and strides only; a bad index
 * is reported back as a status plus where and what, and the ops layer
 * words the message. Values go through compute-type blocks (cpu_load /
 * cpu_store), so float16 / bfloat16 are rounded once per store. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/nn.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vmath.h"


/* ------------------------------------------------------- gelu_backward */
/* d/dx x·Φ(x) = Φ(x) + x·φ(x); Φ through erfc, as the forward (no
 * cancellation for x << 0); float32 in vectorised blocks (vmath.h) */
static inline double dgelu_d(double x) {
  double cdf = 0.5 * erfc(-x * 0.70710678118654752);
  return cdf + x * 0.39894228040143267794 * exp(-0.5 * x * x);
}

typedef struct gelu_ctx { dt_dtype ct, dt[3]; } gelu_ctx;

static void gelu_bw_inner(char **p, const int64_t *st, int64_t n, void *vctx) {
  const gelu_ctx *c = vctx;
  _Alignas(64) char bg[CPU_BLOCK * 8], bx[CPU_BLOCK * 8];
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(bg, c->ct, p[1] + s * st[1], c->dt[1], st[1], k);
    cpu_load(bx, c->ct, p[2] + s * st[2], c->dt[2], st[2], k);
    if (c->ct == DT_FLOAT32) {
      cpu_vgelu_grad_f32((float *)bg, (const float *)bx, k);
    } else {
      double *g = (double *)bg;
      const double *x = (const double *)bx;
      for (int64_t i = 0; i < k; i++) g[i] *= dgelu_d(x[i]);
    }
    cpu_store(p[0] + s * st[0], c->dt[0], st[0], bg, c->ct, k);
  }
}

void cpu_gelu_backward(dt_dtype ct, const cpu_view *out, const cpu_view *grad,
                       const cpu_view *x) {
  gelu_ctx c = {ct, {out->dtype, grad->dtype, x->dtype}};
  cpu_view ops[3] = {*out, *grad, *x};
  cpu_iter it;
  cpu_iter_init(&it, ops, 3);
  cpu_iter_run_parallel(&it, gelu_bw_inner, &c);
}

/* ----------------------------------------------------------- index_add */

/* one pass over the indices (a few thousand: what index_add reads anyway),
 * not worth chunks */
int64_t cpu_count_not_equal(const cpu_view *idx, int64_t value) {
  int64_t n = cpu_view_numel(idx), count = 0;
  for (int64_t j = 0; j < n; j++) count += cpu_index_at(idx, j) != value;
  return count;
}

/* out += src elementwise (op 0 is read and written), in double */
static void add_inner(char **p, const int64_t *st, int64_t n, void *vctx) {
  const dt_dtype *dt = vctx;
  double bo[CPU_BLOCK], bs[CPU_BLOCK];
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(bo, DT_FLOAT64, p[0] + s * st[0], dt[0], st[0], k);
    cpu_load(bs, DT_FLOAT64, p[1] + s * st[1], dt[1], st[1], k);
    for (int64_t i = 0; i < k; i++) bo[i] += bs[i];
    cpu_store(p[0] + s * st[0], dt[0], st[0], bo, DT_FLOAT64, k);
  }
}

dt_status cpu_index_add(const cpu_view *out, int dim, const cpu_view *idx,
                        const cpu_view *src, int64_t *bad_pos,
                        int64_t *bad_val) {
  int64_t n = cpu_view_numel(idx), limit = out->sizes[dim];
  for (int64_t j = 0; j < n; j++) { /* all checked before any write */
    int64_t v = cpu_index_at(idx, j);
    if (v < 0 || v >= limit) {
      *bad_pos = j;
      *bad_val = v;
      return DT_ERR_INVALID_ARGUMENT;
    }
  }
  cpu_view dst = *out, s = *src;
  dst.sizes[dim] = 1;
  s.sizes[dim] = 1;
  if (cpu_view_numel(&dst) == 0) return DT_OK;
  int64_t oes = (int64_t)cpu_dtype_size(out->dtype);
  int64_t ses = (int64_t)cpu_dtype_size(src->dtype);
  dt_dtype dt[2] = {out->dtype, src->dtype};
  /* in index order: duplicates accumulate, each sum rounded to out's
   * dtype as an in-place index_add_ does */
  for (int64_t j = 0; j < n; j++) {
    dst.data = out->data + cpu_index_at(idx, j) * out->strides[dim] * oes;
    s.data = src->data + j * src->strides[dim] * ses;
    cpu_view ops[2] = {dst, s};
    cpu_iter it;
    cpu_iter_init(&it, ops, 2);
    cpu_iter_run_parallel(&it, add_inner, dt);
  }
  return DT_OK;
}

/* ------------------------------------------------ cross_entropy_backward */
/* element p (row-major) of a float view, in double */
static double value_at(const cpu_view *v, int64_t p) {
  int64_t off = 0;
  for (int d = v->ndim - 1; d >= 0; d--) {
    off += (p % v->sizes[d]) * v->strides[d];
    p /= v->sizes[d];
  }
  double x;
  cpu_load(&x, DT_FLOAT64, v->data + off * (int64_t)cpu_dtype_size(v->dtype),
           v->dtype, 0, 1);
  return x;
}

/* a strided row of n values (byte stride sb) */
typedef struct row { const char *p; dt_dtype d; int64_t sb; } row;

static double row_logsumexp(row r, int64_t n) {
  double buf[CPU_BLOCK], mx = -INFINITY, sum = 0;
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(buf, DT_FLOAT64, r.p + s * r.sb, r.d, r.sb, k);
    for (int64_t i = 0; i < k; i++)
      if (buf[i] > mx || isnan(buf[i])) mx = buf[i];
  }
  if (isnan(mx) || isinf(mx)) return mx;
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(buf, DT_FLOAT64, r.p + s * r.sb, r.d, r.sb, k);
    for (int64_t i = 0; i < k; i++) sum += exp(buf[i] - mx);
  }
  return mx + log(sum);
}

static double row_sum(row r, int64_t n) {
  double buf[CPU_BLOCK], s = 0;
  for (int64_t k0 = 0; k0 < n; k0 += CPU_BLOCK) {
    int64_t k = n - k0 < CPU_BLOCK ? n - k0 : CPU_BLOCK;
    cpu_load(buf, DT_FLOAT64, r.p + k0 * r.sb, r.d, r.sb, k);
    for (int64_t i = 0; i < k; i++) s += buf[i];
  }
  return s;
}

/* one position: out row = w · (softmax(x) − q) for the target distribution
 * q = (1 − ε)·onehot(cls) + ε/C (cls < 0: the probability row t, where
 * the softmax is scaled by Σ q, which is not assumed to be 1) */
static void ce_grad_row(row o, row x, const row *t, int64_t cls, int64_t nc,
                        double eps, double w) {
  double lse = row_logsumexp(x, nc), sq = 1, bx[CPU_BLOCK], bt[CPU_BLOCK];
  if (t) sq = (1 - eps) * row_sum(*t, nc) + eps;
  double uni = eps / (double)nc;
  for (int64_t s = 0; s < nc; s += CPU_BLOCK) {
    int64_t k = nc - s < CPU_BLOCK ? nc - s : CPU_BLOCK;
    cpu_load(bx, DT_FLOAT64, x.p + s * x.sb, x.d, x.sb, k);
    if (t) cpu_load(bt, DT_FLOAT64, t->p + s * t->sb, t->d, t->sb, k);
    for (int64_t i = 0; i < k; i++) {
      double q = t ? (1 - eps) * bt[i] + uni
                   : (s + i == cls ? 1 - eps : 0) + uni;
      bx[i] = w * (exp(bx[i] - lse) * sq - q);
    }
    cpu_store((char *)o.p + s * o.sb, o.d, o.sb, bx, DT_FLOAT64, k);
  }
}

/* The same for a unit-stride float32 row and output with a class target,
 * in vectorised float: o = exp(x - max) (vmath.h, within 1 ulp), the sum
 * in the eight double lanes of reduce.h, then o = o * (w sq / sum) - w
 * eps / C, and the target's element in double. Within a few ulp of the
 * double path (test_grad_ops); a row with an infinite or NaN max takes
 * the double path. False when it does not apply. */
CPU_CLONES static void scale_shift_f32(float *restrict o, int64_t n, float k,
                                       float c) {
  for (int64_t i = 0; i < n; i++) o[i] = o[i] * k - c;
}

static bool ce_grad_row_f32(row o, row x, int64_t cls, int64_t nc, double eps,
                            double w) {
  if (x.d != DT_FLOAT32 || x.sb != 4 || o.d != DT_FLOAT32 || o.sb != 4)
    return false;
  const float *xf = (const float *)(const void *)x.p;
  float *of = (float *)(void *)o.p, mx = cpu_vmax_f32(xf, nc);
  if (!isfinite(mx)) return false;
  double lanes[CPU_ROW_LANES] = {0};
  cpu_vexp_max_f32(of, xf, mx, nc);
  cpu_lanes_sum_f32(of, nc, lanes);
  double k = w / cpu_lanes_total(lanes), uni = eps / (double)nc;
  double e_cls = of[cls];
  scale_shift_f32(of, nc, (float)k, (float)(w * uni));
  of[cls] = (float)(e_cls * k - w * (1 - eps + uni));
  return true;
}

typedef struct ce_grad_job { const cpu_view *out; const cpu_ce_grad_args *a; } ce_grad_job;

/* positions [begin, end): each writes its own row of out (indices were
 * checked before), so any split gives the same bits */
static void ce_grad_range(int64_t begin, int64_t end, void *arg) {
  const ce_grad_job *j = arg;
  const cpu_ce_grad_args *a = j->a;
  const cpu_view *x = a->logits, *t = a->target, *out = j->out;
  int64_t nc = x->sizes[1];
  int64_t es = (int64_t)cpu_dtype_size(x->dtype);
  int64_t oes = (int64_t)cpu_dtype_size(out->dtype);
  int64_t tes = (int64_t)cpu_dtype_size(t->dtype);
  for (int64_t p = begin; p < end; p++) {
    row rx = {x->data + cpu_ce_row(x, p) * es, x->dtype, x->strides[1] * es};
    row ro = {out->data + cpu_ce_row(out, p) * oes, out->dtype,
              out->strides[1] * oes};
    double w = a->grad ? value_at(a->grad, p) : a->scale;
    if (a->probabilities) {
      row rt = {t->data + cpu_ce_row(t, p) * tes, t->dtype, t->strides[1] * tes};
      ce_grad_row(ro, rx, &rt, -1, nc, a->label_smoothing, w);
      continue;
    }
    int64_t cls = cpu_index_at(t, p);
    if (cls == a->ignore_index) { /* contributes nothing: a zero row */
      double zero[CPU_BLOCK] = {0};
      for (int64_t s = 0; s < nc; s += CPU_BLOCK) {
        int64_t k = nc - s < CPU_BLOCK ? nc - s : CPU_BLOCK;
        cpu_store((char *)ro.p + s * ro.sb, ro.d, ro.sb, zero, DT_FLOAT64, k);
      }
      continue;
    }
    if (!ce_grad_row_f32(ro, rx, cls, nc, a->label_smoothing, w))
      ce_grad_row(ro, rx, NULL, cls, nc, a->label_smoothing, w);
  }
}

/* class indices checked first (nothing written when one is bad), then the
 * positions in chunks of about CPU_GRAIN logits that idle ranks steal */
dt_status cpu_cross_entropy_backward(const cpu_view *out,
                                     const cpu_ce_grad_args *a,
                                     int64_t *bad_pos, int64_t *bad_val) {
  const cpu_view *x = a->logits;
  int64_t nc = x->sizes[1], m = 1;
  for (int d = 0; d < x->ndim; d++) if (d != 1) m *= x->sizes[d];
  for (int64_t p = 0; !a->probabilities && p < m; p++) {
    int64_t cls = cpu_index_at(a->target, p);
    if (cls != a->ignore_index && (cls < 0 || cls >= nc)) {
      *bad_pos = p;
      *bad_val = cls;
      return DT_ERR_INVALID_ARGUMENT;
    }
  }
  ce_grad_job j = {out, a};
  int64_t grain = CPU_GRAIN / (nc > 0 ? nc : 1);
  cpu_parallel_for(m, grain < 1 ? 1 : grain, ce_grad_range, &j);
  return DT_OK;
}
