/* Factories (empty/zeros/ones/full/arange/rand/randn/_like), host transfer
 * for every dtype, and the counter-based RNG: Philox 4x32-10 known-answer
 * vectors, an independent re-implementation, seeding and split invariance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "philox_kat.h"
#include "testutil.h"
#include "threads.h"
#include "kernels/cpu/cpu.h"

static void test_full_family(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_shape shapes[] = {DT_SHAPE(), DT_SHAPE(0), DT_SHAPE(3, 0, 2), DT_SHAPE(1),
                       DT_SHAPE(2, 3, 4)};
  for (int di = 0; di < 8; di++)
    for (int s = 0; s < 5; s++) {
      dt_dtype d = tu_all_dtypes[di];
      dt_tensor_options o = {.dtype = d};
      dt_tensor *t[4] = {dt_zeros(shapes[s], &o), dt_ones(shapes[s], &o),
                         dt_full(shapes[s], 5, &o), dt_empty(shapes[s], &o)};
      double want[3] = {0, 1, d == DT_BOOL ? 1 : 5};
      for (int k = 0; k < 4; k++) {
        assert_non_null(t[k]);
        assert_int_equal(dt_tensor_dtype(t[k]), d);
        dt_shape got = dt_tensor_shape(t[k]);
        assert_int_equal(got.ndim, shapes[s].ndim);
        assert_memory_equal(got.dims, shapes[s].dims,
                            sizeof(int64_t) * (size_t)got.ndim);
        assert_int_equal(dt_tensor_numel(t[k]), tu_numel(shapes[s]));
        assert_true(dt_tensor_is_contiguous(t[k]));
        if (k == 3) continue; /* empty: values undefined */
        double *v = tu_values(t[k]);
        for (int64_t i = 0; i < tu_numel(shapes[s]); i++)
          assert_true(v[i] == want[k]);
        free(v);
      }
      dt_tensor *l[3] = {dt_zeros_like(t[2]), dt_ones_like(t[2]),
                         dt_full_like(t[2], 5)};
      for (int k = 0; k < 3; k++) {
        assert_int_equal(dt_tensor_dtype(l[k]), d);
        assert_int_equal(dt_tensor_numel(l[k]), tu_numel(shapes[s]));
        double *v = tu_values(l[k]);
        for (int64_t i = 0; i < tu_numel(shapes[s]); i++)
          assert_true(v[i] == want[k]);
        free(v);
        dt_tensor_release(l[k]);
      }
      for (int k = 0; k < 4; k++) dt_tensor_release(t[k]);
    }
  /* negative zero survives full */
  dt_tensor *nz = dt_full(DT_SHAPE(2), -0.0, NULL);
  double *v = tu_values(nz);
  assert_true(v[0] == 0 && signbit(v[0]));
  free(v);
  dt_tensor_release(nz);
  tu_leaks_end();
}

/* A value an integer dtype cannot hold is an error, not C's undefined
 * double → integer conversion (which gave INT64_MIN or garbage): NaN,
 * infinities, and values past the dtype's range after truncation toward
 * zero. uint8 takes [-255, 255] like a PyTorch integer scalar (-1 → 255). */
