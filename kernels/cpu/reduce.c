/* Reduction kernels: sum, mean, max, min, prod, argmax, argmin and var over
 * any set of dims of a strided view, plus the row walker that norm.c shares.
 *
 * Each output element reduces one row (reduce.h explains the split and the
 * lane order that makes float sums independent of strides). Three ways to
 * read a row, all adding element j into lane j % 8 in order of j, so all
 * give the same bits:
 *   - dense float32/float64 rows are read in place;
 *   - column tiles: when rows are far apart but neighbouring outputs are
 *     adjacent in memory (a reduction over leading dims), 64 outputs are
 *     reduced together from contiguous loads;
 *   - otherwise blocks of CPU_ROW_BLOCK elements are gathered into the
 *     compute type (double for floats, int64 for integers and bool).
 * Results are gathered in a block and stored converting to the output
 * dtype. Rows are independent: chunks of outputs run on whichever rank
 * steals them, and long rows are split into segments whose partials are
 * combined in a fixed order (below), so no result depends on the split. */
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK CPU_ROW_BLOCK
#define LANES CPU_ROW_LANES
/* var is not a cpu_reduce_op; the drivers take it as one past the last */
#define OP_VAR CPU_REDUCE_COUNT

/* ------------------------------------------------------------ row walking */
void cpu_rows_init(cpu_rows *r, const cpu_view *v, uint32_t mask) {
  int64_t es = (int64_t)cpu_dtype_size(v->dtype);
  r->dtype = v->dtype;
  r->nouter = r->nrow = 0;
  r->nrows = r->rowlen = 1;
  for (int d = 0; d < v->ndim; d++) {
    int64_t sz = v->sizes[d], st = v->strides[d] * es;
    if (!(mask >> d & 1)) {
      r->nrows *= sz;
      if (sz == 1) continue;
      r->osizes[r->nouter] = sz;
      r->ostrides[r->nouter++] = st;
      continue;
    }
    r->rowlen *= sz;
    if (sz == 1) continue;
    int k = r->nrow - 1;
    if (k >= 0 && r->rstrides[k] == st * sz) {
      /* the previous row dim steps exactly over this one: merge them */
      r->rsizes[k] *= sz;
      r->rstrides[k] = st;
    } else {
      r->rsizes[r->nrow] = sz;
      r->rstrides[r->nrow++] = st;
    }
  }
}

bool cpu_rows_dense(const cpu_rows *r) {
  return r->nrow == 0 ||
         (r->nrow == 1 &&
          r->rstrides[0] == (int64_t)cpu_dtype_size(r->dtype));
}

void cpu_row_walk_start(const cpu_rows *r, const char *data, int64_t i,
                        cpu_row_walk *w) {
  w->base = data;
  for (int k = r->nouter - 1; k >= 0; k--) {
    w->idx[k] = i % r->osizes[k];
    i /= r->osizes[k];
    w->base += w->idx[k] * r->ostrides[k];
  }
}

void cpu_row_walk_next(const cpu_rows *r, cpu_row_walk *w) {
  for (int k = r->nouter - 1; k >= 0; k--) {
    w->base += r->ostrides[k];
    if (++w->idx[k] < r->osizes[k]) return;
    w->base -= r->osizes[k] * r->ostrides[k];
    w->idx[k] = 0;
  }
}

void cpu_rows_load(const cpu_rows *r, const char *base, int64_t j0, int64_t n,
                   void *buf, dt_dtype ct) {
  if (n <= 0) return;
  if (r->nrow == 0) { /* a row of one element */
    cpu_load(buf, ct, base, r->dtype, 0, n);
    return;
  }
  int last = r->nrow - 1;
  int64_t idx[DT_MAX_DIMS], rem = j0;
  const char *p = base;
  for (int k = last; k >= 0; k--) {
    idx[k] = rem % r->rsizes[k];
    rem /= r->rsizes[k];
    p += idx[k] * r->rstrides[k];
  }
  char *dst = buf;
  size_t cs = cpu_dtype_size(ct);
  for (;;) {
    int64_t run = r->rsizes[last] - idx[last];
    if (run > n) run = n;
    cpu_load(dst, ct, p, r->dtype, r->rstrides[last], run);
    dst += (size_t)run * cs;
    n -= run;
    if (n == 0) return;
    p += run * r->rstrides[last];
    idx[last] += run;
    for (int k = last; k > 0 && idx[k] == r->rsizes[k]; k--) {
      p += r->rstrides[k - 1] - r->rsizes[k] * r->rstrides[k];
      idx[k] = 0;
      idx[k - 1]++;
    }
  }
}

/* ------------------------------------------------------------- lane sums */
/* The eight lanes are two vectors of 4 doubles, lanes 0-3 and 4-7 (GCC/
 * clang vector extensions: two AVX2 or AVX-512VL registers in the v3 and
 * v4 clones, four SSE2 ones in baseline code), and 8 elements are loaded
 * as two vectors and converted at once. Written as `for l < 8: acc[l] +=
 * x[i + l]`, GCC 12 built each 8-float vector from eight scalar loads and
 * inserts (0.22 ns per element per core for four rows at once, 0.18 for
 * one row); as one vector of 8 doubles, the v3 (AVX2) clone kept every
 * accumulator on the stack, moved through general registers each step
 * (a 64 MB float sum 3.1-4.1 ms where the AVX-512 clone took 1.3-1.5).
 * The lane arithmetic is the same in every form, so are the bits. */
typedef double lanes_h __attribute__((vector_size(4 * sizeof(double))));
typedef struct lanes_v { lanes_h lo, hi; } lanes_v;

/* through pointers (a 32-byte vector passed by value changes the ABI
 * between the clones: -Wpsabi); inlined, these are a load each */
