/* Normalisation kernels: softmax / log_softmax along any dim, layer_norm and
 * rms_norm over the last dim, for strided inputs and contiguous outputs.
 *
 * Each row is one 1-D slice along the normalised dim, walked with the row
 * walker of reduce.c. Everything is written once per compute type T (float
 * for float32/float16/bfloat16, double for float64) as block functions that
 * run either on a dense row in place (the fast path: float32/float64 rows
 * with unit stride) or on blocks of CPU_ROW_BLOCK elements converted into a
 * T buffer; softmax along a dim that is not innermost in memory also has
 * column tiles (64 neighbouring rows from contiguous loads). Row sums use
 * the lane order of reduce.h in double and every path evaluates the same
 * expressions, so all give the same bits. Softmax subtracts the row max
 * before exp, so large logits do not overflow. */
#include <math.h>
#include <stddef.h>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vmath.h"

#define BLOCK CPU_ROW_BLOCK
#define LANES CPU_ROW_LANES

typedef struct norm_args {
  const cpu_view *w, *b;    /* NULL when absent */
  int64_t ws, bs;           /* byte strides of w and b */
  double eps;
  bool rms;
} norm_args;

/* one row: its input (through the walker's rows) and its output */
typedef struct row_io {
  const cpu_rows *r;
  const char *in;
  char *out;
  int64_t os;               /* output byte stride along the row */
  dt_dtype od;
  bool dense;               /* in and out are unit-stride rows of T */
  bool stream;              /* dense, and the output is large: written with
                             * streaming stores (cpu_stream_copy) */
} row_io;

#define MIN_BLOCK(len, j) ((len) - (j) < BLOCK ? (len) - (j) : BLOCK)
/* norm_rows4's column blocks between prefetches (a multiple of LANES) */
#define NORM_PF_BLOCK 256

