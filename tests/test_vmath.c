/* The kernels' branch-free float32 exp, erf, erfc and tanh
 * (kernels/cpu/vmath.h) against libm's double versions, in ulps of the
 * float result: 10^7 points per function (spread evenly over the float bit
 * patterns and over the interesting interval), plus the edge values
 * (infinities, NaN, ±0, denormals, the overflow and underflow
 * boundaries). DTORCH_SWEEP=reduced (the sanitizer runs) takes 10^5. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/nn.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vmath.h"
#include "testutil.h"

typedef struct fn_case {
  const char *name;
  float (*f)(float);
  double (*ref)(double);
  float lo, hi;          /* the interval sampled densely */
  double max_ulp;
  double tiny;           /* |ref| below this: compared in absolute terms */
} fn_case;

static float f_exp(float x) { return cpu_vexpf(x); }
static float f_erf(float x) { return cpu_verff(x); }
static float f_erfc(float x) { return cpu_verfcf(x); }
static float f_tanh(float x) { return cpu_vtanhf(x); }
static float f_log(float x) { return cpu_vlogf(x); }
/* sin and cos through their blocks (libm past CPU_VTRIG_MAX) */
static float f_sin(float x) {
  float y;
  cpu_vsin_f32(&y, &x, 1);
  return y;
}
static float f_cos(float x) {
  float y;
  cpu_vcos_f32(&y, &x, 1);
  return y;
}

/* the distance of got from the exact ref in units of the float spacing at
 * ref (the denormal spacing below FLT_MIN); an infinite ref must be met
 * exactly (beyond FLT_MAX rounds to inf) */
static double ulp_error(float got, double ref) {
  if (isnan(ref)) return isnan(got) ? 0 : INFINITY;
  if (isnan(got)) return INFINITY;
  double a = fabs(ref);
  if (a > (double)FLT_MAX * (1 + 0x1p-25)) /* rounds to inf */
    return isinf(got) && (got > 0) == (ref > 0) ? 0 : INFINITY;
  if (isinf(got)) return INFINITY;
  int e;
  frexp(a, &e); /* a = m 2^e, m in [0.5, 1): spacing 2^(e - 24) */
  double ulp = ldexp(1.0, (e - 24 < -149 ? -149 : e - 24));
  return fabs((double)got - ref) / ulp;
}

static int64_t sweep_points(void) {
  const char *s = getenv("DTORCH_SWEEP");
  return s && !strcmp(s, "reduced") ? 100000 : 10000000;
}

static float worst_x;
static double check_point(const fn_case *c, float x) {
  double ref = c->ref((double)x);
  float got = c->f(x);
  double err = ulp_error(got, ref);
  if (fabs(ref) < c->tiny) /* absolute: in ulps of c->tiny */
    err = fabs((double)got - ref) / (c->tiny * 0x1p-24);
  return err;
}

static void sweep(const fn_case *c) {
  int64_t n = sweep_points() / 2;
  double worst = 0;
  /* evenly over all bit patterns (both signs, denormals to inf) */
  uint64_t step = (0x100000000ull / (uint64_t)n) | 1;
  for (uint64_t u = 0; u < 0x100000000ull; u += step) {
    float x = vm_float((uint32_t)u);
    double e = check_point(c, x);
    if (e > worst) { worst = e; worst_x = x; }
  }
  /* evenly over the interval where the function is not flat */
  for (int64_t i = 0; i <= n; i++) {
    float x = c->lo + (c->hi - c->lo) * (float)((double)i / (double)n);
    double e = check_point(c, x);
    if (e > worst) { worst = e; worst_x = x; }
  }
  print_message("%s: max %.3f ulp (at %.9g)\n", c->name, worst,
                (double)worst_x);
  if (!(worst <= c->max_ulp))
    fail_msg("%s: %.3f ulp at x = %.9g (allowed %.1f)", c->name, worst,
             (double)worst_x, c->max_ulp);
}

