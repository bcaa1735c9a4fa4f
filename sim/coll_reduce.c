/* Reductions and bulk stores for the emulated collectives (see
 * coll_reduce.h for the order and the semantics of each op and dtype).
 *
 * A reduction runs block by block: CHUNK elements of input 0 are loaded
 * into an accumulator in the compute type, inputs 1..nin-1 are combined
 * into it in order, AVG divides, the block is converted once to the
 * storage dtype and then copied to every output. The accumulator stays in
 * L1, so each input byte is read from memory once and each output byte
 * written once. Outputs of large reductions and large copies are written
 * with non-temporal stores: they will be read by another rank's next op,
 * not by this one, and streaming saves the read-for-ownership that would
 * otherwise make a write cost two memory transfers (the memcpy baseline
 * the benchmark compares with streams too). */
#include "sim/coll_reduce.h"

#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu/cpu.h"

#if defined(__SSE2__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#include <emmintrin.h>
#define SIM_COLL_STREAMING 1
#else
#define SIM_COLL_STREAMING 0
#endif

/* elements per block: two 8 KiB blocks (accumulator, staging) fit in L1 */
#define CHUNK 1024
/* below this many bytes per output, stores stay cached (the reader is
 * likely to find them in the shared cache) */
#define STREAM_MIN ((int64_t)256 * 1024)

typedef union acc_block {
  float f[CHUNK];
  double d[CHUNK];
  int64_t i[CHUNK];
  uint8_t b[CHUNK * 8];
} acc_block;

dt_status sim_coll_reduce_check(const char *what, dt_dtype d, dt_reduce_op op) {
  if ((unsigned)d >= (unsigned)DT_DTYPE_COUNT)
    return core_error_set(DT_ERR_DTYPE, "%s: invalid dtype %d", what, (int)d);
  if ((unsigned)op > (unsigned)DT_REDUCE_PROD)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: invalid reduce op %d",
                        what, (int)op);
  if (d == DT_BOOL && op == DT_REDUCE_AVG)
    return core_error_set(DT_ERR_DTYPE,
                        "%s: avg of bool is not defined (sum is a logical "
                        "or)", what);
  return DT_OK;
}

/* NaN in either operand gives NaN (the a != a test catches a; b NaN fails
 * the comparison and is chosen) */
#define FMAX(a, b) ((a) != (a) || (a) > (b) ? (a) : (b))
#define FMIN(a, b) ((a) != (a) || (a) < (b) ? (a) : (b))

/* blocks of 8 with a constant inner bound, which gcc's -O2 (very cheap
 * cost model) vectorises; then the tail */
#define COMBINE_LOOP(EXPR)                                                  \
  do {                                                                      \
    for (int64_t j0 = 0; j0 + 8 <= n; j0 += 8)                              \
      for (int u = 0; u < 8; u++) {                                         \
        int64_t j = j0 + u;                                                 \
        a[j] = (EXPR);                                                      \
      }                                                                     \
    for (int64_t j = n & ~(int64_t)7; j < n; j++) a[j] = (EXPR);            \
  } while (0)

#define DEFINE_COMBINE_FLOAT(NAME, T)                                       \
  static void NAME(T *restrict a, const T *restrict b, int64_t n,           \
                   dt_reduce_op op) {                                       \
    switch (op) {                                                           \
    case DT_REDUCE_SUM: case DT_REDUCE_AVG: COMBINE_LOOP(a[j] + b[j]); break; \
    case DT_REDUCE_PROD: COMBINE_LOOP(a[j] * b[j]); break;                  \
    case DT_REDUCE_MAX: COMBINE_LOOP(FMAX(a[j], b[j])); break;              \
    case DT_REDUCE_MIN: COMBINE_LOOP(FMIN(a[j], b[j])); break;              \
    }                                                                       \
  }
DEFINE_COMBINE_FLOAT(combine_f32, float)
DEFINE_COMBINE_FLOAT(combine_f64, double)

/* integers wrap: the arithmetic is done on uint64 (defined overflow) and
 * converted back (GCC defines that conversion as modulo 2^64) */
static void combine_i64(int64_t *restrict a, const int64_t *restrict b,
                        int64_t n, dt_reduce_op op) {
  switch (op) {
  case DT_REDUCE_SUM: case DT_REDUCE_AVG:
    COMBINE_LOOP((int64_t)((uint64_t)a[j] + (uint64_t)b[j])); break;
  case DT_REDUCE_PROD:
    COMBINE_LOOP((int64_t)((uint64_t)a[j] * (uint64_t)b[j])); break;
  case DT_REDUCE_MAX: COMBINE_LOOP(a[j] > b[j] ? a[j] : b[j]); break;
  case DT_REDUCE_MIN: COMBINE_LOOP(a[j] < b[j] ? a[j] : b[j]); break;
  }
}

/* bool values are 0/1 after cpu_load: sum/max = or, prod/min = and */
static void combine_bool(uint8_t *restrict a, const uint8_t *restrict b,
                         int64_t n, dt_reduce_op op) {
  if (op == DT_REDUCE_PROD || op == DT_REDUCE_MIN)
    COMBINE_LOOP((uint8_t)(a[j] & b[j]));
  else
    COMBINE_LOOP((uint8_t)(a[j] | b[j]));
}