static inline void lanes_load_float(lanes_v *v, const float *p) {
  /* element by element: GCC 12 makes this one vcvtps2pd from memory per
   * half, where __builtin_convertvector of a 4-float vector became two
   * 2-wide converts, a bounce through the stack and an insert */
  v->lo = (lanes_h){p[0], p[1], p[2], p[3]};
  v->hi = (lanes_h){p[4], p[5], p[6], p[7]};
}
static inline void lanes_load_double(lanes_v *v, const double *p) {
  memcpy(&v->lo, p, sizeof v->lo);
  memcpy(&v->hi, p + 4, sizeof v->hi);
}
#define LANES_GET(v, lanes)                                                 \
  do {                                                                      \
    memcpy(&(v).lo, (lanes), sizeof(v).lo);                                 \
    memcpy(&(v).hi, (lanes) + 4, sizeof(v).hi);                             \
  } while (0)
#define LANES_PUT(lanes, v)                                                 \
  do {                                                                      \
    memcpy((lanes), &(v).lo, sizeof(v).lo);                                 \
    memcpy((lanes) + 4, &(v).hi, sizeof(v).hi);                             \
  } while (0)
/* acc += v; acc += (v - c)^2 (c broadcast; no fused multiply-add) */
#define LANES_ADD(acc, v) ((acc).lo += (v).lo, (acc).hi += (v).hi)
#define LANES_ADD_SQDEV(acc, v, c)                                          \
  ((v).lo -= (c), (v).hi -= (c), (acc).lo += (v).lo * (v).lo,               \
   (acc).hi += (v).hi * (v).hi)

#define LANES_SUM(NAME, T)                                                  \
  CPU_CLONES void NAME(const T *restrict x, int64_t n, double *restrict lanes) { \
    lanes_v acc, v;                                                         \
    LANES_GET(acc, lanes);                                                  \
    int64_t i = 0;                                                          \
    for (; i + LANES <= n; i += LANES) {                                    \
      lanes_load_##T(&v, x + i);                                            \
      LANES_ADD(acc, v);                                                    \
    }                                                                       \
    LANES_PUT(lanes, acc);                                                  \
    for (int l = 0; i < n; i++, l++) lanes[l] += (double)x[i];              \
  }
LANES_SUM(cpu_lanes_sum_f32, float)
LANES_SUM(cpu_lanes_sum_f64, double)

/* Four segments of n elements (a multiple of LANES), `gap` elements apart,
 * each into its own eight lanes (lanes + 8 k): every lane adds the same
 * values in the same order as LANES_SUM on that segment alone, so the bits
 * are the same. Reading four streams at once keeps more cache misses in
 * flight than one (a 64 MB float sum on 2 pinned threads read 13-15 GB/s
 * in one stream per thread and 24-29 GB/s in four, on an older VM), and
 * gives the adders four independent chains (one segment's lanes are one
 * chain of dependent vector adds, 3-4 cycles per 8 elements). */
#define LANES_SUM4(SC, NAME, T)                                             \
  CPU_CLONES SC void NAME(const T *restrict x, int64_t gap, int64_t n,      \
                       double *restrict lanes) {                            \
    lanes_v a, b, c, d, v0, v1, v2, v3;                                     \
    LANES_GET(a, lanes);                                                    \
    LANES_GET(b, lanes + LANES);                                            \
    LANES_GET(c, lanes + 2 * LANES);                                        \
    LANES_GET(d, lanes + 3 * LANES);                                        \
    for (int64_t i = 0; i + LANES <= n; i += LANES) {                       \
      lanes_load_##T(&v0, x + i);                                           \
      lanes_load_##T(&v1, x + gap + i);                                     \
      lanes_load_##T(&v2, x + 2 * gap + i);                                 \
      lanes_load_##T(&v3, x + 3 * gap + i);                                 \
      LANES_ADD(a, v0);                                                     \
      LANES_ADD(b, v1);                                                     \
      LANES_ADD(c, v2);                                                     \
      LANES_ADD(d, v3);                                                     \
    }                                                                       \
    LANES_PUT(lanes, a);                                                    \
    LANES_PUT(lanes + LANES, b);                                            \
    LANES_PUT(lanes + 2 * LANES, c);                                        \
    LANES_PUT(lanes + 3 * LANES, d);                                        \
  }
LANES_SUM4(static, lanes_sum4_f32_any, float)
LANES_SUM4(, cpu_lanes_sum4_f64, double)

/* lanes += (x - c)^2, in the lane order of LANES_SUM */
#define LANES_SQDEV(NAME, T)                                                \
  CPU_CLONES void NAME(const T *restrict x, int64_t n, double c,            \
                       double *restrict lanes) {                            \
    lanes_v acc, d;                                                         \
    LANES_GET(acc, lanes);                                                  \
    int64_t i = 0;                                                          \
    for (; i + LANES <= n; i += LANES) {                                    \
      lanes_load_##T(&d, x + i);                                            \
      LANES_ADD_SQDEV(acc, d, c);                                           \
    }                                                                       \
    LANES_PUT(lanes, acc);                                                  \
    for (int l = 0; i < n; i++, l++) {                                      \
      double dv = (double)x[i] - c;                                         \
      lanes[l] += dv * dv;                                                  \
    }                                                                       \
  }
LANES_SQDEV(cpu_lanes_sqdev_f32, float)
LANES_SQDEV(cpu_lanes_sqdev_f64, double)

/* LANES_SQDEV over four segments (as LANES_SUM4: n a multiple of LANES,
 * `gap` apart, segment k about c[k] into lanes + 8 k, the same bits as one
 * at a time): four independent chains of adds instead of one */