static const fn_case cases[] = {
    {"exp", f_exp, exp, -104.0f, 89.0f, 2.0, 0},
    {"erf", f_erf, erf, -4.5f, 4.5f, 2.0, 0},
    {"tanh", f_tanh, tanh, -10.0f, 10.0f, 2.0, 0},
    {"log", f_log, log, 0.0f, 4.0f, 2.0, 0},
    /* the reduction's two roundings come on top of the series': 2.4 seen */
    {"sin", f_sin, sin, -400.0f, 400.0f, 3.0, 0},
    {"cos", f_cos, cos, -400.0f, 400.0f, 3.0, 0},
    /* erfc below FLT_MIN is denormal: absolute error there */
    {"erfc", f_erfc, erfc, -4.0f, 10.5f, 6.0, 0x1p-126},
};

static void test_sweeps(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) sweep(&cases[i]);
}

static void expect(const char *what, float got, float want) {
  bool same = isnan(want) ? isnan(got) : memcmp(&got, &want, sizeof got) == 0;
  if (!same) fail_msg("%s: got %.9g, want %.9g", what, (double)got, (double)want);
}

static void test_edges(void **state) {
  (void)state;
  expect("exp(-inf)", cpu_vexpf(-INFINITY), 0.0f);
  expect("exp(inf)", cpu_vexpf(INFINITY), INFINITY);
  expect("exp(nan)", cpu_vexpf(NAN), NAN);
  expect("exp(0)", cpu_vexpf(0.0f), 1.0f);
  expect("exp(-0)", cpu_vexpf(-0.0f), 1.0f);
  expect("exp(89)", cpu_vexpf(89.0f), INFINITY);
  expect("exp(88.8)", cpu_vexpf(88.8f), INFINITY);
  expect("exp(-110)", cpu_vexpf(-110.0f), 0.0f);
  /* just below overflow, around the smallest normal and in the denormals */
  const float xs[] = {88.72283f, 88.7f, -87.33654f, -87.4f, -100.0f,
                      -103.0f, -103.9f, 1e-30f, -1e-30f, 0x1p-149f};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
    double e = ulp_error(cpu_vexpf(xs[i]), exp((double)xs[i]));
    if (e > 2) fail_msg("exp(%.9g): %.2f ulp", (double)xs[i], e);
  }
  expect("log(0)", cpu_vlogf(0.0f), -INFINITY);
  expect("log(-0)", cpu_vlogf(-0.0f), -INFINITY);
  expect("log(1)", cpu_vlogf(1.0f), 0.0f);
  expect("log(-1)", cpu_vlogf(-1.0f), NAN);
  expect("log(-inf)", cpu_vlogf(-INFINITY), NAN);
  expect("log(inf)", cpu_vlogf(INFINITY), INFINITY);
  expect("log(nan)", cpu_vlogf(NAN), NAN);
  const float ls[] = {0x1p-149f, 0x1p-127f, 0x1p-126f, FLT_MAX, 0.70710677f,
                      0.70710683f, 1.41421354f, 1.41421366f, 1.0000001f,
                      0.99999994f};
  for (size_t i = 0; i < sizeof ls / sizeof ls[0]; i++) {
    double e = ulp_error(cpu_vlogf(ls[i]), log((double)ls[i]));
    if (e > 2) fail_msg("log(%.9g): %.2f ulp", (double)ls[i], e);
  }
  expect("erf(inf)", cpu_verff(INFINITY), 1.0f);
  expect("erf(-inf)", cpu_verff(-INFINITY), -1.0f);
  expect("erf(nan)", cpu_verff(NAN), NAN);
  expect("erf(-0)", cpu_verff(-0.0f), -0.0f);
  expect("erf(denormal)", cpu_verff(0x1p-140f), (float)erf(0x1p-140));
  expect("erfc(inf)", cpu_verfcf(INFINITY), 0.0f);
  expect("erfc(-inf)", cpu_verfcf(-INFINITY), 2.0f);
  expect("erfc(nan)", cpu_verfcf(NAN), NAN);
  expect("erfc(0)", cpu_verfcf(0.0f), 1.0f);
  expect("tanh(inf)", cpu_vtanhf(INFINITY), 1.0f);
  expect("tanh(-inf)", cpu_vtanhf(-INFINITY), -1.0f);
  expect("tanh(nan)", cpu_vtanhf(NAN), NAN);
  expect("tanh(-0)", cpu_vtanhf(-0.0f), -0.0f);
  expect("tanh(denormal)", cpu_vtanhf(-0x1p-140f), -0x1p-140f);
}

