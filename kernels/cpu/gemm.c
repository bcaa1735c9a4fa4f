/* GEMM kernels (gemm.h): BLAS for float32/float64 with transpose flags
 * instead of copies, widen-to-float32 for float16/bfloat16, a 64-bit
 * wrapping loop for integers, and the batch loop with the fold that turns
 * x[B, T, in]·Wᵀ into one call.
 *
 * Zero-size cases are handled here, never passed to BLAS: M == 0 or N == 0
 * writes nothing; K == 0 writes zeros (or the bias), as PyTorch does. */
#include "kernels/cpu/gemm.h"

#include "core/host_alloc.h"

#include <cblas.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int64_t max1(int64_t x) { return x > 1 ? x : 1; }

/* How BLAS can read m in place: NoTrans with ld = the row stride, or Trans
 * (m stored as its transpose, column-major) with ld = the column stride.
 * The stride of a size-1 dim is free, so it never blocks either form. */
static bool blas_layout(const cpu_matrix *m, CBLAS_TRANSPOSE *t, int *ld) {
  int64_t r = m->rows, c = m->cols;
  int64_t cs = c == 1 ? 1 : m->cs, rs = r == 1 ? 1 : m->rs;
  if (cs == 1) {
    int64_t l = r == 1 ? max1(c) : m->rs;
    if (l >= max1(c) && l <= INT_MAX) {
      *t = CblasNoTrans;
      *ld = (int)l;
      return true;
    }
  }
  if (rs == 1) {
    int64_t l = c == 1 ? max1(r) : m->cs;
    if (l >= max1(r) && l <= INT_MAX) {
      *t = CblasTrans;
      *ld = (int)l;
      return true;
    }
  }
  return false;
}

/* m (dtype sd) as a fresh row-major buffer of compute type ct; the load
 * converts (float16 → float32) and gathers strided rows in one pass.
 * Only called with rows, cols > 0. */
static void *pack(const cpu_matrix *m, dt_dtype sd, dt_dtype ct) {
  size_t es = cpu_dtype_size(ct), ss = cpu_dtype_size(sd);
  char *p = core_host_malloc((size_t)(m->rows * m->cols) * es);
  if (!p) return NULL;
  for (int64_t i = 0; i < m->rows; i++)
    cpu_load(p + (size_t)(i * m->cols) * es, ct, m->data + i * m->rs * (int64_t)ss,
             sd, m->cs * (int64_t)ss, m->cols);
  return p;
}

/* Initial value of the M×N accumulator rows (row stride ld elements, of
 * compute type ct): the bias on every row, or zeros. */
static void init_rows(void *acc, dt_dtype ct, int64_t m, int64_t n, int64_t ld,
                      dt_dtype d, const char *bias, int64_t bias_stride) {
  size_t es = cpu_dtype_size(ct);
  int64_t bs = bias_stride * (int64_t)cpu_dtype_size(d);
  for (int64_t i = 0; i < m; i++) {
    char *row = (char *)acc + (size_t)(i * ld) * es;
    if (bias)
      cpu_load(row, ct, bias, d, bs, n);
    else
      memset(row, 0, (size_t)n * es);
  }
}

/* One BLAS call split into a grid of blocks of C, each block's K in
 * panels: a unit is one panel of one block, a single-threaded cblas call
 * (the first panel with the call's beta, the later ones adding to C), and
 * a chunk is one block's panels in order. Idle ranks steal blocks; a rank
 * that stole one leaves it between panels when its own records arrive
 * (cpu_parallel_steps), so a thief's stream waits at most one panel. The
 * plan (cpu_gemm_plan) depends only on m, n, k and the CPU count, so the
 * bits do not depend on the rank count or on who ran which panel.
 * The alternative, OpenBLAS's own threads on the free cores for one call,
 * was slower on the 2-core VM (README, CPU kernels: 20-28 ms against
 * 17-20 ms for 1024^3): its pool competes with the rank threads for the
 * cores instead of using whichever are idle. */
typedef struct gemm_job {
  dt_dtype d;
  CBLAS_TRANSPOSE ta, tb;
  int64_t m, n, k;
  const void *a;
  int lda;
  const void *b;
  int ldb;
  bool accumulate;         /* beta = 1 (C holds the bias) */
  char *c;
  int64_t ldc;
  cpu_gemm_grid g;
} gemm_job;