#define LANES_SQDEV4(SC, NAME, T)                                           \
  CPU_CLONES SC void NAME(const T *restrict x, int64_t gap, int64_t n,      \
                       const double *restrict c, double *restrict lanes) {  \
    lanes_v a, b, e, f, d0, d1, d2, d3;                                     \
    double c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];                      \
    LANES_GET(a, lanes);                                                    \
    LANES_GET(b, lanes + LANES);                                            \
    LANES_GET(e, lanes + 2 * LANES);                                        \
    LANES_GET(f, lanes + 3 * LANES);                                        \
    for (int64_t i = 0; i + LANES <= n; i += LANES) {                       \
      lanes_load_##T(&d0, x + i);                                           \
      lanes_load_##T(&d1, x + gap + i);                                     \
      lanes_load_##T(&d2, x + 2 * gap + i);                                 \
      lanes_load_##T(&d3, x + 3 * gap + i);                                 \
      LANES_ADD_SQDEV(a, d0, c0);                                           \
      LANES_ADD_SQDEV(b, d1, c1);                                           \
      LANES_ADD_SQDEV(e, d2, c2);                                           \
      LANES_ADD_SQDEV(f, d3, c3);                                           \
    }                                                                       \
    LANES_PUT(lanes, a);                                                    \
    LANES_PUT(lanes + LANES, b);                                            \
    LANES_PUT(lanes + 2 * LANES, e);                                        \
    LANES_PUT(lanes + 3 * LANES, f);                                        \
  }
LANES_SQDEV4(static, lanes_sqdev4_f32_any, float)
LANES_SQDEV4(, cpu_lanes_sqdev4_f64, double)

/* The float32 four-row sums hand-written for AVX-512: one vcvtps2pd of 8
 * floats to 8 doubles per load. GCC 12 compiles the vector-extension
 * conversion above to two 4-wide converts, an extract and an insert, even
 * in the v4 clone (four-row sum 0.10 -> 0.07 ns per element per core).
 * The same adds (and multiplies: no fused multiply-add) in the same lane
 * order: the same bits. Picked once by an ifunc, as stream.c's stores;
 * the generic clones elsewhere and under ThreadSanitizer. */
#if CPU_HAVE_CLONES && defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f"))) static void
sum4_f32_512(const float *x, int64_t gap, int64_t n, double *lanes) {
  __m512d a = _mm512_loadu_pd(lanes), b = _mm512_loadu_pd(lanes + 8);
  __m512d c = _mm512_loadu_pd(lanes + 16), d = _mm512_loadu_pd(lanes + 24);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
    b = _mm512_add_pd(b, _mm512_cvtps_pd(_mm256_loadu_ps(x + gap + i)));
    c = _mm512_add_pd(c, _mm512_cvtps_pd(_mm256_loadu_ps(x + 2 * gap + i)));
    d = _mm512_add_pd(d, _mm512_cvtps_pd(_mm256_loadu_ps(x + 3 * gap + i)));
  }
  _mm512_storeu_pd(lanes, a);
  _mm512_storeu_pd(lanes + 8, b);
  _mm512_storeu_pd(lanes + 16, c);
  _mm512_storeu_pd(lanes + 24, d);
}

__attribute__((target("avx512f"))) static inline __m512d
sqdev8(__m512d acc, const float *p, __m512d c) {
  __m512d dv = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p)), c);
  return _mm512_add_pd(acc, _mm512_mul_pd(dv, dv));
}

__attribute__((target("avx512f"))) static void
sqdev4_f32_512(const float *x, int64_t gap, int64_t n, const double *c,
               double *lanes) {
  __m512d a = _mm512_loadu_pd(lanes), b = _mm512_loadu_pd(lanes + 8);
  __m512d e = _mm512_loadu_pd(lanes + 16), f = _mm512_loadu_pd(lanes + 24);
  __m512d c0 = _mm512_set1_pd(c[0]), c1 = _mm512_set1_pd(c[1]);
  __m512d c2 = _mm512_set1_pd(c[2]), c3 = _mm512_set1_pd(c[3]);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    a = sqdev8(a, x + i, c0);
    b = sqdev8(b, x + gap + i, c1);
    e = sqdev8(e, x + 2 * gap + i, c2);
    f = sqdev8(f, x + 3 * gap + i, c3);
  }
  _mm512_storeu_pd(lanes, a);
  _mm512_storeu_pd(lanes + 8, b);
  _mm512_storeu_pd(lanes + 16, e);
  _mm512_storeu_pd(lanes + 24, f);
}

typedef void (*sum4_fn)(const float *, int64_t, int64_t, double *);
typedef void (*sqdev4_fn)(const float *, int64_t, int64_t, const double *,
                          double *);
CPU_RESOLVER static sum4_fn resolve_sum4(void) {
  __builtin_cpu_init();
  return CPU_HAS_AVX512F() ? sum4_f32_512 : lanes_sum4_f32_any;
}
CPU_RESOLVER static sqdev4_fn resolve_sqdev4(void) {
  __builtin_cpu_init();
  return CPU_HAS_AVX512F() ? sqdev4_f32_512 : lanes_sqdev4_f32_any;
}
void cpu_lanes_sum4_f32(const float *x, int64_t gap, int64_t n, double *lanes)
    __attribute__((ifunc("resolve_sum4")));
void cpu_lanes_sqdev4_f32(const float *x, int64_t gap, int64_t n,
                          const double *c, double *lanes)
    __attribute__((ifunc("resolve_sqdev4")));
#else
void cpu_lanes_sum4_f32(const float *x, int64_t gap, int64_t n, double *lanes) {
  lanes_sum4_f32_any(x, gap, n, lanes);
}
void cpu_lanes_sqdev4_f32(const float *x, int64_t gap, int64_t n,
                          const double *c, double *lanes) {
  lanes_sqdev4_f32_any(x, gap, n, c, lanes);
}
#endif

double cpu_lanes_total(const double *l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

static void lanes_prod(const double *restrict x, int64_t n,
                       double *restrict lanes) {
  double acc[LANES];
  memcpy(acc, lanes, sizeof acc);
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int l = 0; l < LANES; l++) acc[l] *= x[i + l];
  for (int l = 0; i < n; i++, l++) acc[l] *= x[i];
  memcpy(lanes, acc, sizeof acc);
}

static double lanes_prod_total(const double *l) {
  return ((l[0] * l[4]) * (l[2] * l[6])) * ((l[1] * l[5]) * (l[3] * l[7]));
}

