/* Elementwise kernels over the strided iterator. Each inner loop takes the
 * contiguous native-type fast path when it can, else converts blocks of
 * CPU_BLOCK elements through the compute type. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"


/* ------------------------------------------------------------ binary */
#define BIN_ARITH(T, OP, o, a, b, n)                                        \
  for (int64_t i = 0; i < n; i++) o[i] = (T)(a[i] OP b[i])

static int64_t ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? (e & 1 ? -1 : 1) : 0;
  int64_t r = 1;
  while (e) {
    if (e & 1) r = (int64_t)((uint64_t)r * (uint64_t)b);
    b = (int64_t)((uint64_t)b * (uint64_t)b);
    e >>= 1;
  }
  return r;
}

/* PyTorch's integer floor division and remainder: the quotient rounds
 * toward -inf, the remainder takes the divisor's sign. b == 0 gives 0
 * (the op fails: see cpu_binary); INT64_MIN / -1 wraps to INT64_MIN
 * (remainder 0) instead of trapping. */
static inline int64_t ifloordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b, r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? q - 1 : q;
}
static inline int64_t irem(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

/* integer arithmetic wraps (two's complement) like PyTorch; do it unsigned */
#define U(x) ((uint64_t)(x))
static void bin_i64(cpu_binary_op op, int64_t n, void *ov, const int64_t *a,
                    const int64_t *b) {
  int64_t *o = ov;
  uint8_t *ob = ov;
  switch (op) {
  case CPU_ADD: for (int64_t i = 0; i < n; i++) o[i] = (int64_t)(U(a[i]) + U(b[i])); break;
  case CPU_SUB: for (int64_t i = 0; i < n; i++) o[i] = (int64_t)(U(a[i]) - U(b[i])); break;
  case CPU_MUL: for (int64_t i = 0; i < n; i++) o[i] = (int64_t)(U(a[i]) * U(b[i])); break;
  case CPU_POW: for (int64_t i = 0; i < n; i++) o[i] = ipow(a[i], b[i]); break;
  case CPU_FLOORDIV: for (int64_t i = 0; i < n; i++) o[i] = ifloordiv(a[i], b[i]); break;
  case CPU_REM: for (int64_t i = 0; i < n; i++) o[i] = irem(a[i], b[i]); break;
  case CPU_MAX: for (int64_t i = 0; i < n; i++) o[i] = a[i] > b[i] ? a[i] : b[i]; break;
  case CPU_MIN: for (int64_t i = 0; i < n; i++) o[i] = a[i] < b[i] ? a[i] : b[i]; break;
  case CPU_EQ: for (int64_t i = 0; i < n; i++) ob[i] = a[i] == b[i]; break;
  case CPU_NE: for (int64_t i = 0; i < n; i++) ob[i] = a[i] != b[i]; break;
  case CPU_LT: for (int64_t i = 0; i < n; i++) ob[i] = a[i] < b[i]; break;
  case CPU_LE: for (int64_t i = 0; i < n; i++) ob[i] = a[i] <= b[i]; break;
  case CPU_GT: for (int64_t i = 0; i < n; i++) ob[i] = a[i] > b[i]; break;
  case CPU_GE: for (int64_t i = 0; i < n; i++) ob[i] = a[i] >= b[i]; break;
  case CPU_AND: for (int64_t i = 0; i < n; i++) ob[i] = a[i] && b[i]; break;
  case CPU_OR: for (int64_t i = 0; i < n; i++) ob[i] = a[i] || b[i]; break;
  default: break; /* CPU_DIV never runs on integers (true division) */
  }
}
#undef U

/* PyTorch's floating floor division (div_floor_floating) and remainder:
 * the quotient from fmod, corrected toward -inf, rounded to the nearest
 * integer when fmod's error puts it past .5; x / 0 is IEEE's */
#define FLOAT_FLOORDIV(NAME, T, S)                                          \
  static inline T NAME(T a, T b) {                                          \
    if (b == 0) return a / b;                                               \
    T mod = fmod##S(a, b), div = (a - mod) / b;                             \
    if (mod != 0 && (b < 0) != (mod < 0)) div -= (T)1;                      \
    if (div == 0) return copysign##S((T)0, a / b);                          \
    T f = floor##S(div);                                                    \
    return div - f > (T)0.5 ? f + (T)1 : f;                                 \
  }
#define FLOAT_REM(NAME, T, S)                                               \
  static inline T NAME(T a, T b) {                                          \
    T mod = fmod##S(a, b);                                                  \
    return mod != 0 && (b < 0) != (mod < 0) ? mod + b : mod;                \
  }
FLOAT_FLOORDIV(floordiv_f, float, f)
FLOAT_FLOORDIV(floordiv_d, double, )
FLOAT_REM(rem_f, float, f)
FLOAT_REM(rem_d, double, )

/* float kinds: T = float or double, M = math suffix */
#define BIN_FLOAT(NAME, T, POWF, FDIV, FREM)                                \
  static void NAME(cpu_binary_op op, int64_t n, void *ov,                   \
                   const T *restrict a, const T *restrict b) {              \
    T *restrict o = ov;                                                     \
    uint8_t *ob = ov;                                                       \
    switch (op) {                                                           \
    case CPU_ADD: BIN_ARITH(T, +, o, a, b, n); break;                       \
    case CPU_SUB: BIN_ARITH(T, -, o, a, b, n); break;                       \
    case CPU_MUL: BIN_ARITH(T, *, o, a, b, n); break;                       \
    case CPU_DIV: BIN_ARITH(T, /, o, a, b, n); break;                       \
    case CPU_POW: for (int64_t i = 0; i < n; i++) o[i] = POWF(a[i], b[i]); break; \
    case CPU_FLOORDIV: for (int64_t i = 0; i < n; i++) o[i] = FDIV(a[i], b[i]); break; \
    case CPU_REM: for (int64_t i = 0; i < n; i++) o[i] = FREM(a[i], b[i]); break; \
    /* maximum/minimum propagate NaN and, on ties (0 vs -0), keep a, as  \
     * PyTorch's std::max / std::min do */                                 \
    case CPU_MAX:                                                           \
      for (int64_t i = 0; i < n; i++)                                       \
        o[i] = a[i] != a[i] ? a[i] : b[i] != b[i] ? b[i] : (a[i] < b[i] ? b[i] : a[i]); \
      break;                                                                \
    case CPU_MIN:                                                           \
      for (int64_t i = 0; i < n; i++)                                       \
        o[i] = a[i] != a[i] ? a[i] : b[i] != b[i] ? b[i] : (b[i] < a[i] ? b[i] : a[i]); \
      break;                                                                \
    case CPU_EQ: for (int64_t i = 0; i < n; i++) ob[i] = a[i] == b[i]; break; \
    case CPU_NE: for (int64_t i = 0; i < n; i++) ob[i] = a[i] != b[i]; break; \
    case CPU_LT: for (int64_t i = 0; i < n; i++) ob[i] = a[i] < b[i]; break; \
    case CPU_LE: for (int64_t i = 0; i < n; i++) ob[i] = a[i] <= b[i]; break; \
    case CPU_GT: for (int64_t i = 0; i < n; i++) ob[i] = a[i] > b[i]; break; \
    case CPU_GE: for (int64_t i = 0; i < n; i++) ob[i] = a[i] >= b[i]; break; \
    case CPU_AND: for (int64_t i = 0; i < n; i++) ob[i] = a[i] != 0 && b[i] != 0; break; \
    case CPU_OR: for (int64_t i = 0; i < n; i++) ob[i] = a[i] != 0 || b[i] != 0; break; \
    default: break;                                                         \
    }                                                                       \
  }
BIN_FLOAT(bin_f32, float, powf, floordiv_f, rem_f)
BIN_FLOAT(bin_f64, double, pow, floordiv_d, rem_d)

static void bin_bool(cpu_binary_op op, int64_t n, uint8_t *o, const uint8_t *a,
                     const uint8_t *b) {
  for (int64_t i = 0; i < n; i++) {
    switch (op) {
    case CPU_ADD: case CPU_OR: case CPU_MAX: o[i] = a[i] | b[i]; break;
    case CPU_MUL: case CPU_AND: case CPU_MIN: o[i] = a[i] & b[i]; break;
    case CPU_EQ: o[i] = a[i] == b[i]; break;
    case CPU_NE: o[i] = a[i] != b[i]; break;
    case CPU_LT: o[i] = a[i] < b[i]; break;
    case CPU_LE: o[i] = a[i] <= b[i]; break;
    case CPU_GT: o[i] = a[i] > b[i]; break;
    case CPU_GE: o[i] = a[i] >= b[i]; break;
    default: o[i] = 0; break;
    }
  }
}

void cpu_binary_flat(cpu_binary_op op, dt_dtype ct, int64_t n, void *o,
                     const void *a, const void *b) {
  switch (ct) {
  case DT_FLOAT32: bin_f32(op, n, o, a, b); break;
  case DT_FLOAT64: bin_f64(op, n, o, a, b); break;
  case DT_INT64: bin_i64(op, n, o, a, b); break;
  default: bin_bool(op, n, o, a, b); break;
  }
}

static bool is_compare(cpu_binary_op op) { return op >= CPU_EQ; }

typedef struct bin_ctx {
  cpu_binary_op op;
  dt_dtype ct, out_ct, dt[3]; /* out, a, b storage dtypes */
  const void *scalar;          /* b is this one compute-type value */
  dt_dtype via;                /* operands of another dtype are rounded to
                                  it first (DT_DTYPE_COUNT: none) */
  _Atomic bool *zero_div;      /* set when an integer divisor was 0 */
  bool round_b;                /* b is rounded to via too */
} bin_ctx;

/* integer floor division / remainder by a block b of k int64 divisors */
static void note_zero_div(const bin_ctx *c, const int64_t *b, int64_t k) {
  if (!c->zero_div || c->ct != DT_INT64 ||
      (c->op != CPU_FLOORDIV && c->op != CPU_REM))
    return;
  for (int64_t i = 0; i < k; i++)
    if (b[i] == 0) { /* relaxed: read after the iterator's join */
      atomic_store_explicit(c->zero_div, true, memory_order_relaxed);
      return;
    }
}

/* operand block x (k compute-type values loaded from dtype d) rounded to
 * c->via and back, as PyTorch converts inputs to the common dtype before
 * it computes: f16 [1] + f64 0-d 2049 adds 2048, uint8 vs int32 0-d -5
 * compares 251 */
static void round_via(const bin_ctx *c, dt_dtype d, void *x, int64_t k) {
  if (c->via == DT_DTYPE_COUNT || d == c->via || c->via == c->ct) return;
  _Alignas(64) char t[CPU_BLOCK * 8];
  size_t vs = cpu_dtype_size(c->via);
  cpu_store(t, c->via, (int64_t)vs, x, c->ct, k);
  cpu_load(x, c->ct, t, c->via, (int64_t)vs, k);
}

static void bin_inner(char **p, const int64_t *st, int64_t n, void *vctx) {
  const bin_ctx *c = vctx;
  size_t cs = cpu_dtype_size(c->ct), ocs = cpu_dtype_size(c->out_ct);
  bool native = c->dt[0] == c->out_ct && c->dt[1] == c->ct &&
                (c->scalar || c->dt[2] == c->ct);
  if (native && st[0] == (int64_t)ocs && st[1] == (int64_t)cs &&
      !c->scalar && st[2] == (int64_t)cs) {
    cpu_binary_flat(c->op, c->ct, n, p[0], p[1], p[2]);
    note_zero_div(c, (const int64_t *)p[2], n);
    return;
  }
  _Alignas(64) char ba[CPU_BLOCK * 8], bb[CPU_BLOCK * 8], bo[CPU_BLOCK * 8];
  if (c->scalar)
    for (int i = 0; i < CPU_BLOCK; i++) memcpy(bb + i * cs, c->scalar, cs);
  if (native && c->scalar && st[0] == (int64_t)ocs && st[1] == (int64_t)cs) {
    /* contiguous tensor ⊕ scalar in the native type: no conversions */
    for (int64_t s = 0; s < n; s += CPU_BLOCK) {
      int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
      cpu_binary_flat(c->op, c->ct, k, p[0] + s * st[0], p[1] + s * st[1], bb);
    }
    return;
  }
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(ba, c->ct, p[1] + s * st[1], c->dt[1], st[1], k);
    round_via(c, c->dt[1], ba, k);
    if (!c->scalar) {
      cpu_load(bb, c->ct, p[2] + s * st[2], c->dt[2], st[2], k);
      if (c->round_b) round_via(c, c->dt[2], bb, k);
      note_zero_div(c, (const int64_t *)bb, k);
    }
    cpu_binary_flat(c->op, c->ct, k, bo, ba, bb);
    cpu_store(p[0] + s * st[0], c->dt[0], st[0], bo, c->out_ct, k);
  }
}

