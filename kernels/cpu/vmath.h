/* Vector-friendly float32 exp, erf, erfc and tanh (kernel-internal).
 *
 * glibc's expf/erfcf/tanhf are calls with branches per element, so a loop
 * over them never vectorises (gelu over 16M floats took 111 ms). These are
 * branch-free: every element takes the same instructions, ranges are chosen
 * with selects, integers are built from float bits, so GCC turns
 * `for (i..) y[i] = cpu_vexpf(x[i])` into SSE2 code at -O3 (baseline
 * x86-64, no FMA assumed). Accuracy, checked against double on 10^7 points
 * and the edge values by tests/test_vmath.c: exp 0.98 ulp, erf 1.6, tanh 1.3
 * (allowed 2); erfc 5.7 ulp where it is not denormal (allowed 6: Numerical
 * Recipes' fit is good to 1.2e-7; gelu's tolerance is 4e-6 relative, and
 * its negative tail is erfc of a positive argument, so it keeps that
 * relative accuracy without cancellation).
 *
 *   exp:  Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2 (Cephes' split
 *         of ln2; a degree-6 polynomial), 2^n applied as two factors
 *         2^(n/2) 2^(n - n/2) so results down to the denormals and up to
 *         the overflow to inf come out of one multiply chain.
 *   erf:  |x| < 0.875: x + x P(x^2) (a least-squares fit, 0.9 ulp);
 *         beyond: 1 - erfc(|x|) with the sign of x.
 *   erfc: z >= 0 from Numerical Recipes' erfcc, t exp(-z^2 + Q(t)),
 *         t = 1/(1 + z/2), relative error < 1.2e-7; z^2 is split into
 *         hi + lo (lo = fma(z, z, -hi), exact) so exp's argument keeps its low bits
 *         (a rounding of -z^2 ~ -100 would cost 60 ulp). z < 0: 2 - erfc(-z).
 *   tanh: |x| < 0.625: x P(x^2); beyond: 1 - 2 / (exp(2|x|) + 1). */