/* the block functions (cloned for AVX2 where the machine has it) give the
 * scalar functions' bits on every point */
static void test_blocks(void **state) {
  (void)state;
  enum { N = 4099 };
  static float x[N], y[N];
  for (int i = 0; i < N; i++) /* -20 .. 20 and a few edge values */
    x[i] = (float)(i - N / 2) * (40.0f / N);
  x[0] = INFINITY; x[1] = -INFINITY; x[2] = NAN; x[3] = 0x1p-140f;
  x[4] = -95.0f; x[5] = 88.5f;
  for (int f = 0; f < 7; f++) {
    switch (f) {
    case 6: cpu_vlog_f32(y, x, N); break;
    case 0: cpu_vexp_f32(y, x, 0.5f, N); break;
    case 1: cpu_vgelu_f32(y, x, N); break;
    case 2: cpu_vgelu_tanh_f32(y, x, N); break;
    case 3: cpu_vtanh_f32(y, x, N); break;
    case 4: cpu_vsigmoid_f32(y, x, N); break;
    default: cpu_vsilu_f32(y, x, N); break;
    }
    for (int i = 0; i < N; i++) {
      float v = x[i], w;
      switch (f) {
      case 0: w = cpu_vexpf(v - 0.5f); break;
      case 1: w = cpu_vgelu_one(v); break;
      case 2: {
        const float k = 0.7978845608028654f;
        w = v / (1.0f + cpu_vexpf(-2.0f * k * (v + 0.044715f * v * v * v)));
        break;
      }
      case 3: w = cpu_vtanhf(v); break;
      case 4: w = 1.0f / (1.0f + cpu_vexpf(-v)); break;
      case 6: w = cpu_vlogf(v); break;
      default: w = v / (1.0f + cpu_vexpf(-v)); break;
      }
      if (memcmp(&w, &y[i], sizeof w) && !(isnan(w) && isnan(y[i])))
        fail_msg("block %d at x = %.9g: %.9g, scalar %.9g", f, (double)v,
                 (double)y[i], (double)w);
    }
  }
}

/* cpu_vexp_max_f32 (exp(x - m) for m >= every x: vm_exp_le0, no range
 * checks but the lower clamp) gives cpu_vexpf's bits on every point of a
 * row whose max is m, the clamp at -104 and the denormals included, and
 * NaN and -inf elements */
static void test_exp_max(void **state) {
  (void)state;
  enum { N = 4099 };
  static float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = 3.5f - 120.0f * (float)i / (float)N;
  x[7] = NAN;
  x[8] = -INFINITY;
  x[9] = -0x1p-140f;
  x[10] = 3.5f - 104.0f;
  x[11] = 3.5f - 87.5f;
  cpu_vexp_max_f32(y, x, 3.5f, N);
  for (int i = 0; i < N; i++)
    expect("exp_max", y[i], cpu_vexpf(x[i] - 3.5f));
  cpu_vexp_max_f32(x, x, 3.5f, N); /* in place */
  for (int i = 0; i < N; i++) expect("exp_max in place", x[i], y[i]);
}

/* cpu_vexp_sum_term_f32: cpu_vexpf's bits for x - m in [-87, 0], exp(-87)
 * below (a term of a sum >= 1), NaN stays NaN (payloads included: a
 * payload must not reach the exponent add) */
static void test_exp_sum_term(void **state) {
  (void)state;
  enum { N = 4099 };
  static float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = 1.0f - 100.0f * (float)i / (float)N;
  x[5] = NAN;
  x[6] = -INFINITY;
  x[7] = 1.0f - 87.0f;
  x[8] = vm_float(0xffc00001u); /* a NaN with a payload */
  x[9] = vm_float(0x7f800123u);
  cpu_vexp_sum_term_f32(y, x, 1.0f, N);
  float floor_term = cpu_vexpf(-87.0f);
  for (int i = 0; i < N; i++) {
    float a = x[i] - 1.0f;
    if (isnan(a)) expect("sum_term(nan)", y[i], NAN);
    else if (a < -87.0f) expect("sum_term below -87", y[i], floor_term);
    else expect("sum_term", y[i], cpu_vexpf(a));
  }
}

