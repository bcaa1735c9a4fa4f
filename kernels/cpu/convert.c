/* Loads from any storage dtype into a compute type and stores back. One
 * switch per block of elements, not per element. */
#include "core/half.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

#include <string.h>

dt_dtype cpu_compute_type(dt_dtype d) {
  switch (d) {
  case DT_FLOAT64: return DT_FLOAT64;
  case DT_FLOAT32: case DT_FLOAT16: case DT_BFLOAT16: return DT_FLOAT32;
  case DT_BOOL: return DT_BOOL;
  default: return DT_INT64;
  }
}

/* read element (a value v of storage type S) as the widest value of its
 * kind. A unit-stride source gets its own loop: indexed, so it vectorises
 * (float16/bfloat16 blocks convert 4-8 at a time, not one call each) */
#define LOAD_LOOP(T, S, EXPR)                                               \
  do {                                                                      \
    T *o = dst;                                                             \
    if (ss == (int64_t)sizeof(S)) {                                         \
      const S *in = (const S *)(const void *)src;                           \
      for (int64_t i = 0; i < n; i++) {                                     \
        S v = in[i];                                                        \
        o[i] = (T)(EXPR);                                                   \
      }                                                                     \
      break;                                                                \
    }                                                                       \
    for (int64_t i = 0; i < n; i++, src += ss) {                            \
      S v;                                                                  \
      memcpy(&v, src, sizeof v);                                            \
      o[i] = (T)(EXPR);                                                     \
    }                                                                       \
  } while (0)

#define LOAD_ALL(T)                                                         \
  switch (sd) {                                                             \
  case DT_FLOAT32: LOAD_LOOP(T, float, v); break;                           \
  case DT_FLOAT64: LOAD_LOOP(T, double, v); break;                          \
  case DT_FLOAT16: LOAD_LOOP(T, uint16_t, core_f16_to_f32(v)); break;       \
  case DT_BFLOAT16: LOAD_LOOP(T, uint16_t, core_bf16_to_f32(v)); break;     \
  case DT_INT32: LOAD_LOOP(T, int32_t, v); break;                           \
  case DT_INT64: LOAD_LOOP(T, int64_t, v); break;                           \
  case DT_UINT8: LOAD_LOOP(T, uint8_t, v); break;                           \
  case DT_BOOL: LOAD_LOOP(T, uint8_t, v != 0); break;                       \
  default: break;                                                           \
  }

CPU_CLONES void cpu_load(void *dst, dt_dtype ct, const char *src, dt_dtype sd,
                         int64_t ss, int64_t n) {
  switch (ct) {
  case DT_FLOAT32: LOAD_ALL(float); break;
  case DT_FLOAT64: LOAD_ALL(double); break;
  case DT_INT64: LOAD_ALL(int64_t); break;
  case DT_BOOL: {
    /* truthiness, not a numeric cast: 0.5 is true */
    uint8_t *o = dst;
    for (int64_t i = 0; i < n; i++, src += ss) {
      switch (sd) {
      case DT_FLOAT32: o[i] = *(const float *)src != 0; break;
      case DT_FLOAT64: o[i] = *(const double *)src != 0; break;
      case DT_FLOAT16: o[i] = (*(const uint16_t *)src & 0x7fff) != 0; break;
      case DT_BFLOAT16: o[i] = (*(const uint16_t *)src & 0x7fff) != 0; break;
      case DT_INT32: o[i] = *(const int32_t *)src != 0; break;
      case DT_INT64: o[i] = *(const int64_t *)src != 0; break;
      default: o[i] = *(const uint8_t *)src != 0; break;
      }
    }
    break;
  }
  default: break;
  }
}

#define STORE_LOOP(T, S, EXPR)                                              \
  do {                                                                      \
    const S *in = src;                                                      \
    if (ds == (int64_t)sizeof(T)) { /* unit stride: vectorises */           \
      T *out = (T *)(void *)dst;                                            \
      for (int64_t i = 0; i < n; i++) {                                     \
        S x = in[i];                                                        \
        out[i] = (EXPR);                                                    \
      }                                                                     \
      break;                                                                \
    }                                                                       \
    for (int64_t i = 0; i < n; i++, dst += ds) {                            \
      S x = in[i];                                                          \
      T y = (EXPR);                                                         \
      memcpy(dst, &y, sizeof y);                                            \
    }                                                                       \
  } while (0)

/* float -> integer casts truncate toward zero. C leaves NaN and values out
 * of the target's range undefined; PyTorch's CPU casts give what x86's
 * truncating conversions give, so do that without UB: NaN and out of range
 * become INT64_MIN (to int64) or INT32_MIN (to int32: a 32-bit conversion),
 * and uint8 takes the low byte of the int64 conversion (inf -> 0,
 * 300 -> 44, -1 -> 255, NaN -> 0). */
static inline int64_t f2i(double x) {
  if (!(x >= -9.2233720368547758e18 && x < 9.2233720368547758e18))
    return INT64_MIN;
  return (int64_t)x;
}
static inline int32_t f2i32(double x) {
  if (!(x >= -2147483648.0 && x < 2147483648.0)) return INT32_MIN;
  return (int32_t)x;
}
static inline int32_t i2i32(int64_t x) { return (int32_t)(uint32_t)(uint64_t)x; }

#define STORE_ALL(S, TOINT, TOI32)                                          \
  switch (dd) {                                                             \
  case DT_FLOAT32: STORE_LOOP(float, S, (float)x); break;                   \
  case DT_FLOAT64: STORE_LOOP(double, S, (double)x); break;                 \
  case DT_FLOAT16: STORE_LOOP(uint16_t, S, core_f32_to_f16((float)x)); break; \
  case DT_BFLOAT16: STORE_LOOP(uint16_t, S, core_f32_to_bf16((float)x)); break; \
  case DT_INT32: STORE_LOOP(int32_t, S, TOI32(x)); break;                   \
  case DT_INT64: STORE_LOOP(int64_t, S, TOINT(x)); break;                   \
  case DT_UINT8: STORE_LOOP(uint8_t, S, (uint8_t)(uint64_t)TOINT(x)); break; \
  case DT_BOOL: STORE_LOOP(uint8_t, S, (uint8_t)(x != 0)); break;           \
  default: break;                                                           \
  }

#define ID(x) (x)
CPU_CLONES void cpu_store(char *dst, dt_dtype dd, int64_t ds, const void *src,
                          dt_dtype ct, int64_t n) {
  switch (ct) {
  case DT_FLOAT32: STORE_ALL(float, f2i, f2i32); break;
  case DT_FLOAT64: STORE_ALL(double, f2i, f2i32); break;
  case DT_INT64: STORE_ALL(int64_t, ID, i2i32); break;
  case DT_BOOL: STORE_ALL(uint8_t, ID, i2i32); break;
  default: break;
  }
}
