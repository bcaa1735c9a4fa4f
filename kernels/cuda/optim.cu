/* Fused optimiser updates (the CPU's kernels/cpu/optim.c, on the GPU):
 * adam_moment out = beta buf + (1 - beta) (x or x^2), and adamw_apply
 * out = decay p - step m / (sqrt(v) + eps), over dense operands of one
 * float dtype, computed in the compute type (float, double for float64)
 * with the scalars rounded to it once, as the CPU does. */
#include <math.h>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/dtype.cuh"

namespace {

template <typename T>
__global__ void moment_kernel(int64_t n, T *out, const T *buf, const T *x,
                              double beta, double rest, bool squared) {
  typedef typename ct_acc<T>::type A;
  A b = (A)beta, r = (A)rest;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    A xv = (A)ct_load(x[i]);
    A v = squared ? xv * xv : xv;
    out[i] = ct_store<T>(b * (A)ct_load(buf[i]) + r * v);
  }
}

template <typename T>
__global__ void adamw_kernel(int64_t n, T *out, const T *p, const T *m,
                             const T *v, double step, double eps,
                             double decay) {
  typedef typename ct_acc<T>::type A;
  A s = (A)step, e = (A)eps, d = (A)decay;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = ct_store<T>(d * (A)ct_load(p[i]) -
                         s * (A)ct_load(m[i]) / (sqrt((A)ct_load(v[i])) + e));
}

int launched(bool ok) {
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}

} // namespace

extern "C" int cuda_adam_moment(void *stream, int dtype, int64_t n, void *out,
                                const void *buf, const void *x, double beta,
                                bool squared) {
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  return launched(ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    moment_kernel<T><<<ct_blocks(n, 256), 256, 0, s>>>(
        n, (T *)out, (const T *)buf, (const T *)x, beta, 1 - beta, squared);
  }));
}

extern "C" int cuda_adamw_apply(void *stream, int dtype, int64_t n, void *out,
                                const void *p, const void *m, const void *v,
                                double step, double eps, double decay) {
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  return launched(ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    adamw_kernel<T><<<ct_blocks(n, 256), 256, 0, s>>>(
        n, (T *)out, (const T *)p, (const T *)m, (const T *)v, step, eps,
        decay);
  }));
}