/* gelu (erf form, the float32 blocks) against double on [-15, 15], the
 * denormal results of x in [-14.85, -13] included: at most 6 ulp (3.5
 * here; the erfc form before the table had 7.5, at x ~ -13.1 where the
 * result nears the denormals), and the edge values */
static double ref_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }

static void test_gelu(void **state) {
  (void)state;
  int n = (int)(sweep_points() / 5);
  float *x = malloc(sizeof *x * (size_t)n), *y = malloc(sizeof *y * (size_t)n);
  assert_non_null(x);
  assert_non_null(y);
  for (int i = 0; i < n; i++) x[i] = -15.0f + 30.0f * (float)i / (float)n;
  cpu_vgelu_f32(y, x, n);
  double worst = 0;
  int at = 0;
  for (int i = 0; i < n; i++) {
    double e = ulp_error(y[i], ref_gelu((double)x[i]));
    if (e > worst) worst = e, at = i;
  }
  print_message("gelu: max %.2f ulp (at %.9g)\n", worst, (double)x[at]);
  if (worst > 6)
    fail_msg("gelu at x = %.9g: %.9g, want %.9g", (double)x[at],
             (double)y[at], ref_gelu((double)x[at]));
  expect("gelu(inf)", cpu_vgelu_one(INFINITY), INFINITY);
  expect("gelu(-inf)", cpu_vgelu_one(-INFINITY), NAN);
  expect("gelu(nan)", cpu_vgelu_one(NAN), NAN);
  expect("gelu(1e30)", cpu_vgelu_one(1e30f), 1e30f);
  expect("gelu(-1e30)", cpu_vgelu_one(-1e30f), -0.0f);
  expect("gelu(20)", cpu_vgelu_one(20.0f), 20.0f);
  expect("gelu(-20)", cpu_vgelu_one(-20.0f), -0.0f);
  expect("gelu(denormal)", cpu_vgelu_one(0x1p-140f), 0x1p-141f);
  free(x);
  free(y);
}

/* gelu's derivative (gelu_backward's float32 blocks) against double: at
 * most 8 ulp of the result (5.6 here, near x = -0.48 where Phi(x) + x phi(x)
 * cancels to half of Phi; 7.1 before gelu's table), or 2^-25 absolute
 * where it crosses zero (x = -0.7518); gradients are scaled, not
 * replaced: g = 3 everywhere, and NaN in, NaN out */
