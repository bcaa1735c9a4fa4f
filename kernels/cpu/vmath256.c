/* AVX2 + FMA forms of gelu and gelu' (vmath.c), for CPUs without AVX-512:
 * their table lookup is one 8-entry vpermps per coefficient, where the
 * generic clone gathers (vgatherdps: 1.9 ns per element per core in the
 * AVX-512 clone, against 0.5 for vpermps). The
 * same operations in the same order as vmath.c, exp's 2^n as its two
 * float factors: the same bits (test_vmath compares the forms on the
 * machines that have them). */
#include "kernels/cpu/vmath.h"

#if CPU_HAVE_CLONES && defined(__x86_64__)
#include <immintrin.h>

#define V256 __attribute__((target("avx2,fma")))
#define WS(x) _mm256_set1_ps(x)
#define WF(a, b, c) _mm256_fmadd_ps((a), (b), (c))

/* vm_exp_core(a, b, has_b = 1, checked = 0, one = 0) */
V256 static inline __m256 w_exp2parts_unchecked(__m256 a, __m256 b) {
  const __m256 magic = WS(VM_ROUND_MAGIC);
  __m256 t = WF(_mm256_add_ps(a, b), WS(VM_LOG2E), magic);
  __m256 n = _mm256_sub_ps(t, magic);
  __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(magic));
  __m256 r = WF(n, WS(-VM_LN2_HI), a);
  r = _mm256_add_ps(r, b);
  r = WF(n, WS(-VM_LN2_LO), r);
  __m256 r2 = _mm256_mul_ps(r, r);
  __m256 q01 = WF(WS(VM_EXP_Q1), r, WS(VM_EXP_Q0));
  __m256 q23 = WF(WS(VM_EXP_Q3), r, WS(VM_EXP_Q2));
  __m256 q = WF(WF(WS(VM_EXP_Q4), r2, q23), r2, q01);
  __m256 p = _mm256_add_ps(WF(q, r2, r), WS(1.0f));
  __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
}

/* min of the float bits as int32 (vmath.c's vm_min_bits) */
V256 static inline __m256 w_min_bits(__m256 a, float b) {
  return _mm256_castsi256_ps(_mm256_min_epi32(_mm256_castps_si256(a),
                                              _mm256_set1_epi32((int)vm_bits(b))));
}

/* coefficient k of interval i (0..7: vpermps reads the low 3 bits) */
V256 static inline __m256 w_coef(__m256i i, int k) {
  return _mm256_permutevar8x32_ps(_mm256_loadu_ps(cpu_gelu_tab[k]), i);
}

/* vmath.c's gelu_r and gelu_e on 8 lanes */
V256 static inline __m256 w_gelu_r(__m256 ax) {
  __m256 tm = WF(ax, WS(0.5f), WS(VM_ROUND_MAGIC));
  __m256 u = WF(_mm256_sub_ps(tm, WS(VM_ROUND_MAGIC)), WS(-2.0f), ax);
  __m256i i = _mm256_castps_si256(tm);
  __m256 p = WF(w_coef(i, 9), u, w_coef(i, 8));
  for (int k = 7; k >= 0; k--) p = WF(p, u, w_coef(i, k));
  return p;
}
V256 static inline __m256 w_gelu_e(__m256 ax) {
  __m256 m = _mm256_mul_ps(WS(-0.5f), ax);
  __m256 hi = _mm256_mul_ps(ax, m);
  return w_exp2parts_unchecked(hi, _mm256_fmsub_ps(ax, m, hi));
}
V256 static inline __m256 w_abs_clamped(__m256 x) {
  return w_min_bits(_mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))),
                    14.85f);
}

V256 static inline __m256 w_gelu(__m256 x) {
  __m256 ax = w_abs_clamped(x);
  __m256 xm = w_min_bits(x, 20.0f);
  __m256 h = _mm256_mul_ps(_mm256_mul_ps(xm, w_gelu_r(ax)), w_gelu_e(ax));
  __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_blendv_ps(_mm256_sub_ps(x, h), h, neg);
}

/* vmath.c's cpu_vgelu_grad_f32 loop body on 8 lanes: g gelu'(v) */
V256 static inline __m256 w_gelu_grad(__m256 g, __m256 v) {
  __m256 ac = w_abs_clamped(v);
  __m256 e = w_gelu_e(ac);
  __m256 h = _mm256_mul_ps(e, w_gelu_r(ac));
  __m256 neg = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ);
  __m256 cdf = _mm256_blendv_ps(_mm256_sub_ps(WS(1.0f), h), h, neg);
  return _mm256_mul_ps(g, WF(v, _mm256_mul_ps(WS(0.39894228040143268f), e), cdf));
}

V256 void cpu_vgelu_grad_f32_avx2(float *g, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(g + i, w_gelu_grad(_mm256_loadu_ps(g + i), _mm256_loadu_ps(x + i)));
  if (i < n) { /* the last 1 to 7 through buffers */
    float bg[8] = {0}, bx[8] = {0};
    memcpy(bg, g + i, sizeof(float) * (size_t)(n - i));
    memcpy(bx, x + i, sizeof(float) * (size_t)(n - i));
    _mm256_storeu_ps(bg, w_gelu_grad(_mm256_loadu_ps(bg), _mm256_loadu_ps(bx)));
    memcpy(g + i, bg, sizeof(float) * (size_t)(n - i));
  }
}

V256 void cpu_vgelu_f32_avx2(float *y, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, w_gelu(_mm256_loadu_ps(x + i)));
  if (i < n) { /* the last 1 to 7 through a buffer (y may be x) */
    float buf[8] = {0};
    memcpy(buf, x + i, sizeof(float) * (size_t)(n - i));
    _mm256_storeu_ps(buf, w_gelu(_mm256_loadu_ps(buf)));
    memcpy(y + i, buf, sizeof(float) * (size_t)(n - i));
  }
}
#else
void cpu_vgelu_f32_avx2(float *y, const float *x, int64_t n) {
  cpu_vgelu_f32_generic(y, x, n);
}
void cpu_vgelu_grad_f32_avx2(float *g, const float *x, int64_t n) {
  cpu_vgelu_grad_f32_generic(g, x, n);
}
#endif
