/* The data movement of collectives emulated on one GPU (docs/cuda.md):
 * every member's buffer is device memory of the same GPU, so a member
 * reduces its segment of every input, read through a table of pointers,
 * and writes the result to every member's output. Inputs are reduced
 * over the CPU backend's pairwise tree of the members (sim/coll_reduce.h:
 * node (lo, hi) = node(lo, mid) op node(mid, hi), mid = lo + (hi - lo) / 2)
 * in its precision (float16 / bfloat16 and float32 in float32, float64 in
 * float64, rounded once, a NaN result the default quiet NaN), so the
 * result is bitwise the CPU backend's. The host lists the tree's combines
 * children first; a thread holds one element of every member and applies
 * them. The rendezvous and the cross-stream ordering (events) are the
 * caller's. */
#include <math.h>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/dtype.cuh"

namespace {

struct ptrs_t {
  const void *in[CUDA_COLL_MAX];
  void *out[CUDA_COLL_MAX];
  /* combine k: v[left[k]] = v[left[k]] op v[right[k]], node (lo, hi)'s
   * value kept in v[lo]; children before parents */
  unsigned char left[CUDA_COLL_MAX], right[CUDA_COLL_MAX];
};

/* appends the combines of node (lo, hi), children first */
void tree_combines(ptrs_t *p, int lo, int hi, int *k) {
  if (hi - lo == 1) return;
  int mid = lo + (hi - lo) / 2;
  tree_combines(p, lo, mid, k);
  tree_combines(p, mid, hi, k);
  p->left[*k] = (unsigned char)lo, p->right[*k] = (unsigned char)mid;
  ++*k;
}

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
    A v[CUDA_COLL_MAX];
    for (int k = 0; k < n; k++) v[k] = (A)ct_load(((const T *)p.in[k])[i]);
    for (int k = 0; k + 1 < n; k++)
      v[p.left[k]] = combine<A>(op, v[p.left[k]], v[p.right[k]]);
    A acc = v[0];
    if (op == 1) acc = acc / (A)n;
    if (acc != acc) acc = (A)NAN; /* which NaN operand survives varies */
    T r = ct_store<T>((double)acc);
    for (int k = 0; k < nout; k++) ((T *)p.out[k])[i] = r;
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
  int nc = 0;
  tree_combines(&p, 0, n, &nc);
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