/* panel p of block `blk`: C_blk (+)= A[blk rows, p's k] · B[p's k, blk cols] */
static void gemm_unit(const gemm_job *j, int64_t blk, int64_t p) {
  size_t es = cpu_dtype_size(j->d);
  int64_t ncb = (j->n + j->g.nb - 1) / j->g.nb; /* column blocks */
  int64_t i0 = blk / ncb * j->g.mb, j0 = blk % ncb * j->g.nb, k0 = p * j->g.kc;
  int64_t mm = j->m - i0 < j->g.mb ? j->m - i0 : j->g.mb;
  int64_t nn = j->n - j0 < j->g.nb ? j->n - j0 : j->g.nb;
  int64_t kk = j->k - k0 < j->g.kc ? j->k - k0 : j->g.kc;
  /* A row-major [m, k] (or its transpose stored [k, m]), B [k, n] (or
   * [n, k]): the panel's first element of A and of B */
  const char *a = (const char *)j->a +
                  (size_t)(j->ta == CblasNoTrans ? i0 * j->lda + k0 : k0 * j->lda + i0) * es;
  const char *b = (const char *)j->b +
                  (size_t)(j->tb == CblasNoTrans ? k0 * j->ldb + j0 : j0 * j->ldb + k0) * es;
  char *c = j->c + (size_t)(i0 * j->ldc + j0) * es;
  bool add = p > 0 || j->accumulate;
  if (j->d == DT_FLOAT32)
    cblas_sgemm(CblasRowMajor, j->ta, j->tb, (int)mm, (int)nn, (int)kk,
                1.0f, (const float *)a, j->lda, (const float *)b, j->ldb,
                add ? 1.0f : 0.0f, (float *)c, (int)j->ldc);
  else
    cblas_dgemm(CblasRowMajor, j->ta, j->tb, (int)mm, (int)nn, (int)kk,
                1.0, (const double *)a, j->lda, (const double *)b, j->ldb,
                add ? 1.0 : 0.0, (double *)c, (int)j->ldc);
}

/* units [begin, end) in order: unit u is panel u % panels of block
 * u / panels; any split of the range makes the same calls in the same
 * order per block (what cpu_parallel_steps needs) */
static void gemm_range(int64_t begin, int64_t end, void *arg) {
  const gemm_job *j = arg;
  for (int64_t u = begin; u < end; u++) gemm_unit(j, u / j->g.panels, u % j->g.panels);
}

/* The CPUs this process may run on: the main thread's set (rank threads
 * are pinned to one CPU each), read once (a relaxed atomic: threads that
 * race to read it store the same count) */