/* ------------------------------------------------------- one row, double */
/* a unit-stride float32/float64 row is read in place: 4 or 8, 0 if not */
static int dense_width(const cpu_rows *r) {
  if (!cpu_rows_dense(r)) return 0;
  return r->dtype == DT_FLOAT32 ? 4 : r->dtype == DT_FLOAT64 ? 8 : 0;
}

static double row_sum(const cpu_rows *r, const char *base) {
  double lanes[LANES] = {0}, buf[BLOCK];
  switch (dense_width(r)) {
  case 4: cpu_lanes_sum_f32((const float *)base, r->rowlen, lanes); break;
  case 8: cpu_lanes_sum_f64((const double *)base, r->rowlen, lanes); break;
  default:
    for (int64_t j = 0; j < r->rowlen; j += BLOCK) {
      int64_t n = r->rowlen - j < BLOCK ? r->rowlen - j : BLOCK;
      cpu_rows_load(r, base, j, n, buf, DT_FLOAT64);
      cpu_lanes_sum_f64(buf, n, lanes);
    }
  }
  return cpu_lanes_total(lanes);
}

static double row_prod(const cpu_rows *r, const char *base) {
  double lanes[LANES] = {1, 1, 1, 1, 1, 1, 1, 1}, buf[BLOCK];
  for (int64_t j = 0; j < r->rowlen; j += BLOCK) {
    int64_t n = r->rowlen - j < BLOCK ? r->rowlen - j : BLOCK;
    cpu_rows_load(r, base, j, n, buf, DT_FLOAT64);
    lanes_prod(buf, n, lanes);
  }
  return lanes_prod_total(lanes);
}

/* sum of x - c over the row, in double */
static double row_dev(const cpu_rows *r, const char *base, double c) {
  double s = 0, buf[BLOCK];
  for (int64_t j = 0; j < r->rowlen; j += BLOCK) {
    int64_t n = r->rowlen - j < BLOCK ? r->rowlen - j : BLOCK;
    cpu_rows_load(r, base, j, n, buf, DT_FLOAT64);
    for (int64_t i = 0; i < n; i++) s += buf[i] - c;
  }
  return s;
}

/* Two passes (mean, then squared deviations), the mean refined once by
 * the mean deviation from it: the rounding of sum / N no longer shows as a
 * variance (a constant row of 1e30 gives 0, not 2e28) */
static double row_var(const cpu_rows *r, const char *base, int64_t corr) {
  int64_t len = r->rowlen;
  if (len - corr <= 0) return NAN; /* N = 0, or N = 1 unbiased */
  double mean = row_sum(r, base) / (double)len;
  mean += row_dev(r, base, mean) / (double)len;
  double lanes[LANES] = {0}, buf[BLOCK];
  switch (dense_width(r)) {
  case 4: cpu_lanes_sqdev_f32((const float *)base, len, mean, lanes); break;
  case 8: cpu_lanes_sqdev_f64((const double *)base, len, mean, lanes); break;
  default:
    for (int64_t j = 0; j < len; j += BLOCK) {
      int64_t n = len - j < BLOCK ? len - j : BLOCK;
      cpu_rows_load(r, base, j, n, buf, DT_FLOAT64);
      cpu_lanes_sqdev_f64(buf, n, mean, lanes);
    }
  }
  return cpu_lanes_total(lanes) / (double)(len - corr);
}

/* max/min/argmax/argmin: NaN wins, and the first NaN stays */
typedef struct extreme { double v; int64_t at; } extreme;

static void extreme_block_f64(extreme *e, const double *x, int64_t n,
                              int64_t j0, bool max) {
  for (int64_t i = 0; i < n && e->v == e->v; i++) {
    double v = x[i];
    if (v != v || (max ? v > e->v : v < e->v)) {
      e->v = v;
      e->at = j0 + i;
    }
  }
}

static extreme row_extreme_f64(const cpu_rows *r, const char *base, bool max) {
  extreme e = {max ? -INFINITY : INFINITY, 0};
  double buf[BLOCK];
  for (int64_t j = 0; j < r->rowlen && e.v == e.v; j += BLOCK) {
    int64_t n = r->rowlen - j < BLOCK ? r->rowlen - j : BLOCK;
    cpu_rows_load(r, base, j, n, buf, DT_FLOAT64);
    extreme_block_f64(&e, buf, n, j, max);
  }
  return e;
}

/* ------------------------------------------------------ one row, integer */
typedef struct extreme_i { int64_t v, at; } extreme_i;

static extreme_i row_int(const cpu_rows *r, const char *base,
                         cpu_reduce_op op) {
  int64_t buf[BLOCK];
  uint64_t acc = op == CPU_REDUCE_PROD ? 1 : 0; /* wraps like PyTorch */
  bool max = op == CPU_REDUCE_MAX || op == CPU_REDUCE_ARGMAX;
  extreme_i e = {max ? INT64_MIN : INT64_MAX, 0};
  for (int64_t j = 0; j < r->rowlen; j += BLOCK) {
    int64_t n = r->rowlen - j < BLOCK ? r->rowlen - j : BLOCK;
    cpu_rows_load(r, base, j, n, buf, DT_INT64);
    switch (op) {
    case CPU_REDUCE_SUM:
      for (int64_t i = 0; i < n; i++) acc += (uint64_t)buf[i];
      break;
    case CPU_REDUCE_PROD:
      for (int64_t i = 0; i < n; i++) acc *= (uint64_t)buf[i];
      break;
    default:
      /* the first element always wins its tie with the initial value */
      for (int64_t i = 0; i < n; i++)
        if ((j == 0 && i == 0) || (max ? buf[i] > e.v : buf[i] < e.v)) {
          e.v = buf[i];
          e.at = j + i;
        }
      break;
    }
  }
  if (op == CPU_REDUCE_SUM || op == CPU_REDUCE_PROD) e.v = (int64_t)acc;
  return e;
}