#ifndef CPU_VMATH_H
#define CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Hot loops are compiled three times, for baseline x86-64 (SSE2, 4
 * floats), x86-64-v3 (AVX2 + FMA, 8 floats) and x86-64-v4 (AVX-512:
 * mask registers instead of blends, ternary logic, 16-float loads where the
 * compiler's cost model wants them), and the loader picks one per machine
 * (GCC/clang target_clones through an ifunc: ELF on x86-64 only). On this
 * project's Zen 4 machines the v4 clone runs gelu in 0.94 ns per element
 * per core against 1.64 for v3: the loops are bound by instruction
 * throughput, and AVX-512 needs about half the instructions.
 * The kernels are built with -ffp-contract=off, so the compiler fuses no
 * multiply-add by itself; the polynomials below fuse theirs explicitly
 * (VM_FMA = fmaf, one rounding): one instruction in the v3 and v4 clones,
 * glibc's fmaf (the same exactly rounded result) elsewhere, so every
 * clone and every scalar use gives the same bits (tests/test_vmath.c
 * checks the blocks against the scalar functions bit for bit). Code that
 * is not cloned should call the blocks, not the inline scalar forms: a
 * fmaf call per operation is slow there. DTORCH_NO_CLONES turns the
 * clones off. */
/* DTORCH_SIMD_MAX_LEVEL (CMake's DTORCH_SIMD_MAX): the widest code the
 * loader may pick, so that an AVX-512 machine can run (and time) what a
 * CPU without AVX-512 runs: 2 (avx512, the default) every form; 1 (avx2)
 * no AVX-512 clone or form; 0 (baseline) no clones at all. */
#ifndef DTORCH_SIMD_MAX_LEVEL
#define DTORCH_SIMD_MAX_LEVEL 2
#endif
#if DTORCH_SIMD_MAX_LEVEL < 1 && !defined(DTORCH_NO_CLONES)
#define DTORCH_NO_CLONES 1
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DTORCH_NO_CLONES 1 /* clang's spelling of __SANITIZE_THREAD__ */
#endif
#endif
/* ThreadSanitizer: the ifunc resolvers run during relocation, before the
 * TSan runtime is up, and crash the program: no clones there */
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && \
    !defined(DTORCH_NO_CLONES) && !defined(__SANITIZE_THREAD__) && \
    !defined(__clang__) /* clang: no arch= clones; the default code only */
#if DTORCH_SIMD_MAX_LEVEL >= 2
#define CPU_CLONES                                                      \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
#define CPU_HAVE_CLONES 1 /* ifunc resolvers may run (kernels/cpu/stream.c) */
/* what the hand-written forms' resolvers test (after __builtin_cpu_init) */
#define CPU_HAS_AVX512F()                                               \
  (DTORCH_SIMD_MAX_LEVEL >= 2 && __builtin_cpu_supports("avx512f"))
#define CPU_HAS_AVX2_FMA()                                              \
  (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
/* an ifunc resolver runs during relocation, before the sanitizers' runtimes
 * are up: no instrumentation in it (GCC's own clone resolvers have none) */
#if defined(__clang__)
#define CPU_RESOLVER __attribute__((used, no_sanitize("address", "undefined")))
#else
#define CPU_RESOLVER __attribute__((no_sanitize_address, no_sanitize_undefined))
#endif
#else
#define CPU_CLONES
#define CPU_HAVE_CLONES 0
#endif

#define VM_FMA(a, b, c) __builtin_fmaf((a), (b), (c))

static inline uint32_t vm_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static inline float vm_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline uint64_t vm_as_u64(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}
static inline double vm_as_double(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* exp's constants: ln2 = VM_LN2_HI + VM_LN2_LO */
#define VM_ROUND_MAGIC 12582912.0f /* 1.5 * 2^23: adding it rounds to int */
#define VM_LOG2E 1.44269504088896341f
#define VM_LN2_HI 0.693359375f  /* 9 bits: n VM_LN2_HI is exact */
#define VM_LN2_LO (-2.12194440e-4f)
/* exp(r) = 1 + r + r^2 (Q0 + Q1 r + Q2 r^2 + Q3 r^3 + Q4 r^4) */
#define VM_EXP_Q0 0.49999988079071045f
#define VM_EXP_Q1 0.166665181517601f
#define VM_EXP_Q2 0.04166964814066887f
#define VM_EXP_Q3 0.008368946611881256f
#define VM_EXP_Q4 0.0013745324686169624f

/* exp(a + b), for a the large part and b a small correction (|b| <~ 2):
 * n is rounded from a + b, the reduction subtracts n ln2 from a first.
 * has_b is a constant at every call: without b (cpu_vexpf) the two adds
 * of b fold away (a + 0.0f does not fold by itself: -0 + 0 is +0). */
/* a clamped to [lo, hi] through the integer order of floats (negatives
 * with their magnitude bits flipped): two integer min/max, where float
 * compares in a vectorised loop became seven blends. A NaN comes out as
 * lo or hi: the callers restore it. */
static inline float vm_clamp_key(float a, int32_t lo, int32_t hi) {
  int32_t k = (int32_t)vm_bits(a);
  k ^= (k >> 31) & 0x7fffffff;
  k = k < lo ? lo : k;
  k = k > hi ? hi : k;
  k ^= (k >> 31) & 0x7fffffff;
  return vm_float((uint32_t)k);
}

/* checked = 0: the caller guarantees a0 + b in [-160, 1] or NaN (no clamp,
 * no NaN select: a NaN reaches p and every product after it). one = 1:
 * the caller guarantees a0 + b in [-87, 1] (p 2^n normal), and 2^n is an
 * add to p's exponent (a NaN is the caller's to restore) */
static inline float vm_exp_core(float a0, float b, int has_b, int checked,
                                int one) {
  const float magic = VM_ROUND_MAGIC;
  /* beyond [-104, 89] exp is 0 or inf in float (b is bounded, so n stays
   * in [-153, 131] and both factors of 2^n below are normal); the keys
   * of -104 and 89 (see vm_clamp_key) */
  float a = checked
                ? vm_clamp_key(a0, (int32_t)0xbd2fffff, (int32_t)0x42b20000)
                : a0;
  float t = VM_FMA(has_b ? a + b : a, VM_LOG2E, magic);
  float n = t - magic;
  int32_t ni = (int32_t)(vm_bits(t) - vm_bits(magic));
  float r = VM_FMA(n, -VM_LN2_HI, a);
  if (has_b) r += b;
  r = VM_FMA(n, -VM_LN2_LO, r);
  /* exp(r) = 1 + r + r^2 q(r), q a degree-4 least-squares fit (0.8 ulp
   * on its own; Cephes' degree 5 bought nothing measurable), evaluated
   * in Estrin's form: three dependent steps instead of Horner's five */
  float r2 = r * r;
  float q01 = VM_FMA(VM_EXP_Q1, r, VM_EXP_Q0);
  float q23 = VM_FMA(VM_EXP_Q3, r, VM_EXP_Q2);
  float q = VM_FMA(VM_FMA(VM_EXP_Q4, r2, q23), r2, q01);
  float p = VM_FMA(q, r2, r) + 1.0f;
  if (one) return vm_float(vm_bits(p) + ((uint32_t)ni << 23));
  int32_t n1 = ni >> 1, n2 = ni - n1; /* each in [-77, 66] */
  float f1 = vm_float((uint32_t)(n1 + 127) << 23);
  float f2 = vm_float((uint32_t)(n2 + 127) << 23);
  float y = (p * f1) * f2;
  return checked && a0 != a0 ? a0 : y; /* NaN in, NaN out */
}

static inline float vm_exp2parts(float a, float b) { return vm_exp_core(a, b, 1, 1, 0); }
static inline float cpu_vexpf(float x) { return vm_exp_core(x, 0.0f, 0, 1, 0); }
/* exp(a) for a <= 0 or NaN (x - max over a row: never positive), the same
 * bits as cpu_vexpf: only the lower clamp at -104 is needed (a compare and
 * a select, where a NaN compares false and stays), no upper clamp, no NaN
 * select: a loop body of 28 AVX-512 instructions per 16 elements where
 * cpu_vexpf's has 34 (softmax's exp-and-sum 0.45 -> 0.35 ns per element
 * per core) */
static inline float vm_exp_le0(float a) {
  return vm_exp_core(a < -104.0f ? -104.0f : a, 0.0f, 0, 0, 0);
}

/* exp(a) for a <= 0 or NaN as a term of a sum that is at least 1 (the
 * sum of exp(x - max) over a row: log_softmax's log-sum-exp;
 * cross_entropy's has its own, vm_lse_term). Below a = -87 the term is exp(-87) = 1.6e-38 instead of
 * the true (denormal or 0) value: as a double it is below 2^-53 of any sum
 * >= 1, and n of them (n < 2^60) too. That makes 2^n one exponent add (n
 * >= -126: p 2^n is normal) where vm_exp_le0 needs two factors: a loop
 * body of 23 AVX-512 instructions per 16 elements (load and store
 * included; 9 on the multiply-add ports) against 28 (11). NaN stays NaN
 * (a compare and a select: a NaN's payload would otherwise reach the
 * exponent add). */
static inline float vm_exp_sum_term(float a0) {
  float y = vm_exp_core(a0 < -87.0f ? -87.0f : a0, 0.0f, 0, 0, 1);
  return a0 != a0 ? a0 : y;
}

/* exp(a) for a = x - max <= 0 (or NaN) as a term of cross_entropy's
 * log-sum-exp (kernels/cpu/lse.c), cheaper than vm_exp_sum_term: the
 * same reduction (r = a - n ln2, ln2 in two parts), then exp(r) as a
 * degree-5 polynomial in Horner's form (9.2e-8 relative by itself;
 * scripts/fit_exp_lse.py) where vm_exp_core has 1 + r + r^2 q(r), q of
 * degree 4 in Estrin's form: 8 multiply-adds instead of 9 and no add.
 * Within 2.0 ulp on every float of [-87, 0] (vm_exp_core: 1.0; test_vmath
 * sweeps them). Below -87 the term is exp(-87), as vm_exp_sum_term's (2^n
 * is an add to p's exponent). NaN in, NaN out. */
#define VM_LSE_C1 0.999999702f /* c0 = 1 */
#define VM_LSE_C2 0.499991477f
#define VM_LSE_C3 0.166676387f
#define VM_LSE_C4 0.0418981612f
#define VM_LSE_C5 0.00829027034f
static inline float vm_lse_term(float a0) {
  float a = a0 < -87.0f ? -87.0f : a0;
  float t = VM_FMA(a, VM_LOG2E, VM_ROUND_MAGIC);
  float n = t - VM_ROUND_MAGIC;
  int32_t ni = (int32_t)(vm_bits(t) - vm_bits(VM_ROUND_MAGIC));
  float r = VM_FMA(n, -VM_LN2_HI, a);
  r = VM_FMA(n, -VM_LN2_LO, r);
  float p = VM_FMA(VM_LSE_C5, r, VM_LSE_C4);
  p = VM_FMA(p, r, VM_LSE_C3);
  p = VM_FMA(p, r, VM_LSE_C2);
  p = VM_FMA(p, r, VM_LSE_C1);
  p = VM_FMA(p, r, 1.0f);
  float y = vm_float(vm_bits(p) + ((uint32_t)ni << 23));
  return a0 != a0 ? a0 : y;
}

/* erfc(z) = t exp(-z^2 + Q(t)), t = 1 / (1 + z/2): Numerical Recipes'
 * erfcc polynomial Q */
#define VM_ERFC_C0 0.17087277f /* the leading coefficient */
#define VM_ERFC_C1 (-0.82215223f)
#define VM_ERFC_C2 1.48851587f
#define VM_ERFC_C3 (-1.13520398f)
#define VM_ERFC_C4 0.27886807f
#define VM_ERFC_C5 (-0.18628806f)
#define VM_ERFC_C6 0.09678418f
#define VM_ERFC_C7 0.37409196f
#define VM_ERFC_C8 1.00002368f
#define VM_ERFC_C9 (-1.26551223f)
static inline float vm_erfc_poly(float t) {
  float q = VM_FMA(VM_ERFC_C0, t, VM_ERFC_C1);
  q = VM_FMA(q, t, VM_ERFC_C2);
  q = VM_FMA(q, t, VM_ERFC_C3);
  q = VM_FMA(q, t, VM_ERFC_C4);
  q = VM_FMA(q, t, VM_ERFC_C5);
  q = VM_FMA(q, t, VM_ERFC_C6);
  q = VM_FMA(q, t, VM_ERFC_C7);
  q = VM_FMA(q, t, VM_ERFC_C8);
  q = VM_FMA(q, t, VM_ERFC_C9);
  return q;
}

/* erfc(z) for z >= 0 (NaN stays NaN). z is clamped to 10.5 (erfc(10.5) <
 * 2^-150 is 0), so exp's argument lies in [-112, 0] and exp's range
 * checks are left out (a NaN reaches every product). gelu writes the same
 * tail out for z = |x|/sqrt 2 (vmath.c) */
static inline float vm_erfc_pos(float z) {
  z = z > 10.5f ? 10.5f : z;
  float t = 1.0f / (1.0f + 0.5f * z);
  float q = vm_erfc_poly(t);
  /* z^2 = hi + lo exactly (the fused multiply-add gives hi's error) */
  float hi = z * z;
  float lo = VM_FMA(z, z, -hi);
  return t * vm_exp_core(-hi, q - lo, 1, 0, 0);
}

/* erf(x) / x - 1 for |x| < 0.875, as a polynomial in x^2 (erf = x + x q:
 * the leading 1.128 would lose half an ulp to its own rounding) */
#define VM_ERF_S0 8.435649942839518e-05f /* the leading coefficient */
#define VM_ERF_S1 (-0.0008152569644153118f)
#define VM_ERF_S2 0.005201295949518681f
#define VM_ERF_S3 (-0.026859182864427567f)
#define VM_ERF_S4 0.11283683031797409f
#define VM_ERF_S5 (-0.37612631916999817f)
#define VM_ERF_S6 0.12837916612625122f
static inline float vm_erf_small(float x) {
  float s = x * x;
  float p = VM_FMA(VM_ERF_S0, s, VM_ERF_S1);
  p = VM_FMA(p, s, VM_ERF_S2);
  p = VM_FMA(p, s, VM_ERF_S3);
  p = VM_FMA(p, s, VM_ERF_S4);
  p = VM_FMA(p, s, VM_ERF_S5);
  p = VM_FMA(p, s, VM_ERF_S6);
  return p;
}

static inline float vm_copysign(float mag, float sgn) {
  return vm_float((vm_bits(mag) & 0x7fffffffu) | (vm_bits(sgn) & 0x80000000u));
}

static inline float cpu_verff(float x) {
  float ax = vm_float(vm_bits(x) & 0x7fffffffu);
  float small = VM_FMA(x, vm_erf_small(x), x);
  float big = vm_copysign(1.0f - vm_erfc_pos(ax), x);
  return ax < 0.875f ? small : big;
}

static inline float cpu_verfcf(float x) {
  float ax = vm_float(vm_bits(x) & 0x7fffffffu);
  float e = vm_erfc_pos(ax);
  /* 1 - erf(x) cancels for x > 0.5 (erfc < 0.48): the tail takes over */
  float small = 1.0f - VM_FMA(x, vm_erf_small(x), x);
  float big = x > 0.0f ? e : 2.0f - e;
  return (x > -1.0f && x < 0.5f) ? small : big;
}

/* log(x): x = m 2^e with m in [sqrt 1/2, sqrt 2) from the bits (denormals
 * scaled by 2^23 first), log1p(f) = f + f^2 g(f) for f = m - 1 (exact),
 * g a degree-8 fit (Lawson-weighted least squares, 0.07 ulp on its own),
 * e ln2 in two parts. x < 0 or NaN: NaN; 0: -inf; inf: inf. */
static inline float cpu_vlogf(float x) {
  float xs = x < 0x1p-126f ? x * 0x1p23f : x; /* denormals: normal first */
  float eb = x < 0x1p-126f ? -23.0f : 0.0f;
  uint32_t b = vm_bits(xs);
  int32_t e = (int32_t)(b >> 23) - 127;
  float m = vm_float((b & 0x007fffffu) | 0x3f800000u);
  float big = m > 1.41421356f ? 1.0f : 0.0f;
  m = big != 0.0f ? 0.5f * m : m;
  float f = m - 1.0f, ef = (float)e + big + eb;
  float g = -7.623032334e-02f;
  g = VM_FMA(g, f, 1.290558371e-01f);
  g = VM_FMA(g, f, -1.324303341e-01f);
  g = VM_FMA(g, f, 1.418162212e-01f);
  g = VM_FMA(g, f, -1.660904774e-01f);
  g = VM_FMA(g, f, 2.000198523e-01f);
  g = VM_FMA(g, f, -2.500158530e-01f);
  g = VM_FMA(g, f, 3.333332550e-01f);
  g = VM_FMA(g, f, -4.999998831e-01f);
  float y = VM_FMA(f * f, g, f);
  /* ln2 = 0.693145751953125 (16 bits: e ln2hi exact) + 1.42860677e-06 */
  y = VM_FMA(ef, 0.693145751953125f, VM_FMA(ef, 1.42860677e-06f, y));
  y = x == 0.0f ? -INFINITY : y;
  y = x == INFINITY ? INFINITY : y;
  return x < 0.0f || x != x ? NAN : y;
}

/* sin and cos for |x| <= CPU_VTRIG_MAX: k = round(x 2/pi) by the 1.5 2^23
 * bias, r = x - k pi/2 with pi/2 in four parts (three of 12 bits, exact
 * in every product for k < 2^12, and the float rest: 2e-21 left over),
 * then the Taylor series on [-pi/4, pi/4] (to x^9 for sin, x^10 for
 * cos: below float rounding) and the quadrant k mod 4. Beyond the limit
 * the blocks (vmath.c) redo the element with libm. */
#define CPU_VTRIG_MAX 8192.0f
static inline void vm_trig_reduce(float x, float *r, int32_t *q) {
  const float magic = VM_ROUND_MAGIC;
  float t = VM_FMA(x, 0.636619772367581343f, magic);
  float k = t - magic;
  *q = (int32_t)(vm_bits(t) - vm_bits(magic));
  float y = VM_FMA(-k, 1.57080078125f, x);
  y = VM_FMA(-k, -4.453584551811218e-06f, y);
  y = VM_FMA(-k, -8.706138032721356e-10f, y);
  *r = VM_FMA(-k, 6.223371969669989e-14f, y);
}
static inline float vm_sin_poly(float r) {
  float s = r * r;
  float p = VM_FMA(s, 2.75573192e-06f, -1.98412698e-04f);
  p = VM_FMA(p, s, 8.33333333e-03f);
  p = VM_FMA(p, s, -1.66666667e-01f);
  return VM_FMA(r * s, p, r);
}
static inline float vm_cos_poly(float r) {
  float s = r * r;
  float p = VM_FMA(s, -2.75573192e-07f, 2.48015873e-05f);
  p = VM_FMA(p, s, -1.38888889e-03f);
  p = VM_FMA(p, s, 4.16666667e-02f);
  p = VM_FMA(p, s, -0.5f);
  return VM_FMA(s, p, 1.0f);
}
/* sin(r + q pi/2) (cos: q + 1) */
static inline float vm_trig_quadrant(float r, int32_t q) {
  float v = (q & 1) ? vm_cos_poly(r) : vm_sin_poly(r);
  return (q & 2) ? -v : v;
}
static inline float cpu_vsinf(float x) {
  float r;
  int32_t q;
  vm_trig_reduce(x, &r, &q);
  return vm_trig_quadrant(r, q);
}
static inline float cpu_vcosf(float x) {
  float r;
  int32_t q;
  vm_trig_reduce(x, &r, &q);
  return vm_trig_quadrant(r, q + 1);
}

static inline float cpu_vtanhf(float x) {
  float ax = vm_float(vm_bits(x) & 0x7fffffffu);
  float s = x * x;
  float p = -0.00569746270775795f;
  p = VM_FMA(p, s, 0.020630257204174995f);
  p = VM_FMA(p, s, -0.05373585224151611f);
  p = VM_FMA(p, s, 0.13331365585327148f);
  p = VM_FMA(p, s, -0.33333274722099304f);
  p = VM_FMA(p, s, 1.0f);
  float small = x * p;
  float a2 = ax > 9.5f ? 9.5f : ax; /* tanh(9.5) rounds to 1 */
  float big = vm_copysign(1.0f - 2.0f / (cpu_vexpf(2.0f * a2) + 1.0f), x);
  return ax < 0.625f ? small : big;
}

/* ---- blocks (kernels/cpu/vmath.c): y[i] = f(x[i]) for i < n, in place
 * allowed (y == x) */
void cpu_vexp_f32(float *y, const float *x, float shift, int64_t n); /* exp(x - shift) */
/* exp(x - m) for m >= every x[i] (a row's max; NaN rows give NaN): the
 * bits of cpu_vexp_f32, faster (vm_exp_le0) */
void cpu_vexp_max_f32(float *y, const float *x, float m, int64_t n);
void cpu_vexp_max_f32_generic(float *y, const float *x, float m, int64_t n);
/* y[i] *= k; y[i] = (x[i] - m) - k: softmax's and log_softmax's last pass */
/* exp(x - m) for m >= every x[i] as terms of a sum >= 1 (vm_exp_sum_term:
 * below exp(-87) the term is exp(-87)); only for sums */
void cpu_vexp_sum_term_f32(float *y, const float *x, float m, int64_t n);
void cpu_vscale_f32(float *y, float k, int64_t n);
void cpu_vsub2_f32(float *y, const float *x, float m, float k, int64_t n);
void cpu_vlog_f32(float *y, const float *x, int64_t n);
void cpu_vsin_f32(float *y, const float *x, int64_t n);
void cpu_vcos_f32(float *y, const float *x, int64_t n);
void cpu_vgelu_f32(float *y, const float *x, int64_t n);      /* erf form */
/* gelu's R(a) = erfcx(a / sqrt 2) / 2 on [0, 14.85]: row k holds the
 * coefficient of u^k, u = a - 2i, of interval i = round(a / 2) (vmath.c) */
#define CPU_GELU_DEG 9
extern const float cpu_gelu_tab[CPU_GELU_DEG + 1][8];
/* the generic clones of it (cpu_vgelu_f32 is vmath512.c's AVX-512 form
 * where the CPU has it: the same bits) */
void cpu_vgelu_f32_generic(float *y, const float *x, int64_t n);
/* the AVX2 + FMA form (vmath256.c; call only where the CPU has both) */
void cpu_vgelu_f32_avx2(float *y, const float *x, int64_t n);
void cpu_vgelu_grad_f32_avx2(float *g, const float *x, int64_t n);
float cpu_vgelu_one(float x); /* the same, one element */
void cpu_vgelu_tanh_f32(float *y, const float *x, int64_t n);
/* g[i] *= gelu'(x[i]) (erf form) */
void cpu_vgelu_grad_f32(float *g, const float *x, int64_t n);
void cpu_vgelu_grad_f32_generic(float *g, const float *x, int64_t n);
void cpu_vtanh_f32(float *y, const float *x, int64_t n);
void cpu_vsigmoid_f32(float *y, const float *x, int64_t n);
void cpu_vsilu_f32(float *y, const float *x, int64_t n);
/* max of x[0..n) (-inf for n = 0), compared as integers so it vectorises
 * without fast-math: +0 > -0, a NaN with the sign bit clear beats +inf
 * and one with it set loses to everything (callers let NaN through their
 * sums) */
float cpu_vmax_f32(const float *x, int64_t n);

#endif