static double ref_dgelu(double x) {
  return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

static void test_gelu_grad(void **state) {
  (void)state;
  int n = (int)(sweep_points() / 5);
  float *x = malloc(sizeof *x * (size_t)n), *g = malloc(sizeof *g * (size_t)n);
  assert_non_null(x);
  assert_non_null(g);
  for (int i = 0; i < n; i++) {
    x[i] = -20.0f + 40.0f * (float)i / (float)n;
    g[i] = 3.0f;
  }
  cpu_vgelu_grad_f32(g, x, n);
  double worst = 0;
  int at = 0;
  for (int i = 0; i < n; i++) {
    double want = 3.0 * ref_dgelu((double)x[i]);
    float a = fabsf((float)want);
    double ulp = fmax((double)(nextafterf(a, INFINITY) - a), 0x1p-25);
    double e = fabs((double)g[i] - want) / ulp;
    if (e > worst) worst = e, at = i;
  }
  print_message("gelu': max %.2f ulp (at %.9g)\n", worst, (double)x[at]);
  if (worst > 8)
    fail_msg("gelu' at x = %.9g: %.9g, want %.9g", (double)x[at],
             (double)g[at], 3.0 * ref_dgelu((double)x[at]));
  float e[2] = {NAN, 1.0f}, one[2] = {1.0f, 1.0f};
  cpu_vgelu_grad_f32(one, e, 2);
  assert_true(isnan(one[0]));
  assert_true(fabs((double)one[1] - ref_dgelu(1.0)) < 1e-7);
  /* large |x|: 1 and 0 exactly (x^2 from x itself gave NaN from 2^16 on,
   * in both forms); ±inf: NaN, as PyTorch's cdf + x pdf = 1 + inf 0 */
  float big[6] = {65548.0f, -65548.0f, 1e20f, -3e38f, INFINITY, -INFINITY};
  float gb[6] = {2, 2, 2, 2, 2, 2}, gg[6] = {2, 2, 2, 2, 2, 2};
  cpu_vgelu_grad_f32(gb, big, 6);
  cpu_vgelu_grad_f32_generic(gg, big, 6);
  for (int i = 0; i < 6; i++) {
    float want = i >= 4 ? NAN : i % 2 ? 0.0f : 2.0f;
    expect("gelu'(large)", gb[i], want);
    expect("gelu'(large), generic", gg[i], want);
  }
  free(x);
  free(g);
}

/* cpu_vmax_f32 against a plain loop, with signed zeros, infinities and
 * NaN (negative NaN loses to everything, positive NaN wins) */
static void test_max(void **state) {
  (void)state;
  enum { N = 1027 };
  static float x[N];
  for (int i = 0; i < N; i++) x[i] = (float)((i * 7919) % 2003) - 1500.5f;
  float want = -INFINITY;
  for (int i = 0; i < N; i++) want = x[i] > want ? x[i] : want;
  for (int n = 0; n <= N; n += 97) {
    float w = -INFINITY;
    for (int i = 0; i < n; i++) w = x[i] > w ? x[i] : w;
    expect("max prefix", cpu_vmax_f32(x, n), w);
  }
  expect("max", cpu_vmax_f32(x, N), want);
  float z[3] = {-0.0f, 0.0f, -0.0f};
  expect("max(-0, +0)", cpu_vmax_f32(z, 3), 0.0f);
  expect("max(-0)", cpu_vmax_f32(z, 1), -0.0f);
  float inf[2] = {-INFINITY, -INFINITY};
  expect("max(-inf)", cpu_vmax_f32(inf, 2), -INFINITY);
  float nn[3] = {1.0f, -NAN, 2.0f};
  expect("max with -nan", cpu_vmax_f32(nn, 3), 2.0f);
  nn[1] = NAN;
  expect("max with nan", cpu_vmax_f32(nn, 3), NAN);
}

/* the four-stream lane sum gives, bit for bit, the lanes of four
 * one-stream sums (kernels/cpu/reduce.c: a long row's segments) */
static void test_lane_sums4(void **state) {
  (void)state;
  static const int64_t ns[] = {8, 1024, 65536};
  uint64_t s = 12345;
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    int64_t n = ns[k], gap = n + 24, total = 3 * gap + n;
    float *xf = malloc(sizeof *xf * (size_t)total);
    double *xd = malloc(sizeof *xd * (size_t)total);
    assert_non_null(xf);
    assert_non_null(xd);
    for (int64_t i = 0; i < total; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      xd[i] = ((double)(s >> 11) / 9007199254740992.0 - 0.5) * 1e3;
      xf[i] = (float)xd[i];
    }
    double got[32], want[32];
    for (int l = 0; l < 32; l++) got[l] = want[l] = l * 0.25; /* carried in */
    cpu_lanes_sum4_f32(xf, gap, n, got);
    for (int q = 0; q < 4; q++) cpu_lanes_sum_f32(xf + q * gap, n, want + 8 * q);
    assert_memory_equal(got, want, sizeof got);
    for (int l = 0; l < 32; l++) got[l] = want[l] = -l * 0.5;
    cpu_lanes_sum4_f64(xd, gap, n, got);
    for (int q = 0; q < 4; q++) cpu_lanes_sum_f64(xd + q * gap, n, want + 8 * q);
    assert_memory_equal(got, want, sizeof got);
    free(xf);
    free(xd);
  }
}

/* the lane order written out one element at a time: lanes[j % 8] += x[j]
 * (or (x[j] - c)^2) in order of j, in double */
static void lanes_reference(const double *x, int64_t n, bool sq, double c,
                            double *lanes) {
  for (int64_t j = 0; j < n; j++) {
    double d = sq ? x[j] - c : x[j];
    lanes[j % 8] += sq ? d * d : d;
  }
}

