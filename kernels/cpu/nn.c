/* nn kernels (nn.h): gathers along a dim, cross-entropy, dropout. Values go
 * through double blocks (cpu_load / cpu_store), so every float dtype shares
 * one loop and float16 / bfloat16 are rounded once. */
#include "kernels/cpu/nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vmath.h"


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

typedef struct gather_job {
  const cpu_view *out, *a, *idx;
  int dim;
  int64_t es, slice;
  bool rows;
} gather_job;

/* indices [begin, end): one slice each, a row memcpy when both sides are
 * dense (embedding), else a strided copy */
static void gather_range(int64_t begin, int64_t end, void *arg) {
  const gather_job *j = arg;
  cpu_view src = *j->a, dst = *j->out;
  src.sizes[j->dim] = 1;
  dst.sizes[j->dim] = 1;
  for (int64_t k = begin; k < end; k++) {
    int64_t v = cpu_index_at(j->idx, k);
    src.data = j->a->data + v * j->a->strides[j->dim] * j->es;
    dst.data = j->out->data + k * j->out->strides[j->dim] * j->es;
    if (j->rows)
      memcpy(dst.data, src.data, (size_t)(j->slice * j->es));
    else
      cpu_unary(CPU_COPY, cpu_compute_type(dst.dtype), &dst, &src);
  }
}

dt_status cpu_index_select(const cpu_view *out, const cpu_view *a, int dim,
                           const cpu_view *idx, int64_t *bad_pos,
                           int64_t *bad_val) {
  int64_t n = cpu_view_numel(idx), limit = a->sizes[dim];
  /* every index checked first (nothing written when one is bad), then the
   * copies in chunks of about CPU_GRAIN elements that idle ranks steal */
  for (int64_t j = 0; j < n; j++) {
    int64_t v = cpu_index_at(idx, j);
    if (v < 0 || v >= limit) {
      *bad_pos = j;
      *bad_val = v;
      return DT_ERR_INVALID_ARGUMENT;
    }
  }
  gather_job g = {out, a, idx, dim, (int64_t)cpu_dtype_size(a->dtype), 0, false};
  cpu_view src = *a, dst = *out;
  src.sizes[dim] = 1;
  dst.sizes[dim] = 1;
  g.slice = cpu_view_numel(&src);
  if (g.slice == 0) return DT_OK;
  /* embedding and dim-0 selects of a contiguous table copy whole rows */
  g.rows = dense(&src) && dense(&dst) && src.dtype == dst.dtype;
  int64_t grain = CPU_GRAIN / g.slice;
  cpu_parallel_for(n, grain < 1 ? 1 : grain, gather_range, &g);
  return DT_OK;
}

/* log(sum(exp(row))) of `rows` (<= 4) unit-stride float32 rows `gap`
 * floats apart, whose maxima mx are finite: exp in float32 and the sum in
 * eight double lanes per row, in lse.c's fixed order (cpu_lse_sum_f32:
 * one row alone or four side by side give the same bits). A libm exp per
 * element in double made cross_entropy [4096, 1000] take 46 ms. */
static void lse_rows_f32(const float *x, int64_t gap, int rows, int64_t n,
                         const float *mx, double *lse) {
  double lanes[4 * CPU_ROW_LANES] = {0};
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_lse_sum_f32(x + s, gap, rows, k, mx, lanes); /* and prefetches */
  }
  for (int q = 0; q < rows; q++)
    lse[q] = (double)mx[q] + log(cpu_lanes_total(lanes + q * CPU_ROW_LANES));
}

/* one row; a max that is not finite (±inf, or a NaN that compares above
 * +inf) gives what the double path gives: NaN if the row has one, else
 * the max */
static double row_logsumexp_f32(const float *x, int64_t n) {
  float mx = cpu_vmax_f32(x, n);
  if (!isfinite(mx)) {
    for (int64_t j = 0; j < n; j++)
      if (x[j] != x[j]) return NAN;
    return mx;
  }
  double lse; /* gap n: the prefetch runs ahead over the rows after it */
  lse_rows_f32(x, n, 1, n, &mx, &lse);
  return lse;
}