/* ---------------------------------------------------------- the drivers */
static bool is_float(dt_dtype d) {
  return d == DT_FLOAT32 || d == DT_FLOAT64 || d == DT_FLOAT16 ||
         d == DT_BFLOAT16;
}

static double row_double(const cpu_rows *r, const char *base,
                         cpu_reduce_op op, int64_t corr, int64_t *at) {
  switch (op) {
  case CPU_REDUCE_SUM: return row_sum(r, base);
  case CPU_REDUCE_MEAN:
    return r->rowlen ? row_sum(r, base) / (double)r->rowlen : NAN;
  case CPU_REDUCE_PROD: return row_prod(r, base);
  case OP_VAR: return row_var(r, base, corr);
  default: {
    bool max = op == CPU_REDUCE_MAX || op == CPU_REDUCE_ARGMAX;
    extreme e = row_extreme_f64(r, base, max);
    *at = e.at;
    return e.v;
  }
  }
}

/* -------------------------------------------------------- column tiles
 * When the innermost kept dim has unit stride (a reduction over leading
 * dims, or over a transposed view) rows are far apart in memory but
 * neighbouring outputs are adjacent: TILE of them are reduced together,
 * each row position reading TILE contiguous elements. Output c still adds
 * its element j into lane j % 8 in order of j, so the bits are those of
 * the row path. Used for the lane reductions (sum, mean, prod, var). */
#define TILE CPU_ROW_TILE
typedef enum tile_kind { TILE_SUM, TILE_PROD, TILE_DEV, TILE_SQDEV } tile_kind;

static bool tiles_apply(const cpu_rows *r, cpu_reduce_op op) {
  /* empty rows (a reduced dim of size 0) never start the row walk, so the
   * tile width, which reads the walk's position, would not advance: the
   * row path gives their identities (0, 1, NaN) */
  if (!is_float(r->dtype) || r->nouter == 0 || r->nrow == 0 ||
      r->rowlen == 0 || cpu_rows_dense(r))
    return false;
  if (op != CPU_REDUCE_SUM && op != CPU_REDUCE_MEAN &&
      op != CPU_REDUCE_PROD && op != OP_VAR)
    return false;
  return r->ostrides[r->nouter - 1] == (int64_t)cpu_dtype_size(r->dtype);
}

/* tile_pass's TILE_SUM over float32 columns: acc[c] += x[c] at each row
 * position, 8 columns a step as two vectors of 4 doubles (the lane sums'
 * form above), the row walk inside the clone. Each column's add is the
 * generic path's (float to double, then one double add, in order of j),
 * so the bits are the same; it replaces a converting load into a buffer
 * and a second loop over it (a [256, 256] float sum over dim 0 took 71 µs,
 * PyTorch's 18). */
CPU_CLONES static void tile_sum_f32(const cpu_rows *r, const char *base, int64_t nc,
                                    double *restrict lanes) {
  int64_t idx[DT_MAX_DIMS] = {0};
  const char *p = base;
  for (int64_t j = 0; j < r->rowlen; j++) {
    double *restrict acc = lanes + (j % LANES) * TILE;
    const float *restrict x = (const float *)p;
    int64_t c = 0;
    for (; c + LANES <= nc; c += LANES) {
      lanes_v a, v;
      LANES_GET(a, acc + c);
      lanes_load_float(&v, x + c);
      LANES_ADD(a, v);
      LANES_PUT(acc + c, a);
    }
    for (; c < nc; c++) acc[c] += (double)x[c];
    for (int k = r->nrow - 1; k >= 0; k--) { /* next row position */
      p += r->rstrides[k];
      if (++idx[k] < r->rsizes[k]) break;
      p -= r->rsizes[k] * r->rstrides[k];
      idx[k] = 0;
    }
  }
}

/* A float32 sum (or mean) tile with rows of at most SHORT_ROW positions,
 * straight into res: per block of 4 columns, its eight lanes in eight
 * vector registers, element j of each column added into lane j % 8 in
 * order of j, from a lane of 0; the total then in cpu_lanes_total's order.
 * Every column's arithmetic is tile_reduce's, so are the bits; what it
 * leaves out is the 4 KB lanes buffer (zeroed per tile) and 64 totals
 * gathered from it, which made a [4, 2, 64, 256] sum over dim 1 (two
 * elements per output) cost 0.4 ms against PyTorch's 0.05. off[j]: the
 * byte offset of row position j. */
#define SHORT_ROW 256
CPU_CLONES static void short_rows_sum_f32(const char *base, const int64_t *off,
                                          int64_t rowlen, int64_t nc, double *res) {
  int64_t c = 0;
  for (; c + 4 <= nc; c += 4) {
    const lanes_h z = {0, 0, 0, 0};
    lanes_h l0 = z, l1 = z, l2 = z, l3 = z, l4 = z, l5 = z, l6 = z, l7 = z;
    const char *b = base + c * (int64_t)sizeof(float);
#define SR_ADD(L, J)                                                        \
  do {                                                                      \
    const float *x = (const float *)(b + off[J]);                           \
    L += (lanes_h){x[0], x[1], x[2], x[3]};                                 \
  } while (0)
    int64_t j = 0;
    for (; j + LANES <= rowlen; j += LANES) {
      SR_ADD(l0, j); SR_ADD(l1, j + 1); SR_ADD(l2, j + 2); SR_ADD(l3, j + 3);
      SR_ADD(l4, j + 4); SR_ADD(l5, j + 5); SR_ADD(l6, j + 6); SR_ADD(l7, j + 7);
    }
    switch (rowlen - j) { /* the last, partial round of lanes */
    case 7: SR_ADD(l6, j + 6); /* fall through */
    case 6: SR_ADD(l5, j + 5); /* fall through */
    case 5: SR_ADD(l4, j + 4); /* fall through */
    case 4: SR_ADD(l3, j + 3); /* fall through */
    case 3: SR_ADD(l2, j + 2); /* fall through */
    case 2: SR_ADD(l1, j + 1); /* fall through */
    case 1: SR_ADD(l0, j); /* fall through */
    default: break;
    }
#undef SR_ADD
    lanes_h t = ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7));
    memcpy(res + c, &t, sizeof t);
  }
  for (; c < nc; c++) { /* the last columns, one by one (the same order) */
    double l[LANES] = {0};
    for (int64_t j = 0; j < rowlen; j++)
      l[j % LANES] += (double)*(const float *)(base + c * (int64_t)sizeof(float) + off[j]);
    res[c] = cpu_lanes_total(l);
  }
}