static int64_t gemm_cpus(void) {
  static _Atomic int64_t cpus;
  int64_t n = atomic_load_explicit(&cpus, memory_order_relaxed);
  if (n > 0) return n;
  cpu_set_t allowed;
  n = sched_getaffinity(getpid(), sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
  if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  atomic_store_explicit(&cpus, n, memory_order_relaxed);
  return n;
}

/* Blocks of at least ~2 MFLOP (smaller ones cost more in packing and
 * dispatch than they gain), at most one per CPU (and 16), in a grid of row
 * blocks (a multiple of 8 rows) by column blocks (a multiple of 16) as
 * square as the shape allows: each call packs its own panels of A and B,
 * so a 4 x 4 grid packs each operand 4 times where 16 row blocks pack B 16
 * times, and blocks beyond the CPUs only add packing. On the 2-CPU Zen 4
 * VM, 1024^3: 16 blocks 10.5-11.3 ms, 4 blocks 10.1-10.3, 2 blocks (one per
 * CPU) 9.9-10.4, alternating runs. More blocks only where one would exceed
 * 8 Mi elements of C (or step / 128: its panels could not stay under the
 * step bound, or only as panels so shallow that rewriting C per panel
 * would cost more than the work). Then K in panels of at most
 * CPU_GEMM_STEP_FLOP each, of equal depth (a multiple of 8, the last the remainder): splitting K adds
 * a pass over the C block per panel, and 3072^3 on one CPU took 0.43 s
 * whole, 0.45 s in 2.4 GFLOP panels (256 deep), 0.48 s in 1.2 GFLOP ones,
 * where splitting M and N instead to the same step size took 0.50-0.51 s
 * (each block repacks its panels of A and B). The grid depends on m, n, k
 * and the CPU count, never on the rank count: the same bits on 1, 2 or 8
 * ranks. */
static _Atomic int64_t step_override; /* cpu_gemm_set_step (tests) */

void cpu_gemm_set_step(int64_t flop) {
  /* relaxed: a test sets it before it issues the ops that read it (the
   * publication orders it) */
  atomic_store_explicit(&step_override, flop > 0 ? flop : 0, memory_order_relaxed);
}

void cpu_gemm_plan(int64_t m, int64_t n, int64_t k, cpu_gemm_grid *g) {
  int64_t over = atomic_load_explicit(&step_override, memory_order_relaxed);
  double step_flop = over > 0 ? (double)over : CPU_GEMM_STEP_FLOP;
  /* elements of C per block: 8 Mi, fewer where panels 64 deep would pass
   * the step */
  double area_max = step_flop / (2.0 * 64) < 8.0 * 1024 * 1024 ? step_flop / (2.0 * 64)
                                                               : 8.0 * 1024 * 1024;
  double flop = 2.0 * (double)m * (double)n * (double)k;
  int64_t parts = (int64_t)(flop / 2e6);
  int64_t cap = gemm_cpus() < 16 ? gemm_cpus() : 16;
  if (parts > cap) parts = cap;
  int64_t pm = 1, pn = 1;
  for (;;) { /* grow the side with more room */
    double area = (double)((m + pm - 1) / pm) * (double)((n + pn - 1) / pn);
    if (pm * pn >= parts && area <= area_max) break;
    bool rows_ok = m / (8 * (pm + 1)) >= 1, cols_ok = n / (16 * (pn + 1)) >= 1;
    if (rows_ok && (pm <= pn || !cols_ok)) pm++;
    else if (cols_ok) pn++;
    else break;
  }
  g->mb = ((m + pm - 1) / pm + 7) / 8 * 8;
  g->nb = ((n + pn - 1) / pn + 15) / 16 * 16;
  if (g->mb < 1) g->mb = 1;
  if (g->nb < 1) g->nb = 1;
  g->blocks = ((m + g->mb - 1) / g->mb) * ((n + g->nb - 1) / g->nb);
  /* panel depth: as deep as the step bound allows, at least 8 */
  double per_k = 2.0 * (double)g->mb * (double)g->nb;
  int64_t kmax = (int64_t)(step_flop / per_k) / 8 * 8;
  if (kmax < 8) kmax = 8;
  int64_t panels = k > kmax ? (k + kmax - 1) / kmax : 1;
  g->kc = panels > 1 ? ((k + panels - 1) / panels + 7) / 8 * 8 : (k > 0 ? k : 1);
  g->panels = (k + g->kc - 1) / g->kc;
  if (g->panels < 1) g->panels = 1;
}

static void gemm_split(gemm_job *j) {
  cpu_gemm_plan(j->m, j->n, j->k, &j->g);
  cpu_parallel_steps(j->g.blocks * j->g.panels, j->g.panels, gemm_range, j);
}

/* float32 / float64 straight through BLAS. */
static dt_status gemm_blas(dt_dtype d, const cpu_matrix *a,
                           const cpu_matrix *b, const cpu_matrix *c,
                           const char *bias, int64_t bias_stride) {
  int64_t m = a->rows, k = a->cols, n = b->cols;
  int64_t ldc = m == 1 ? max1(n) : c->rs;
  if (ldc > INT_MAX) return DT_ERR_UNSUPPORTED;
  if (bias || k == 0) init_rows(c->data, d, m, n, ldc, d, bias, bias_stride);
  if (k == 0) return DT_OK;
  CBLAS_TRANSPOSE ta, tb;
  int lda, ldb;
  void *pa = NULL, *pb = NULL;
  const void *pta = a->data, *ptb = b->data;
  if (!blas_layout(a, &ta, &lda)) {
    pta = pa = pack(a, d, d);
    ta = CblasNoTrans;
    lda = (int)max1(k);
  }
  if (!blas_layout(b, &tb, &ldb)) {
    ptb = pb = pack(b, d, d);
    tb = CblasNoTrans;
    ldb = (int)max1(n);
  }
  if (!pta || !ptb) {
    free(pa);
    free(pb);
    return DT_ERR_OUT_OF_MEMORY;
  }
  gemm_job j = {d, ta, tb, m, n, k, pta, lda, ptb, ldb, bias != NULL,
                c->data, ldc, {0}};
  gemm_split(&j);
  free(pa);
  free(pb);
  return DT_OK;
}

/* float16 / bfloat16: widen to float32, sgemm into the M×N accumulator,
 * round once when storing. */
static void gemm_half(dt_dtype d, int64_t m, int64_t k, int64_t n,
                      const float *pa, const float *pb, float *acc,
                      const cpu_matrix *c, const char *bias,
                      int64_t bias_stride) {
  init_rows(acc, DT_FLOAT32, m, n, n, d, bias, bias_stride);
  if (k > 0) {
    gemm_job j = {DT_FLOAT32, CblasNoTrans, CblasNoTrans, m, n, k, pa, (int)k,
                  pb, (int)n, true, (char *)acc, n, {0}};
    gemm_split(&j);
  }
  int64_t es = (int64_t)cpu_dtype_size(d);
  for (int64_t i = 0; i < m; i++)
    cpu_store(c->data + i * c->rs * es, d, c->cs * es, acc + i * n,
              DT_FLOAT32, n);
}

/* Integers: i-p-j loop over packed int64 operands into a one-row
 * accumulator. Unsigned arithmetic makes overflow wrap (defined) instead of
 * being undefined; the store truncates to the output's width, as PyTorch's
 * int matmul does. Not split into chunks: its one-row accumulator is
 * shared by the rows, integer matmuls are rare and small (index arithmetic,
 * tests), and the i-p-j inner loop already vectorises. */
static void gemm_int(dt_dtype d, int64_t m, int64_t k, int64_t n,
                     const uint64_t *pa, const uint64_t *pb, uint64_t *acc,
                     const cpu_matrix *c, const char *bias,
                     int64_t bias_stride) {
  int64_t es = (int64_t)cpu_dtype_size(d);
  for (int64_t i = 0; i < m; i++) {
    init_rows(acc, DT_INT64, 1, n, n, d, bias, bias_stride);
    for (int64_t p = 0; p < k; p++) {
      uint64_t x = pa[i * k + p];
      const uint64_t *row = pb + p * n;
      for (int64_t j = 0; j < n; j++) acc[j] += x * row[j];
    }
    cpu_store(c->data + i * c->rs * es, d, c->cs * es, acc, DT_INT64, n);
  }
}

/* The widening kernels (float16 / bfloat16, the integers): a and b packed as
 * the compute type (float32 / int64; not when K == 0), an accumulator, and
 * gemm_half or gemm_int. */
static dt_status gemm_widened(dt_dtype d, const cpu_matrix *a,
                              const cpu_matrix *b, const cpu_matrix *c,
                              const char *bias, int64_t bias_stride) {
  int64_t m = a->rows, k = a->cols, n = b->cols;
  bool half = d == DT_FLOAT16 || d == DT_BFLOAT16;
  dt_dtype ct = half ? DT_FLOAT32 : DT_INT64;
  void *pa = NULL, *pb = NULL;
  void *acc = core_host_malloc(half ? (size_t)(m * n) * sizeof(float)
                          : (size_t)n * sizeof(uint64_t));
  if (k > 0) {
    pa = pack(a, d, ct);
    pb = pack(b, d, ct);
  }
  dt_status st = DT_ERR_OUT_OF_MEMORY;
  if (acc && (k == 0 || (pa && pb))) {
    if (half)
      gemm_half(d, m, k, n, pa, pb, acc, c, bias, bias_stride);
    else
      gemm_int(d, m, k, n, pa, pb, acc, c, bias, bias_stride);
    st = DT_OK;
  }
  free(acc);
  free(pa);
  free(pb);
  return st;
}

dt_status cpu_gemm(dt_dtype d, const cpu_matrix *a, const cpu_matrix *b,
                   const cpu_matrix *c, const char *bias, int64_t bias_stride) {
  int64_t m = a->rows, k = a->cols, n = b->cols;
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) return DT_ERR_UNSUPPORTED;
  if (d == DT_BOOL && k == 0) { /* an empty sum: all false, no GEMM needed */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) c->data[i * c->rs + j * c->cs] = 0;
    return DT_OK;
  }
  switch (d) {
  case DT_FLOAT32: case DT_FLOAT64: case DT_FLOAT16: case DT_BFLOAT16:
  case DT_INT32: case DT_INT64: case DT_UINT8: break;
  default: return DT_ERR_DTYPE;
  }
  if (m == 0 || n == 0) return DT_OK;
  if (d == DT_FLOAT32 || d == DT_FLOAT64)
    return gemm_blas(d, a, b, c, bias, bias_stride);
  return gemm_widened(d, a, b, c, bias, bias_stride);
}

