/* The vmath.h functions over blocks: one call per block, the loop inside
 * vectorised (and cloned for AVX2), so kernels pay no call per element. */
#include "kernels/cpu/vmath.h"

#include <math.h>
#include <string.h>

CPU_CLONES void cpu_vexp_f32(float *y, const float *x, float shift,
                             int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = cpu_vexpf(x[i] - shift);
}

CPU_CLONES void cpu_vexp_max_f32_generic(float *y, const float *x, float m,
                                         int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = vm_exp_le0(x[i] - m);
}

CPU_CLONES void cpu_vexp_sum_term_f32(float *y, const float *x, float m,
                                      int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = vm_exp_sum_term(x[i] - m);
}

CPU_CLONES void cpu_vscale_f32(float *restrict y, float k, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] *= k;
}

CPU_CLONES void cpu_vsub2_f32(float *y, const float *x, float m, float k,
                              int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) - k;
}

CPU_CLONES void cpu_vlog_f32(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = cpu_vlogf(x[i]);
}

/* sin / cos: the vectorised form for |x| <= CPU_VTRIG_MAX, then libm for
 * the rest of the block (infinities and NaN included). The block counts
 * the elements out of range as it goes (a vector compare and add), so the
 * scalar pass over the inputs runs only for blocks that have one: it was
 * 45% of sin's time. */
CPU_CLONES static int64_t vsin_blk(float *restrict y, const float *restrict x,
                                   int64_t n, int32_t shift) {
  int64_t out = 0;
  for (int64_t i = 0; i < n; i++) {
    float r;
    int32_t q;
    vm_trig_reduce(x[i], &r, &q);
    y[i] = vm_trig_quadrant(r, q + shift);
    out += !(vm_float(vm_bits(x[i]) & 0x7fffffffu) <= CPU_VTRIG_MAX);
  }
  return out;
}

static void vtrig(float *y, const float *x, int64_t n, int32_t shift) {
  enum { B = 256 };
  float buf[B];
  for (int64_t s = 0; s < n; s += B) {
    int64_t k = n - s < B ? n - s : B;
    if (vsin_blk(buf, x + s, k, shift))
      for (int64_t i = 0; i < k; i++) {
        float v = x[s + i];
        if (!(fabsf(v) <= CPU_VTRIG_MAX)) buf[i] = shift ? cosf(v) : sinf(v);
      }
    memcpy(y + s, buf, sizeof *buf * (size_t)k); /* y may be x */
  }
}

void cpu_vsin_f32(float *y, const float *x, int64_t n) { vtrig(y, x, n, 0); }
void cpu_vcos_f32(float *y, const float *x, int64_t n) { vtrig(y, x, n, 1); }

/* gelu(x) = x Phi(x). With a = |x| clamped to 14.85 (past it Phi(-a) is
 * 0 in float; a NaN clamps too and x carries it to the result),
 * Phi(-a) = E R(a): E = exp(-a^2/2), with a^2/2 split exactly into hi + lo
 * (its rounding would cost up to 100 ulp of E near 14), and R(a) =
 * erfcx(a / sqrt 2) / 2, smooth and slowly varying, a degree-9 polynomial
 * in u = a - 2i on each of the 8 intervals around the even numbers 2i
 * (cpu_gelu_tab, scripts/fit_gelu.py: 5.0e-8 relative). i is a/2 rounded
 * to an integer by the magic add, whose low bits index the table: one
 * vpermps per coefficient on AVX2 and AVX-512 (no division, no gather).
 * Until 2026-12 the table had 16 intervals of width 1 at degree 7, and
 * AVX2, whose vpermps reads 8 entries, took two and a blend for each of
 * its 8 coefficients: 27 operations for R where this takes 22 (AVX2 gelu
 * 1.15 -> 0.85 ns per element on one core in L1; AVX-512, 18 -> 22
 * operations: 0.43 -> 0.48 ns). Both forms and the generic clone give the
 * same bits on all 2^32 floats. Accuracy on every third float of [-15,
 * 15]: 3.54 ulp worst (the old table 3.85), mean 0.086 (the same); R's
 * rounding grows with |u| (up to 1 now), which shows where gelu's
 * derivative cancels near x = -0.75: 4.6e-8 absolute there (3.2e-8
 * before).
 * h = x Phi(-a) = (x P) E, E last so a
 * denormal result is rounded once; gelu = h for x < 0 (no cancellation in
 * the tail), x - h beyond (h <= x/2). x in the product is clamped to 20,
 * so gelu(inf) = inf - 20 0 = inf (gelu(-inf) is NaN, as in PyTorch:
 * 0.5 (-inf) 0). Numerical Recipes' erfc (a division and a degree-9
 * polynomial in t = 1/(1 + z/2)) took 0.65 ns per element per core where
 * the first table took 0.51 (AVX-512; AVX2 1.64 -> 1.10), and 7.5 -> 3.85
 * ulp worst on [-15, 15] (every float of it checked once). */