static void test_full_out_of_range(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  const dt_tensor_options i32 = {.dtype = DT_INT32}, i64 = {.dtype = DT_INT64},
                          u8 = {.dtype = DT_UINT8};
  tu_expect_error(dt_full(DT_SHAPE(2), NAN, &i32), DT_ERR_INVALID_ARGUMENT,
                  "dt_full", "value nan", "int32", "overflow", NULL);
  tu_expect_error(dt_full(DT_SHAPE(2), 1e30, &i64), DT_ERR_INVALID_ARGUMENT,
                  "dt_full", "value 1e+30", "cannot be converted to int64",
                  NULL);
  tu_expect_error(dt_full(DT_SHAPE(2), INFINITY, &i64),
                  DT_ERR_INVALID_ARGUMENT, "dt_full", "inf", "int64", NULL);
  tu_expect_error(dt_full(DT_SHAPE(2), 9223372036854775808.0, &i64),
                  DT_ERR_INVALID_ARGUMENT, "dt_full", "int64", NULL);
  tu_expect_error(dt_full(DT_SHAPE(2), 2147483648.0, &i32),
                  DT_ERR_INVALID_ARGUMENT, "dt_full", "2147483648", "int32",
                  NULL);
  tu_expect_error(dt_full(DT_SHAPE(2), -2147483649.0, &i32),
                  DT_ERR_INVALID_ARGUMENT, "dt_full", "int32", NULL);
  tu_expect_error(dt_full(DT_SHAPE(2), 256, &u8), DT_ERR_INVALID_ARGUMENT,
                  "dt_full", "256", "uint8", NULL);
  tu_expect_error(dt_full(DT_SHAPE(2), -256, &u8), DT_ERR_INVALID_ARGUMENT,
                  "dt_full", "-256", "uint8", NULL);
  dt_tensor *z = dt_zeros(DT_SHAPE(2), &i32);
  tu_expect_error(dt_full_like(z, NAN), DT_ERR_INVALID_ARGUMENT,
                  "dt_full_like", "nan", "int32", NULL);
  /* the edges of each range, and truncation toward zero */
  struct { double v; dt_dtype d; double want; } ok[] = {
      {2147483647.0, DT_INT32, 2147483647.0},
      {-2147483648.0, DT_INT32, -2147483648.0},
      {2147483647.75, DT_INT32, 2147483647.0},
      {-2147483648.5, DT_INT32, -2147483648.0},
      {-9223372036854775808.0, DT_INT64, -9223372036854775808.0},
      {9223372036854774784.0, DT_INT64, 9223372036854774784.0},
      {-1, DT_UINT8, 255}, {255, DT_UINT8, 255}, {-255, DT_UINT8, 1},
      {NAN, DT_BOOL, 1}, {1e300, DT_BOOL, 1}};
  for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) {
    dt_tensor *t = dt_full(DT_SHAPE(3), ok[k].v, &(dt_tensor_options){.dtype = ok[k].d});
    if (!t) fail_msg("full(%s, %.17g): %s", dt_dtype_name(ok[k].d), ok[k].v,
                     dt_last_error());
    double *v = tu_values(t);
    for (int i = 0; i < 3; i++)
      if (v[i] != ok[k].want)
        fail_msg("full(%s, %.17g): got %.17g want %.17g",
                 dt_dtype_name(ok[k].d), ok[k].v, v[i], ok[k].want);
    free(v);
    dt_tensor_release(t);
  }
  /* int64 extremes exactly (doubles cannot show INT64_MIN's neighbours) */
  dt_tensor *m = dt_full(DT_SHAPE(1), -9223372036854775808.0, &i64);
  int64_t got = 0;
  assert_int_equal(dt_to_host(m, &got, sizeof got), DT_OK);
  assert_true(got == INT64_MIN);
  /* arange: every value it stores must fit */
  tu_expect_error(dt_arange(1e19, 1.00000000001e19, 1e9, &i64),
                  DT_ERR_INVALID_ARGUMENT, "dt_arange", "start 1e+19",
                  "int64", NULL);
  tu_expect_error(dt_arange(2147483640.0, 2147483650.0, 1, &i32),
                  DT_ERR_INVALID_ARGUMENT, "dt_arange", "last value",
                  "2147483649", "int32", NULL);
  dt_tensor *r = dt_arange(2147483640.0, 2147483648.0, 1, &i32);
  if (!r) fail_msg("arange to INT32_MAX: %s", dt_last_error());
  double *rv = tu_values(r);
  assert_int_equal(dt_tensor_numel(r), 8);
  assert_true(rv[7] == 2147483647.0);
  free(rv);
  TU_RELEASE(r, m, z);
  tu_leaks_end();
}

/* -0.0 keeps its sign in every floating dtype. Regression: the zero fill
 * shortcut stored +0 for float16 and bfloat16. */
