/* Counter-based random numbers: Philox 4x32-10 (Salmon et al., SC'11,
 * "Parallel random numbers: as easy as 1, 2, 3"). Element i of the stream
 * keyed by seed is a pure function of (seed, i), so any rank can produce any
 * slice of a tensor's values without the others: the value of element i does
 * not depend on how the tensor is split.
 *
 * Layout: one Philox call with counter (i / 2, 0, 0, 0)... would tie pairs of
 * elements together; instead each element i uses counter (lo32(i), hi32(i),
 * 0, 0) and takes out[0] (uniform) or out[0], out[1] (Box–Muller normal). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* the ten Philox rounds on counter (c0..c3) with key (k0, k1); inlined
 * into the element loop of philox_block, which then vectorises */
static inline __attribute__((always_inline)) void
philox10(uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3, uint32_t k0,
         uint32_t k1) {
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * *c0, p1 = (uint64_t)PHILOX_M1 * *c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ *c1 ^ k0;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ *c3 ^ k1;
    *c0 = n0;
    *c1 = (uint32_t)p1;
    *c2 = n2;
    *c3 = (uint32_t)p0;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
}

void cpu_philox4x32(const uint32_t ctr[4], const uint32_t key[2],
                    uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  philox10(&c0, &c1, &c2, &c3, key[0], key[1]);
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

static void philox_at(uint64_t seed, uint64_t index, uint32_t out[4]) {
  uint32_t ctr[4] = {(uint32_t)index, (uint32_t)(index >> 32), 0, 0};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  cpu_philox4x32(ctr, key, out);
}

/* 53 random bits to a double in [0, 1) */
static double to_unit(uint32_t hi, uint32_t lo) {
  uint64_t bits = ((uint64_t)hi << 21) ^ (lo >> 11);
  return (double)(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

double cpu_philox_uniform(uint64_t seed, uint64_t index) {
  uint32_t r[4];
  philox_at(seed, index, r);
  return to_unit(r[0], r[1]);
}

double cpu_philox_normal(uint64_t seed, uint64_t index) {
  uint32_t r[4];
  philox_at(seed, index, r);
  double u1 = to_unit(r[0], r[1]), u2 = to_unit(r[2], r[3]);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Philox for elements [first, first + n) of the stream: r[k][i] is output
 * word k of element first + i. Sixteen elements at a time as vectors of 16
 * x 32 bits (GCC vector extensions): each 32 x 32 -> 64-bit product is
 * taken on the even and the odd lanes separately (as 64-bit lanes) and the
 * halves put back together. Written per element and left to the
 * vectoriser, the loop widened every lane to 64 bits and permuted them
 * back each round: 3.5 ns per element per core, this 2.7. The rest of a
 * block (< 16) runs per element; one cpu_philox4x32 call per element cost
 * 16 ns. */
#define RBLOCK 256
typedef uint32_t px_u32 __attribute__((vector_size(64)));
typedef uint64_t px_u64 __attribute__((vector_size(64)));
/* lo and hi of m * a in every 32-bit lane */
#define PX_MULHILO(a, m, lo, hi)                                             \
  do {                                                                       \
    px_u64 a_ = (px_u64)(a), m_ = (px_u64){0} + (uint64_t)(m);               \
    px_u64 pe_ = (a_ & 0xffffffffull) * m_; /* even lanes */                 \
    px_u64 po_ = (a_ >> 32) * m_;           /* odd lanes */                  \
    (lo) = (px_u32)((pe_ & 0xffffffffull) | (po_ << 32));                    \
    (hi) = (px_u32)((pe_ >> 32) | (po_ & 0xffffffff00000000ull));            \
  } while (0)

static void philox_rest(uint64_t seed, uint64_t first, int64_t i0, int64_t n,
                        uint32_t r[4][RBLOCK]) {
  for (int64_t i = i0; i < n; i++) {
    uint64_t index = first + (uint64_t)i;
    uint32_t c0 = (uint32_t)index, c1 = (uint32_t)(index >> 32), c2 = 0, c3 = 0;
    philox10(&c0, &c1, &c2, &c3, (uint32_t)seed, (uint32_t)(seed >> 32));
    r[0][i] = c0;
    r[1][i] = c1;
    r[2][i] = c2;
    r[3][i] = c3;
  }
}

CPU_CLONES static void philox_block_any(uint64_t seed, uint64_t first,
                                        int64_t n, uint32_t r[4][RBLOCK]) {
  int64_t i0 = 0;
  for (; i0 + 16 <= n; i0 += 16) {
    uint32_t lo[16], hi[16];
    for (int l = 0; l < 16; l++) { /* the counter: the element's index */
      uint64_t ix = first + (uint64_t)(i0 + l);
      lo[l] = (uint32_t)ix;
      hi[l] = (uint32_t)(ix >> 32);
    }
    px_u32 c0, c1, c2 = {0}, c3 = {0};
    memcpy(&c0, lo, sizeof c0);
    memcpy(&c1, hi, sizeof c1);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
      px_u32 l0, h0, l1, h1;
      PX_MULHILO(c0, PHILOX_M0, l0, h0);
      PX_MULHILO(c2, PHILOX_M1, l1, h1);
      c0 = h1 ^ c1 ^ k0;
      c2 = h0 ^ c3 ^ k1;
      c1 = l1;
      c3 = l0;
      k0 += PHILOX_W0;
      k1 += PHILOX_W1;
    }
    memcpy(&r[0][i0], &c0, sizeof c0);
    memcpy(&r[1][i0], &c1, sizeof c1);
    memcpy(&r[2][i0], &c2, sizeof c2);
    memcpy(&r[3][i0], &c3, sizeof c3);
  }
  if (i0 < n) philox_rest(seed, first, i0, n, r);
}

/* Hand-written AVX2 and AVX-512 forms: GCC 12 compiles PX_MULHILO's
 * 64-bit lane products to a full 64 x 64 multiply (three vpmuludq, shifts
 * and adds in the v3 clone, vpmullq in v4) although both factors fit in
 * 32 bits, and in the v3 clone the 16-lane vectors spill: rand 16M took
 * 170 ms at avx2 (PyTorch 60). Here each product is one vpmuludq on the
 * even lanes and one on the odd lanes shifted down, the halves blended
 * back; two groups of 8 lanes side by side in AVX2 (independent chains
 * through the rounds). Integer arithmetic: the same words as the generic
 * form and cpu_philox4x32 (tests/test_creation.c checks them). */
#if CPU_HAVE_CLONES && defined(__x86_64__)
#include <immintrin.h>

#define PX256 __attribute__((target("avx2")))
/* lo and hi of m * a in every 32-bit lane */
PX256 static inline void px_mulhilo_256(__m256i a, __m256i m, __m256i *lo,
                                        __m256i *hi) {
  __m256i pe = _mm256_mul_epu32(a, m);
  __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  *lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xaa);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xaa);
}
PX256 static inline void px_round_256(__m256i *c, __m256i k0, __m256i k1) {
  const __m256i m0 = _mm256_set1_epi64x(PHILOX_M0), m1 = _mm256_set1_epi64x(PHILOX_M1);
  __m256i l0, h0, l1, h1;
  px_mulhilo_256(c[0], m0, &l0, &h0);
  px_mulhilo_256(c[2], m1, &l1, &h1);
  c[0] = _mm256_xor_si256(_mm256_xor_si256(h1, c[1]), k0);
  c[2] = _mm256_xor_si256(_mm256_xor_si256(h0, c[3]), k1);
  c[1] = l1;
  c[3] = l0;
}
/* the counters of elements first + i .. + 7: low and high words (the
 * high word one more in the lanes where the low one wrapped) */
PX256 static inline void px_counter_256(uint64_t first, int64_t i, __m256i *c) {
  uint64_t base = first + (uint64_t)i;
  __m256i b = _mm256_set1_epi32((int)(uint32_t)base);
  __m256i lo = _mm256_add_epi32(b, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i sign = _mm256_set1_epi32(INT32_MIN); /* unsigned lo < b */
  __m256i wrap = _mm256_cmpgt_epi32(_mm256_xor_si256(b, sign), _mm256_xor_si256(lo, sign));
  c[0] = lo;
  c[1] = _mm256_sub_epi32(_mm256_set1_epi32((int)(uint32_t)(base >> 32)), wrap);
  c[2] = c[3] = _mm256_setzero_si256();
}
PX256 static inline void px_store_256(uint32_t r[4][RBLOCK], int64_t i, const __m256i *c) {
  for (int k = 0; k < 4; k++) _mm256_storeu_si256((__m256i *)(void *)&r[k][i], c[k]);
}
PX256 static void philox_block_256(uint64_t seed, uint64_t first, int64_t n,
                                   uint32_t r[4][RBLOCK]) {
  int64_t i0 = 0;
  for (; i0 + 16 <= n; i0 += 16) {
    __m256i a[4], b[4];
    px_counter_256(first, i0, a);
    px_counter_256(first, i0 + 8, b);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
      __m256i k0v = _mm256_set1_epi32((int)k0), k1v = _mm256_set1_epi32((int)k1);
      px_round_256(a, k0v, k1v);
      px_round_256(b, k0v, k1v);
      k0 += PHILOX_W0;
      k1 += PHILOX_W1;
    }
    px_store_256(r, i0, a);
    px_store_256(r, i0 + 8, b);
  }
  if (i0 < n) philox_rest(seed, first, i0, n, r);
}

#define PX512 __attribute__((target("avx512f")))
PX512 static inline void px_mulhilo_512(__m512i a, __m512i m, __m512i *lo,
                                        __m512i *hi) {
  __m512i pe = _mm512_mul_epu32(a, m);
  __m512i po = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  *lo = _mm512_mask_blend_epi32(0xaaaa, pe, _mm512_slli_epi64(po, 32));
  *hi = _mm512_mask_blend_epi32(0xaaaa, _mm512_srli_epi64(pe, 32), po);
}
PX512 static void philox_block_512(uint64_t seed, uint64_t first, int64_t n,
                                   uint32_t r[4][RBLOCK]) {
  const __m512i m0 = _mm512_set1_epi64(PHILOX_M0), m1 = _mm512_set1_epi64(PHILOX_M1);
  int64_t i0 = 0;
  for (; i0 + 16 <= n; i0 += 16) {
    uint64_t base = first + (uint64_t)i0; /* the counters, as px_counter_256 */
    __m512i b = _mm512_set1_epi32((int)(uint32_t)base);
    __m512i c0 = _mm512_add_epi32(b, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                       10, 11, 12, 13, 14, 15));
    __m512i hi = _mm512_set1_epi32((int)(uint32_t)(base >> 32));
    __m512i c1 = _mm512_mask_add_epi32(hi, _mm512_cmplt_epu32_mask(c0, b), hi,
                                       _mm512_set1_epi32(1));
    __m512i c2 = _mm512_setzero_si512(), c3 = c2;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
      __m512i l0, h0, l1, h1;
      px_mulhilo_512(c0, m0, &l0, &h0);
      px_mulhilo_512(c2, m1, &l1, &h1);
      c0 = _mm512_xor_si512(_mm512_xor_si512(h1, c1), _mm512_set1_epi32((int)k0));
      c2 = _mm512_xor_si512(_mm512_xor_si512(h0, c3), _mm512_set1_epi32((int)k1));
      c1 = l1;
      c3 = l0;
      k0 += PHILOX_W0;
      k1 += PHILOX_W1;
    }
    _mm512_storeu_si512(&r[0][i0], c0);
    _mm512_storeu_si512(&r[1][i0], c1);
    _mm512_storeu_si512(&r[2][i0], c2);
    _mm512_storeu_si512(&r[3][i0], c3);
  }
  if (i0 < n) philox_rest(seed, first, i0, n, r);
}

