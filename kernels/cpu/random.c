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
 * word k of element first + i. The ten rounds unroll and the loop over
 * elements vectorises (32 x 32 -> 64-bit multiplies are pmuludq); one
 * cpu_philox4x32 call per element cost 16 ns. */
#define RBLOCK 256
CPU_CLONES static void philox_block(uint64_t seed, uint64_t first, int64_t n,
                                    uint32_t r[4][RBLOCK]) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t index = first + (uint64_t)i;
    uint32_t c0 = (uint32_t)index, c1 = (uint32_t)(index >> 32), c2 = 0, c3 = 0;
    philox10(&c0, &c1, &c2, &c3, (uint32_t)seed, (uint32_t)(seed >> 32));
    r[0][i] = c0;
    r[1][i] = c1;
    r[2][i] = c2;
    r[3][i] = c3;
  }
}

void cpu_philox_uniform_block(uint64_t seed, uint64_t first, int64_t n,
                              double *out) {
  uint32_t r[4][RBLOCK];
  for (int64_t b = 0; b < n; b += RBLOCK) {
    int64_t m = n - b < RBLOCK ? n - b : RBLOCK;
    philox_block(seed, first + (uint64_t)b, m, r);
    for (int64_t i = 0; i < m; i++) out[b + i] = to_unit(r[0][i], r[1][i]);
  }
}

/* float32 uniforms: to_unit's double exactly, rounded to float and kept
 * below 1, as the generic path below stores them (the same bits), but in
 * a loop that vectorises: the 53-bit integer is built as a 21-bit high
 * part (an exact int32 conversion) and a 32-bit low part (exact through
 * the 2^52 bias: AVX2 converts no unsigned or 64-bit integer) */
CPU_CLONES static void uniform_f32(float *restrict out,
                                   const uint32_t *restrict r0,
                                   const uint32_t *restrict r1, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t hi = r0[i] >> 11, lo = (r0[i] << 21) | (r1[i] >> 11);
    uint64_t biased = 0x4330000000000000ull | lo;
    double lo_d;
    memcpy(&lo_d, &biased, sizeof lo_d);
    lo_d -= 4503599627370496.0; /* 2^52 */
    double u = ((double)(int32_t)hi * 4294967296.0 + lo_d) *
               (1.0 / 9007199254740992.0);
    float f = (float)u;
    out[i] = f < 0.99999994f ? f : 0.99999994f;
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
    if (!j->normal && j->d == DT_FLOAT32) {
      uniform_f32((float *)(void *)(j->dst + (size_t)b * es), r[0], r[1], n);
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
