/* Element types of the CUDA kernels: dt_dtype values to C++ types, loads
 * to the compute type (float, or double for float64) and stores back with
 * round-to-nearest-even, as the CPU backend converts. */
#ifndef KERNELS_CUDA_DTYPE_CUH
#define KERNELS_CUDA_DTYPE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

enum { CT_F32 = 0, CT_F64 = 1, CT_F16 = 2, CT_BF16 = 3, CT_I32 = 4,
       CT_I64 = 5, CT_U8 = 6, CT_BOOL = 7 };

template <typename T> struct ct_acc { typedef float type; };
template <> struct ct_acc<double> { typedef double type; };

__device__ __forceinline__ float ct_load(float v) { return v; }
__device__ __forceinline__ double ct_load(double v) { return v; }
__device__ __forceinline__ float ct_load(__half v) { return __half2float(v); }
__device__ __forceinline__ float ct_load(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ double ct_load(int32_t v) { return v; }
__device__ __forceinline__ double ct_load(int64_t v) { return (double)v; }
__device__ __forceinline__ double ct_load(uint8_t v) { return v; }
__device__ __forceinline__ double ct_load(bool v) { return v ? 1.0 : 0.0; }

/* Stores from the compute type, as the CPU's cpu_store does
 * (kernels/cpu/convert.c): float16 / bfloat16 through float (a double
 * rounded twice, as there), integers truncated toward zero with NaN and
 * out-of-range values giving INT64_MIN / INT32_MIN (x86's conversions),
 * uint8 the low byte of the int64 conversion, bool nonzero. */
__device__ __forceinline__ int64_t ct_f2i(double v) {
  if (!(v >= -9.2233720368547758e18 && v < 9.2233720368547758e18))
    return INT64_MIN;
  return (int64_t)v;
}
__device__ __forceinline__ int32_t ct_f2i32(double v) {
  if (!(v >= -2147483648.0 && v < 2147483648.0)) return INT32_MIN;
  return (int32_t)v;
}

template <typename T> __device__ __forceinline__ T ct_store(double v);
template <> __device__ __forceinline__ float ct_store<float>(double v) {
  return (float)v;
}
template <> __device__ __forceinline__ double ct_store<double>(double v) {
  return v;
}
template <> __device__ __forceinline__ __half ct_store<__half>(double v) {
  return __float2half_rn((float)v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 ct_store<__nv_bfloat16>(double v) {
  return __float2bfloat16_rn((float)v);
}
template <> __device__ __forceinline__ int32_t ct_store<int32_t>(double v) {
  return ct_f2i32(v);
}
template <> __device__ __forceinline__ int64_t ct_store<int64_t>(double v) {
  return ct_f2i(v);
}
template <> __device__ __forceinline__ uint8_t ct_store<uint8_t>(double v) {
  return (uint8_t)(uint64_t)ct_f2i(v);
}
template <> __device__ __forceinline__ bool ct_store<bool>(double v) {
  return v != 0.0;
}

template <typename T> struct ct_is_int { static const bool value = false; };
template <> struct ct_is_int<int32_t> { static const bool value = true; };
template <> struct ct_is_int<int64_t> { static const bool value = true; };
template <> struct ct_is_int<uint8_t> { static const bool value = true; };
template <> struct ct_is_int<bool> { static const bool value = true; };

/* a cast of one element, as the CPU's copies (ops_copy_type): integers
 * meet in int64 (int32 wraps, uint8 takes the low byte, bool is nonzero, a
 * float rounds once from the int64, float16 / bfloat16 through float),
 * floats in double then ct_store's rules */
template <typename O, typename I> __device__ __forceinline__ O ct_cast(I v) {
  if constexpr (ct_is_int<I>::value) {
    int64_t x = (int64_t)v;
    if constexpr (std::is_same<O, bool>::value) return x != 0;
    else if constexpr (std::is_same<O, uint8_t>::value)
      return (uint8_t)(uint64_t)x;
    else if constexpr (std::is_same<O, int32_t>::value)
      return (int32_t)(uint32_t)(uint64_t)x;
    else if constexpr (std::is_same<O, int64_t>::value) return x;
    else if constexpr (std::is_same<O, float>::value) return (float)x;
    else if constexpr (std::is_same<O, double>::value) return (double)x;
    else return ct_store<O>((double)(float)x);
  } else {
    return ct_store<O>((double)ct_load(v));
  }
}

/* calls f.template operator()<T>() with T the C++ type of dtype d; false
 * when d is not one of the listed kinds */
template <typename F> bool ct_dispatch_float(int d, F &&f) {
  switch (d) {
  case CT_F32: f(float()); return true;
  case CT_F64: f(double()); return true;
  case CT_F16: f(__half()); return true;
  case CT_BF16: f(__nv_bfloat16()); return true;
  default: return false;
  }
}
template <typename F> bool ct_dispatch_all(int d, F &&f) {
  switch (d) {
  case CT_I32: f(int32_t()); return true;
  case CT_I64: f(int64_t()); return true;
  case CT_U8: f(uint8_t()); return true;
  case CT_BOOL: f(bool()); return true;
  default: return ct_dispatch_float(d, f);
  }
}

/* grid for n elements, one per thread, grid-stride beyond the cap */
static inline unsigned ct_blocks(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  return (unsigned)(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

#endif
