/* nn kernels (nn.h): gathers along a dim, cross-entropy, dropout. Values go
 * through double blocks (cpu_load / cpu_store), so every float dtype shares
 * one loop and float16 / bfloat16 are rounded once. */
#include "kernels/cpu/nn.h"

#include <math.h>
#include <string.h>


int64_t cpu_index_at(const cpu_view *v, int64_t j) {
  int64_t off = 0;
  for (int d = v->ndim - 1; d >= 0; d--) {
    off += (j % v->sizes[d]) * v->strides[d];
    j /= v->sizes[d];
  }
  const char *p = v->data + off * (int64_t)cpu_dtype_size(v->dtype);
  if (v->dtype == DT_INT32) {
    int32_t x;
    memcpy(&x, p, sizeof x);
    return x;
  }
  int64_t x;
  memcpy(&x, p, sizeof x);
  return x;
}

int64_t cpu_view_numel(const cpu_view *v) {
  int64_t n = 1;
  for (int d = 0; d < v->ndim; d++) n *= v->sizes[d];
  return n;
}

/* true when the view's elements are one dense row-major block */
static bool dense(const cpu_view *v) {
  int64_t want = 1;
  for (int d = v->ndim - 1; d >= 0; d--) {
    if (v->sizes[d] == 1) continue;
    if (v->strides[d] != want) return false;
    want *= v->sizes[d];
  }
  return true;
}

dt_status cpu_index_select(const cpu_view *out, const cpu_view *a, int dim,
                           const cpu_view *idx, int64_t *bad_pos,
                           int64_t *bad_val) {
  int64_t n = cpu_view_numel(idx), limit = a->sizes[dim];
  int64_t es = (int64_t)cpu_dtype_size(a->dtype);
  cpu_view src = *a, dst = *out;
  src.sizes[dim] = 1;
  dst.sizes[dim] = 1;
  int64_t slice = cpu_view_numel(&src);
  /* embedding and dim-0 selects of a contiguous table copy whole rows */
  bool rows = dense(&src) && dense(&dst) && src.dtype == dst.dtype;
  for (int64_t j = 0; j < n; j++) {
    int64_t v = cpu_index_at(idx, j);
    if (v < 0 || v >= limit) {
      *bad_pos = j;
      *bad_val = v;
      return DT_ERR_INVALID_ARGUMENT;
    }
    if (slice == 0) continue; /* indices are still checked */
    src.data = a->data + v * a->strides[dim] * es;
    dst.data = out->data + j * out->strides[dim] * es;
    if (rows)
      memcpy(dst.data, src.data, (size_t)(slice * es));
    else
      cpu_unary(CPU_COPY, cpu_compute_type(dst.dtype), &dst, &src);
  }
  return DT_OK;
}

/* log(sum(exp(row))) of a strided row of n values, in double */
static double row_logsumexp(const char *p, dt_dtype d, int64_t stride_b,
                            int64_t n) {
  double buf[CPU_BLOCK], mx = -INFINITY;
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(buf, DT_FLOAT64, p + s * stride_b, d, stride_b, k);
    for (int64_t i = 0; i < k; i++)
      if (buf[i] > mx || isnan(buf[i])) mx = buf[i];
  }
  if (isnan(mx) || isinf(mx)) return mx; /* NaN stays NaN; ±inf rows too */
  double sum = 0;
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(buf, DT_FLOAT64, p + s * stride_b, d, stride_b, k);
    for (int64_t i = 0; i < k; i++) sum += exp(buf[i] - mx);
  }
  return mx + log(sum);
}

int64_t cpu_ce_row(const cpu_view *x, int64_t p) {
  int64_t off = 0;
  for (int d = x->ndim - 1; d >= 0; d--) {
    if (d == 1) continue; /* the class dim */
    off += (p % x->sizes[d]) * x->strides[d];
    p /= x->sizes[d];
  }
  return off;
}

/* sum of a strided row of n values weighted by w (NULL: 1), in double */
static double row_dot(const char *p, dt_dtype d, int64_t stride_b, int64_t n,
                      const char *w, dt_dtype wd, int64_t wstride_b) {
  double buf[CPU_BLOCK], wb[CPU_BLOCK], s = 0;
  for (int64_t k0 = 0; k0 < n; k0 += CPU_BLOCK) {
    int64_t k = n - k0 < CPU_BLOCK ? n - k0 : CPU_BLOCK;
    cpu_load(buf, DT_FLOAT64, p + k0 * stride_b, d, stride_b, k);
    if (w) cpu_load(wb, DT_FLOAT64, w + k0 * wstride_b, wd, wstride_b, k);
    for (int64_t i = 0; i < k; i++) s += w ? wb[i] * buf[i] : buf[i];
  }
  return s;
}