typedef void (*philox_block_fn)(uint64_t, uint64_t, int64_t, uint32_t[4][RBLOCK]);
CPU_RESOLVER static philox_block_fn resolve_philox_block(void) {
  __builtin_cpu_init();
  if (CPU_HAS_AVX512F()) return philox_block_512;
  if (__builtin_cpu_supports("avx2")) return philox_block_256;
  return philox_block_any;
}
static void philox_block(uint64_t seed, uint64_t first, int64_t n,
                         uint32_t r[4][RBLOCK])
    __attribute__((ifunc("resolve_philox_block")));
#else
static void philox_block(uint64_t seed, uint64_t first, int64_t n,
                         uint32_t r[4][RBLOCK]) {
  philox_block_any(seed, first, n, r);
}
#endif

void cpu_philox_uniform_block(uint64_t seed, uint64_t first, int64_t n,
                              double *out) {
  uint32_t r[4][RBLOCK];
  for (int64_t b = 0; b < n; b += RBLOCK) {
    int64_t m = n - b < RBLOCK ? n - b : RBLOCK;
    philox_block(seed, first + (uint64_t)b, m, r);
    for (int64_t i = 0; i < m; i++) out[b + i] = to_unit(r[0][i], r[1][i]);
  }
}

/* to_unit's 53-bit double of words (w0, w1), exactly, in a form that
 * vectorises: a 21-bit high part (an exact int32 conversion) and a 32-bit
 * low part (exact through the 2^52 bias: AVX2 converts no unsigned or
 * 64-bit integer) */