/* ---- block functions and row drivers for one compute type */
#define NORM_KERNELS(S, T, CT, EXPBLK, MAXBLK, LANES_SUM, LANES_SQDEV,      \
                     LANES_SUM4, LANES_SQDEV4, SCALEBLK, SUB2BLK,         \
                     TERMBLK)                                             \
  /* the row max (exact: any order gives the same value; a NaN row ends \
   * NaN through the sum) */                                              \
  static T max_##S(const T *restrict x, int64_t n, T m) {                   \
    T b = MAXBLK(x, n);                                                     \
    return b > m ? b : m;                                                   \
  }                                                                         \
  /* lanes += exp(x - m) (lane j % 8 for element j of a block that starts \
   * at a multiple of 8); keep (may be NULL) receives the exponentials.   \
   * The exponentials are made a block at a time (vectorised), then added; \
   * log_softmax's only feed the sum (TERMBLK: vm_exp_sum_term) */         \
  static void sumexp_##S(const T *restrict x, int64_t n, T m,               \
                         double *restrict lanes, T *restrict keep, bool lg) { \
    T e[BLOCK];                                                             \
    for (int64_t j = 0; j < n; j += BLOCK) {                                \
      int64_t k = MIN_BLOCK(n, j);                                          \
      T *dst = keep ? keep + j : e;                                         \
      if (lg) TERMBLK(dst, x + j, m, k);                                    \
      else EXPBLK(dst, x + j, m, k);                                        \
      LANES_SUM(dst, k, lanes);                                             \
    }                                                                       \
  }                                                                         \
  /* softmax: y = exp(x - m) * k (k = 1/sum); log: y = (x - m) - k */      \
  static void softmax_blk_##S(const T *restrict x, T *restrict y, int64_t n, \
                              T m, T k, bool lg) {                         \
    if (lg) {                                                               \
      SUB2BLK(y, x, m, k, n);                                               \
      return;                                                               \
    }                                                                       \
    EXPBLK(y, x, m, n);                                                     \
    SCALEBLK(y, k, n);                                                      \
  }                                                                         \
  static void softmax_row_##S(const row_io *io, bool lg) {                 \
    int64_t len = io->r->rowlen;                                            \
    T m = (T)-INFINITY, buf[BLOCK], y[BLOCK];                               \
    double lanes[LANES] = {0};                                              \
    if (io->dense) {                                                        \
      const T *x = (const T *)io->in;                                       \
      T *o = (T *)io->out;                                                  \
      m = max_##S(x, len, m);                                               \
      /* softmax keeps exp(x - m) in o: the same bits as recomputing it */  \
      sumexp_##S(x, len, m, lanes, lg ? NULL : o, lg);                       \
      double s = cpu_lanes_total(lanes);                                    \
      T k = lg ? (T)log(s) : (T)(1.0 / s);                                  \
      if (lg)                                                               \
        softmax_blk_##S(x, o, len, m, k, true);                             \
      else                                                                  \
        SCALEBLK(o, k, len);                                                \
      return;                                                               \
    }                                                                       \
    for (int64_t j = 0; j < len; j += BLOCK) {                              \
      cpu_rows_load(io->r, io->in, j, MIN_BLOCK(len, j), buf, CT);          \
      m = max_##S(buf, MIN_BLOCK(len, j), m);                               \
    }                                                                       \
    for (int64_t j = 0; j < len; j += BLOCK) {                              \
      cpu_rows_load(io->r, io->in, j, MIN_BLOCK(len, j), buf, CT);          \
      sumexp_##S(buf, MIN_BLOCK(len, j), m, lanes, NULL, lg);                \
    }                                                                       \
    double s = cpu_lanes_total(lanes);                                      \
    T k = lg ? (T)log(s) : (T)(1.0 / s);                                   \
    for (int64_t j = 0; j < len; j += BLOCK) {                              \
      int64_t n = MIN_BLOCK(len, j);                                        \
      cpu_rows_load(io->r, io->in, j, n, buf, CT);                          \
      softmax_blk_##S(buf, y, n, m, k, lg);                                \
      cpu_store(io->out + j * io->os, io->od, io->os, y, CT, n);            \
    }                                                                       \
  }                                                                         \
  /* four dense rows gin / gout elements apart, each as softmax_row's     \
   * dense path computes it (the same bits), their lane sums side by side \
   * (LANES_SUM4: one row's eight lanes are one chain of dependent adds) */ \
  static void softmax_rows4_##S(const row_io *io, int64_t gin, int64_t gout, \
                                bool lg) {                                  \
    int64_t len = io->r->rowlen, len8 = len / LANES * LANES;                \
    const T *x = (const T *)io->in;                                         \
    T *o = (T *)io->out, m[4], e[4][BLOCK];                                 \
    /* a streamed output: log_softmax writes each row once, around the    \
     * caches. softmax keeps its exponentials in the output until the sum  \
     * is known; kept in L1 instead, then streamed, it was slower (1.25-1.33 \
     * -> 1.44-1.46 ms: four rows in and four kept overflow L1) */         \
    bool nt = io->stream && lg;                                             \
    double lanes[4 * LANES] = {0};                                          \
    for (int q = 0; q < 4; q++) m[q] = max_##S(x + q * gin, len, (T)-INFINITY); \
    for (int64_t j = 0; j < len; j += BLOCK) {                              \
      int64_t k = MIN_BLOCK(len, j), k8 = k / LANES * LANES;                \
      for (int q = 0; q < 4; q++) {                                         \
        if (lg) TERMBLK(e[q], x + q * gin + j, m[q], k);                    \
        else EXPBLK(o + q * gout + j, x + q * gin + j, m[q], k);            \
        /* this block of the row two groups on, into L2 (as layer_norm) */  \
        cpu_prefetch_l2((const char *)(x + (q + 8) * gin + j),              \
                      k * (int64_t)sizeof(T));                              \
      }                                                                     \
      if (lg) LANES_SUM4(e[0], BLOCK, k8, lanes);                           \
      else LANES_SUM4(o + j, gout, k8, lanes);                              \
    }                                                                       \
    int64_t jl = (len - 1) / BLOCK * BLOCK; /* the last block (e's) */      \
    for (int q = 0; q < 4; q++) {                                           \
      /* the last block's tail, lanes 0.. as LANES_SUM adds it */           \
      LANES_SUM(lg ? e[q] + (len8 - jl) : o + q * gout + len8, len - len8,  \
                lanes + q * LANES);                                         \
      double s = cpu_lanes_total(lanes + q * LANES);                        \
      T kq = lg ? (T)log(s) : (T)(1.0 / s);                                 \
      if (!nt) {                                                            \
        if (lg) SUB2BLK(o + q * gout, x + q * gin, m[q], kq, len);          \
        else SCALEBLK(o + q * gout, kq, len);                               \
      } else {                                                              \
        for (int64_t j = 0; j < len; j += BLOCK) { /* e[0]: a tile now */   \
          int64_t k = MIN_BLOCK(len, j);                                    \
          SUB2BLK(e[0], x + q * gin + j, m[q], kq, k);                      \
          cpu_stream_copy(o + q * gout + j, e[0], sizeof(T) * (size_t)k);   \
        }                                                                   \
      }                                                                     \
    }                                                                       \
  }                                                                         \
  /* y = (x - shift) * scale [* w] [+ b], 64 elements at a time */       \
  CPU_CLONES static void affine_##S(const T *restrict x, T *restrict y,     \
                                    int64_t n, T shift, T scale,           \
                                    const T *w, const T *b, bool nt) {     \
    const int64_t step = 64;                                                \
    T tile[64];                                                             \
    for (int64_t i0 = 0; i0 < n; i0 += step) {                              \
      int64_t i1 = i0 + step < n ? i0 + step : n;                           \
      /* streaming: the tile is made in L1, then written around the caches */ \
      T *d = nt ? tile : y + i0;                                            \
      const T *xs = x + i0;                                                 \
      int64_t m = i1 - i0;                                                  \
      /* one pass when both are there (the same expression, the same bits) */ \
      if (w && b) {                                                         \
        const T *ws = w + i0, *bs = b + i0;                                 \
        for (int64_t i = 0; i < m; i++)                                     \
          d[i] = (xs[i] - shift) * scale * ws[i] + bs[i];                   \
      } else {                                                              \
        for (int64_t i = 0; i < m; i++) d[i] = (xs[i] - shift) * scale;     \
        if (w) for (int64_t i = 0; i < m; i++) d[i] *= w[i0 + i];           \
        if (b) for (int64_t i = 0; i < m; i++) d[i] += b[i0 + i];           \
      }                                                                     \
      if (nt) cpu_stream_copy(y + i0, tile, sizeof(T) * (size_t)m);         \
    }                                                                       \
  }                                                                         \
  /* shift (the mean, 0 for rms) and scale 1/sqrt(var + eps) from the   \
   * mean and the eight lanes of squared deviations */                    \
  static void finish_stats_##S(double mean, const double *dev, int64_t len, \
                               const norm_args *a, T *shift, T *scale) {    \
    double var = cpu_lanes_total(dev) / (double)len;                        \
    *shift = (T)mean;                                                       \
    *scale = (T)(1.0 / sqrt(var + a->eps));                                 \
  }                                                                         \
  static void scale_of_##S(const row_io *io, const norm_args *a,            \
                           double mean, T *shift, T *scale);                \
  /* row statistics: shift (mean, or 0 for rms) and scale (1/sqrt(.+eps)) */ \
  static void stats_##S(const row_io *io, const norm_args *a, T *shift,     \
                        T *scale) {                                         \
    int64_t len = io->r->rowlen;                                            \
    double mean = 0, lanes[LANES] = {0};                                    \
    T buf[BLOCK];                                                           \
    if (!a->rms) {                                                          \
      if (io->dense) LANES_SUM((const T *)io->in, len, lanes);              \
      for (int64_t j = 0; !io->dense && j < len; j += BLOCK) {              \
        cpu_rows_load(io->r, io->in, j, MIN_BLOCK(len, j), buf, CT);        \
        LANES_SUM(buf, MIN_BLOCK(len, j), lanes);                           \
      }                                                                     \
      mean = cpu_lanes_total(lanes) / (double)len;                          \
    }                                                                       \
    scale_of_##S(io, a, mean, shift, scale);                                \
  }                                                                         \
  /* shift and scale from the row's mean (0 for rms): the variance pass */  \
  static void scale_of_##S(const row_io *io, const norm_args *a,            \
                           double mean, T *shift, T *scale) {               \
    int64_t len = io->r->rowlen;                                            \
    double lanes[LANES] = {0};                                              \
    T buf[BLOCK];                                                           \
    if (io->dense) LANES_SQDEV((const T *)io->in, len, mean, lanes);        \
    for (int64_t j = 0; !io->dense && j < len; j += BLOCK) {                \
      cpu_rows_load(io->r, io->in, j, MIN_BLOCK(len, j), buf, CT);          \
      LANES_SQDEV(buf, MIN_BLOCK(len, j), mean, lanes);                     \
    }                                                                       \
    finish_stats_##S(mean, lanes, len, a, shift, scale);                    \
  }                                                                         \
  static void apply_##S(const row_io *io, const norm_args *a, T shift,    \
                        T scale);                                           \
  static void norm_row_##S(const row_io *io, const norm_args *a) {          \
    T shift, scale;                                                         \
    stats_##S(io, a, &shift, &scale);                                       \
    apply_##S(io, a, shift, scale);                                         \
  }                                                                         \
  /* four dense rows gin (in) and gout (out) elements apart: their sums    \
   * and then their squared deviations read as four streams at once       \
   * (LANES_SUM4, LANES_SQDEV4: the same lane bits as one row at a time,   \
   * the tails added after as LANES_SUM does), the statistics as          \
   * scale_of computes them, then each row's output from cache. Both      \
   * passes go NORM_PF_BLOCK columns at a time (the lanes carry over: the \
   * same bits), and after each block the same columns of two of the rows \
   * two groups on are fetched into L2 (rows 8, 9 in the sums, 10, 11 in  \
   * the deviations), so memory keeps streaming while rows compute from   \
   * cache. Until 2026-12 all four were fetched in the output pass, a row \
   * at a time, and that pass waited on the fill buffers, which its       \
   * stores need too. layer_norm [4096, 1024] on two CPUs of a VM that    \
   * reports 480 MiB of L3 (eight runs alternating with the old build):   \
   * 0.91-0.95 -> 0.74-0.79 ms with this and plain stores for its 16 MiB  \
   * output (stream.c's threshold), at avx512 and avx2 alike; this alone  \
   * 0.85-0.93, plain stores alone 1.03-1.05. */                          \
  static void norm_rows4_##S(const row_io *io, int64_t gin, int64_t gout,   \
                             const norm_args *a) {                          \
    int64_t len = io->r->rowlen, len8 = len / LANES * LANES;                \
    const T *x = (const T *)io->in;                                         \
    double lanes[4 * LANES] = {0}, dev[4 * LANES] = {0}, mean[4];           \
    for (int64_t j = 0; j < len8; j += NORM_PF_BLOCK) {                     \
      int64_t k = len8 - j < NORM_PF_BLOCK ? len8 - j : NORM_PF_BLOCK;      \
      LANES_SUM4(x + j, gin, k, lanes);                                     \
      for (int q = 8; q < 10; q++)                                          \
        cpu_prefetch_l2((const char *)(x + q * gin + j), k * (int64_t)sizeof(T)); \
    }                                                                       \
    for (int q = 0; q < 4; q++) {                                           \
      LANES_SUM(x + q * gin + len8, len - len8, lanes + q * LANES);         \
      mean[q] = cpu_lanes_total(lanes + q * LANES) / (double)len;           \
    }                                                                       \
    for (int64_t j = 0; j < len8; j += NORM_PF_BLOCK) {                     \
      int64_t k = len8 - j < NORM_PF_BLOCK ? len8 - j : NORM_PF_BLOCK;      \
      LANES_SQDEV4(x + j, gin, k, mean, dev);                               \
      for (int q = 10; q < 12; q++)                                         \
        cpu_prefetch_l2((const char *)(x + q * gin + j), k * (int64_t)sizeof(T)); \
    }                                                                       \
    for (int q = 0; q < 4; q++) {                                           \
      LANES_SQDEV(x + q * gin + len8, len - len8, mean[q], dev + q * LANES); \
      T shift, scale;                                                       \
      finish_stats_##S(mean[q], dev + q * LANES, len, a, &shift, &scale);   \
      row_io r1 = *io;                                                      \
      r1.in = (const char *)(x + q * gin);                                  \
      r1.out = (char *)((T *)io->out + q * gout);                           \
      apply_##S(&r1, a, shift, scale);                                      \
    }                                                                       \
  }                                                                         \
  static void apply_##S(const row_io *io, const norm_args *a, T shift,    \
                        T scale) {                                          \
    int64_t len = io->r->rowlen;                                            \
    T buf[BLOCK], wb[BLOCK], bb[BLOCK], y[BLOCK];                           \
    if (io->dense) {                                                        \
      affine_##S((const T *)io->in, (T *)io->out, len, shift, scale,        \
                 a->w ? (const T *)a->w->data : NULL,                       \
                 a->b ? (const T *)a->b->data : NULL, io->stream);          \
      return;                                                               \
    }                                                                       \
    for (int64_t j = 0; j < len; j += BLOCK) {                              \
      int64_t n = MIN_BLOCK(len, j);                                        \
      cpu_rows_load(io->r, io->in, j, n, buf, CT);                          \
      if (a->w) cpu_load(wb, CT, a->w->data + j * a->ws, a->w->dtype,       \
                         a->ws, n);                                         \
      if (a->b) cpu_load(bb, CT, a->b->data + j * a->bs, a->b->dtype,       \
                         a->bs, n);                                         \
      affine_##S(buf, y, n, shift, scale, a->w ? wb : NULL,                 \
                 a->b ? bb : NULL, false);                                  \
      cpu_store(io->out + j * io->os, io->od, io->os, y, CT, n);            \
    }                                                                       \
  }