bool cpu_binary(cpu_binary_op op, dt_dtype ct, dt_dtype via, bool round_b,
                const cpu_view *out, const cpu_view *a, const cpu_view *b) {
  _Atomic bool zero = false;
  bin_ctx c = {op, ct, is_compare(op) ? DT_BOOL : ct,
               {out->dtype, a->dtype, b->dtype}, NULL, via, &zero, round_b};
  cpu_view ops[3] = {*out, *a, *b};
  cpu_iter it;
  cpu_iter_init(&it, ops, 3);
  cpu_iter_run_parallel(&it, bin_inner, &c);
  /* relaxed: the parallel run's join ordered every chunk's store */
  return atomic_load_explicit(&zero, memory_order_relaxed);
}

void cpu_binary_scalar(cpu_binary_op op, dt_dtype ct, const cpu_view *out,
                       const cpu_view *a, double s) {
  _Alignas(8) char sv[8];
  switch (ct) {
  case DT_FLOAT32: *(float *)sv = (float)s; break;
  case DT_FLOAT64: *(double *)sv = s; break;
  case DT_INT64: *(int64_t *)sv = (int64_t)s; break;
  default: *(uint8_t *)sv = s != 0; break;
  }
  bin_ctx c = {op, ct, is_compare(op) ? DT_BOOL : ct,
               {out->dtype, a->dtype, a->dtype}, sv, DT_DTYPE_COUNT, NULL, false};
  cpu_view ops[2] = {*out, *a};
  cpu_iter it;
  cpu_iter_init(&it, ops, 2);
  /* the scalar operand has no pointer; give the inner loop a dummy slot */
  it.nops = 3;
  it.base[2] = NULL;
  for (int d = 0; d < it.ndim; d++) it.strides[2][d] = 0;
  cpu_iter_run_parallel(&it, bin_inner, &c);
}