static void test_full_negative_zero(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int k = 0; k < 4; k++) {
    dt_dtype d = tu_float_dtypes[k];
    dt_tensor *t = dt_full(DT_SHAPE(5), -0.0, &(dt_tensor_options){.dtype = d});
    unsigned char b[5 * 8];
    assert_int_equal(dt_to_host(t, b, sizeof b), DT_OK);
    size_t es = dt_dtype_size(d);
    for (int i = 0; i < 5; i++) {
      /* the sign bit is the top bit of the last byte (little-endian); every
       * other bit is 0 */
      for (size_t j = 0; j < es; j++) {
        unsigned want = j == es - 1 ? 0x80 : 0;
        if (b[i * es + j] != want)
          fail_msg("full(%s, -0.0): element %d byte %zu is 0x%02x, want "
                   "0x%02x", dt_dtype_name(d), i, j, b[i * es + j], want);
      }
    }
    dt_tensor_release(t);
  }
  /* integers and bool store a plain 0 */
  dt_tensor *i = dt_full(DT_SHAPE(2), -0.0, &(dt_tensor_options){.dtype = DT_INT32});
  int32_t g[2];
  assert_int_equal(dt_to_host(i, g, sizeof g), DT_OK);
  assert_true(g[0] == 0 && g[1] == 0);
  dt_tensor_release(i);
  tu_leaks_end();
}

static void test_arange(void **state) {
  (void)state;
  tu_leaks_begin();
  struct { double a, b, s; int64_t n; } c[] = {
      {0, 10, 1, 10}, {1, 2, 0.3, 4}, {5, 0, -1.5, 4}, {0, 0, 1, 0},
      {-3, 3, 2, 3},  {0.5, 1, 1, 1},
  };
  for (int i = 0; i < 6; i++)
    for (int di = 0; di < 6; di++) { /* floats and int32/int64 */
      dt_dtype d = tu_all_dtypes[di];
      if (d == DT_INT32 || d == DT_INT64) {
        if (c[i].s != floor(c[i].s) || c[i].a != floor(c[i].a)) continue;
      }
      dt_tensor *t = dt_arange(c[i].a, c[i].b, c[i].s,
                               &(dt_tensor_options){.dtype = d});
      assert_non_null(t);
      assert_int_equal(dt_tensor_numel(t), c[i].n);
      double *v = tu_values(t);
      for (int64_t k = 0; k < c[i].n; k++)
        assert_true(v[k] == tu_round(c[i].a + (double)k * c[i].s, d));
      free(v);
      dt_tensor_release(t);
    }
  tu_leaks_end();
}

static void test_host_roundtrip(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int di = 0; di < 8; di++) {
    dt_dtype d = tu_all_dtypes[di];
    size_t es = dt_dtype_size(d);
    unsigned char raw[24 * 8], back[24 * 8];
    for (size_t i = 0; i < sizeof raw; i++) raw[i] = (unsigned char)(i * 37 + 11);
    if (d == DT_BOOL)
      for (int i = 0; i < 24; i++) raw[i] &= 1; /* bools are 0/1 */
    if (d == DT_FLOAT16 || d == DT_BFLOAT16 || d == DT_FLOAT32 || d == DT_FLOAT64)
      for (int i = 0; i < 24; i++) tu_encode(raw + (size_t)i * es, d, i * 0.25 - 3);
    dt_tensor *t = dt_from_host(raw, DT_SHAPE(2, 3, 4), &(dt_tensor_options){.dtype = d});
    assert_non_null(t);
    assert_int_equal(dt_to_host(t, back, 24 * es), DT_OK);
    assert_memory_equal(raw, back, 24 * es);
    /* a permuted view comes back in its own row-major order */
    dt_tensor *p = dt_permute(t, (int[]){2, 0, 1}, 3);
    assert_int_equal(dt_to_host(p, back, 24 * es), DT_OK);
    for (int k = 0; k < 4; k++)
      for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
          assert_memory_equal(back + (size_t)((k * 2 + i) * 3 + j) * es,
                              raw + (size_t)((i * 3 + j) * 4 + k) * es, es);
    dt_tensor_release(p);
    dt_tensor_release(t);
  }
  tu_leaks_end();
}

/* Bool bytes other than 0 and 1 from the host read as true (nonzero is
 * true, as C's _Bool and numpy's astype(bool)): dt_from_host stores 1,
 * on one device and on a mesh, and the ops agree with each other and
 * with the hand-computed truth table. The caller's buffer is untouched. */