const float cpu_gelu_tab[CPU_GELU_DEG + 1][8] = {
    {0.5f, 0.168101996f, 0.094410643f, 0.0647793114f, 0.0491225459f, 0.0395066924f, 0.0330189727f, 0.0283526611f},
    {-0.398942262f, -0.062738277f, -0.0212997161f, -0.0102663944f, -0.00596191082f, -0.00387533917f, -0.00271462766f, -0.00200503296f},
    {0.249999329f, 0.0213128477f, 0.00460583623f, 0.00159056566f, 0.000713641173f, 0.000376702519f, 0.000221668786f, 0.00014107833f},
    {-0.13297227f, -0.0067043216f, -0.000958700199f, -0.000241194488f, -8.42889858e-05f, -3.62851497e-05f, -1.79883082e-05f, -9.88466672e-06f},
    {0.0624466278f, 0.00197560922f, 0.000193028405f, 3.53836003e-05f, 9.7744005e-06f, 3.20255936e-06f, 1.70977455e-06f, 8.18382489e-07f},
    {-0.0264033861f, -0.00055023958f, -3.76191347e-05f, -5.16514501e-06f, -1.13086526e-06f, -3.00461949e-07f, -1.39077883e-07f, -1.32813742e-08f},
    {0.00998683926f, 0.000146029211f, 6.65198877e-06f, 1.4826569e-06f, 2.15659398e-07f, 4.48730844e-07f, -4.0439258e-07f, -2.58578552e-07f},
    {-0.00318734488f, -3.71775968e-05f, -1.18547564e-06f, -2.07245193e-07f, -1.85810034e-08f, -4.60066474e-08f, 3.50591307e-08f, -1.03756435e-07f},
    {0.000739594572f, 9.63217644e-06f, 4.68778921e-07f, -3.52523756e-07f, -4.17860306e-08f, -2.08633963e-07f, 2.06777187e-07f, 1.67720074e-07f},
    {-8.88358845e-05f, -2.15392174e-06f, -1.01183609e-07f, 5.04235018e-08f, 2.51004884e-09f, 2.13243645e-08f, -1.77133241e-08f, 8.65279617e-08f},
};

static inline float vm_min_bits(float a, float b) {
  int32_t ia = (int32_t)vm_bits(a), ib = (int32_t)vm_bits(b);
  return vm_float((uint32_t)(ia < ib ? ia : ib));
}
/* R(a) from the table, and E = exp(-a^2/2) (its argument in [-110.3, 0]:
 * no range checks), for a = |x| clamped */
static inline float gelu_r(float ax) {
  /* ax / 2 is exact (a denormal's rounding cannot reach the magic add's
   * result), so the fused form rounds once as the plain one would; u =
   * ax - 2c is exact (Sterbenz: c <= ax <= 4c for c >= 1) */
  float tm = VM_FMA(ax, 0.5f, VM_ROUND_MAGIC);
  float u = VM_FMA(tm - VM_ROUND_MAGIC, -2.0f, ax);
  uint32_t i = vm_bits(tm) & 7;
  float p = VM_FMA(cpu_gelu_tab[9][i], u, cpu_gelu_tab[8][i]);
  for (int k = 7; k >= 0; k--) p = VM_FMA(p, u, cpu_gelu_tab[k][i]);
  return p;
}
static inline float gelu_e(float ax) {
  float m = -0.5f * ax; /* exact */
  float hi = ax * m, lo = VM_FMA(ax, m, -hi);
  return vm_exp_core(hi, lo, 1, 0, 0);
}
static inline float gelu_one(float x) {
  float ax = vm_min_bits(vm_float(vm_bits(x) & 0x7fffffffu), 14.85f);
  float xm = vm_min_bits(x, 20.0f); /* negatives are negative integers */
  float h = (xm * gelu_r(ax)) * gelu_e(ax);
  return x < 0.0f ? h : x - h;
}