/* lanes[l * TILE + c] op= element j of column c, for j with j % 8 == l;
 * center: per-column value subtracted before squaring (TILE_SQDEV) */
static void tile_pass(const cpu_rows *r, const char *base, int64_t nc,
                      tile_kind kind, const double *center, double *lanes) {
  if (kind == TILE_SUM && r->dtype == DT_FLOAT32) {
    tile_sum_f32(r, base, nc, lanes);
    return;
  }
  int64_t idx[DT_MAX_DIMS] = {0}, es = (int64_t)cpu_dtype_size(r->dtype);
  const char *p = base;
  double x[TILE];
  for (int64_t j = 0; j < r->rowlen; j++) {
    cpu_load(x, DT_FLOAT64, p, r->dtype, es, nc);
    double *acc = lanes + (j % LANES) * TILE;
    if (kind == TILE_SUM)
      for (int64_t c = 0; c < nc; c++) acc[c] += x[c];
    else if (kind == TILE_PROD)
      for (int64_t c = 0; c < nc; c++) acc[c] *= x[c];
    else if (kind == TILE_DEV)
      for (int64_t c = 0; c < nc; c++) acc[c] += x[c] - center[c];
    else
      for (int64_t c = 0; c < nc; c++) {
        double d = x[c] - center[c];
        acc[c] += d * d;
      }
    for (int k = r->nrow - 1; k >= 0; k--) { /* next row position */
      p += r->rstrides[k];
      if (++idx[k] < r->rsizes[k]) break;
      p -= r->rsizes[k] * r->rstrides[k];
      idx[k] = 0;
    }
  }
}

static double tile_total(const double *lanes, int64_t c, bool prod) {
  double l[LANES];
  for (int k = 0; k < LANES; k++) l[k] = lanes[k * TILE + c];
  return prod ? lanes_prod_total(l) : cpu_lanes_total(l);
}

/* res[0..nc) for the nc rows (columns) starting at base */
static void tile_reduce(const cpu_rows *r, const char *base, int64_t nc,
                        cpu_reduce_op op, int64_t corr, const int64_t *off,
                        double *res) {
  double lanes[LANES * TILE], mean[TILE];
  bool prod = op == CPU_REDUCE_PROD;
  double len = (double)r->rowlen;
  if (off) { /* a float32 sum or mean over short rows */
    short_rows_sum_f32(base, off, r->rowlen, nc, res);
    if (op == CPU_REDUCE_MEAN)
      for (int64_t c = 0; c < nc; c++) res[c] /= len;
    return;
  }
  for (int k = 0; k < LANES * TILE; k++) lanes[k] = prod ? 1 : 0;
  tile_pass(r, base, nc, prod ? TILE_PROD : TILE_SUM, NULL, lanes);
  for (int64_t c = 0; c < nc; c++) {
    double t = tile_total(lanes, c, prod);
    res[c] = op == CPU_REDUCE_MEAN ? t / len : t;
    mean[c] = t / len;
  }
  if (op != OP_VAR) return;
  if (r->rowlen - corr <= 0) { /* N = 1 unbiased (rowlen > 0 here) */
    for (int64_t c = 0; c < nc; c++) res[c] = NAN;
    return;
  }
  for (int k = 0; k < LANES * TILE; k++) lanes[k] = 0; /* refine (row_var) */
  tile_pass(r, base, nc, TILE_DEV, mean, lanes);
  for (int64_t c = 0; c < nc; c++) mean[c] += tile_total(lanes, c, false) / len;
  for (int k = 0; k < LANES * TILE; k++) lanes[k] = 0;
  tile_pass(r, base, nc, TILE_SQDEV, mean, lanes);
  for (int64_t c = 0; c < nc; c++)
    res[c] = tile_total(lanes, c, false) / (double)(r->rowlen - corr);
}

/* ------------------------------------------------ long rows in segments
 * A float row of at least 2 SEG elements (a full reduction, a few long
 * rows) is split into segments of SEG elements: chunks idle ranks steal.
 * Segment s of a row reduces elements [s SEG, (s + 1) SEG) into its own
 * partial (eight lanes, element j into lane j % 8 as everywhere: SEG is a
 * multiple of 8; or the extreme and its index), and a row's partials are
 * combined in segment order afterwards. The bits depend only on the sizes,
 * not on which rank ran a segment nor on how many ranks there are. var
 * keeps the row path (its three passes over a long row run on one rank). */
#define SEG CPU_GRAIN
typedef struct seg_part { double lanes[LANES]; extreme e; } seg_part;
typedef struct seg_job {
  const cpu_rows *r;
  const char *data;
  cpu_reduce_op op;
  int64_t nseg;
  seg_part *parts;   /* the batch's: unit u's partial at parts[u - u0] */
  int64_t u0;        /* the batch's first unit */
} seg_job;