static void expect_bools(dt_tensor *t, const unsigned char *want, int n,
                         const char *what) {
  if (!t) fail_msg("%s: %s", what, dt_last_error());
  unsigned char got[8];
  assert_int_equal(dt_to_host(t, got, (size_t)n), DT_OK);
  for (int i = 0; i < n; i++)
    if (got[i] != want[i])
      fail_msg("%s: element %d is %d, want %d", what, i, got[i], want[i]);
  dt_tensor_release(t);
}

static void test_bool_bytes_from_host(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  assert_true(rt && m);
  const unsigned char raw[6] = {0, 1, 2, 255, 128, 0}, keep[6] = {0, 1, 2, 255, 128, 0};
  const unsigned char truth[6] = {0, 1, 1, 1, 1, 0}, falsity[6] = {1, 0, 0, 0, 0, 1},
                      pattern[6] = {1, 1, 0, 1, 0, 0};
  const unsigned char and_p[6] = {0, 1, 0, 1, 0, 0}, or_p[6] = {1, 1, 1, 1, 1, 0};
  const dt_tensor_options one = {.dtype = DT_BOOL}, spread[2] = {
      {.dtype = DT_BOOL, .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))},
      {.dtype = DT_BOOL, .mesh = m, .placements = DT_PLACEMENTS(DT_REPLICATE)}};
  const dt_tensor_options *opts[3] = {&one, &spread[0], &spread[1]};
  for (int k = 0; k < 3; k++) {
    dt_tensor *b = dt_from_host(raw, DT_SHAPE(6), opts[k]);
    dt_tensor *t = dt_full(DT_SHAPE(6), 1, opts[k]);
    dt_tensor *p = dt_from_host(pattern, DT_SHAPE(6), opts[k]);
    assert_true(b && t && p);
    expect_bools(dt_clone(b), truth, 6, "the stored bytes");
    expect_bools(dt_eq(b, t), truth, 6, "eq(b, true)");
    expect_bools(dt_logical_and(b, t), truth, 6, "logical_and(b, true)");
    expect_bools(dt_ne(b, t), falsity, 6, "ne(b, true)");
    expect_bools(dt_logical_not(b), falsity, 6, "logical_not(b)");
    expect_bools(dt_logical_and(b, p), and_p, 6, "logical_and(b, p)");
    expect_bools(dt_logical_or(b, p), or_p, 6, "logical_or(b, p)");
    expect_bools(dt_eq(b, p), (const unsigned char[]){0, 1, 0, 1, 0, 1}, 6, "eq(b, p)");
    dt_tensor *n = dt_sum(b, NULL, 0, false); /* int64: the trues */
    int64_t count = -1;
    assert_int_equal(dt_to_host(n, &count, sizeof count), DT_OK);
    assert_int_equal(count, 4);
    TU_RELEASE(n, p, t, b);
  }
  assert_memory_equal(raw, keep, 6);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
  tu_leaks_end();
}

/* Random123's known-answer vectors (tests/support/philox_kat.h) */
static void test_philox_kat(void **state) {
  (void)state;
  const philox_kat *kat = philox_kats;
  for (int i = 0; i < PHILOX_NKATS; i++) {
    uint32_t out[4];
    cpu_philox4x32(kat[i].ctr, kat[i].key, out);
    for (int k = 0; k < 4; k++)
      if (out[k] != kat[i].out[k])
        fail_msg("KAT %d word %d: got %08x want %08x", i, k, out[k], kat[i].out[k]);
  }
}

/* element i of rand() is uniform(seed, offset + i): the same value whatever
 * tensor it lands in */
