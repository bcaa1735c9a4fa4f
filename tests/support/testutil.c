/* Test support: independent decoding, random data, references, checks. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const dt_dtype tu_all_dtypes[8] = {DT_FLOAT32, DT_FLOAT64, DT_FLOAT16,
                                   DT_BFLOAT16, DT_INT32, DT_INT64, DT_UINT8,
                                   DT_BOOL};
const dt_dtype tu_float_dtypes[4] = {DT_FLOAT32, DT_FLOAT64, DT_FLOAT16,
                                     DT_BFLOAT16};

static size_t esize(dt_dtype d) {
  switch (d) {
  case DT_FLOAT64: case DT_INT64: return 8;
  case DT_FLOAT32: case DT_INT32: return 4;
  case DT_FLOAT16: case DT_BFLOAT16: return 2;
  default: return 1;
  }
}

/* IEEE half: sign, 5-bit exponent, 10-bit mantissa, decoded with ldexp */
static double half_decode(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 0) v = ldexp(m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

double tu_decode(const void *p, dt_dtype d) {
  switch (d) {
  case DT_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
  case DT_FLOAT64: { double f; memcpy(&f, p, 8); return f; }
  case DT_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return half_decode(h); }
  case DT_BFLOAT16: {
    uint16_t h; memcpy(&h, p, 2);
    uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f;
  }
  case DT_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
  case DT_INT64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
  case DT_UINT8: return *(const uint8_t *)p;
  default: return *(const uint8_t *)p ? 1 : 0;
  }
}

/* nearest representable half: binary search over the positive encodings,
 * which are ordered like their values; ties go to the even encoding */
static uint16_t half_encode(double v) {
  if (isnan(v)) return 0x7e00;
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  double a = fabs(v);
  if (a >= 65520) return (uint16_t)(sign | 0x7c00);
  uint32_t lo = 0, hi = 0x7bff; /* find the largest h with value <= a */
  while (lo < hi) {
    uint32_t mid = (lo + hi + 1) / 2;
    if (half_decode((uint16_t)mid) <= a) lo = mid; else hi = mid - 1;
  }
  uint32_t best = lo;
  if (lo < 0x7bff || a > half_decode(0x7bff)) {
    double below = half_decode((uint16_t)lo), above = half_decode((uint16_t)(lo + 1));
    double db = a - below, da = above - a;
    if (da < db || (da == db && (lo & 1))) best = lo + 1;
  }
  return (uint16_t)(sign | best);
}

double tu_round(double v, dt_dtype d) {
  unsigned char buf[8];
  tu_encode(buf, d, v);
  return tu_decode(buf, d);
}

void tu_encode(void *p, dt_dtype d, double v) {
  switch (d) {
  case DT_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
  case DT_FLOAT64: memcpy(p, &v, 8); break;
  case DT_FLOAT16: { uint16_t h = half_encode(v); memcpy(p, &h, 2); break; }
  case DT_BFLOAT16: {
    float f = (float)v; uint32_t u; memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
    uint16_t h = (uint16_t)(u >> 16); memcpy(p, &h, 2); break;
  }
  case DT_INT32: { int32_t x = (int32_t)(uint32_t)(int64_t)v; memcpy(p, &x, 4); break; }
  case DT_INT64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
  case DT_UINT8: *(uint8_t *)p = (uint8_t)(int64_t)v; break; /* wraps */
  default: *(uint8_t *)p = v != 0; break;
  }
}

int64_t tu_numel(dt_shape s) {
  int64_t n = 1;
  for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
  return n;
}

double *tu_values(dt_tensor *t) {
  assert_non_null(t);
  int64_t n = dt_tensor_numel(t);
  dt_dtype d = dt_tensor_dtype(t);
  size_t bytes = (size_t)n * esize(d);
  unsigned char *raw = malloc(bytes ? bytes : 1);
  dt_status st = dt_to_host(t, raw, bytes);
  if (st != DT_OK) fail_msg("dt_to_host: %s", dt_last_error());
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = tu_decode(raw + (size_t)i * esize(d), d);
  free(raw);
  return v;
}

void tu_fill_random(double *v, int64_t n, dt_dtype d, uint64_t seed,
                    double lo, double hi) {
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(x >> 11) / 9007199254740992.0;
    if (d == DT_BOOL) v[i] = u < 0.5 ? 0 : 1;
    else if (d == DT_INT32 || d == DT_INT64 || d == DT_UINT8)
      v[i] = floor(lo + u * (hi - lo + 1));
    else v[i] = tu_round(lo + u * (hi - lo), d);
  }
}

dt_tensor *tu_tensor(const double *v, dt_shape s, dt_dtype d) {
  int64_t n = tu_numel(s);
  unsigned char *raw = malloc((size_t)(n ? n : 1) * esize(d));
  for (int64_t i = 0; i < n; i++) tu_encode(raw + (size_t)i * esize(d), d, v[i]);
  dt_tensor_options o = {.dtype = d};
  dt_tensor *t = dt_from_host(raw, s, &o);
  free(raw);
  if (!t) fail_msg("dt_from_host: %s", dt_last_error());
  return t;
}