/* y = exp(x - m) over a block (m the row max): float32 through vmath's
 * vectorised exp */
static void exp_blk_f64(double *restrict y, const double *restrict x,
                        double m, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = exp(x[i] - m);
}

/* the max of a double block in independent lanes so it vectorises */
static double max_blk_f64(const double *restrict x, int64_t n) {
  double acc[LANES], m = -INFINITY;
  for (int l = 0; l < LANES; l++) acc[l] = m;
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int l = 0; l < LANES; l++)
      acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  for (; i < n; i++) m = x[i] > m ? x[i] : m;
  for (int l = 0; l < LANES; l++) m = acc[l] > m ? acc[l] : m;
  return m;
}

static void scale_blk_f64(double *restrict y, double k, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] *= k;
}

static void sub2_blk_f64(double *restrict y, const double *restrict x,
                         double m, double k, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) - k;
}

NORM_KERNELS(f32, float, DT_FLOAT32, cpu_vexp_max_f32, cpu_vmax_f32,
             cpu_lanes_sum_f32, cpu_lanes_sqdev_f32, cpu_lanes_sum4_f32,
             cpu_lanes_sqdev4_f32, cpu_vscale_f32, cpu_vsub2_f32,
             cpu_vexp_sum_term_f32)
NORM_KERNELS(f64, double, DT_FLOAT64, exp_blk_f64, max_blk_f64,
             cpu_lanes_sum_f64, cpu_lanes_sqdev_f64, cpu_lanes_sum4_f64,
             cpu_lanes_sqdev4_f64, scale_blk_f64, sub2_blk_f64, exp_blk_f64)