static void seg_reduce(const cpu_rows *r, const char *base, cpu_reduce_op op,
                       int64_t j0, int64_t n, seg_part *pt) {
  bool prod = op == CPU_REDUCE_PROD, max = op == CPU_REDUCE_MAX ||
                                           op == CPU_REDUCE_ARGMAX;
  for (int l = 0; l < LANES; l++) pt->lanes[l] = prod ? 1 : 0;
  pt->e = (extreme){max ? -INFINITY : INFINITY, 0};
  bool sum = op == CPU_REDUCE_SUM || op == CPU_REDUCE_MEAN;
  if (sum && dense_width(r) == 4) {
    cpu_lanes_sum_f32((const float *)base + j0, n, pt->lanes);
    return;
  }
  if (sum && dense_width(r) == 8) {
    cpu_lanes_sum_f64((const double *)base + j0, n, pt->lanes);
    return;
  }
  double buf[BLOCK];
  for (int64_t k = 0; k < n; k += BLOCK) {
    int64_t m = n - k < BLOCK ? n - k : BLOCK;
    cpu_rows_load(r, base, j0 + k, m, buf, DT_FLOAT64);
    if (sum) cpu_lanes_sum_f64(buf, m, pt->lanes);
    else if (prod) lanes_prod(buf, m, pt->lanes);
    else extreme_block_f64(&pt->e, buf, m, j0 + k, max);
  }
}

/* Segments u .. u + 3 in one pass (LANES_SUM4) when they are full
 * segments of one dense float sum row; false otherwise */
static bool seg_four(const seg_job *j, int64_t u, int64_t end) {
  bool sum = j->op == CPU_REDUCE_SUM || j->op == CPU_REDUCE_MEAN;
  int w = dense_width(j->r);
  if (!sum || (w != 4 && w != 8) || end - u < 4 || u / j->nseg != (u + 3) / j->nseg ||
      (u + 3) % j->nseg * SEG + SEG > j->r->rowlen)
    return false;
  cpu_row_walk wk;
  cpu_row_walk_start(j->r, j->data, u / j->nseg, &wk);
  int64_t j0 = u % j->nseg * SEG;
  double lanes[4 * LANES] = {0};
  if (w == 4) cpu_lanes_sum4_f32((const float *)wk.base + j0, SEG, SEG, lanes);
  else cpu_lanes_sum4_f64((const double *)wk.base + j0, SEG, SEG, lanes);
  for (int k = 0; k < 4; k++) {
    seg_part *pt = &j->parts[u + k - j->u0];
    memcpy(pt->lanes, lanes + k * LANES, sizeof pt->lanes);
    pt->e = (extreme){INFINITY, 0};
  }
  return true;
}

/* units [begin, end) of the batch: absolute units u0 + begin .. */
static void seg_range(int64_t begin, int64_t end, void *arg) {
  const seg_job *j = arg;
  begin += j->u0;
  end += j->u0;
  for (int64_t u = begin; u < end; u++) {
    if (seg_four(j, u, end)) {
      u += 3;
      continue;
    }
    cpu_row_walk w;
    cpu_row_walk_start(j->r, j->data, u / j->nseg, &w);
    int64_t j0 = u % j->nseg * SEG;
    int64_t n = j->r->rowlen - j0 < SEG ? j->r->rowlen - j0 : SEG;
    seg_reduce(j->r, w.base, j->op, j0, n, &j->parts[u - j->u0]);
  }
}

/* A row's partials folded in segment order, one segment at a time, so a
 * row can span batches: the same operations in the same order as a fold
 * over all of them at once. */
typedef struct seg_fold { double l[LANES]; extreme e; } seg_fold;

static void fold_next(seg_fold *f, const seg_part *p, bool first, cpu_reduce_op op) {
  if (first) {
    memcpy(f->l, p->lanes, sizeof f->l);
    f->e = p->e;
    return;
  }
  if (op == CPU_REDUCE_SUM || op == CPU_REDUCE_MEAN || op == CPU_REDUCE_PROD) {
    bool prod = op == CPU_REDUCE_PROD;
    for (int k = 0; k < LANES; k++) f->l[k] = prod ? f->l[k] * p->lanes[k] : f->l[k] + p->lanes[k];
    return;
  }
  /* ties keep the earlier segment, as the row path; a NaN stays */
  bool max = op == CPU_REDUCE_MAX || op == CPU_REDUCE_ARGMAX;
  double v = p->e.v;
  if (f->e.v == f->e.v && (v != v || (max ? v > f->e.v : v < f->e.v))) f->e = p->e;
}

/* the folded row's result (and index for arg ops) */
static double fold_result(const seg_fold *f, cpu_reduce_op op, int64_t len, int64_t *at) {
  if (op == CPU_REDUCE_PROD) return lanes_prod_total(f->l);
  if (op == CPU_REDUCE_SUM || op == CPU_REDUCE_MEAN) {
    double t = cpu_lanes_total(f->l);
    return op == CPU_REDUCE_MEAN ? t / (double)len : t;
  }
  *at = f->e.at;
  return f->e.v;
}

/* Segments in batches of SEG_BATCH (a multiple of the chunk of 4): the
 * partials need that many entries whatever the row length (a sum over
 * 2^62 elements is 2^46 segments), and a cancelled op stops at the batch
 * it is in (cpu_parallel_for returns false; its output is poisoned). */
#define SEG_BATCH ((int64_t)4096)

/* false (nothing written) when the rows are not long, or no memory; true
 * when written, or cancelled */
static bool reduce_segments(cpu_reduce_op op, const cpu_view *out,
                            const cpu_view *in, const cpu_rows *r) {
  if (!is_float(r->dtype) || op == OP_VAR || r->rowlen < 2 * SEG) return false;
  seg_job j = {r, in->data, op, (r->rowlen + SEG - 1) / SEG, NULL, 0};
  int64_t units = j.nseg * r->nrows, batch = units < SEG_BATCH ? units : SEG_BATCH;
  j.parts = malloc(sizeof *j.parts * (size_t)batch);
  if (!j.parts) return false;
  bool arg = op == CPU_REDUCE_ARGMAX || op == CPU_REDUCE_ARGMIN;
  int64_t os = (int64_t)cpu_dtype_size(out->dtype);
  seg_fold f;
  for (int64_t u0 = 0; u0 < units; u0 += batch) {
    int64_t n = units - u0 < batch ? units - u0 : batch;
    j.u0 = u0;
    /* chunks of four segments (1 MiB of float32): seg_four reads them as
     * four streams; 64 chunks for a 64 MB row still spread over the ranks */
    if (!cpu_parallel_for(n, 4, seg_range, &j)) break; /* cancelled */
    for (int64_t u = u0; u < u0 + n; u++) {
      int64_t row = u / j.nseg, sg = u % j.nseg;
      fold_next(&f, &j.parts[u - u0], sg == 0, op);
      if (sg + 1 < j.nseg) continue;
      int64_t at = 0;
      double v = fold_result(&f, op, r->rowlen, &at);
      if (arg) cpu_store(out->data + row * os, out->dtype, os, &at, DT_INT64, 1);
      else cpu_store(out->data + row * os, out->dtype, os, &v, DT_FLOAT64, 1);
    }
  }
  free(j.parts);
  return true;
}

