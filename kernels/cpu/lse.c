/* cross_entropy's log-sum-exp terms: exp(x - max) over float32 rows, added
 * into double lanes. cross_entropy is bound by this loop (it took 16 MB of
 * logits in 0.8 ms, about 0.4 of the machine's memory bandwidth, with the
 * lane sums' exp and order), so it has its own exp and its own order of
 * adds, chosen for throughput within the accuracy of a double sum of
 * float terms:
 *
 * - the term is vm_lse_term (vmath.h), within 2.0 ulp on every float of
 *   [-87, 0];
 * - 64 terms at a time, as four vectors of 16: their float sum term by
 *   term (((e0 + e1) + e2) + e3, three roundings), then both halves of it
 *   into the row's eight double lanes (low eight, then high eight). One
 *   conversion to double per four terms where the lane sums convert each:
 *   the conversions had cost as much as a third of the loop on Zen 4.
 *
 * The row's sum stays within 4 x 2^-24 of double (2.3 seen), 2.4e-7 in
 * the log-sum-exp. The order is fixed by the row alone, so every rank
 * count gives the same bits; the AVX-512 form (registers only, the
 * exponent scale by vscalefps) and the generic form (a block of terms in
 * L1, cloned loops) give the same bits (test_vmath's test_lse_sum checks
 * both against the order written out term by term). The loop: 0.30 ->
 * 0.19 ns per element per core in L2; cross_entropy [4096, 1000]
 * 0.79-0.89 -> 0.58-0.61 ms. */
#include "kernels/cpu/nn.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vmath.h"

#include <string.h>

CPU_CLONES static void lse_terms_blk(float *restrict e,
                                     const float *restrict x, float m,
                                     int64_t n) {
  for (int64_t i = 0; i < n; i++) e[i] = vm_lse_term(x[i] - m);
}

typedef float lse_v8f __attribute__((vector_size(32)));
typedef double lse_v8d __attribute__((vector_size(64)));

/* *acc += 64 terms in the order above (a pointer: a 64-byte vector by
 * value changes the ABI between clones) */
static inline __attribute__((always_inline)) void
lse_add64_any(lse_v8d *acc, const float *e) {
  lse_v8f f[2];
  for (int h = 0; h < 2; h++) { /* the low eight of each vector, the high */
    lse_v8f v[4];
    memcpy(v, e + 8 * h, sizeof v[0]);
    for (int k = 1; k < 4; k++) memcpy(&v[k], e + 16 * k + 8 * h, sizeof v[0]);
    f[h] = ((v[0] + v[1]) + v[2]) + v[3];
  }
  *acc += __builtin_convertvector(f[0], lse_v8d);
  *acc += __builtin_convertvector(f[1], lse_v8d);
}

/* lanes += the terms e[0..n): the last group padded with +0, which leaves
 * a float partial and a lane alone (no term or lane is ever -0) */
CPU_CLONES static void lse_add_blk(const float *restrict e, int64_t n,
                                   double *restrict lanes) {
  lse_v8d acc;
  memcpy(&acc, lanes, sizeof acc);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) lse_add64_any(&acc, e + i);
  if (i < n) {
    float pad[64] = {0};
    memcpy(pad, e + i, sizeof(float) * (size_t)(n - i));
    lse_add64_any(&acc, pad);
  }
  memcpy(lanes, &acc, sizeof acc);
}

/* the rows LSE_AHEAD on (two four-row groups) are fetched into L2 as
 * these are summed, so memory keeps streaming while rows compute from
 * cache */
#define LSE_AHEAD 8

static void lse_sum_any(const float *x, int64_t gap, int rows, int64_t n,
                        const float *m, double *lanes) {
  float e[CPU_BLOCK];
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    for (int q = 0; q < rows; q++) {
      lse_terms_blk(e, x + q * gap + s, m[q], k);
      lse_add_blk(e, k, lanes + q * CPU_ROW_LANES);
      cpu_prefetch_l2((const char *)(x + (q + LSE_AHEAD) * gap + s),
                      k * (int64_t)sizeof(float));
    }
  }
}

#if CPU_HAVE_CLONES && defined(__x86_64__)
#include <immintrin.h>

#define LSE_TARGET __attribute__((target("avx512f")))

/* vm_lse_term on 16 lanes: the same operations in the same order, p 2^n
 * as vscalefps (exact, as the exponent add: p 2^n is normal for every
 * argument >= -87); a NaN comes out NaN by itself */