/* ---- softmax over a dim that is not innermost in memory: column tiles.
 * When the innermost other dim has unit stride (in and out), TILE
 * neighbouring rows are done together, each row position reading TILE
 * contiguous elements. Every column uses the expressions and lane order of
 * softmax_row, so the bits are the same. */
#define TILE CPU_ROW_TILE
#define SOFTMAX_TILE(S, T, CT, EXP, TERM)                                   \
  static void softmax_tile_##S(const row_io *io, int64_t nc, bool lg) {     \
    int64_t len = io->r->rowlen, st = io->r->rstrides[0];                   \
    int64_t es = (int64_t)cpu_dtype_size(io->r->dtype);                     \
    int64_t eo = (int64_t)cpu_dtype_size(io->od);                           \
    T m[TILE], k[TILE], x[TILE], y[TILE];                                   \
    double lanes[LANES][TILE] = {{0}};                                      \
    for (int64_t c = 0; c < nc; c++) m[c] = (T)-INFINITY;                   \
    for (int64_t j = 0; j < len; j++) {                                     \
      cpu_load(x, CT, io->in + j * st, io->r->dtype, es, nc);               \
      for (int64_t c = 0; c < nc; c++) m[c] = x[c] > m[c] ? x[c] : m[c];    \
    }                                                                       \
    for (int64_t j = 0; j < len; j++) {                                     \
      cpu_load(x, CT, io->in + j * st, io->r->dtype, es, nc);               \
      for (int64_t c = 0; c < nc; c++) x[c] -= m[c];                        \
      if (lg) TERM(y, x, 0, nc); /* as sumexp */                            \
      else EXP(y, x, 0, nc);                                                \
      for (int64_t c = 0; c < nc; c++) lanes[j % LANES][c] += (double)y[c]; \
    }                                                                       \
    for (int64_t c = 0; c < nc; c++) {                                      \
      double l[LANES];                                                      \
      for (int i = 0; i < LANES; i++) l[i] = lanes[i][c];                   \
      double s = cpu_lanes_total(l);                                        \
      k[c] = lg ? (T)log(s) : (T)(1.0 / s);                                 \
    }                                                                       \
    for (int64_t j = 0; j < len; j++) {                                     \
      cpu_load(x, CT, io->in + j * st, io->r->dtype, es, nc);               \
      for (int64_t c = 0; c < nc; c++) x[c] -= m[c];                        \
      if (lg)                                                               \
        for (int64_t c = 0; c < nc; c++) y[c] = x[c] - k[c];                \
      else {                                                                \
        EXP(y, x, 0, nc);                                                   \
        for (int64_t c = 0; c < nc; c++) y[c] *= k[c];                      \
      }                                                                     \
      cpu_store(io->out + j * io->os, io->od, eo, y, CT, nc);               \
    }                                                                       \
  }