static inline double unit53(uint32_t w0, uint32_t w1) {
  uint32_t hi = w0 >> 11, lo = (w0 << 21) | (w1 >> 11);
  double lo_d = vm_as_double(0x4330000000000000ull | lo) - 4503599627370496.0;
  return ((double)(int32_t)hi * 4294967296.0 + lo_d) *
         (1.0 / 9007199254740992.0);
}

/* float32 uniforms: to_unit's double rounded to float and kept below 1,
 * as the generic path below stores them (the same bits) */
CPU_CLONES static void uniform_f32(float *restrict out,
                                   const uint32_t *restrict r0,
                                   const uint32_t *restrict r1, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float f = (float)unit53(r0[i], r1[i]);
    out[i] = f < 0.99999994f ? f : 0.99999994f;
  }
}

/* float32 normals: Box-Muller as the double path, sqrt(-2 ln u1)
 * cos(2 pi u2), with u1, u2 the same 53-bit doubles, evaluated in float
 * where every rounding is relative: ln u1 = e ln2 + log1p(m - 1) with m
 * in [sqrt 1/2, sqrt 2) split off the double (m - 1 exact, so u1 near 1
 * keeps its digits), and the angle reduced by quarter turns in double
 * (w = u2 - q/4 exact, |2 pi w| <= pi/4), so no transform loses what
 * float precision holds; within a few ulp of the double path rounded to
 * float (tests/test_creation.c). Part one: per element, in double, the
 * float inputs of part two. */