LSE_TARGET static inline __m512 lse_term16(__m512 x, __m512 m) {
  const __m512 magic = _mm512_set1_ps(VM_ROUND_MAGIC);
  /* max(-87, a): vmaxps gives its second operand when one is NaN */
  __m512 a = _mm512_max_ps(_mm512_set1_ps(-87.0f), _mm512_sub_ps(x, m));
  __m512 t = _mm512_fmadd_ps(a, _mm512_set1_ps(VM_LOG2E), magic);
  __m512 n = _mm512_sub_ps(t, magic);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-VM_LN2_HI), a);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-VM_LN2_LO), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(VM_LSE_C5), r,
                             _mm512_set1_ps(VM_LSE_C4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VM_LSE_C3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VM_LSE_C2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VM_LSE_C1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

/* one vector of 16 terms (k: the lanes that are terms; the others +0) */
LSE_TARGET static inline __m512 lse_vec(const float *x, __m512 m,
                                        __mmask16 k) {
  if (k == 0xffff) return lse_term16(_mm512_loadu_ps(x), m);
  return _mm512_maskz_mov_ps(k, lse_term16(_mm512_maskz_loadu_ps(k, x), m));
}

LSE_TARGET static inline __mmask16 lse_mask(int64_t left) {
  return left >= 16 ? (__mmask16)0xffff
         : left <= 0 ? (__mmask16)0
                     : (__mmask16)((1u << left) - 1);
}

/* lanes += 64 terms from x[0..left) of one row; the same 256 bytes of
 * the row LSE_AHEAD on go to L2, a line per vector (a block's lines at
 * once, as the generic form fetches them, queue up behind each other:
 * cross_entropy [4096, 1000] 0.73-0.97 -> 0.68-0.85 ms, alternating) */
LSE_TARGET static inline __m512d lse_add64(__m512d acc, const float *x,
                                           int64_t gap, __m512 m,
                                           int64_t left) {
  const char *ahead = (const char *)(x + LSE_AHEAD * gap);
  for (int k = 0; k < 4; k++) _mm_prefetch(ahead + 64 * k, _MM_HINT_T1);
  __m512 f = lse_vec(x, m, lse_mask(left));
  for (int k = 1; k < 4; k++)
    f = _mm512_add_ps(f, lse_vec(x + 16 * k, m, lse_mask(left - 16 * k)));
  acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
  __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1));
  return _mm512_add_pd(acc, _mm512_cvtps_pd(hi));
}

/* ROWS rows side by side: their lane chains are independent */
#define LSE_SUM_512(ROWS)                                                   \
  LSE_TARGET static void lse_sum_512_##ROWS(const float *x, int64_t gap,    \
                                            int64_t n, const float *m,      \
                                            double *lanes) {                \
    __m512d acc[ROWS];                                                      \
    __m512 mv[ROWS];                                                        \
    for (int q = 0; q < ROWS; q++) {                                        \
      acc[q] = _mm512_loadu_pd(lanes + q * CPU_ROW_LANES);                  \
      mv[q] = _mm512_set1_ps(m[q]);                                         \
    }                                                                       \
    for (int64_t i = 0; i < n; i += 64)                                     \
      for (int q = 0; q < ROWS; q++)                                        \
        acc[q] = lse_add64(acc[q], x + q * gap + i, gap, mv[q], n - i);          \
    for (int q = 0; q < ROWS; q++)                                          \
      _mm512_storeu_pd(lanes + q * CPU_ROW_LANES, acc[q]);                  \
  }
LSE_SUM_512(1)
LSE_SUM_512(4)

static void lse_sum_512(const float *x, int64_t gap, int rows, int64_t n,
                        const float *m, double *lanes) {
  if (rows == 4) lse_sum_512_4(x, gap, n, m, lanes);
  else
    for (int q = 0; q < rows; q++)
      lse_sum_512_1(x + q * gap, gap, n, m + q, lanes + q * CPU_ROW_LANES);
}

typedef void (*lse_sum_fn)(const float *, int64_t, int, int64_t,
                           const float *, double *);
CPU_RESOLVER static lse_sum_fn resolve_lse_sum(void) {
  __builtin_cpu_init();
  return CPU_HAS_AVX512F() ? lse_sum_512 : lse_sum_any;
}
void cpu_lse_sum_f32(const float *x, int64_t gap, int rows, int64_t n,
                     const float *m, double *lanes)
    __attribute__((ifunc("resolve_lse_sum")));
#else
void cpu_lse_sum_f32(const float *x, int64_t gap, int rows, int64_t n,
                     const float *m, double *lanes) {
  lse_sum_any(x, gap, rows, n, m, lanes);
}
#endif

void cpu_lse_sum_f32_generic(const float *x, int64_t gap, int rows,
                             int64_t n, const float *m, double *lanes) {
  lse_sum_any(x, gap, rows, n, m, lanes);
}