/* ------------------------------------------------------------- unary */
/* float32 gelu and exp-based ops run as blocks (un_f32_vector); these
 * scalar forms are theirs, for the switch below */
static inline float gelu_f(float x) { return cpu_vgelu_one(x); }
static inline float gelu_tanh_f(float x) {
  float k = 0.7978845608028654f; /* sqrt(2/pi) */
  /* 0.5 (1 + tanh u) = sigmoid(2u): no cancellation for x << 0 */
  return x / (1.0f + cpu_vexpf(-2.0f * k * (x + 0.044715f * x * x * x)));
}
static inline double gelu_d(double x) {
  return 0.5 * x * erfc(-x * 0.70710678118654752);
}
static inline double gelu_tanh_d(double x) {
  double k = 0.79788456080286535588;
  return x / (1.0 + exp(-2.0 * k * (x + 0.044715 * x * x * x)));
}

#define UN_FLOAT(NAME, T, S, GELU, GELU_T)                                  \
  static void NAME(cpu_unary_op op, int64_t n, T *restrict o,               \
                   const T *restrict a) {                                   \
    switch (op) {                                                           \
    case CPU_NEG: for (int64_t i = 0; i < n; i++) o[i] = -a[i]; break;      \
    case CPU_ABS: for (int64_t i = 0; i < n; i++) o[i] = fabs##S(a[i]); break; \
    case CPU_EXP: for (int64_t i = 0; i < n; i++) o[i] = exp##S(a[i]); break; \
    case CPU_LOG: for (int64_t i = 0; i < n; i++) o[i] = log##S(a[i]); break; \
    case CPU_SQRT: for (int64_t i = 0; i < n; i++) o[i] = sqrt##S(a[i]); break; \
    case CPU_RSQRT: for (int64_t i = 0; i < n; i++) o[i] = (T)1 / sqrt##S(a[i]); break; \
    case CPU_SIN: for (int64_t i = 0; i < n; i++) o[i] = sin##S(a[i]); break; \
    case CPU_COS: for (int64_t i = 0; i < n; i++) o[i] = cos##S(a[i]); break; \
    case CPU_TANH: for (int64_t i = 0; i < n; i++) o[i] = tanh##S(a[i]); break; \
    case CPU_SIGMOID: for (int64_t i = 0; i < n; i++) o[i] = (T)1 / ((T)1 + exp##S(-a[i])); break; \
    /* x < 0 ? 0 : x keeps NaN and -0.0, as PyTorch's relu does */       \
    case CPU_RELU: for (int64_t i = 0; i < n; i++) o[i] = a[i] < 0 ? (T)0 : a[i]; break; \
    case CPU_SILU: for (int64_t i = 0; i < n; i++) o[i] = a[i] / ((T)1 + exp##S(-a[i])); break; \
    case CPU_GELU: for (int64_t i = 0; i < n; i++) o[i] = GELU(a[i]); break; \
    case CPU_GELU_TANH: for (int64_t i = 0; i < n; i++) o[i] = GELU_T(a[i]); break; \
    case CPU_COPY: memcpy(o, a, (size_t)n * sizeof(T)); break;              \
    default: break;                                                         \
    }                                                                       \
  }
UN_FLOAT(un_f32, float, f, gelu_f, gelu_tanh_f)
UN_FLOAT(un_f64, double, , gelu_d, gelu_tanh_d)

static void un_i64(cpu_unary_op op, int64_t n, int64_t *o, const int64_t *a) {
  for (int64_t i = 0; i < n; i++) {
    switch (op) {
    case CPU_NEG: o[i] = (int64_t)(0 - (uint64_t)a[i]); break;
    case CPU_ABS: o[i] = a[i] < 0 ? (int64_t)(0 - (uint64_t)a[i]) : a[i]; break;
    case CPU_RELU: o[i] = a[i] > 0 ? a[i] : 0; break;
    default: o[i] = a[i]; break; /* CPU_COPY */
    }
  }
}

/* float32 transcendental ops through the vectorised blocks of vmath.h
 * (libm's expf/erfcf/tanhf are a call with branches per element: gelu
 * over 16M floats took 111 ms); false for the rest */
static bool un_f32_vector(cpu_unary_op op, int64_t n, float *o,
                          const float *a) {
  switch (op) {
  case CPU_EXP: cpu_vexp_f32(o, a, 0.0f, n); return true;
  case CPU_LOG: cpu_vlog_f32(o, a, n); return true;
  case CPU_SIN: cpu_vsin_f32(o, a, n); return true;
  case CPU_COS: cpu_vcos_f32(o, a, n); return true;
  case CPU_TANH: cpu_vtanh_f32(o, a, n); return true;
  case CPU_SIGMOID: cpu_vsigmoid_f32(o, a, n); return true;
  case CPU_SILU: cpu_vsilu_f32(o, a, n); return true;
  case CPU_GELU: cpu_vgelu_f32(o, a, n); return true;
  case CPU_GELU_TANH: cpu_vgelu_tanh_f32(o, a, n); return true;
  default: return false;
  }
}

static void un_contig(cpu_unary_op op, dt_dtype ct, int64_t n, void *o,
                      const void *a) {
  switch (ct) {
  case DT_FLOAT32:
    if (!un_f32_vector(op, n, o, a)) un_f32(op, n, o, a);
    break;
  case DT_FLOAT64: un_f64(op, n, o, a); break;
  case DT_INT64: un_i64(op, n, o, a); break;
  default: { /* bool: logical_not, copy, abs/relu are identity */
    uint8_t *ob = o;
    const uint8_t *ab = a;
    for (int64_t i = 0; i < n; i++) ob[i] = op == CPU_NOT ? !ab[i] : ab[i];
    break;
  }
  }
}

typedef struct un_ctx {
  cpu_unary_op op;
  dt_dtype ct, dt[2];
  bool stream; /* the output is >= cpu_stream_min_bytes(): dense runs of it
                * are written with non-temporal stores */
} un_ctx;

/* n elements of es bytes from a (byte stride sa) to o (byte stride so):
 * one memcpy when both are dense, else a loop per element size whose
 * fixed-size memcpy compiles to one load and one store (no alignment or
 * aliasing assumptions, no call per element) */
#define COPY_LOOP(W)                                                        \
  for (int64_t i = 0; i < n; i++) memcpy(o + i * so, a + i * sa, W);       \
  break
static void copy_same(char *o, int64_t so, const char *a, int64_t sa,
                      int64_t n, size_t es) {
  if (so == (int64_t)es && sa == (int64_t)es) {
    memcpy(o, a, (size_t)n * es);
    return;
  }
  switch (es) {
  case 1: COPY_LOOP(1);
  case 2: COPY_LOOP(2);
  case 4: COPY_LOOP(4);
  case 8: COPY_LOOP(8);
  default: COPY_LOOP(es);
  }
}
#undef COPY_LOOP

/* A cast between dense runs where one side is the compute type: one
 * conversion per block straight from the input (no copy through the
 * compute type and back), into a tile that is streamed out when the
 * output is large (the read-for-ownership of every output line saved:
 * float32 -> bfloat16 of 16M, 2.3-2.4 -> 1.7-1.9 ms), else into the
 * output. Returns false where it does not apply. */
static bool cast_dense(const un_ctx *c, char **p, const int64_t *st,
                       int64_t n, char *tile) {
  int64_t eo = (int64_t)cpu_dtype_size(c->dt[0]), ei = (int64_t)cpu_dtype_size(c->dt[1]);
  bool from_ct = c->dt[1] == c->ct, to_ct = c->dt[0] == c->ct;
  if (st[0] != eo || st[1] != ei || !(from_ct || to_ct)) return false;
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    char *dst = c->stream ? tile : p[0] + s * eo;
    if (from_ct) cpu_store(dst, c->dt[0], eo, p[1] + s * ei, c->ct, k);
    else cpu_load(dst, c->ct, p[1] + s * ei, c->dt[1], ei, k);
    if (c->stream) cpu_stream_copy(p[0] + s * eo, tile, (size_t)(k * eo));
  }
  if (c->stream) cpu_stream_fence(); /* before the chunk counts as done */
  return true;
}

static void un_inner(char **p, const int64_t *st, int64_t n, void *vctx) {
  const un_ctx *c = vctx;
  size_t cs = cpu_dtype_size(c->ct);
  if (c->dt[0] == c->ct && c->dt[1] == c->ct && st[0] == (int64_t)cs &&
      st[1] == (int64_t)cs) {
    un_contig(c->op, c->ct, n, p[0], p[1]);
    return;
  }
  if (c->op == CPU_COPY && c->dt[0] == c->dt[1]) { /* same-type copy */
    copy_same(p[0], st[0], p[1], st[1], n, cpu_dtype_size(c->dt[0]));
    return;
  }
  _Alignas(64) char ba[CPU_BLOCK * 8], bo[CPU_BLOCK * 8];
  if (c->op == CPU_COPY && cast_dense(c, p, st, n, bo)) return;
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(ba, c->ct, p[1] + s * st[1], c->dt[1], st[1], k);
    un_contig(c->op, c->ct, k, bo, ba);
    cpu_store(p[0] + s * st[0], c->dt[0], st[0], bo, c->ct, k);
  }
}

