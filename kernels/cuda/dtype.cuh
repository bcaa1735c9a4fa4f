/* Element types of the CUDA kernels: dt_dtype values to C++ types, loads
 * to the compute type (float, or double for float64) and stores back with
 * round-to-nearest-even, as the CPU backend converts. */
#ifndef KERNELS_CUDA_DTYPE_CUH
#define KERNELS_CUDA_DTYPE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

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

template <typename T> __device__ __forceinline__ T ct_store(double v);
template <> __device__ __forceinline__ float ct_store<float>(double v) {
  return (float)v;
}
template <> __device__ __forceinline__ double ct_store<double>(double v) {
  return v;
}
template <> __device__ __forceinline__ __half ct_store<__half>(double v) {
  return __double2half(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 ct_store<__nv_bfloat16>(double v) {
  return __double2bfloat16(v);
}
/* float to integer: truncation toward zero, as a C cast */
template <> __device__ __forceinline__ int32_t ct_store<int32_t>(double v) {
  return (int32_t)v;
}
template <> __device__ __forceinline__ int64_t ct_store<int64_t>(double v) {
  return (int64_t)v;
}
template <> __device__ __forceinline__ uint8_t ct_store<uint8_t>(double v) {
  return (uint8_t)v;
}
template <> __device__ __forceinline__ bool ct_store<bool>(double v) {
  return v != 0.0;
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