SOFTMAX_TILE(f32, float, DT_FLOAT32, cpu_vexp_max_f32, /* x - m <= 0 */
             cpu_vexp_sum_term_f32)
SOFTMAX_TILE(f64, double, DT_FLOAT64, exp_blk_f64, exp_blk_f64)

/* ---- drivers: walk the rows of in and out together */
typedef void (*row_fn)(const row_io *io, const void *ctx);
/* nc neighbouring rows at once (column tiles); NULL where not supported */
typedef void (*tile_fn)(const row_io *io, int64_t nc, const void *ctx);

static void softmax_f32_fn(const row_io *io, const void *ctx) {
  softmax_row_f32(io, *(const bool *)ctx);
}
static void softmax_f64_fn(const row_io *io, const void *ctx) {
  softmax_row_f64(io, *(const bool *)ctx);
}
static void softmax4_f32_fn(const row_io *io, int64_t gin, int64_t gout,
                            const void *ctx) {
  softmax_rows4_f32(io, gin, gout, *(const bool *)ctx);
}
static void softmax4_f64_fn(const row_io *io, int64_t gin, int64_t gout,
                            const void *ctx) {
  softmax_rows4_f64(io, gin, gout, *(const bool *)ctx);
}
static void softmax_tile_f32_fn(const row_io *io, int64_t nc,
                                const void *ctx) {
  softmax_tile_f32(io, nc, *(const bool *)ctx);
}
static void softmax_tile_f64_fn(const row_io *io, int64_t nc,
                                const void *ctx) {
  softmax_tile_f64(io, nc, *(const bool *)ctx);
}
static void norm_f32_fn(const row_io *io, const void *ctx) {
  norm_row_f32(io, ctx);
}
static void norm_f64_fn(const row_io *io, const void *ctx) {
  norm_row_f64(io, ctx);
}
/* four dense rows gin / gout elements apart (row4_fn) */
typedef void (*row4_fn)(const row_io *io, int64_t gin, int64_t gout,
                        const void *ctx);