/* every lane kernel the build picked here (the AVX-512 forms, or the v3 /
 * baseline clones in a DTORCH_SIMD_MAX=avx2 / baseline build) against the
 * order written out, bit for bit: lengths around a vector and its tail,
 * values of mixed magnitude and sign (so any other order of adds would
 * round differently), lanes carried in */
static void test_lane_sums_order(void **state) {
  (void)state;
  static const int64_t ns[] = {1, 7, 8, 9, 31, 64, 1000, 4099};
  uint64_t s = 4242;
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    int64_t n = ns[k], gap = n + 13, total = 3 * gap + n;
    float *xf = malloc(sizeof *xf * (size_t)total);
    double *xd = malloc(sizeof *xd * (size_t)total);
    double *xr = malloc(sizeof *xr * (size_t)total);
    assert_non_null(xf);
    assert_non_null(xd);
    assert_non_null(xr);
    for (int64_t i = 0; i < total; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      double m = ldexp(1.0, (int)(s >> 59) * 3 - 24); /* 2^-24 .. 2^69 */
      xd[i] = ((double)(s >> 11 & 0xffffff) / 16777216.0 - 0.5) * m;
      xf[i] = (float)xd[i];
    }
    const double c[4] = {0.375, -1e3, 3e9, -7.25};
    for (int sq = 0; sq < 2; sq++)
      for (int isf = 0; isf < 2; isf++) {
        for (int64_t i = 0; i < total; i++) xr[i] = isf ? (double)xf[i] : xd[i];
        double got[32], want[32];
        for (int l = 0; l < 32; l++) got[l] = want[l] = l * 0.125 - 1; /* carried in */
        for (int q = 0; q < 4; q++) lanes_reference(xr + q * gap, n, sq, c[q], want + 8 * q);
        if (isf && sq) cpu_lanes_sqdev_f32(xf, n, c[0], got);
        else if (isf) cpu_lanes_sum_f32(xf, n, got);
        else if (sq) cpu_lanes_sqdev_f64(xd, n, c[0], got);
        else cpu_lanes_sum_f64(xd, n, got);
        if (memcmp(got, want, 8 * sizeof *got))
          fail_msg("lanes %s %s n=%lld: not the order written out",
                   sq ? "sqdev" : "sum", isf ? "f32" : "f64", (long long)n);
        if (n % 8) continue; /* the four-segment forms take whole vectors */
        for (int l = 0; l < 32; l++) got[l] = l * 0.125 - 1;
        if (isf && sq) cpu_lanes_sqdev4_f32(xf, gap, n, c, got);
        else if (isf) cpu_lanes_sum4_f32(xf, gap, n, got);
        else if (sq) cpu_lanes_sqdev4_f64(xd, gap, n, c, got);
        else cpu_lanes_sum4_f64(xd, gap, n, got);
        if (memcmp(got, want, sizeof got))
          fail_msg("lanes4 %s %s n=%lld: not the order written out",
                   sq ? "sqdev" : "sum", isf ? "f32" : "f64", (long long)n);
      }
    free(xf);
    free(xd);
    free(xr);
  }
  print_message("lane sums at %s: the order written out\n", cpu_simd_level());
}

/* vmath512.c's AVX-512 blocks (and vmath256.c's AVX2 gelu and gelu' where
 * the CPU has AVX2 and FMA) against the generic clones, bit for bit,
 * on sweep_points() bit patterns spread evenly (both signs, denormals,
 * infinities, NaNs): gelu and gelu' on all of them, softmax's exp(x - m)
 * on the non-positive ones it is defined for. (All 2^32 floats were compared
 * once for both: none differ.) Without AVX-512 both sides are the
 * generic clones. */