typedef struct normal_parts {
  float f[RBLOCK], e[RBLOCK], th[RBLOCK];
  int32_t quad[RBLOCK];
} normal_parts;

CPU_CLONES static void normal_split(normal_parts *restrict np,
                                    const uint32_t r[4][RBLOCK], int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    double u1 = unit53(r[0][i], r[1][i]), u2 = unit53(r[2][i], r[3][i]);
    u1 = u1 < 1e-300 ? 1e-300 : u1; /* as the double path */
    uint64_t b = vm_as_u64(u1);
    /* u1 = m 2^e, m in [1, 2); the exponent as a double through the bias */
    double e = vm_as_double(0x4330000000000000ull | (b >> 52)) -
               (4503599627370496.0 + 1023.0);
    double m = vm_as_double((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
    bool big = m > 1.4142135623730951;
    np->f[i] = (float)((big ? 0.5 * m : m) - 1.0);
    np->e[i] = (float)(big ? e + 1.0 : e);
    /* q = round(4 u2) by the 1.5 2^52 bias; its low bits are the quadrant */
    double t = 4.0 * u2 + 6755399441055744.0;
    double q = t - 6755399441055744.0;
    np->quad[i] = (int32_t)(vm_as_u64(t) & 3);
    np->th[i] = (float)((u2 - 0.25 * q) * 6.283185307179586);
  }
}

/* part two: log1p(f) = 2 atanh(f / (2 + f)) (|s| <= 0.172: the series to
 * s^11 is below float rounding), sin and cos on [-pi/4, pi/4] by their
 * series to the 11th / 10th power */
CPU_CLONES static void normal_finish(float *restrict out,
                                     const normal_parts *restrict np,
                                     int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float f = np->f[i], s = f / (2.0f + f), s2 = s * s;
    float p = VM_FMA(s2, 1.0f / 11.0f, 1.0f / 9.0f);
    p = VM_FMA(p, s2, 1.0f / 7.0f);
    p = VM_FMA(p, s2, 1.0f / 5.0f);
    p = VM_FMA(p, s2, 1.0f / 3.0f);
    float l1p = VM_FMA(2.0f * s * s2, p, 2.0f * s);
    /* ln2 = 0.693145751953125 + 1.42860677e-06 (the first with 16 bits) */
    float ln = VM_FMA(np->e[i], 0.693145751953125f,
                      VM_FMA(np->e[i], 1.42860677e-06f, l1p));
    float r = sqrtf(-2.0f * ln);
    float x = np->th[i], x2 = x * x;
    float sp = VM_FMA(x2, 1.0f / 362880.0f, -1.0f / 5040.0f);
    sp = VM_FMA(sp, x2, 1.0f / 120.0f);
    sp = VM_FMA(sp, x2, -1.0f / 6.0f);
    float sn = VM_FMA(x * x2, sp, x);
    float cp = VM_FMA(x2, -1.0f / 3628800.0f, 1.0f / 40320.0f);
    cp = VM_FMA(cp, x2, -1.0f / 720.0f);
    cp = VM_FMA(cp, x2, 1.0f / 24.0f);
    cp = VM_FMA(cp, x2, -0.5f);
    float cs = VM_FMA(x2, cp, 1.0f);
    int32_t qd = np->quad[i];
    float c = (qd & 1) ? sn : cs;        /* cos(x + q pi/2) */
    c = ((qd + 1) & 2) ? -c : c;         /* negative for q = 1, 2 */
    out[i] = r * c;
  }
}

