/* Random fills from the Philox stream shared with the CPU backend
 * (kernels/cuda/philox.h): element i of a fill is stream element first + i,
 * so `dt_rand` gives the same integers on both backends, and the same
 * uniform / normal values up to the device's log and cos. */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/philox.h"

extern "C" void cuda_philox4x32_host(const uint32_t ctr[4],
                                     const uint32_t key[2], uint32_t out[4]) {
  cuda_philox_out o =
      cuda_philox4x32_10(ctr[0], ctr[1], ctr[2], ctr[3], key[0], key[1]);
  for (int i = 0; i < 4; i++) out[i] = o.v[i];
}

__host__ __device__ static double uniform_at(uint64_t seed, uint64_t index) {
  cuda_philox_out r = cuda_philox_at(seed, index);
  return cuda_philox_unit(r.v[0], r.v[1]);
}

/* Box–Muller from the element's four words, as the CPU backend */
__host__ __device__ static double normal_at(uint64_t seed, uint64_t index) {
  cuda_philox_out r = cuda_philox_at(seed, index);
  double u1 = cuda_philox_unit(r.v[0], r.v[1]);
  double u2 = cuda_philox_unit(r.v[2], r.v[3]);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

extern "C" double cuda_philox_uniform_host(uint64_t seed, uint64_t index) {
  return uniform_at(seed, index);
}
extern "C" double cuda_philox_normal_host(uint64_t seed, uint64_t index) {
  return normal_at(seed, index);
}

template <typename T>
__global__ void rand_kernel(T *dst, int64_t n, uint64_t seed, uint64_t first,
                            bool normal, double top) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    double v = normal ? normal_at(seed, first + (uint64_t)i)
                      : uniform_at(seed, first + (uint64_t)i);
    if (!normal && top < 1.0) {
      /* rounding to a narrow float may give 1.0: keep [0, 1) as the CPU */
      if ((float)v >= 1.0f) v = 0.99999994f;
      if (v > top) v = top;
    }
    dst[i] = ct_store<T>(v);
  }
}

struct dims_t {
  int64_t s[CUDA_MAX_DIMS];
};

/* element i of the dense output takes stream element first + i, as the
 * CPU backend's cpu_dropout; the value is divided in double and rounded
 * once, so kept elements match it bitwise */
template <typename T>
__global__ void dropout_kernel(int64_t n, int ndim, dims_t sz, cuda_operand a,
                               T *out, double p, uint64_t seed,
                               uint64_t first) {
  double q = 1.0 - p;
  const T *x = (const T *)a.data;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off = 0, r = i;
    for (int d = ndim - 1; d >= 0; d--) {
      int64_t qd = r / sz.s[d];
      off += (r - qd * sz.s[d]) * a.strides[d];
      r = qd;
    }
    double v = (double)ct_load(x[off]);
    out[i] = ct_store<T>(uniform_at(seed, first + (uint64_t)i) >= p ? v / q
                                                                   : 0.0);
  }
}

extern "C" int cuda_dropout(void *stream, int dtype, int ndim,
                            const int64_t *sizes, void *out,
                            const cuda_operand *a, double p, uint64_t seed,
                            uint64_t offset) {
  dims_t sz;
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= (sz.s[d] = sizes[d]);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  bool ok = ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    dropout_kernel<T><<<ct_blocks(n, 256), 256, 0, s>>>(
        n, ndim, sz, *a, (T *)out, p, seed, offset);
  });
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int cuda_rand_fill(void *stream, void *dst, int dtype, int64_t n,
                              uint64_t seed, uint64_t first, bool normal) {
  double top = dtype == CT_F16    ? 0.99951171875
               : dtype == CT_BF16 ? 0.99609375
               : dtype == CT_F32  ? 0.99999994f
                                  : 1.0;
  cudaStream_t s = (cudaStream_t)stream;
  bool ok = ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    if (n > 0)
      rand_kernel<T><<<ct_blocks(n, 256), 256, 0, s>>>((T *)dst, n, seed,
                                                       first, normal, top);
  });
  if (!ok) return -1;
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
