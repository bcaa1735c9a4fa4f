/* AVX-512 forms of vmath.c blocks (gelu, gelu', softmax's exp(x - max)),
 * each picked by an ifunc where the CPU has AVX-512F (elsewhere the AVX2
 * forms of vmath256.c or the generic clones; under ThreadSanitizer, the
 * generic code). gelu's table rows sit in registers and are indexed by
 * vpermps (vmath.c says why the table).
 *
 * They compute what the generic loops compute, operation for operation,
 * with one substitution that keeps the bits: exp's 2^n, which the generic
 * code builds as two float factors (p 2^n1) 2^n2 so that a denormal
 * result is rounded once, is vscalefps(p, n) here: p 2^n1 is exact, so
 * both round the exact p 2^n once, to nearest. That is 1 instruction where
 * the factors take 7 (an integer subtract, a shift, a subtract, two adds
 * and shifts into exponents, two multiplies), in loops bound by
 * instruction throughput. test_vmath compares each form with the generic
 * one bit for bit. */
#include "kernels/cpu/vmath.h"

#if CPU_HAVE_CLONES && defined(__x86_64__)
#include <immintrin.h>

#define V512 __attribute__((target("avx512f")))
#define VS(x) _mm512_set1_ps(x)
#define VF(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define GELU_NC (CPU_GELU_DEG + 1)
/* the table's rows in the low 8 lanes (the upper ones zero: never read) */
#define GELU_TAB_LOAD(tab)                                                  \
  for (int k = 0; k < GELU_NC; k++)                                         \
    (tab)[k] = _mm512_maskz_loadu_ps((__mmask16)0x00ff, cpu_gelu_tab[k])

/* exp(r) times 2^n, the end of vm_exp_core */
V512 static inline __m512 v_exp_tail(__m512 r, __m512 n) {
  __m512 r2 = _mm512_mul_ps(r, r);
  __m512 q01 = VF(VS(VM_EXP_Q1), r, VS(VM_EXP_Q0));
  __m512 q23 = VF(VS(VM_EXP_Q3), r, VS(VM_EXP_Q2));
  __m512 q = VF(VF(VS(VM_EXP_Q4), r2, q23), r2, q01);
  __m512 p = _mm512_add_ps(VF(q, r2, r), VS(1.0f));
  return _mm512_scalef_ps(p, n);
}

/* vm_exp_core(a, b, has_b = 1, checked = 0, one = 0): a + b in [-160, 1] */
V512 static inline __m512 v_exp2parts_unchecked(__m512 a, __m512 b) {
  const __m512 magic = VS(VM_ROUND_MAGIC);
  __m512 t = VF(_mm512_add_ps(a, b), VS(VM_LOG2E), magic);
  __m512 n = _mm512_sub_ps(t, magic);
  __m512 r = VF(n, VS(-VM_LN2_HI), a);
  r = _mm512_add_ps(r, b);
  return v_exp_tail(VF(n, VS(-VM_LN2_LO), r), n);
}

/* vm_exp_le0: vm_exp_core(max(a, -104), 0, has_b = 0, checked = 0, one = 0)
 * for a <= 0 or NaN (vmaxps gives its second operand, a, when one is NaN) */
V512 static inline __m512 v_exp_le0(__m512 a) {
  const __m512 magic = VS(VM_ROUND_MAGIC);
  a = _mm512_max_ps(VS(-104.0f), a);
  __m512 t = VF(a, VS(VM_LOG2E), magic);
  __m512 n = _mm512_sub_ps(t, magic);
  __m512 r = VF(n, VS(-VM_LN2_HI), a);
  return v_exp_tail(VF(n, VS(-VM_LN2_LO), r), n);
}

/* |x| clamped to c through the integer order of non-negative floats (a NaN
 * clamps too), as vmath.c's vm_min_bits */
V512 static inline __m512 v_abs_min_bits(__m512 x, float c) {
  __m512i ai = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
  return _mm512_castsi512_ps(_mm512_min_epi32(ai, _mm512_set1_epi32((int)vm_bits(c))));
}

/* vmath.c's gelu_r and gelu_e on 16 lanes: R(a) from the table's rows
 * (tab, vectors) indexed by vpermps with tm's low bits, E = exp(-a^2/2) */
V512 static inline __m512 v_gelu_r(__m512 ax, const __m512 tab[GELU_NC]) {
  __m512 tm = VF(ax, VS(0.5f), VS(VM_ROUND_MAGIC));
  __m512 u = VF(_mm512_sub_ps(tm, VS(VM_ROUND_MAGIC)), VS(-2.0f), ax);
  __m512i i = _mm512_castps_si512(tm); /* 0..7 in the low 4 bits vpermps reads */
  __m512 p = VF(_mm512_permutexvar_ps(i, tab[9]), u, _mm512_permutexvar_ps(i, tab[8]));
  for (int k = 7; k >= 0; k--) p = VF(p, u, _mm512_permutexvar_ps(i, tab[k]));
  return p;
}
V512 static inline __m512 v_gelu_e(__m512 ax) {
  __m512 m = _mm512_mul_ps(VS(-0.5f), ax);
  __m512 hi = _mm512_mul_ps(ax, m);
  return v_exp2parts_unchecked(hi, _mm512_fmsub_ps(ax, m, hi));
}