/* four rows `gap` floats apart, side by side (one row's eight lanes are
 * one chain of dependent adds, which alone held cross_entropy back) */
static void row_logsumexp4_f32(const float *x, int64_t gap, int64_t n,
                               double lse[4]) {
  float mx[4];
  for (int q = 0; q < 4; q++) {
    mx[q] = cpu_vmax_f32(x + q * gap, n);
    if (!isfinite(mx[q])) { /* the one-row path's special rows */
      for (int r = 0; r < 4; r++) lse[r] = row_logsumexp_f32(x + r * gap, n);
      return;
    }
  }
  lse_rows_f32(x, gap, 4, n, mx, lse);
}

/* log(sum(exp(row))) of a strided row of n values, in double */
static double row_logsumexp(const char *p, dt_dtype d, int64_t stride_b,
                            int64_t n) {
  if (d == DT_FLOAT32 && stride_b == 4)
    return row_logsumexp_f32((const float *)p, n);
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

/* One call's positions in blocks of `grain`; each block's partial (sum of
 * losses, count, first bad index) goes to its own slot, and the slots are
 * added in block order afterwards: the result does not depend on which
 * rank ran which block, nor on how many ranks there are. */
typedef struct ce_part { double total; int64_t count, bad_pos, bad_val; } ce_part;
typedef struct ce_job {
  const cpu_ce_args *a;
  char *out;
  dt_dtype od;
  int64_t grain;
  ce_part *parts;
} ce_job;

/* the loss at position p; false for a class index out of range */
static bool ce_loss(const cpu_ce_args *a, int64_t p, const double *lse4,
                    double *loss, bool *counted, int64_t *bad) {
  const cpu_view *x = a->logits, *t = a->target;
  int64_t nc = x->sizes[1];
  dt_dtype d = x->dtype;
  int64_t es = (int64_t)cpu_dtype_size(d), cs = x->strides[1] * es;
  int64_t tes = (int64_t)cpu_dtype_size(t->dtype);
  double eps = a->label_smoothing;
  const char *row = x->data + cpu_ce_row(x, p) * es;
  *loss = 0;
  *counted = false;
  if (a->probabilities) { /* q = (1 - eps) P + eps / C: sum_c q_c (lse - x_c) */
    const char *trow = t->data + cpu_ce_row(t, p) * tes;
    int64_t tcs = t->strides[1] * tes;
    double lse = row_logsumexp(row, d, cs, nc);
    double sq = row_dot(trow, t->dtype, tcs, nc, NULL, d, 0);
    double qx = row_dot(row, d, cs, nc, trow, t->dtype, tcs);
    double sx = row_dot(row, d, cs, nc, NULL, d, 0);
    double wsum = (1 - eps) * sq + eps, wx = (1 - eps) * qx + eps * sx / (double)nc;
    *loss = lse * wsum - wx;
    *counted = true;
    return true;
  }
  int64_t c = cpu_index_at(t, p);
  if (c == a->ignore_index) return true;
  if (c < 0 || c >= nc) {
    *bad = c;
    return false;
  }
  double xt;
  cpu_load(&xt, DT_FLOAT64, row + c * cs, d, es, 1);
  *loss = (lse4 ? *lse4 : row_logsumexp(row, d, cs, nc)) - (1 - eps) * xt;
  if (eps != 0) *loss -= eps * row_dot(row, d, cs, nc, NULL, d, 0) / (double)nc;
  *counted = true;
  return true;
}

static void ce_range(int64_t begin, int64_t end, void *arg) {
  const ce_job *j = arg;
  int64_t oes = (int64_t)cpu_dtype_size(j->od);
  const cpu_view *x = j->a->logits;
  /* float32 class rows read in place: their log-sum-exps four at a time */
  bool fast = !j->a->probabilities && x->ndim == 2 &&
              x->dtype == DT_FLOAT32 && x->strides[1] == 1;
  /* whole blocks: the range starts on a block boundary (both the
   * scheduler's chunks and the inline whole range do) */
  for (int64_t b0 = begin; b0 < end; b0 += j->grain) {
    int64_t b1 = b0 + j->grain < end ? b0 + j->grain : end;
    ce_part *pt = &j->parts[b0 / j->grain];
    *pt = (ce_part){0, 0, -1, 0};
    double lse[4];
    int64_t have = -1; /* lse holds rows have .. have + 3 */
    for (int64_t p = b0; p < b1; p++) {
      double loss;
      bool counted;
      if (fast && (p - b0) % 4 == 0 && p + 4 <= b1) {
        row_logsumexp4_f32((const float *)(const void *)x->data + p * x->strides[0],
                           x->strides[0], x->sizes[1], lse);
        have = p;
      }
      const double *pl = have >= 0 && p < have + 4 ? &lse[p - have] : NULL;
      if (!ce_loss(j->a, p, pl, &loss, &counted, &pt->bad_val)) {
        pt->bad_pos = p;
        break;
      }
      pt->total += loss;
      pt->count += counted;
      if (j->a->reduction == DT_REDUCTION_NONE)
        cpu_store(j->out + p * oes, j->od, oes, &loss, DT_FLOAT64, 1);
    }
  }
}

dt_status cpu_cross_entropy(char *out, dt_dtype od, const cpu_ce_args *a,
                            int64_t *bad_pos, int64_t *bad_val) {
  const cpu_view *x = a->logits;
  int64_t nc = x->sizes[1], m = 1;
  for (int d = 0; d < x->ndim; d++) if (d != 1) m *= x->sizes[d];
  int64_t grain = CPU_GRAIN / (nc > 0 ? nc : 1);
  if (grain < 1) grain = 1;
  int64_t nblocks = m ? (m + grain - 1) / grain : 0;
  ce_part one, *parts = nblocks > 1 ? malloc(sizeof *parts * (size_t)nblocks) : &one;
  if (!parts) { /* no memory for the partials: one block, inline */
    grain = m;
    nblocks = 1;
    parts = &one;
  }
  ce_job j = {a, out, od, grain, parts};
  if (nblocks > 1) cpu_parallel_for(m, grain, ce_range, &j);
  else if (m > 0) ce_range(0, m, &j);
  double total = 0;
  int64_t count = 0;
  dt_status st = DT_OK;
  for (int64_t b = 0; b < nblocks; b++) {
    if (parts[b].bad_pos >= 0) {
      *bad_pos = parts[b].bad_pos;
      *bad_val = parts[b].bad_val;
      st = DT_ERR_INVALID_ARGUMENT;
      break;
    }
    total += parts[b].total;
    count += parts[b].count;
  }
  if (parts != &one) free(parts);
  if (st != DT_OK) return st;
  if (a->reduction != DT_REDUCTION_NONE) {
    /* mean over no targets is 0/0 = NaN, as PyTorch; said without a
     * division by zero */
    double r = a->reduction == DT_REDUCTION_SUM ? total
               : count ? total / (double)count : NAN;
    cpu_store(out, od, (int64_t)cpu_dtype_size(od), &r, DT_FLOAT64, 1);
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
  double buf[CPU_BLOCK], u[CPU_BLOCK];
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(buf, DT_FLOAT64, ptrs[1] + s * st[1], c->ad, st[1], k);
    cpu_philox_uniform_block(c->seed, first + (uint64_t)s, k, u);
    for (int64_t i = 0; i < k; i++) buf[i] = u[i] >= c->p ? buf[i] / c->q : 0.0;
    cpu_store(ptrs[0] + s * st[0], c->od, st[0], buf, DT_FLOAT64, k);
  }
}

void cpu_dropout(const cpu_view *out, const cpu_view *a, double p,
                 uint64_t seed, uint64_t offset) {
  drop_ctx c = {p, 1.0 - p, seed, offset, out->data, out->dtype, a->dtype};
  cpu_view ops[2] = {*out, *a};
  cpu_iter it;
  cpu_iter_init(&it, ops, 2);
  /* each element's mask depends only on its index: any split is the same */
  cpu_iter_run_parallel(&it, drop_inner, &c);
}