CPU_CLONES void cpu_vgelu_f32_generic(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = gelu_one(x[i]);
}

/* g *= d/dx x Phi(x) = Phi(x) + x phi(x), from gelu's pieces (above):
 * E = exp(-x^2/2) once, phi = E / sqrt(2 pi), Phi(-|x|) = E R(|x|) —
 * Phi = that for x < 0, 1 - that beyond (no cancellation for x << 0).
 * R's table is accurate near 0 too, where Phi + x phi cancels down to
 * half of Phi (at x = -0.75): 1.9 ulp worst on [-20, 20], where the
 * erfc tail in t = 1/(1 + z/2) with erf's polynomial near 0 had 7.1
 * and a division. |x| clamped to 14.85 (E is 0 past it): x^2 from x
 * itself gave NaN from |x| = 2^16 on. */
CPU_CLONES void cpu_vgelu_grad_f32_generic(float *g, const float *x,
                                          int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    float ac = vm_min_bits(vm_float(vm_bits(v) & 0x7fffffffu), 14.85f);
    float e = gelu_e(ac), h = e * gelu_r(ac);
    float cdf = v < 0.0f ? h : 1.0f - h;
    g[i] *= VM_FMA(v, 0.39894228040143268f * e, cdf);
  }
}

/* 0.5 (1 + tanh u) = sigmoid(2u): no cancellation for x << 0 */
CPU_CLONES void cpu_vgelu_tanh_f32(float *y, const float *x, int64_t n) {
  const float k = 0.7978845608028654f; /* sqrt(2/pi) */
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    y[i] = v / (1.0f + cpu_vexpf(-2.0f * k * (v + 0.044715f * v * v * v)));
  }
}

CPU_CLONES void cpu_vtanh_f32(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = cpu_vtanhf(x[i]);
}

CPU_CLONES void cpu_vsigmoid_f32(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + cpu_vexpf(-x[i]));
}

CPU_CLONES void cpu_vsilu_f32(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + cpu_vexpf(-x[i]));
}


/* through the block, so the scalar form runs the same clone (the same
 * bits, and no fmaf call per operation in baseline code) */
float cpu_vgelu_one(float x) {
  float y;
  cpu_vgelu_f32(&y, &x, 1);
  return y;
}

/* In the order of floats as int32 with the magnitude bits of negatives
 * flipped, without flipping: a float with the sign bit clear is the
 * largest one's bits as int32 (every value with the sign set is a negative
 * int32), and when all have it set the largest is the smallest bits as
 * uint32, -inf (the start) below every NaN with the sign set. Two integer
 * reductions on one load where the flip took three operations and a
 * second load per vector. */
CPU_CLONES float cpu_vmax_f32(const float *x, int64_t n) {
  int32_t pos = INT32_MIN;        /* -0: the sign set, "none yet" */
  uint32_t neg = 0xff800000u;     /* -inf */
  for (int64_t i = 0; i < n; i++) {
    uint32_t b = vm_bits(x[i]);
    pos = (int32_t)b > pos ? (int32_t)b : pos;
    neg = b < neg ? b : neg;
  }
  return vm_float(pos >= 0 ? (uint32_t)pos : neg);
}

/* the level the loader picks for CPU_CLONES kernels on this machine (a
 * target_clones "arch=x86-64-v4" clone runs where the CPU has all of
 * x86-64-v4's features; the hand-written forms need AVX-512F or AVX2 +
 * FMA, which those levels include) */
const char *cpu_simd_level(void) {
#if CPU_HAVE_CLONES
  __builtin_cpu_init();
  if (DTORCH_SIMD_MAX_LEVEL >= 2 && __builtin_cpu_supports("x86-64-v4"))
    return "avx512";
  if (__builtin_cpu_supports("x86-64-v3")) return "avx2";
  return "sse2";
#elif defined(__AVX512F__) /* no clones: what the build's flags allow */
  return "avx512";
#elif defined(__AVX2__)
  return "avx2";
#elif defined(__SSE2__)
  return "sse2";
#else
  return "generic";
#endif
}