void cpu_unary(cpu_unary_op op, dt_dtype ct, const cpu_view *out,
               const cpu_view *a) {
  int64_t bytes = (int64_t)cpu_dtype_size(out->dtype);
  for (int d = 0; d < out->ndim; d++) bytes *= out->sizes[d];
  un_ctx c = {op, ct, {out->dtype, a->dtype}, bytes >= cpu_stream_min_bytes()};
  cpu_view ops[2] = {*out, *a};
  cpu_iter it;
  cpu_iter_init(&it, ops, 2);
  if (op == CPU_COPY && out->dtype == a->dtype &&
      cpu_copy_transposed(&it, cpu_dtype_size(out->dtype)))
    return;
  cpu_iter_run_parallel(&it, un_inner, &c);
}

/* ------------------------------------------------------ clamp, where */
typedef struct clamp_ctx {
  dt_dtype ct, dt[2];
  double lo, hi;
  int64_t ilo, ihi; /* the bounds for ct int64 */
} clamp_ctx;

/* the int64 bound equivalent to a double one for integer x: x >= lo iff
 * x >= ceil(lo), x <= hi iff x <= floor(hi); infinities and values past
 * int64 saturate, which keeps the conversion defined and, for a min below
 * or a max above every value (what the ops layer lets through), bounds
 * nothing */