/* ---------------------------------------------------------------- driver */
/* one call's rows, shared by its chunks (read-only while they run) */
typedef struct rows_job {
  cpu_reduce_op op;
  const cpu_view *out, *in;
  const cpu_rows *r;
  int64_t corr;       /* var's correction (op OP_VAR only) */
  bool tiled;
} rows_job;

/* the byte offsets of a row's positions, in order (rowlen <= SHORT_ROW) */
static void row_offsets(const cpu_rows *r, int64_t *off) {
  int64_t idx[DT_MAX_DIMS] = {0}, at = 0;
  for (int64_t j = 0; j < r->rowlen; j++) {
    off[j] = at;
    for (int k = r->nrow - 1; k >= 0; k--) {
      at += r->rstrides[k];
      if (++idx[k] < r->rsizes[k]) break;
      at -= r->rsizes[k] * r->rstrides[k];
      idx[k] = 0;
    }
  }
}

/* w moved n outputs on; a tile (n > 1) stays within the innermost outer
 * dim's run, so all but the last step are one add */
static void walk_by(const cpu_rows *r, cpu_row_walk *w, int64_t n) {
  if (n > 1) {
    int last = r->nouter - 1;
    w->idx[last] += n - 1;
    w->base += (n - 1) * r->ostrides[last];
  }
  cpu_row_walk_next(r, w);
}

/* outputs [begin, end): a chunk. Each output's bits do not depend on the
 * chunk (tiles start wherever the chunk does and give the row path's
 * bits), so any split gives the same result. */
static void rows_range(int64_t begin, int64_t end, void *arg) {
  const rows_job *j = arg;
  const cpu_rows *r = j->r;
  cpu_reduce_op op = j->op;
  bool arg_op = op == CPU_REDUCE_ARGMAX || op == CPU_REDUCE_ARGMIN;
  bool fl = is_float(j->in->dtype);
  /* results: double for float values, int64 for integers and indices */
  dt_dtype rt = (fl && !arg_op) ? DT_FLOAT64 : DT_INT64;
  union { double d[BLOCK]; int64_t i[BLOCK]; } res;
  size_t os = cpu_dtype_size(j->out->dtype);
  char *dst = j->out->data + (size_t)begin * os;
  /* an empty row never reads the input (whose data may be NULL) */
  cpu_row_walk w = {.base = NULL};
  if (r->rowlen > 0) cpu_row_walk_start(r, j->in->data, begin, &w);
  int64_t off[SHORT_ROW], *offp = NULL;
  if (j->tiled && j->in->dtype == DT_FLOAT32 && r->rowlen <= SHORT_ROW &&
      (op == CPU_REDUCE_SUM || op == CPU_REDUCE_MEAN)) {
    row_offsets(r, off);
    offp = off;
  }
  int64_t k = 0;
  for (int64_t row = begin; row < end;) {
    int64_t nc = 1, at = 0;
    if (j->tiled) { /* up to TILE rows, not past the inner run or chunk */
      int last = r->nouter - 1;
      nc = r->osizes[last] - w.idx[last] < TILE ? r->osizes[last] - w.idx[last]
                                                : TILE;
      if (nc > end - row) nc = end - row;
      tile_reduce(r, w.base, nc, op, j->corr, offp, &res.d[k]);
    } else if (fl) {
      double v = row_double(r, w.base, op, j->corr, &at);
      if (arg_op) res.i[k] = at; else res.d[k] = v;
    } else {
      extreme_i e = row_int(r, w.base, op);
      res.i[k] = arg_op ? e.at : e.v;
    }
    k += nc;
    row += nc;
    if (k > BLOCK - TILE || row == end) {
      cpu_store(dst, j->out->dtype, (int64_t)os, &res, rt, k);
      dst += (size_t)k * os;
      k = 0;
    }
    if (row < end && r->rowlen > 0) walk_by(r, &w, nc);
  }
}

/* corr: var's correction (op OP_VAR only). Long rows go in segments;
 * otherwise the outputs are split into chunks of about CPU_GRAIN input
 * elements. */
static void reduce_rows(cpu_reduce_op op, const cpu_view *out,
                        const cpu_view *in, uint32_t mask, int64_t corr) {
  cpu_rows r;
  cpu_rows_init(&r, in, mask);
  if (r.nrows == 0) return;
  if (reduce_segments(op, out, in, &r)) return;
  rows_job j = {op, out, in, &r, corr, tiles_apply(&r, op)};
  int64_t grain = CPU_GRAIN / (r.rowlen > 0 ? r.rowlen : 1);
  if (grain < 1) grain = 1;
  if (j.tiled && grain < TILE) grain = TILE;
  cpu_parallel_for(r.nrows, grain, rows_range, &j);
}

void cpu_reduce(cpu_reduce_op op, const cpu_view *out, const cpu_view *in,
                uint32_t mask) {
  reduce_rows(op, out, in, mask, 0);
}

void cpu_var(const cpu_view *out, const cpu_view *in, uint32_t mask,
             int64_t correction) {
  reduce_rows(OP_VAR, out, in, mask, correction);
}