/* Dims [0, n) of v fold into one dim: true and its stride in *stride (size-1
 * dims are skipped; their stride is free). */
static bool fold_dims(const cpu_view *v, int n, int64_t *stride) {
  int64_t st = 0, span = -1;
  for (int d = n - 1; d >= 0; d--) {
    if (v->sizes[d] == 1) continue;
    if (span < 0) {
      st = v->strides[d];
    } else if (v->strides[d] != span) {
      return false;
    }
    span = v->strides[d] * v->sizes[d];
  }
  *stride = st;
  return true;
}

static cpu_matrix matrix_at(const cpu_view *v, int64_t off, int64_t rows,
                            int64_t rs) {
  int nd = v->ndim;
  /* an empty operand (K == 0) may have no storage at all */
  char *p = v->data ? v->data + off * (int64_t)cpu_dtype_size(v->dtype) : NULL;
  cpu_matrix m = {p, rows, v->sizes[nd - 1], rs, v->strides[nd - 1]};
  return m;
}

dt_status cpu_bmm(const cpu_view *out, const cpu_view *a, const cpu_view *b,
                  const char *bias, int64_t bias_stride) {
  int nd = out->ndim, nb = nd - 2;
  int64_t total = 1, numel = 1;
  for (int i = 0; i < nd; i++) numel *= out->sizes[i];
  for (int i = 0; i < nb; i++) total *= out->sizes[i];
  if (numel == 0) return DT_OK;
  dt_dtype d = out->dtype;
  bool b_fixed = true;
  for (int i = 0; i < nb; i++) b_fixed &= b->sizes[i] == 1 || b->strides[i] == 0;
  int64_t rsa, rso;
  if (b_fixed && fold_dims(a, nd - 1, &rsa) && fold_dims(out, nd - 1, &rso)) {
    int64_t rows = total * out->sizes[nd - 2];
    cpu_matrix ma = matrix_at(a, 0, rows, rsa);
    cpu_matrix mb = matrix_at(b, 0, b->sizes[nd - 2], b->strides[nd - 2]);
    cpu_matrix mc = matrix_at(out, 0, rows, rso);
    return cpu_gemm(d, &ma, &mb, &mc, bias, bias_stride);
  }
  int64_t idx[DT_MAX_DIMS] = {0};
  for (int64_t t = 0; t < total; t++) {
    int64_t oa = 0, ob = 0, oc = 0;
    for (int i = 0; i < nb; i++) {
      oa += idx[i] * a->strides[i];
      ob += idx[i] * b->strides[i];
      oc += idx[i] * out->strides[i];
    }
    cpu_matrix ma = matrix_at(a, oa, a->sizes[nd - 2], a->strides[nd - 2]);
    cpu_matrix mb = matrix_at(b, ob, b->sizes[nd - 2], b->strides[nd - 2]);
    cpu_matrix mc = matrix_at(out, oc, out->sizes[nd - 2], out->strides[nd - 2]);
    dt_status st = cpu_gemm(d, &ma, &mb, &mc, bias, bias_stride);
    if (st != DT_OK) return st;
    for (int i = nb - 1; i >= 0; i--) {
      if (++idx[i] < out->sizes[i]) break;
      idx[i] = 0;
    }
  }
  return DT_OK;
}

void cpu_blas_set_threads(int n) { openblas_set_num_threads(n); }
int cpu_blas_get_threads(void) { return openblas_get_num_threads(); }