static void test_avx512_forms(void **state) {
  (void)state;
  enum { B = 4096 };
  static float x[B], a[B], g[B];
  uint64_t n = (uint64_t)sweep_points(), step = (0x100000000ull / n) | 1;
  uint64_t u = 0;
#if defined(__x86_64__)
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  bool avx2 = false;
#endif
  while (u < 0x100000000ull) {
    int k = 0;
    for (; k < B && u < 0x100000000ull; k++, u += step) x[k] = vm_float((uint32_t)u);
    cpu_vgelu_f32(a, x, k);
    cpu_vgelu_f32_generic(g, x, k);
    for (int i = 0; i < k; i++)
      if (memcmp(&a[i], &g[i], sizeof a[i]))
        fail_msg("gelu(%a): %a, generic %a", (double)x[i], (double)a[i], (double)g[i]);
    if (avx2) {
      cpu_vgelu_f32_avx2(a, x, k - 3); /* and a tail */
      for (int i = 0; i < k - 3; i++)
        if (memcmp(&a[i], &g[i], sizeof a[i]))
          fail_msg("gelu(%a): %a in AVX2, generic %a", (double)x[i], (double)a[i],
                   (double)g[i]);
    }
    for (int i = 0; i < k; i++) a[i] = g[i] = 1.5f - (float)(i % 7);
    cpu_vgelu_grad_f32(a, x, k);
    cpu_vgelu_grad_f32_generic(g, x, k);
    for (int i = 0; i < k; i++)
      if (memcmp(&a[i], &g[i], sizeof a[i]))
        fail_msg("gelu'(%a): %a, generic %a", (double)x[i], (double)a[i], (double)g[i]);
    if (avx2) {
      for (int i = 0; i < k; i++) a[i] = 1.5f - (float)(i % 7);
      cpu_vgelu_grad_f32_avx2(a, x, k - 3);
      for (int i = 0; i < k - 3; i++)
        if (memcmp(&a[i], &g[i], sizeof a[i]))
          fail_msg("gelu'(%a): %a in AVX2, generic %a", (double)x[i], (double)a[i],
                   (double)g[i]);
    }
    for (int i = 0; i < k; i++) /* the non-positive half, and NaNs */
      if (!(x[i] <= 0.0f) && x[i] == x[i]) x[i] = -x[i];
    cpu_vexp_max_f32(a, x, 0.0f, k);
    cpu_vexp_max_f32_generic(g, x, 0.0f, k);
    for (int i = 0; i < k; i++)
      if (memcmp(&a[i], &g[i], sizeof a[i]))
        fail_msg("exp_max(%a): %a, generic %a", (double)x[i], (double)a[i], (double)g[i]);
  }
}

/* vm_lse_term (cross_entropy's log-sum-exp term) on sweep_points()
 * floats of [-87, 0] spread evenly over their bit patterns: within 2 ulp
 * of exp in double (1.999 on every float of the range, checked once);
 * below -87 and at -inf exactly the term of -87; NaN stays NaN */
static void test_lse_term(void **state) {
  (void)state;
  uint32_t step = (uint32_t)((0x42ae0000u / (uint64_t)sweep_points()) | 1);
  double worst = 0;
  float wx = 0;
  for (uint32_t b = 0x80000000u; b <= 0xc2ae0000u; b += step) {
    float a = vm_float(b);
    double e = ulp_error(vm_lse_term(a), exp((double)a));
    if (e > worst) { worst = e; wx = a; }
  }
  print_message("lse_term: max %.3f ulp (at %.9g)\n", worst, (double)wx);
  if (!(worst <= 2.0)) fail_msg("lse_term: %.3f ulp at %.9g", worst, (double)wx);
  float floor_term = vm_lse_term(-87.0f);
  expect("lse_term(-88)", vm_lse_term(-88.0f), floor_term);
  expect("lse_term(-inf)", vm_lse_term(-INFINITY), floor_term);
  expect("lse_term(-1e30)", vm_lse_term(-1e30f), floor_term);
  expect("lse_term(nan)", vm_lse_term(NAN), NAN);
  expect("lse_term(-nan)", vm_lse_term(vm_float(0xffc00001u)), NAN);
  expect("lse_term(0)", vm_lse_term(0.0f), 1.0f);
}

/* lse.c's order, written out one term at a time: 64 terms as four vectors
 * of 16, summed in float vector by vector, then each vector's low eight
 * and high eight into the eight lanes */