double *tu_random_values(int64_t n, dt_dtype d, uint64_t seed, double lo,
                         double hi, bool flip) {
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  tu_fill_random(v, n, d, seed, lo, hi);
  if (flip && d != DT_UINT8 && d != DT_BOOL)
    for (int64_t i = 0; i < n; i += 3) v[i] = -v[i];
  return v;
}

dt_tensor *tu_random(dt_shape s, dt_dtype d, uint64_t seed, double lo,
                     double hi, double **values) {
  double *v = tu_random_values(tu_numel(s), d, seed, lo, hi, false);
  dt_tensor *t = tu_tensor(v, s, d);
  if (values) *values = v; else free(v);
  return t;
}

dt_tensor *tu_noncontig(dt_tensor *t) {
  dt_shape s = dt_tensor_shape(t);
  dt_dtype d = dt_tensor_dtype(t);
  double *v = tu_values(t);
  int64_t n = tu_numel(s);
  if (s.ndim == 0) { /* a 0-d tensor: select from a strided 1-d one */
    double w[3] = {-7, v[0], -7};
    dt_tensor *big = tu_tensor(w, DT_SHAPE(3), d);
    dt_tensor *r = dt_select(big, 0, 1);
    dt_tensor_release(big);
    free(v);
    return r;
  }
  dt_shape bs = s;
  int last = s.ndim - 1;
  bs.dims[last] *= 2;
  double *w = malloc(sizeof(double) * (size_t)(2 * n + 1));
  for (int64_t i = 0; i < n; i++) {
    w[2 * i] = v[i];
    w[2 * i + 1] = -7; /* garbage the view must never read */
  }
  dt_tensor *big = tu_tensor(w, bs, d);
  dt_tensor *r = dt_slice(big, last, 0, INT64_MAX, 2);
  dt_tensor_release(big);
  free(w);
  free(v);
  assert_non_null(r);
  return r;
}

void tu_make_noncontig(dt_tensor **t) {
  dt_tensor *r = tu_noncontig(*t);
  dt_tensor_release(*t);
  *t = r;
}

dt_tensor *tu_noncontig_values(const double *v, dt_shape s, dt_dtype d) {
  dt_tensor *t = tu_tensor(v, s, d), *r = tu_noncontig(t);
  dt_tensor_release(t);
  return r;
}

dt_tensor *tu_transposed(const double *v, dt_shape s, dt_dtype d, int i,
                         int j) {
  dt_shape s0 = s; /* the storage: s with dims i and j swapped */
  s0.dims[i] = s.dims[j];
  s0.dims[j] = s.dims[i];
  int64_t n = tu_numel(s), idx[DT_MAX_DIMS];
  double *w = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t k = 0; k < n; k++) { /* w[..j..i..] = v[..i..j..] */
    tu_unravel(k, s, idx);
    int64_t tmp = idx[i];
    idx[i] = idx[j];
    idx[j] = tmp;
    w[tu_ravel(idx, s0)] = v[k];
  }
  dt_tensor *t0 = tu_tensor(w, s0, d);
  dt_tensor *t = dt_transpose(t0, i, j);
  dt_tensor_release(t0);
  free(w);
  assert_non_null(t);
  return t;
}

const char *const tu_layout_names[TU_LAYOUTS] = {"contiguous", "step-2",
                                                  "transposed"};

dt_tensor *tu_layout_input(dt_shape s, dt_dtype d, uint64_t seed, double lo,
                           double hi, bool flip, tu_layout l, double **vals) {
  if (l == TU_TRANSPOSED && s.ndim < 2) l = TU_STEP2;
  double *v = tu_random_values(tu_numel(s), d, seed, lo, hi, flip);
  *vals = v;
  switch (l) {
  case TU_CONTIG: return tu_tensor(v, s, d);
  case TU_STEP2: return tu_noncontig_values(v, s, d);
  default: return tu_transposed(v, s, d, 0, s.ndim - 1);
  }
}

bool tu_is_float(dt_dtype d) {
  return d == DT_FLOAT32 || d == DT_FLOAT64 || d == DT_FLOAT16 ||
         d == DT_BFLOAT16;
}

int64_t tu_ravel(const int64_t *idx, dt_shape s) {
  int64_t f = 0;
  for (int k = 0; k < s.ndim; k++) f = f * s.dims[k] + idx[k];
  return f;
}

void tu_unravel(int64_t i, dt_shape s, int64_t *idx) {
  for (int k = s.ndim - 1; k >= 0; k--) {
    idx[k] = s.dims[k] ? i % s.dims[k] : 0;
    i = s.dims[k] ? i / s.dims[k] : 0;
  }
}

int64_t tu_bcast_index(int64_t out_idx, dt_shape out, dt_shape in) {
  int64_t idx[DT_MAX_DIMS];
  tu_unravel(out_idx, out, idx);
  int64_t flat = 0;
  int shift = out.ndim - in.ndim;
  for (int k = 0; k < in.ndim; k++) {
    int64_t j = in.dims[k] == 1 ? 0 : idx[k + shift];
    flat = flat * in.dims[k] + j;
  }
  return flat;
}

