/* The data movement of collectives emulated on one GPU (docs/cuda.md):
 * every member's buffer is device memory of the same GPU, so a member
 * reduces its segment of every input, read through a table of pointers,
 * and writes the result to every member's output. Inputs are reduced in
 * member order in the CPU backend's precision (float16 / bfloat16 and
 * float32 in float32, float64 in float64, rounded once), so the result
 * is bitwise the CPU backend's (sim/coll_reduce.h). The rendezvous and
 * the cross-stream ordering (events) are the caller's. */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/dtype.cuh"

namespace {

struct ptrs_t {
  const void *in[CUDA_COLL_MAX];
  void *out[CUDA_COLL_MAX];
};

template <typename A> __device__ __forceinline__ A combine(int op, A a, A b) {
  switch (op) {
  case 2: return a > b || a != a ? a : b; /* max */
  case 3: return a < b || a != a ? a : b; /* min */
  case 4: return a * b;                   /* prod */
  default: return a + b;                  /* sum, avg */
  }
}

template <typename T>
__global__ void reduce_ptrs(int op, int n, int nout, ptrs_t p, int64_t begin,
                            int64_t end) {
  typedef typename ct_acc<T>::type A;
  for (int64_t i = begin + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
       i < end; i += (int64_t)gridDim.x * blockDim.x) {
    A acc = (A)ct_load(((const T *)p.in[0])[i]);
    for (int k = 1; k < n; k++)
      acc = combine<A>(op, acc, (A)ct_load(((const T *)p.in[k])[i]));
    if (op == 1) acc = acc / (A)n;
    T v = ct_store<T>((double)acc);
    for (int k = 0; k < nout; k++) ((T *)p.out[k])[i] = v;
  }
}

} // namespace

extern "C" int cuda_reduce_ptrs(void *stream, int op, int dtype, int n,
                                const void *const *in, int nout,
                                void *const *out, int64_t begin, int64_t end) {
  if (n < 1 || n > CUDA_COLL_MAX || nout < 1 || nout > CUDA_COLL_MAX ||
      op < 0 || op > 4)
    return -1;
  if (end <= begin) return 0;
  ptrs_t p = {};
  for (int k = 0; k < n; k++) p.in[k] = in[k];
  for (int k = 0; k < nout; k++) p.out[k] = out[k];
  cudaStream_t s = (cudaStream_t)stream;
  /* enough blocks to fill the GPU; a grid-stride loop does the rest */
  int64_t blocks = (end - begin + 255) / 256;
  unsigned grid = (unsigned)(blocks < 132 * 16 ? blocks : 132 * 16);
  bool ok = ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    reduce_ptrs<T><<<grid, 256, 0, s>>>(op, n, nout, p, begin, end);
  });
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}
