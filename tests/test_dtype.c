/* dtypes: float16/bfloat16 conversions checked exhaustively against this
 * file's own decoder, names and sizes, and the full 8x8 promotion table
 * (hand-written from PyTorch's promoteTypes). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "core/half.h"

static double half_ref(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                              : ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

static void test_f16_decode_exhaustive(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    double want = half_ref((uint16_t)h);
    float got = core_f16_to_f32((uint16_t)h);
    if (isnan(want)) { assert_true(isnan(got)); continue; }
    if ((double)got != want) fail_msg("f16 %04x: got %g want %g", h, got, want);
  }
}

/* every finite half round-trips; midpoints round to even; just above a
 * midpoint rounds up */
static void test_f16_encode_rounding(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x7c00; h++) {
    float x = (float)half_ref((uint16_t)h);
    assert_int_equal(core_f32_to_f16(x), h);
    assert_int_equal(core_f32_to_f16(-x), h | 0x8000);
    if (h + 1 < 0x7c00) {
      double mid = (half_ref((uint16_t)h) + half_ref((uint16_t)(h + 1))) / 2;
      uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
      assert_int_equal(core_f32_to_f16((float)mid), even);
      float above = nextafterf((float)mid, INFINITY);
      assert_int_equal(core_f32_to_f16(above), h + 1);
    }
  }
  assert_int_equal(core_f32_to_f16(1e6f), 0x7c00);           /* overflow → inf */
  assert_int_equal(core_f32_to_f16(65520.0f), 0x7c00);       /* rounds up to inf */
  assert_int_equal(core_f32_to_f16(65519.0f), 0x7bff);       /* max half */
  assert_true((core_f32_to_f16(NAN) & 0x7c00) == 0x7c00 &&
              (core_f32_to_f16(NAN) & 0x3ff) != 0);
}

/* the test support's own float16 encoder (tu_encode / tu_round, which
 * build every float16 test tensor), held to the same rules: every finite
 * half round-trips, midpoints round to even, values either side of a
 * midpoint to the nearer half; overflow, zeros, infinities and NaN */
static void test_tu_f16_encoder(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x7c00; h++) {
    double x = half_ref((uint16_t)h);
    uint16_t got;
    tu_encode(&got, DT_FLOAT16, x);
    assert_int_equal(got, h);
    tu_encode(&got, DT_FLOAT16, -x);
    assert_int_equal(got, h | 0x8000);
    double next = h + 1 < 0x7c00 ? half_ref((uint16_t)(h + 1)) : 65536;
    double mid = (x + next) / 2, even = (h & 1) ? next : x;
    if (h + 1 == 0x7c00) even = INFINITY; /* 65520 rounds up to inf */
    if (tu_round(mid, DT_FLOAT16) != even ||
        tu_round(-mid, DT_FLOAT16) != -even)
      fail_msg("tu_round(+-%.17g) is not +-%.17g", mid, even);
    if (tu_round(nextafter(mid, -INFINITY), DT_FLOAT16) != x)
      fail_msg("tu_round just below %.17g is not %.17g", mid, x);
    if (h + 1 < 0x7c00 &&
        tu_round(nextafter(mid, INFINITY), DT_FLOAT16) != next)
      fail_msg("tu_round just above %.17g is not %.17g", mid, next);
  }
  assert_true(tu_round(1e6, DT_FLOAT16) == INFINITY);
  assert_true(tu_round(-1e6, DT_FLOAT16) == -INFINITY);
  assert_true(isnan(tu_round(NAN, DT_FLOAT16)));
  const double special[4] = {0.0, -0.0, INFINITY, -INFINITY};
  const uint16_t bits[4] = {0x0000, 0x8000, 0x7c00, 0xfc00};
  for (int i = 0; i < 4; i++) {
    uint16_t got;
    tu_encode(&got, DT_FLOAT16, special[i]);
    assert_int_equal(got, bits[i]);
  }
}