static int64_t int_bound(double v) {
  if (v < -9.2233720368547758e18) return INT64_MIN;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  return (int64_t)v;
}

static void clamp_inner(char **p, const int64_t *st, int64_t n, void *vctx) {
  const clamp_ctx *c = vctx;
  _Alignas(64) char b[CPU_BLOCK * 8];
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(b, c->ct, p[1] + s * st[1], c->dt[1], st[1], k);
    /* min(max(x, lo), hi) as std::max/min do it: x unless a bound is
     * strictly past it, so NaN and -0.0 stay; a NaN bound gives NaN */
    bool nan_bound = c->lo != c->lo || c->hi != c->hi;
    if (c->ct == DT_FLOAT32) {
      float *x = (float *)b, lo = (float)c->lo, hi = (float)c->hi;
      for (int64_t i = 0; i < k; i++) {
        x[i] = x[i] < lo ? lo : x[i];
        x[i] = x[i] > hi ? hi : x[i];
        if (nan_bound) x[i] = NAN;
      }
    } else if (c->ct == DT_FLOAT64) {
      double *x = (double *)b, lo = c->lo, hi = c->hi;
      for (int64_t i = 0; i < k; i++) {
        x[i] = x[i] < lo ? lo : x[i];
        x[i] = x[i] > hi ? hi : x[i];
        if (nan_bound) x[i] = NAN;
      }
    } else {
      /* compared as integers: (double)x would round past 2^53 */
      int64_t *x = (int64_t *)b, lo = c->ilo, hi = c->ihi;
      for (int64_t i = 0; i < k; i++) {
        if (x[i] < lo) x[i] = lo;
        if (x[i] > hi) x[i] = hi;
      }
    }
    cpu_store(p[0] + s * st[0], c->dt[0], st[0], b, c->ct, k);
  }
}