static void norm4_f32_fn(const row_io *io, int64_t gin, int64_t gout,
                         const void *ctx) {
  norm_rows4_f32(io, gin, gout, ctx);
}
static void norm4_f64_fn(const row_io *io, int64_t gin, int64_t gout,
                         const void *ctx) {
  norm_rows4_f64(io, gin, gout, ctx);
}

/* unit stride in T: float32 rows for the f32 kernels, float64 for f64 */
static bool dense_view(const cpu_view *v, const cpu_rows *r) {
  return (v->dtype == DT_FLOAT32 || v->dtype == DT_FLOAT64) &&
         cpu_rows_dense(r);
}

/* rows far apart whose neighbours (innermost other dim) are adjacent */
static bool tiles_apply(const cpu_rows *ri, const cpu_rows *ro) {
  if (ri->nrow != 1 || ri->nouter == 0) return false;
  int last = ri->nouter - 1;
  return ri->ostrides[last] == (int64_t)cpu_dtype_size(ri->dtype) &&
         ro->ostrides[last] == (int64_t)cpu_dtype_size(ro->dtype);
}

/* one call's rows, shared by its chunks (read-only while they run) */
typedef struct rows_job {
  cpu_rows ri, ro;
  const char *in_data;
  char *out_data;
  row_io io;          /* the fields every row shares */
  bool tiled;
  row_fn fn;
  tile_fn tfn;
  row4_fn fn4;        /* four dense rows at once, or NULL */
  const void *ctx;
} rows_job;