dt_status cpu_cross_entropy(char *out, dt_dtype od, const cpu_ce_args *a,
                            int64_t *bad_pos, int64_t *bad_val) {
  const cpu_view *x = a->logits, *t = a->target;
  int64_t nc = x->sizes[1], m = 1;
  for (int d = 0; d < x->ndim; d++) if (d != 1) m *= x->sizes[d];
  dt_dtype d = x->dtype;
  int64_t es = (int64_t)cpu_dtype_size(d), oes = (int64_t)cpu_dtype_size(od);
  int64_t cs = x->strides[1] * es;
  bool probs = a->probabilities;
  int64_t tes = (int64_t)cpu_dtype_size(t->dtype);
  double eps = a->label_smoothing, total = 0;
  int64_t count = 0;
  for (int64_t p = 0; p < m; p++) {
    const char *row = x->data + cpu_ce_row(x, p) * es;
    double loss = 0;
    if (probs) { /* q = (1 - eps) P + eps / C: sum_c q_c (lse - x_c) */
      const char *trow = t->data + cpu_ce_row(t, p) * tes;
      int64_t tcs = t->strides[1] * tes;
      double lse = row_logsumexp(row, d, cs, nc);
      double sq = row_dot(trow, t->dtype, tcs, nc, NULL, d, 0);
      double qx = row_dot(row, d, cs, nc, trow, t->dtype, tcs);
      double sx = row_dot(row, d, cs, nc, NULL, d, 0);
      double wsum = (1 - eps) * sq + eps, wx = (1 - eps) * qx + eps * sx / (double)nc;
      loss = lse * wsum - wx;
      total += loss;
      count++;
    } else {
      int64_t c = cpu_index_at(t, p);
      if (c != a->ignore_index) {
        if (c < 0 || c >= nc) {
          *bad_pos = p;
          *bad_val = c;
          return DT_ERR_INVALID_ARGUMENT;
        }
        double xt;
        cpu_load(&xt, DT_FLOAT64, row + c * cs, d, es, 1);
        loss = row_logsumexp(row, d, cs, nc) - (1 - eps) * xt;
        if (eps != 0) loss -= eps * row_dot(row, d, cs, nc, NULL, d, 0) / (double)nc;
        total += loss;
        count++;
      }
    }
    if (a->reduction == DT_REDUCTION_NONE)
      cpu_store(out + p * oes, od, oes, &loss, DT_FLOAT64, 1);
  }
  if (a->reduction != DT_REDUCTION_NONE) {
    /* mean over no targets is 0/0 = NaN, as PyTorch; said without a
     * division by zero */
    double r = a->reduction == DT_REDUCTION_SUM ? total
               : count ? total / (double)count : NAN;
    cpu_store(out, od, oes, &r, DT_FLOAT64, 1);
  }
  return DT_OK;
}

typedef struct drop_ctx {
  double p, q;            /* drop probability, 1 - p */
  uint64_t seed, offset;
  const char *base;       /* out's first element: its offset is the index */
  dt_dtype od, ad;
} drop_ctx;

static void drop_inner(char **ptrs, const int64_t *st, int64_t n, void *vctx) {
  const drop_ctx *c = vctx;
  int64_t oes = (int64_t)cpu_dtype_size(c->od);
  uint64_t first = c->offset + (uint64_t)((ptrs[0] - c->base) / oes);
  double buf[CPU_BLOCK];
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(buf, DT_FLOAT64, ptrs[1] + s * st[1], c->ad, st[1], k);
    for (int64_t i = 0; i < k; i++) {
      double u = cpu_philox_uniform(c->seed, first + (uint64_t)(s + i));
      buf[i] = u >= c->p ? buf[i] / c->q : 0.0;
    }
    cpu_store(ptrs[0] + s * st[0], c->od, st[0], buf, DT_FLOAT64, k);
  }
}

void cpu_dropout(const cpu_view *out, const cpu_view *a, double p,
                 uint64_t seed, uint64_t offset) {
  drop_ctx c = {p, 1.0 - p, seed, offset, out->data, out->dtype, a->dtype};
  cpu_view ops[2] = {*out, *a};
  cpu_iter it;
  cpu_iter_init(&it, ops, 2);
  cpu_iter_run(&it, 0, it.numel, drop_inner, &c);
}