static void lse_reference(const float *x, int64_t n, float m, double *lanes) {
  for (int64_t i = 0; i < n; i += 64) {
    float f[16] = {0};
    for (int v = 0; v < 4; v++)
      for (int j = 0; j < 16; j++)
        if (i + 16 * v + j < n) f[j] += vm_lse_term(x[i + 16 * v + j] - m);
    for (int j = 0; j < 16; j++) lanes[j % 8] += (double)f[j];
  }
}

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 11;
}

/* cpu_lse_sum_f32: the AVX-512 form (where the CPU has it: elsewhere both
 * are the generic form) and the generic form against the order written
 * out above, bit for bit, over lengths around every boundary (a vector,
 * four vectors, a block) and rows with -inf and terms below exp(-87);
 * blocks of CPU_BLOCK add up to one call; the sums within 4 x 2^-24 of
 * double; a NaN makes its row NaN in both forms */
static void test_lse_sum(void **state) {
  (void)state;
  static const int64_t ns[] = {1, 7, 8, 15, 16, 17, 63, 64, 65, 255, 256, 300, 1000};
  uint64_t s = 777;
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    int64_t n = ns[k], gap = n + 5;
    float *x = malloc(sizeof *x * (size_t)(4 * gap));
    assert_non_null(x);
    for (int64_t i = 0; i < 4 * gap; i++)
      x[i] = (float)(((double)lcg(&s) / 9007199254740992.0 - 0.5) * (k % 2 ? 8 : 200));
    if (n > 1) x[n / 2] = -INFINITY; /* row 0, not its max */
    float m[4];
    for (int q = 0; q < 4; q++) m[q] = cpu_vmax_f32(x + q * gap, n);
    double fast[32] = {0}, gen[32] = {0}, want[32] = {0}, blk[32] = {0};
    cpu_lse_sum_f32(x, gap, 4, n, m, fast);
    cpu_lse_sum_f32_generic(x, gap, 4, n, m, gen);
    for (int q = 0; q < 4; q++) lse_reference(x + q * gap, n, m[q], want + 8 * q);
    for (int64_t b = 0; b < n; b += CPU_BLOCK)
      cpu_lse_sum_f32(x + b, gap, 4, n - b < CPU_BLOCK ? n - b : CPU_BLOCK, m, blk);
    assert_memory_equal(fast, want, sizeof want);
    assert_memory_equal(gen, want, sizeof want);
    assert_memory_equal(blk, want, sizeof want);
    for (int q = 0; q < 4; q++) {
      double one[8] = {0}, ref = 0;
      cpu_lse_sum_f32(x + q * gap, gap, 1, n, m + q, one);
      assert_memory_equal(one, want + 8 * q, sizeof one);
      for (int64_t i = 0; i < n; i++) ref += exp((double)x[q * gap + i] - m[q]);
      double got = cpu_lanes_total(want + 8 * q);
      if (!(fabs(got - ref) <= 4 * 0x1p-24 * ref))
        fail_msg("lse sum n=%lld row %d: %.17g, double %.17g", (long long)n,
                 q, got, ref);
    }
    x[gap + n - 1] = vm_float(0xffc00001u); /* a NaN that loses the max */
    double nf[32] = {0}, ng[32] = {0};
    cpu_lse_sum_f32(x, gap, 4, n, m, nf);
    cpu_lse_sum_f32_generic(x, gap, 4, n, m, ng);
    assert_true(isnan(cpu_lanes_total(nf + 8)) && isnan(cpu_lanes_total(ng + 8)));
    assert_memory_equal(nf, fast, 8 * sizeof(double));
    free(x);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_sweeps),
      cmocka_unit_test(test_blocks),
      cmocka_unit_test(test_max),
      cmocka_unit_test(test_exp_max),
      cmocka_unit_test(test_exp_sum_term),
      cmocka_unit_test(test_gelu),
      cmocka_unit_test(test_gelu_grad),
      cmocka_unit_test(test_lane_sums4),
      cmocka_unit_test(test_lane_sums_order),
      cmocka_unit_test(test_avx512_forms),
      cmocka_unit_test(test_lse_term),
      cmocka_unit_test(test_lse_sum),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