/* the four rows from the walkers' position on lie equally far apart in
 * the input and in the output (the last outer dim has four left): their
 * distances in elements */
static bool four_rows(const rows_job *j, const cpu_row_walk *w, int64_t *gin,
                      int64_t *gout) {
  int last = j->ri.nouter - 1;
  if (last < 0 || w->idx[last] + 3 >= j->ri.osizes[last]) return false;
  int64_t es = (int64_t)cpu_dtype_size(j->ri.dtype);
  int64_t si = j->ri.ostrides[last], so = j->ro.ostrides[last];
  if (si % es || so % es) return false;
  *gin = si / es;
  *gout = so / es;
  return true;
}

/* rows [begin, end): a chunk. Each row's result does not depend on which
 * chunk or thread computes it (tiles start wherever the chunk does), so
 * any split gives the same bits. */
static void rows_range(int64_t begin, int64_t end, void *arg) {
  const rows_job *j = arg;
  row_io io = j->io;
  cpu_row_walk wi, wo;
  cpu_row_walk_start(&j->ri, j->in_data, begin, &wi);
  cpu_row_walk_start(&j->ro, j->out_data, begin, &wo);
  for (int64_t row = begin; row < end;) {
    io.in = wi.base;
    io.out = (char *)wo.base;
    int64_t nc = 1, gin, gout;
    if (j->tiled) { /* up to TILE rows, not past the inner run or the chunk */
      int last = j->ri.nouter - 1;
      nc = j->ri.osizes[last] - wi.idx[last];
      if (nc > TILE) nc = TILE;
      if (nc > end - row) nc = end - row;
      j->tfn(&io, nc, j->ctx);
    } else if (j->fn4 && io.dense && end - row >= 4 &&
               four_rows(j, &wi, &gin, &gout)) {
      j->fn4(&io, gin, gout, j->ctx);
      nc = 4;
    } else {
      j->fn(&io, j->ctx);
    }
    row += nc;
    for (int64_t i = 0; i < nc && row < end; i++) {
      cpu_row_walk_next(&j->ri, &wi);
      cpu_row_walk_next(&j->ro, &wo);
    }
  }
  /* streaming stores are weakly ordered: done before the chunk is */
  if (j->io.stream) cpu_stream_fence();
}