static void test_bf16(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    uint32_t u = h << 16;
    float want;
    memcpy(&want, &u, 4);
    float got = core_bf16_to_f32((uint16_t)h);
    if (isnan(want)) { assert_true(isnan(got)); continue; }
    assert_true(got == want);
    assert_int_equal(core_f32_to_bf16(want), h); /* exact values round-trip */
  }
  /* rounding of values between two bfloat16s: nearest, ties to even */
  uint64_t x = 12345;
  for (int i = 0; i < 200000; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t bits = (uint32_t)(x >> 32) & 0x7f7fffffu; /* finite */
    float f;
    memcpy(&f, &bits, 4);
    uint32_t lo = bits & 0xffff0000u, hi = lo + 0x10000u;
    float flo, fhi;
    memcpy(&flo, &lo, 4);
    memcpy(&fhi, &hi, 4);
    /* past the largest finite value the next step is 2^128 (rounds to inf) */
    double dfhi = hi == 0x7f800000u ? ldexp(1.0, 128) : (double)fhi;
    double dl = (double)f - flo, dh = dfhi - f;
    uint16_t want = (uint16_t)((dl < dh || (dl == dh && !((lo >> 16) & 1)))
                                   ? lo >> 16 : hi >> 16);
    assert_int_equal(core_f32_to_bf16(f), want);
  }
}

static void test_names_sizes(void **state) {
  (void)state;
  const char *names[8] = {"float32", "float64", "float16", "bfloat16",
                          "int32", "int64", "uint8", "bool"};
  size_t sizes[8] = {4, 8, 2, 2, 4, 8, 1, 1};
  for (int i = 0; i < 8; i++) {
    assert_string_equal(dt_dtype_name((dt_dtype)i), names[i]);
    assert_int_equal(dt_dtype_size((dt_dtype)i), sizes[i]);
  }
  assert_string_equal(dt_dtype_name((dt_dtype)99), "?");
  assert_int_equal(dt_dtype_size((dt_dtype)-1), 0);
  assert_string_equal(dt_status_name(DT_ERR_SHAPE), "DT_ERR_SHAPE");
}

/* order: f32 f64 f16 bf16 i32 i64 u8 bool */
enum { F4, F8, F2, BF, I4, I8, U1, B1 };
static const int table[8][8] = {
    /* f32 */ {F4, F8, F4, F4, F4, F4, F4, F4},
    /* f64 */ {F8, F8, F8, F8, F8, F8, F8, F8},
    /* f16 */ {F4, F8, F2, F4, F2, F2, F2, F2},
    /* bf16*/ {F4, F8, F4, BF, BF, BF, BF, BF},
    /* i32 */ {F4, F8, F2, BF, I4, I8, I4, I4},
    /* i64 */ {F4, F8, F2, BF, I8, I8, I8, I8},
    /* u8  */ {F4, F8, F2, BF, I4, I8, U1, U1},
    /* bool*/ {F4, F8, F2, BF, I4, I8, U1, B1},
};

static void test_promotion_table(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++) {
      dt_tensor *x = dt_ones(DT_SHAPE(2), &(dt_tensor_options){.dtype = (dt_dtype)a});
      dt_tensor *y = dt_ones(DT_SHAPE(2), &(dt_tensor_options){.dtype = (dt_dtype)b});
      dt_tensor *r = dt_mul(x, y);
      assert_non_null(r);
      if ((int)dt_tensor_dtype(r) != table[a][b])
        fail_msg("promote(%s, %s) = %s, want %s", dt_dtype_name((dt_dtype)a),
                 dt_dtype_name((dt_dtype)b), dt_dtype_name(dt_tensor_dtype(r)),
                 dt_dtype_name((dt_dtype)table[a][b]));
      double *v = tu_values(r);
      assert_true(v[0] == 1 && v[1] == 1);
      free(v);
      dt_tensor_release(r); dt_tensor_release(x); dt_tensor_release(y);
    }
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f16_decode_exhaustive),
      cmocka_unit_test(test_f16_encode_rounding),
      cmocka_unit_test(test_tu_f16_encoder),
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_names_sizes),
      cmocka_unit_test(test_promotion_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