typedef struct rand_job {
  char *dst;
  dt_dtype d;
  uint64_t seed, first;
  bool normal;
} rand_job;

/* elements [begin, end) a block at a time: values depend only on (seed,
 * first + i), so any split gives the same tensor */
static void rand_range(int64_t begin, int64_t end, void *arg) {
  const rand_job *j = arg;
  size_t es = cpu_dtype_size(j->d);
  uint32_t r[4][RBLOCK];
  double v[RBLOCK];
  for (int64_t b = begin; b < end; b += RBLOCK) {
    int64_t n = end - b < RBLOCK ? end - b : RBLOCK;
    philox_block(j->seed, j->first + (uint64_t)b, n, r);
    if (j->d == DT_FLOAT32) {
      float *o = (float *)(void *)(j->dst + (size_t)b * es);
      if (!j->normal) {
        uniform_f32(o, r[0], r[1], n);
      } else {
        normal_parts np;
        normal_split(&np, (const uint32_t(*)[RBLOCK])r, n);
        normal_finish(o, &np, n);
      }
      continue;
    }
    for (int64_t i = 0; i < n; i++) {
      double u1 = to_unit(r[0][i], r[1][i]);
      if (!j->normal) {
        v[i] = u1;
        continue;
      }
      double u2 = to_unit(r[2][i], r[3][i]);
      if (u1 < 1e-300) u1 = 1e-300;
      v[i] = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    }
    if (!j->normal && j->d != DT_FLOAT64) {
      /* rounding to a narrow float may give 1.0: keep [0, 1) */
      double top = j->d == DT_FLOAT16 ? 0.99951171875
                   : j->d == DT_BFLOAT16 ? 0.99609375 : 0.99999994f;
      for (int64_t i = 0; i < n; i++) {
        if ((float)v[i] >= 1.0f) v[i] = 0.99999994f;
        if (v[i] > top) v[i] = top;
      }
    }
    cpu_store(j->dst + (size_t)b * es, j->d, (int64_t)es, v, DT_FLOAT64, n);
  }
}

void cpu_rand_fill(void *dst, dt_dtype d, int64_t n, uint64_t seed,
                   uint64_t first, bool normal) {
  rand_job j = {dst, d, seed, first, normal};
  cpu_parallel_for(n, CPU_GRAIN, rand_range, &j);
}