/* the rows in chunks of about CPU_GRAIN elements, which idle ranks steal */
static void run_rows(const cpu_view *out, const cpu_view *in, uint32_t mask,
                     bool dense_ok, bool stream_ok, row_fn fn, tile_fn tfn,
                     row4_fn fn4, const void *ctx) {
  rows_job j = {.in_data = in->data, .out_data = out->data, .fn = fn, .tfn = tfn,
                .fn4 = fn4, .ctx = ctx};
  cpu_rows_init(&j.ri, in, mask);
  cpu_rows_init(&j.ro, out, mask); /* same sizes: the same outer dims */
  if (j.ri.nrows == 0 || j.ri.rowlen == 0) return;
  j.io = (row_io){.r = &j.ri, .od = out->dtype,
                  .os = j.ro.nrow ? j.ro.rstrides[0] : 0};
  j.io.dense = dense_ok && out->dtype == in->dtype && dense_view(in, &j.ri) &&
               dense_view(out, &j.ro);
  j.io.stream = j.io.dense && stream_ok &&
                j.ri.nrows * j.ri.rowlen * (int64_t)cpu_dtype_size(out->dtype) >=
                    cpu_stream_min_bytes();
  j.tiled = tfn && !j.io.dense && tiles_apply(&j.ri, &j.ro);
  int64_t grain = CPU_GRAIN / j.ri.rowlen;
  if (grain < 1) grain = 1;
  if (j.tiled && grain < TILE) grain = TILE;
  cpu_parallel_for(j.ri.nrows, grain, rows_range, &j);
}

void cpu_softmax(const cpu_view *out, const cpu_view *in, int dim, bool lg) {
  uint32_t mask = in->ndim > 0 ? 1u << dim : 0;
  bool f64 = in->dtype == DT_FLOAT64;
  run_rows(out, in, mask, true, true, f64 ? softmax_f64_fn : softmax_f32_fn,
           f64 ? softmax_tile_f64_fn : softmax_tile_f32_fn,
           f64 ? softmax4_f64_fn : softmax4_f32_fn, &lg);
}

/* weight/bias of x's dtype with unit stride can be read in place */
static bool dense_param(const cpu_view *p, dt_dtype xd) {
  return !p || (p->dtype == xd && (p->sizes[0] <= 1 || p->strides[0] == 1));
}

static void norm_rows(const cpu_view *out, const cpu_view *x,
                      const cpu_view *w, const cpu_view *b, double eps,
                      bool rms) {
  norm_args a = {.w = w, .b = b, .eps = eps, .rms = rms};
  if (w) a.ws = w->strides[0] * (int64_t)cpu_dtype_size(w->dtype);
  if (b) a.bs = b->strides[0] * (int64_t)cpu_dtype_size(b->dtype);
  uint32_t mask = x->ndim > 0 ? 1u << (x->ndim - 1) : 0;
  bool dense_ok = dense_param(w, x->dtype) && dense_param(b, x->dtype);
  bool f64 = x->dtype == DT_FLOAT64;
  /* rms has no mean pass to read four rows at once */
  row4_fn fn4 = rms ? NULL : f64 ? norm4_f64_fn : norm4_f32_fn;
  run_rows(out, x, mask, dense_ok, true, f64 ? norm_f64_fn : norm_f32_fn, NULL, fn4,
           &a);
}

void cpu_layer_norm(const cpu_view *out, const cpu_view *x,
                    const cpu_view *weight, const cpu_view *bias, double eps) {
  norm_rows(out, x, weight, bias, eps, false);
}

void cpu_rms_norm(const cpu_view *out, const cpu_view *x,
                  const cpu_view *weight, double eps) {
  norm_rows(out, x, weight, NULL, eps, true);
}