void cpu_clamp(dt_dtype ct, const cpu_view *out, const cpu_view *a,
               double lo, double hi) {
  clamp_ctx c = {ct, {out->dtype, a->dtype}, lo, hi, int_bound(ceil(lo)),
                 int_bound(floor(hi))};
  cpu_view ops[2] = {*out, *a};
  cpu_iter it;
  cpu_iter_init(&it, ops, 2);
  cpu_iter_run_parallel(&it, clamp_inner, &c);
}

typedef struct where_ctx { dt_dtype ct, dt[4]; } where_ctx;

static void where_inner(char **p, const int64_t *st, int64_t n, void *vctx) {
  const where_ctx *c = vctx;
  size_t cs = cpu_dtype_size(c->ct);
  _Alignas(64) uint8_t bc[CPU_BLOCK];
  _Alignas(64) char ba[CPU_BLOCK * 8], bb[CPU_BLOCK * 8];
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(bc, DT_BOOL, p[1] + s * st[1], c->dt[1], st[1], k);
    cpu_load(ba, c->ct, p[2] + s * st[2], c->dt[2], st[2], k);
    cpu_load(bb, c->ct, p[3] + s * st[3], c->dt[3], st[3], k);
    for (int64_t i = 0; i < k; i++)
      if (!bc[i]) memcpy(ba + i * cs, bb + i * cs, cs);
    cpu_store(p[0] + s * st[0], c->dt[0], st[0], ba, c->ct, k);
  }
}

