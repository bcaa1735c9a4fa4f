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

/* x Phi(x) with E = erfc(|x|/sqrt 2): 0.5 x E for x < 0 (no cancellation
 * in the tail), x - 0.5 x E for x >= 0 (E <= 1: no cancellation either).
 * One erfc tail evaluation per element (vm_erfc_pos's, written out
 * for z = |x|/sqrt 2 without rounding z: 1 + z/2 is one fused
 * multiply-add of |x|, and z^2 = |x|^2 / 2 exactly, split as hi + lo).
 * Both clamps are integer minima of the float bits (one instruction each,
 * against a compare and a blend): |x| to 14.85, where E is 0 in float (a
 * NaN clamps too; x carries it to the result), and x to 20 for the
 * product, so gelu(inf) = inf - 0.5 20 0 = inf (gelu(-inf) is NaN, as in
 * PyTorch: 0.5 (-inf) 0). Past x = 10, 0.5 x E is below half an ulp of x,
 * so x - h is x. */
static inline float vm_min_bits(float a, float b) {
  int32_t ia = (int32_t)vm_bits(a), ib = (int32_t)vm_bits(b);
  return vm_float((uint32_t)(ia < ib ? ia : ib));
}
static inline float gelu_one(float x) {
  float ax = vm_min_bits(vm_float(vm_bits(x) & 0x7fffffffu), 14.85f);
  float xm = vm_min_bits(x, 20.0f); /* negatives are negative integers */
  float t = 1.0f / VM_FMA(ax, 0.353553390593273762f, 1.0f);
  float q = vm_erfc_poly(t);
  float hi = ax * ax, lo = VM_FMA(ax, ax, -hi);
  /* exp's argument -z^2 + q in [-112, 0]: no range checks */
  float e = t * vm_exp_core(-0.5f * hi, VM_FMA(-0.5f, lo, q), 1, 0, 0);
  float h = 0.5f * xm * e;
  return x < 0.0f ? h : x - h;
}

CPU_CLONES void cpu_vgelu_f32_generic(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = gelu_one(x[i]);
}

/* erfcx(z) = erfc(z) exp(z^2) / t for t = 1 / (1 + z/2), z in [0, 10.5]:
 * a degree-10 polynomial in t (VM_ERFCX_C*, vmath.h) */
static inline float erfcx_over_t(float t) {
  float p = VM_FMA(VM_ERFCX_C0, t, VM_ERFCX_C1);
  p = VM_FMA(p, t, VM_ERFCX_C2);
  p = VM_FMA(p, t, VM_ERFCX_C3);
  p = VM_FMA(p, t, VM_ERFCX_C4);
  p = VM_FMA(p, t, VM_ERFCX_C5);
  p = VM_FMA(p, t, VM_ERFCX_C6);
  p = VM_FMA(p, t, VM_ERFCX_C7);
  p = VM_FMA(p, t, VM_ERFCX_C8);
  p = VM_FMA(p, t, VM_ERFCX_C9);
  return VM_FMA(p, t, VM_ERFCX_C10);
}

/* g *= d/dx x Phi(x) = Phi(x) + x phi(x), with one exp: E = exp(-x^2/2)
 * (x^2 split exactly into hi + lo: its rounding would cost up to 100 ulp
 * of exp's argument at |x| ~ 14), phi = E / sqrt(2 pi), and the tail
 * 0.5 erfc(|x|/sqrt 2) = 0.5 E erfcx(|x|/sqrt 2) with erfcx from a
 * polynomial in t (no second exp); Phi = the tail for x < 0, 1 - the tail
 * beyond (no cancellation for x << 0), erf's polynomial for |x| < 0.75 */
CPU_CLONES void cpu_vgelu_grad_f32_generic(float *g, const float *x,
                                          int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    float ac = vm_min_bits(vm_float(vm_bits(v) & 0x7fffffffu), 14.85f);
    float t = 1.0f / VM_FMA(ac, 0.353553390593273762f, 1.0f);
    /* from |x| clamped: past 14.85 E is 0 either way, and x^2's error lo
     * (up to 2^-25 x^2) must stay a small correction to exp's argument
     * (from x itself, |x| >= 2^16 gave NaN) */
    float hi = ac * ac, lo = VM_FMA(ac, ac, -hi);
    float e = vm_exp2parts(-0.5f * hi, -0.5f * lo);
    float h = 0.5f * e * (t * erfcx_over_t(t));
    /* near 0, where Phi + x phi cancels down to half of Phi (at x = -0.75),
     * Phi from erf's polynomial (1.6 ulp; the tail's 5 would show) */
    float z = v * 0.70710678118654752f;
    float small = 0.5f + 0.5f * VM_FMA(z, vm_erf_small(z), z);
    float cdf = ac < 0.75f ? small : v < 0.0f ? h : 1.0f - h;
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