static void test_rand_split_invariance(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int n = 0; n < 2; n++) {
    dt_tensor *(*fn)(dt_shape, const dt_tensor_options *) = n ? dt_randn : dt_rand;
    dt_manual_seed(42);
    dt_tensor *whole = fn(DT_SHAPE(10, 100), &(dt_tensor_options){.dtype = DT_FLOAT64});
    dt_manual_seed(42);
    dt_tensor *a = fn(DT_SHAPE(3, 100), &(dt_tensor_options){.dtype = DT_FLOAT64});
    dt_tensor *b = fn(DT_SHAPE(700), &(dt_tensor_options){.dtype = DT_FLOAT64});
    double *vw = tu_values(whole), *va = tu_values(a), *vb = tu_values(b);
    assert_memory_equal(vw, va, 300 * sizeof(double));
    assert_memory_equal(vw + 300, vb, 700 * sizeof(double));
    /* the value is the stream's element, computed on its own */
    for (int i = 0; i < 1000; i += 97) {
      double want = n ? cpu_philox_normal(42, (uint64_t)i)
                      : cpu_philox_uniform(42, (uint64_t)i);
      assert_true(vw[i] == want);
    }
    free(vw); free(va); free(vb);
    dt_tensor_release(whole); dt_tensor_release(a); dt_tensor_release(b);
  }
  /* another seed gives other values */
  dt_manual_seed(43);
  dt_tensor *c = dt_rand(DT_SHAPE(4), NULL);
  dt_manual_seed(42);
  dt_tensor *d = dt_rand(DT_SHAPE(4), NULL);
  double *vc = tu_values(c), *vd = tu_values(d);
  assert_true(memcmp(vc, vd, 4 * sizeof(double)) != 0);
  free(vc); free(vd);
  dt_tensor_release(c); dt_tensor_release(d);
  tu_leaks_end();
}

/* cpu_rand_fill's blocks (the AVX-512, AVX2 or generic Philox form this
 * machine picks: 16 or 8 counters a vector) give every element the words
 * of its own counter: float64 uniforms and normals bit for bit against
 * the element computed alone, at offsets where the counter's low word
 * wraps inside a vector (the high word must carry in those lanes only)
 * and at the top of the 64-bit counter space */
static void test_rand_counter_carry(void **state) {
  (void)state;
  static const uint64_t firsts[] = {0, 5, 0xffffffffull - 37, 0xffffffffull - 8,
                                    0x2ffffffffull - 3, 0xffffffffffffff00ull};
  enum { N = 300 };
  double got[N];
  for (size_t f = 0; f < sizeof firsts / sizeof *firsts; f++)
    for (int normal = 0; normal < 2; normal++) {
      cpu_rand_fill(got, DT_FLOAT64, N, 0x9e3779b97f4a7c15ull, firsts[f], normal);
      for (int i = 0; i < N; i++) {
        uint64_t ix = firsts[f] + (uint64_t)i;
        double want = normal ? cpu_philox_normal(0x9e3779b97f4a7c15ull, ix)
                             : cpu_philox_uniform(0x9e3779b97f4a7c15ull, ix);
        if (memcmp(&got[i], &want, sizeof want))
          fail_msg("%s at counter %#llx: %.17g, alone %.17g",
                   normal ? "normal" : "uniform", (unsigned long long)ix, got[i], want);
      }
    }
}

/* float32 rand (its own vectorised path) stores exactly what the double
 * stream gives, rounded to float and kept below 1; 100,003 elements so
 * that the chunks and blocks end unevenly, after an offset of 17 */
static void test_rand_float32_bits(void **state) {
  (void)state;
  tu_leaks_begin();
  const int n = 100003;
  dt_manual_seed(1234);
  dt_tensor *skip = dt_rand(DT_SHAPE(17), NULL);
  dt_tensor *u = dt_rand(DT_SHAPE(n), NULL);
  float *v = malloc(sizeof *v * (size_t)n);
  assert_non_null(v);
  assert_int_equal(dt_to_host(u, v, sizeof *v * (size_t)n), DT_OK);
  for (int i = 0; i < n; i++) {
    float want = (float)cpu_philox_uniform(1234, 17 + (uint64_t)i);
    if (want >= 1.0f) want = 0.99999994f;
    if (v[i] != want)
      fail_msg("element %d: %.9g, want %.9g", i, (double)v[i], (double)want);
  }
  free(v);
  dt_tensor_release(skip);
  dt_tensor_release(u);
  tu_leaks_end();
}