void tu_shape_str(dt_shape s, char *buf, size_t len) {
  size_t n = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < s.ndim && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, i ? ", %lld" : "%lld",
                          (long long)s.dims[i]);
  if (n < len) snprintf(buf + n, len - n, "]");
}

static void check_dims(dt_shape got, dt_shape want, const char *what,
                       const char *kind) {
  bool same = got.ndim == want.ndim;
  for (int i = 0; same && i < want.ndim; i++)
    same = got.dims[i] == want.dims[i];
  if (!same) {
    char g[128], w[128];
    tu_shape_str(got, g, sizeof g);
    tu_shape_str(want, w, sizeof w);
    fail_msg("%s: %s%s, want %s", what, kind, g, w);
  }
}

void tu_assert_dims(dt_shape got, dt_shape want, const char *what) {
  check_dims(got, want, what, "");
}

void tu_assert_shape(dt_tensor *t, dt_shape want, const char *what) {
  if (!t) fail_msg("%s: no tensor (%s)", what, dt_last_error());
  check_dims(dt_tensor_shape(t), want, what, "shape ");
}

void tu_assert_meta(dt_tensor *t, dt_dtype d, dt_shape s, const char *what) {
  if (!t) fail_msg("%s: %s", what, dt_last_error());
  if (dt_tensor_dtype(t) != d)
    fail_msg("%s: dtype %s, want %s", what, dt_dtype_name(dt_tensor_dtype(t)),
             dt_dtype_name(d));
  tu_assert_shape(t, s, what);
}

void tu_assert_close(const double *got, const double *want, int64_t n,
                     double rtol, double atol, const char *what) {
  for (int64_t i = 0; i < n; i++) {
    if (isnan(want[i]) && isnan(got[i])) continue;
    if (isinf(want[i]) && got[i] == want[i]) continue;
    double err = fabs(got[i] - want[i]);
    if (!(err <= atol + rtol * fabs(want[i])))
      fail_msg("%s: element %lld: got %.17g, want %.17g (|err| %.3g)", what,
               (long long)i, got[i], want[i], err);
  }
}

double tu_rtol(dt_dtype d) {
  switch (d) {
  case DT_FLOAT32: return 2e-6;
  case DT_FLOAT64: return 1e-13;
  case DT_FLOAT16: return 2e-3;
  case DT_BFLOAT16: return 1.6e-2;
  default: return 0;
  }
}

static void check_message(const char *msg, va_list ap) {
  const char *sub;
  while ((sub = va_arg(ap, const char *)) != NULL)
    if (!strstr(msg, sub))
      fail_msg("error message \"%s\" does not mention \"%s\"", msg, sub);
}

void tu_expect_status(dt_status got, dt_status want, ...) {
  if (got != want)
    fail_msg("status %s, want %s (message: %s)", dt_status_name(got),
             dt_status_name(want), dt_last_error());
  if (dt_last_status() != want)
    fail_msg("dt_last_status %s, want %s", dt_status_name(dt_last_status()),
             dt_status_name(want));
  va_list ap;
  va_start(ap, want);
  check_message(dt_last_error(), ap);
  va_end(ap);
  dt_clear_error();
}

void tu_expect_error(dt_tensor *got, dt_status want, ...) {
  if (got) {
    dt_tensor_release(got);
    fail_msg("expected failure %s, got a tensor", dt_status_name(want));
  }
  if (dt_last_status() != want)
    fail_msg("status %s, want %s (message: %s)",
             dt_status_name(dt_last_status()), dt_status_name(want),
             dt_last_error());
  va_list ap;
  va_start(ap, want);
  check_message(dt_last_error(), ap);
  va_end(ap);
  dt_clear_error();
}

/* Ops run on rank threads, which drop their records' references when the
 * op has run: count only once all issued work is done. */
void tu_settle(void) {
  dt_status st = dt_runtime_synchronize(dt_runtime_current());
  if (st != DT_OK) fail_msg("dt_runtime_synchronize: %s", dt_last_error());
}

static int64_t settled_live_tensors(void) {
  tu_settle();
  return dt_live_tensors();
}

static int64_t leak_base;
void tu_leaks_begin(void) { leak_base = settled_live_tensors(); }
void tu_leaks_end(void) {
  int64_t now = settled_live_tensors();
  if (now != leak_base)
    fail_msg("%lld tensor handles leaked", (long long)(now - leak_base));
}

void tu_leaks_begin_clear(void) {
  dt_clear_error();
  tu_leaks_begin();
}

void tu_release_n(dt_tensor *const *ts, size_t n) {
  for (size_t i = 0; i < n; i++) dt_tensor_release(ts[i]);
}

const char *tu_dev(int rank) {
  static _Thread_local char buf[8][24];
  static _Thread_local int next;
  const char *d = getenv("DTORCH_DEVICE");
  bool cuda = d && strncmp(d, "cuda", 4) == 0;
  char *b = buf[next++ & 7];
  snprintf(b, sizeof buf[0], "%s:%d", cuda ? "cuda" : "cpu", rank);
  return b;
}