static void combine(acc_block *acc, const void *b, int64_t n, dt_dtype ct,
                    dt_reduce_op op) {
  switch (ct) {
  case DT_FLOAT32: combine_f32(acc->f, b, n, op); break;
  case DT_FLOAT64: combine_f64(acc->d, b, n, op); break;
  case DT_INT64: combine_i64(acc->i, b, n, op); break;
  default: combine_bool(acc->b, b, n, op); break;
  }
}

static void finish_avg(acc_block *acc, int64_t n, dt_dtype ct, int nin) {
  switch (ct) {
  case DT_FLOAT32: {
    float k = (float)nin;
    for (int64_t j = 0; j < n; j++) acc->f[j] /= k;
    break;
  }
  case DT_FLOAT64:
    for (int64_t j = 0; j < n; j++) acc->d[j] /= (double)nin;
    break;
  case DT_INT64: /* C division: truncation toward zero */
    for (int64_t j = 0; j < n; j++) acc->i[j] /= nin;
    break;
  default: break; /* bool avg is rejected by sim_coll_reduce_check */
  }
}

/* acc = reduction of in[*][off .. off+n) */
static void accumulate(acc_block *acc, acc_block *tmp,
                       const void *const *in, int nin, int64_t off,
                       int64_t n, dt_dtype d, dt_dtype ct, dt_reduce_op op) {
  size_t esz = core_dtype_size(d);
  /* storage already in the compute type: combine straight from the input
   * (bool goes through cpu_load, which makes any nonzero byte 1) */
  bool native = d == ct && d != DT_BOOL;
  const char *p0 = (const char *)in[0] + (size_t)off * esz;
  if (native)
    memcpy(acc, p0, (size_t)n * esz);
  else
    cpu_load(acc, ct, p0, d, (int64_t)esz, n);
  for (int m = 1; m < nin; m++) {
    const char *p = (const char *)in[m] + (size_t)off * esz;
    if (!native) {
      cpu_load(tmp, ct, p, d, (int64_t)esz, n);
      p = (const char *)tmp;
    }
    combine(acc, p, n, ct, op);
  }
  if (op == DT_REDUCE_AVG) finish_avg(acc, n, ct, nin);
}

/* copies bytes to dst, streaming when asked and dst allows */
static void store_bytes(char *dst, const char *src, int64_t bytes,
                        bool stream) {
#if SIM_COLL_STREAMING
  if (stream) {
    /* cached stores up to the first 16-byte boundary of dst */
    int64_t head = (int64_t)((16 - ((uintptr_t)dst & 15)) & 15);
    if (head > bytes) head = bytes;
    memcpy(dst, src, (size_t)head);
    dst += head, src += head, bytes -= head;
    for (; bytes >= 64; bytes -= 64, dst += 64, src += 64) {
      __m128i x0 = _mm_loadu_si128((const __m128i *)src);
      __m128i x1 = _mm_loadu_si128((const __m128i *)(src + 16));
      __m128i x2 = _mm_loadu_si128((const __m128i *)(src + 32));
      __m128i x3 = _mm_loadu_si128((const __m128i *)(src + 48));
      _mm_stream_si128((__m128i *)dst, x0);
      _mm_stream_si128((__m128i *)(dst + 16), x1);
      _mm_stream_si128((__m128i *)(dst + 32), x2);
      _mm_stream_si128((__m128i *)(dst + 48), x3);
    }
  }
#else
  (void)stream;
#endif
  if (bytes > 0) memcpy(dst, src, (size_t)bytes);
}

bool sim_coll_streams(int64_t bytes) { return bytes >= STREAM_MIN; }

void sim_coll_copy(void *dst, const void *src, int64_t bytes, bool stream) {
  if (bytes <= 0 || dst == src) return;
  store_bytes(dst, src, bytes, stream);
}

void sim_coll_store_fence(void) {
#if SIM_COLL_STREAMING
  _mm_sfence();
#endif
}

void sim_coll_reduce(const void *const *in, int nin, void *const *out, int nout,
                 int64_t count, dt_dtype d, dt_reduce_op op) {
  CORE_ASSERT(nin >= 1);
  dt_dtype ct = cpu_compute_type(d);
  size_t esz = core_dtype_size(d);
  bool stream = sim_coll_streams(count * (int64_t)esz);
  _Alignas(64) acc_block acc, tmp;
  for (int64_t off = 0; off < count; off += CHUNK) {
    int64_t n = count - off < CHUNK ? count - off : CHUNK;
    accumulate(&acc, &tmp, in, nin, off, n, d, ct, op);
    const char *src = (const char *)&acc;
    if (d != ct) { /* round once, then copy the same bits everywhere */
      cpu_store((char *)&tmp, d, (int64_t)esz, &acc, ct, n);
      src = (const char *)&tmp;
    }
    for (int o = 0; o < nout; o++)
      store_bytes((char *)out[o] + (size_t)off * esz, src,
                  n * (int64_t)esz, stream);
  }
}