/* float32 randn (its own vectorised float transforms) stays within 4 ulp
 * of the double Box-Muller of the same stream rounded to float (3.5 seen
 * over 2M draws); the ulp is the float's at the double value */
static void test_randn_float32_close(void **state) {
  (void)state;
  tu_leaks_begin();
  const int n = 200003;
  dt_manual_seed(99);
  dt_tensor *g = dt_randn(DT_SHAPE(n), NULL);
  float *v = malloc(sizeof *v * (size_t)n);
  assert_non_null(v);
  assert_int_equal(dt_to_host(g, v, sizeof *v * (size_t)n), DT_OK);
  double worst = 0;
  int at = 0;
  for (int i = 0; i < n; i++) {
    double want = cpu_philox_normal(99, (uint64_t)i);
    float a = fabsf((float)want);
    double ulp = (double)(nextafterf(a, INFINITY) - a);
    double e = fabs((double)v[i] - want) / ulp;
    if (e > worst) worst = e, at = i;
  }
  if (worst > 4.0)
    fail_msg("element %d: %.9g, double path %.9g: %.2f ulp", at,
             (double)v[at], cpu_philox_normal(99, (uint64_t)at), worst);
  free(v);
  dt_tensor_release(g);
  tu_leaks_end();
}

/* moments of 200k draws for every float dtype; uniform stays in [0, 1) */
static void test_rand_distribution(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_manual_seed(7);
  for (int di = 0; di < 4; di++) {
    dt_dtype d = tu_float_dtypes[di];
    const int n = 200000;
    dt_tensor *u = dt_rand(DT_SHAPE(n), &(dt_tensor_options){.dtype = d});
    dt_tensor *g = dt_randn(DT_SHAPE(n), &(dt_tensor_options){.dtype = d});
    double *vu = tu_values(u), *vg = tu_values(g);
    double su = 0, sg = 0, sg2 = 0;
    for (int i = 0; i < n; i++) {
      assert_true(vu[i] >= 0 && vu[i] < 1);
      su += vu[i];
      sg += vg[i];
      sg2 += vg[i] * vg[i];
    }
    /* 6 sigma bounds: sd(mean) = 0.289/sqrt(n) and 1/sqrt(n) */
    assert_true(fabs(su / n - 0.5) < 6 * 0.289 / sqrt(n) + 2e-3);
    assert_true(fabs(sg / n) < 6 / sqrt(n) + 4e-3);
    assert_true(fabs(sg2 / n - 1) < 0.02);
    free(vu); free(vg);
    dt_tensor_release(u); dt_tensor_release(g);
  }
  tu_leaks_end();
}

static void test_requires_grad_flag(void **state) {
  (void)state;
  dt_tensor *t = dt_zeros(DT_SHAPE(2), &(dt_tensor_options){.requires_grad = true});
  dt_tensor *u = dt_zeros(DT_SHAPE(2), NULL);
  assert_true(dt_tensor_requires_grad(t));
  assert_false(dt_tensor_requires_grad(u));
  assert_null(dt_tensor_mesh(t));
  dt_tensor *r = dt_tensor_retain(t);
  assert_ptr_equal(r, t);
  dt_tensor_release(r);
  dt_tensor_release(t);
  dt_tensor_release(u);
  dt_tensor_release(NULL); /* no-op */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_family),
      cmocka_unit_test(test_arange),
      cmocka_unit_test(test_full_out_of_range),
      cmocka_unit_test(test_full_negative_zero),
      cmocka_unit_test(test_host_roundtrip),
      cmocka_unit_test(test_bool_bytes_from_host),
      cmocka_unit_test(test_philox_kat),
      cmocka_unit_test(test_rand_split_invariance),
      cmocka_unit_test(test_rand_counter_carry),
      cmocka_unit_test(test_rand_float32_bits),
      cmocka_unit_test(test_randn_float32_close),
      cmocka_unit_test(test_rand_distribution),
      cmocka_unit_test(test_requires_grad_flag),
  };
  /* the mesh cases run on rank threads: a hang fails the run */
  return TU_RUN_TESTS_WITH_ALARM(600, tests);
}