void cpu_where(dt_dtype ct, const cpu_view *out, const cpu_view *cond,
               const cpu_view *a, const cpu_view *b) {
  where_ctx c = {ct, {out->dtype, cond->dtype, a->dtype, b->dtype}};
  cpu_view ops[4] = {*out, *cond, *a, *b};
  cpu_iter it;
  cpu_iter_init(&it, ops, 4);
  cpu_iter_run_parallel(&it, where_inner, &c);
}

typedef struct fill_job { char *p; size_t es; char one[8]; bool zero; } fill_job;

/* elements [begin, end): zero bytes by memset, otherwise the element once
 * and then doubling memcpys within the range */
static void fill_range(int64_t begin, int64_t end, void *arg) {
  const fill_job *j = arg;
  char *p = j->p + (size_t)begin * j->es;
  int64_t n = end - begin;
  if (j->zero) {
    memset(p, 0, (size_t)n * j->es);
    return;
  }
  memcpy(p, j->one, j->es);
  int64_t have = 1;
  while (have < n) {
    int64_t k = have < n - have ? have : n - have;
    memcpy(p + have * j->es, p, (size_t)k * j->es);
    have += k;
  }
}

void cpu_fill(void *dst, dt_dtype d, int64_t n, double v) {
  if (n <= 0) return;
  fill_job j = {dst, cpu_dtype_size(d), {0}, false};
  /* all-zero bytes are +0 in every dtype; -0.0 into any floating dtype
   * (float16 and bfloat16 too) keeps its sign bit, so it is replicated */
  j.zero = v == 0 && !signbit(v);
  /* convert once; chunks of 4 CPU_GRAIN elements copy it (a fill is a
   * store stream: the memory bus, not the cores, bounds it) */
  double one = v;
  dt_dtype ct = d == DT_FLOAT64 ? DT_FLOAT64
                : (d == DT_INT64 || d == DT_INT32 || d == DT_UINT8) ? DT_INT64
                : d == DT_BOOL ? DT_BOOL : DT_FLOAT32;
  _Alignas(8) char tmp[8];
  switch (ct) {
  case DT_FLOAT64: memcpy(tmp, &one, 8); break;
  case DT_INT64: { int64_t x = (int64_t)one; memcpy(tmp, &x, 8); break; }
  case DT_BOOL: tmp[0] = one != 0; break;
  default: { float f = (float)one; memcpy(tmp, &f, 4); break; }
  }
  cpu_store(j.one, d, (int64_t)j.es, tmp, ct, 1);
  cpu_parallel_for(n, 4 * CPU_GRAIN, fill_range, &j);
}

typedef struct flat_job {
  cpu_binary_op op;
  dt_dtype ct;
  char *o;
  const char *a, *b;
  size_t es, oes;
} flat_job;
static void flat_range(int64_t begin, int64_t end, void *arg) {
  const flat_job *j = arg;
  cpu_binary_flat(j->op, j->ct, end - begin, j->o + begin * (int64_t)j->oes,
                  j->a + begin * (int64_t)j->es, j->b + begin * (int64_t)j->es);
}

void cpu_binary_contig(cpu_binary_op op, dt_dtype ct, int64_t n, void *out,
                       const void *a, const void *b) {
  flat_job j = {op, ct, out, a, b, cpu_dtype_size(ct),
                cpu_dtype_size(is_compare(op) ? DT_BOOL : ct)};
  cpu_parallel_for(n, CPU_GRAIN, flat_range, &j);
}