/* vmath.c's gelu_one on 16 lanes (its comment says why each step) */
V512 static inline __m512 v_gelu(__m512 x, const __m512 tab[GELU_NC]) {
  __m512 ax = v_abs_min_bits(x, 14.85f);
  __m512 xm = _mm512_castsi512_ps(_mm512_min_epi32(
      _mm512_castps_si512(x), _mm512_set1_epi32((int)vm_bits(20.0f))));
  __m512 h = _mm512_mul_ps(_mm512_mul_ps(xm, v_gelu_r(ax, tab)), v_gelu_e(ax));
  __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_mov_ps(_mm512_sub_ps(x, h), neg, h);
}

/* vmath.c's cpu_vgelu_grad_f32 loop body on 16 lanes: g gelu'(v) */
V512 static inline __m512 v_gelu_grad(__m512 g, __m512 v, const __m512 tab[GELU_NC]) {
  __m512 ac = v_abs_min_bits(v, 14.85f);
  __m512 e = v_gelu_e(ac);
  __m512 h = _mm512_mul_ps(e, v_gelu_r(ac, tab));
  __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
  __m512 cdf = _mm512_mask_mov_ps(_mm512_sub_ps(VS(1.0f), h), neg, h);
  return _mm512_mul_ps(g, VF(v, _mm512_mul_ps(VS(0.39894228040143268f), e), cdf));
}

V512 static void vgelu_grad_512(float *g, const float *x, int64_t n) {
  __m512 tab[GELU_NC];
  GELU_TAB_LOAD(tab);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(g + i, v_gelu_grad(_mm512_loadu_ps(g + i), _mm512_loadu_ps(x + i), tab));
  if (i < n) {
    __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
    __m512 r = v_gelu_grad(_mm512_maskz_loadu_ps(k, g + i), _mm512_maskz_loadu_ps(k, x + i),
                           tab);
    _mm512_mask_storeu_ps(g + i, k, r);
  }
}

V512 static void vgelu_512(float *y, const float *x, int64_t n) {
  __m512 tab[GELU_NC];
  GELU_TAB_LOAD(tab);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, v_gelu(_mm512_loadu_ps(x + i), tab));
  if (i < n) {
    __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, k, v_gelu(_mm512_maskz_loadu_ps(k, x + i), tab));
  }
}

/* softmax's exponentials: y = exp(x - m), m >= every x */
V512 static void vexp_max_512(float *y, const float *x, float m, int64_t n) {
  const __m512 mv = VS(m);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, v_exp_le0(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv)));
  if (i < n) {
    __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
    __m512 v = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv);
    _mm512_mask_storeu_ps(y + i, k, v_exp_le0(v));
  }
}

typedef void (*vblk_fn)(float *, const float *, int64_t);
typedef void (*vexp_max_fn)(float *, const float *, float, int64_t);
CPU_RESOLVER static vblk_fn resolve_vgelu_grad(void) {
  __builtin_cpu_init();
  if (CPU_HAS_AVX512F()) return vgelu_grad_512;
  if (CPU_HAS_AVX2_FMA())
    return cpu_vgelu_grad_f32_avx2;
  return cpu_vgelu_grad_f32_generic;
}
void cpu_vgelu_grad_f32(float *g, const float *x, int64_t n)
    __attribute__((ifunc("resolve_vgelu_grad")));
CPU_RESOLVER static vexp_max_fn resolve_vexp_max(void) {
  __builtin_cpu_init();
  return CPU_HAS_AVX512F() ? vexp_max_512 : cpu_vexp_max_f32_generic;
}
void cpu_vexp_max_f32(float *y, const float *x, float m, int64_t n)
    __attribute__((ifunc("resolve_vexp_max")));
CPU_RESOLVER static vblk_fn resolve_vgelu(void) {
  __builtin_cpu_init();
  if (CPU_HAS_AVX512F()) return vgelu_512;
  if (CPU_HAS_AVX2_FMA())
    return cpu_vgelu_f32_avx2;
  return cpu_vgelu_f32_generic;
}
void cpu_vgelu_f32(float *y, const float *x, int64_t n)
    __attribute__((ifunc("resolve_vgelu")));
#else
void cpu_vgelu_f32(float *y, const float *x, int64_t n) {
  cpu_vgelu_f32_generic(y, x, n);
}
void cpu_vexp_max_f32(float *y, const float *x, float m, int64_t n) {
  cpu_vexp_max_f32_generic(y, x, m, n);
}
void cpu_vgelu_grad_f32(float *g, const float *x, int64_t n) {
  cpu_vgelu_grad_f32_generic(g, x, n);
}
#endif
