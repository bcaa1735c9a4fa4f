/* Helpers of the row kernels (kernels/cuda/rows.cu, grad.cu): a row is
 * handled by one warp (G = 32, eight rows per block of 256) when it is
 * short and by one block of 1024 threads (G = 1024) otherwise; reductions
 * over the group in double. Internal linkage: each .cu file gets its own
 * copy. */
#ifndef KERNELS_CUDA_ROWS_CUH
#define KERNELS_CUDA_ROWS_CUH

#include <math.h>
#include <stdint.h>

#include "kernels/cuda/dtype.cuh"

namespace {

__device__ __forceinline__ void offsets(int64_t i, int n, const int64_t *sz,
                                        const int64_t *sx, const int64_t *sy,
                                        int64_t *ox, int64_t *oy) {
  int64_t x = 0, y = 0;
  for (int d = n - 1; d >= 0; d--) {
    int64_t q = i / sz[d], r = i - q * sz[d];
    x += r * sx[d];
    y += r * sy[d];
    i = q;
  }
  *ox = x;
  *oy = y;
}

__device__ __forceinline__ double pick(int op, double a, double b) {
  switch (op) {
  case 2: return a > b || a != a ? a : b;   /* max, NaN wins */
  case 3: return a < b || a != a ? a : b;   /* min */
  case 4: return a * b;                     /* prod */
  default: return a + b;                    /* sum, mean */
  }
}

__host__ __device__ inline double identity(int op) {
  return op == 2 ? -INFINITY : op == 3 ? INFINITY : op == 4 ? 1.0 : 0.0;
}

/* reduces v over the group: a warp (G = 32) or the block (G = 1024) */
template <int G>
__device__ double group_reduce(int op, double v, double *smem) {
  for (int o = 16; o > 0; o >>= 1)
    v = pick(op, v, __shfl_xor_sync(0xffffffffu, v, o));
  if (G == 32) return v;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); /* smem may still be read by a previous call */
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? smem[lane] : identity(op);
  for (int o = 16; o > 0; o >>= 1)
    v = pick(op, v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* the row this group handles, and the thread's index in the group */
template <int G> __device__ int64_t row_of() {
  return G == 32 ? (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32
                 : (int64_t)blockIdx.x;
}
template <int G> __device__ int lane_of() {
  return G == 32 ? (int)(threadIdx.x & 31) : (int)threadIdx.x;
}

/* the log-sum-exp of the group's row of nc values at stride cs (a NaN or
 * infinite max is the lse), and its plain sum into *sum unless NULL (the
 * same for every lane of the group) */
template <typename T, int G>
__device__ double row_lse(const T *rx, int64_t nc, int64_t cs, double *smem,
                          double *sum) {
  double mx = -INFINITY;
  for (int64_t i = lane_of<G>(); i < nc; i += G)
    mx = pick(2, mx, (double)ct_load(rx[i * cs]));
  mx = group_reduce<G>(2, mx, smem);
  double s = 0, sx = 0;
  for (int64_t i = lane_of<G>(); i < nc; i += G) {
    double v = (double)ct_load(rx[i * cs]);
    s += exp(v - mx);
    sx += v;
  }
  s = group_reduce<G>(0, s, smem);
  if (sum) *sum = group_reduce<G>(0, sx, smem);
  return mx != mx || isinf(mx) ? mx : mx + log(s);
}

/* launches k<T, 32> (8 rows per block) or k<T, 1024> (a row per block) */
#define ROWS_LAUNCH(K, T, count, rows, s, ...)                               \
  do {                                                                       \
    if ((count) <= 1024)                                                     \
      K<T, 32><<<(unsigned)(((rows) + 7) / 8), 256, 0, s>>>(__VA_ARGS__);    \
    else                                                                     \
      K<T, 1024><<<(unsigned)(rows), 1024, 0, s>>>(__VA_ARGS__);             \
  } while (0)

#define ROWS_LAUNCH2(K, T, I, count, rows, s, ...)                           \
  do {                                                                       \
    if ((count) <= 1024)                                                     \
      K<T, I, 32><<<(unsigned)(((rows) + 7) / 8), 256, 0, s>>>(__VA_ARGS__); \
    else                                                                     \
      K<T, I, 1024><<<(unsigned)(rows), 1024, 0, s>>>(__VA_ARGS__);          \
  } while (0)

inline bool rows_fit(int64_t rows) { return rows <= 0x7FFFFFFFLL; }

} // namespace

#endif
