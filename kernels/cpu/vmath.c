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
 * erfcx(a / sqrt 2) / 2, smooth and slowly varying, a degree-7 polynomial
 * in u = a - i on each of the 16 intervals around the integers i
 * (cpu_gelu_tab, scripts/fit_gelu.py: 5.3e-8 relative). i is a rounded to
 * an integer by the magic add, whose low bits index the table (vpermps on
 * AVX-512: no division, no gather). h = x Phi(-a) = (x P) E, E last so a
 * denormal result is rounded once; gelu = h for x < 0 (no cancellation in
 * the tail), x - h beyond (h <= x/2). x in the product is clamped to 20,
 * so gelu(inf) = inf - 20 0 = inf (gelu(-inf) is NaN, as in PyTorch:
 * 0.5 (-inf) 0). Numerical Recipes' erfc (a division and a degree-9
 * polynomial in t = 1/(1 + z/2)) took 0.65 ns per element per core where
 * this takes 0.51 (AVX-512; AVX2 1.64 -> 1.10), and 7.5 -> 3.85 ulp worst
 * on [-15, 15] (every float of it checked once). */
const float cpu_gelu_tab[8][16] = {
    {0.5f, 0.261578292f, 0.168101996f, 0.121513948f, 0.094410643f, 0.0769193023f, 0.0647793114f, 0.0558934808f, 0.0491225459f, 0.0437987894f, 0.0395066924f, 0.03597489f, 0.0330189727f, 0.0305094142f, 0.0283526611f, 0.0264794882f},
    {-0.398942262f, -0.137364f, -0.062738277f, -0.034400437f, -0.0212997161f, -0.0143457558f, -0.0102663944f, -0.00768790348f, -0.00596191082f, -0.00475318078f, -0.0038753394f, -0.00321849459f, -0.00271462742f, -0.00231989194f, -0.00200503296f, -0.00174994546f},
    {0.249999046f, 0.0621075034f, 0.0213127583f, 0.00915632583f, 0.00460589118f, 0.002595264f, 0.00159047381f, 0.00103907962f, 0.000713630288f, 0.000510081882f, 0.000376650103f, 0.000285724673f, 0.000221720693f, 0.000175409485f, 0.000141099139f, 0.000115153904f},
    {-0.13296552f, -0.0250855517f, -0.00670427736f, -0.00231049093f, -0.000958718127f, -0.000456479087f, -0.000241183894f, -0.000138115356f, -8.42894369e-05f, -5.41478257e-05f, -3.62794199e-05f, -2.51743586e-05f, -1.79930666e-05f, -1.31895413e-05f, -9.88171814e-06f, -7.54560915e-06f},
    {0.0623790845f, 0.00924829766f, 0.00197532447f, 0.000556111452f, 0.000192735984f, 7.821287e-05f, 3.58414691e-05f, 1.80676761e-05f, 9.82857e-06f, 5.68782161e-06f, 3.46395814e-06f, 2.2016759e-06f, 1.45096647e-06f, 9.86359169e-07f, 6.88770115e-07f, 4.92429535e-07f},
    {-0.0260666367f, -0.00316536054f, -0.000550341385f, -0.000128356216f, -3.75374111e-05f, -1.30781627e-05f, -5.22550044e-06f, -2.32778189e-06f, -1.13196097e-06f, -5.91392507e-07f, -3.27924511e-07f, -1.91163039e-07f, -1.16282692e-07f, -7.33683123e-08f, -4.77837148e-08f, -3.19037134e-08f},
    {0.00909400266f, 0.00106009538f, 0.00015043444f, 2.91603683e-05f, 7.21741117e-06f, 2.16423928e-06f, 7.55460235e-07f, 2.978434e-07f, 1.29626869e-07f, 6.11973405e-08f, 3.09187165e-08f, 1.65407759e-08f, 9.29137034e-09f, 5.44323475e-09f, 3.30749139e-09f, 2.15352092e-09f},
    {-0.00195998698f, -0.00031683009f, -3.78691184e-05f, -6.23358028e-06f, -1.32542493e-06f, -3.45697742e-07f, -1.06221783e-07f, -3.72695581e-08f, -1.45770782e-08f, -6.23826457e-09f, -2.8787055e-09f, -1.41593504e-09f, -7.35606853e-10f, -4.00609462e-10f, -2.27334707e-10f, -1.11457767e-10f},
};

static inline float vm_min_bits(float a, float b) {
  int32_t ia = (int32_t)vm_bits(a), ib = (int32_t)vm_bits(b);
  return vm_float((uint32_t)(ia < ib ? ia : ib));
}
/* R(a) from the table, and E = exp(-a^2/2) (its argument in [-110.3, 0]:
 * no range checks), for a = |x| clamped */
static inline float gelu_r(float ax) {
  float tm = ax + VM_ROUND_MAGIC;
  float u = ax - (tm - VM_ROUND_MAGIC);
  uint32_t i = vm_bits(tm) & 15;
  float p = VM_FMA(cpu_gelu_tab[7][i], u, cpu_gelu_tab[6][i]);
  p = VM_FMA(p, u, cpu_gelu_tab[5][i]);
  p = VM_FMA(p, u, cpu_gelu_tab[4][i]);
  p = VM_FMA(p, u, cpu_gelu_tab[3][i]);
  p = VM_FMA(p, u, cpu_gelu_tab[2][i]);
  p = VM_FMA(p, u, cpu_gelu_tab[1][i]);
  return VM_FMA(p, u, cpu_gelu_tab[0][i]);
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
#else
  return "generic";
#endif
}
