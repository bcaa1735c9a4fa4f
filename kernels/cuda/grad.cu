/* Backward kernels of autograd's index ops: cross_entropy's gradient with
 * class-index targets, and index_select's (an index_add into zeros).
 *
 * cross_entropy_backward: one kernel counts the targets that are not
 * ignore_index (MEAN's denominator, as the CPU's cpu_count_not_equal)
 * and marks the first target out of range; the row kernel then writes
 * w (softmax(x) - q) per position in double (q: the smoothed one-hot),
 * zero rows for ignored positions: the CPU's double path, within a few
 * ulp of its vectorised float32 path (the sums' order differs too).
 *
 * index_add: deterministic, and the CPU's bits. The CPU adds source
 * slice j into out[idx[j]] for j in order, rounding each sum to out's
 * dtype. Here the (index, j) pairs are sorted by index with CUB's stable
 * radix sort, so each index's positions stay in ascending j; one thread
 * per (outer, run head, inner) element then adds its run in that order
 * with the same rounding. No atomics: the same bits on every run. */
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/rows.cuh"

namespace {

/* the targets not equal to ignore (as a double) into *count, and the
 * first target out of range (not ignore) into *bad; one block */
template <typename I>
__global__ void ce_count(int64_t m, int64_t nc, const I *t, int64_t ts,
                         int64_t ignore, double *count,
                         unsigned long long *bad) {
  __shared__ double smem[32];
  double n = 0;
  for (int64_t p = threadIdx.x; p < m; p += blockDim.x) {
    int64_t c = (int64_t)t[p * ts];
    if (c == ignore) continue;
    n += 1;
    if (c < 0 || c >= nc) atomicMin(bad, (unsigned long long)p);
  }
  n = group_reduce<1024>(0, n, smem);
  if (threadIdx.x == 0) *count = n;
}

/* one position per group: out row = w (exp(x - lse) - q) with q the
 * target's (1 - eps) plus eps / nc everywhere; w = g[p * gs] (NONE) or
 * g[0], divided by *count for MEAN; an ignored or bad target: zeros */
template <typename T, typename I, int G>
__global__ void ce_grad_kernel(int64_t m, int64_t nc, int64_t rs, int64_t cs,
                               const T *x, const I *t, int64_t ts,
                               int64_t ignore, double eps, int reduction,
                               const T *g, int64_t gs, const double *count,
                               T *out, int64_t ors, int64_t ocs) {
  __shared__ double smem[32];
  int64_t row = row_of<G>();
  if (row >= m) return;
  const T *rx = x + row * rs;
  T *ro = out + row * ors;
  int64_t c = (int64_t)t[row * ts];
  if (c == ignore || c < 0 || c >= nc) {
    for (int64_t i = lane_of<G>(); i < nc; i += G) ro[i * ocs] = ct_store<T>(0);
    return;
  }
  double lse = row_lse<T, G>(rx, nc, cs, smem, nullptr);
  double w = (double)ct_load(g[reduction == 2 ? row * gs : 0]);
  if (reduction == 0) w /= *count;
  double uni = eps / (double)nc;
  for (int64_t i = lane_of<G>(); i < nc; i += G) {
    double q = (i == c ? 1 - eps : 0) + uni;
    ro[i * ocs] = ct_store<T>(w * (exp((double)ct_load(rx[i * cs]) - lse) - q));
  }
}

/* keys[j] = idx[j * istride] as int64, vals[j] = j; the first index out
 * of [0, size) lowers *bad to its position */
template <typename I>
__global__ void ia_keys(int64_t n, const I *idx, int64_t istride,
                        int64_t size, int64_t *keys, int64_t *vals,
                        unsigned long long *bad) {
  int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  int64_t v = (int64_t)idx[j * istride];
  keys[j] = v;
  vals[j] = j;
  if (v < 0 || v >= size) atomicMin(bad, (unsigned long long)j);
}

/* element e = (o, p, i) of the sorted order: when p heads its run of
 * equal keys, the run's sources added into out[o, key, i] in order */
template <typename T>
__global__ void ia_runs(int64_t outer, int64_t n, int64_t inner, int64_t size,
                        const int64_t *keys, const int64_t *vals, const T *src,
                        T *out) {
  int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= outer * n * inner) return;
  int64_t i = e % inner, p = (e / inner) % n, o = e / (inner * n);
  int64_t k = keys[p];
  if ((p > 0 && keys[p - 1] == k) || k < 0 || k >= size) return;
  T *dst = out + (o * size + k) * inner + i;
  T acc = *dst;
  for (int64_t q = p; q < n && keys[q] == k; q++)
    acc = ct_store<T>((double)ct_load(acc) +
                      (double)ct_load(src[(o * n + vals[q]) * inner + i]));
  *dst = acc;
}

size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

size_t sort_temp(int64_t n) {
  size_t temp = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, temp, (const int64_t *)nullptr,
                                  (int64_t *)nullptr, (const int64_t *)nullptr,
                                  (int64_t *)nullptr, (int)n);
  return temp;
}

} // namespace

extern "C" int cuda_cross_entropy_backward(
    void *stream, int dtype, bool idx64, int64_t m, int64_t nc, int64_t rs,
    int64_t cs, const void *x, const void *t, int64_t ts, int64_t ignore,
    double eps, int reduction, const void *g, int64_t gs, void *out,
    int64_t ors, int64_t ocs, void *scratch) {
  if (!rows_fit(m)) return -1;
  if (m == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  double *count = (double *)scratch;
  unsigned long long *bad = (unsigned long long *)(count + 1);
  bool ok = ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    if (idx64) {
      ce_count<int64_t><<<1, 1024, 0, s>>>(m, nc, (const int64_t *)t, ts,
                                           ignore, count, bad);
      ROWS_LAUNCH2(ce_grad_kernel, T, int64_t, nc, m, s, m, nc, rs, cs,
                   (const T *)x, (const int64_t *)t, ts, ignore, eps,
                   reduction, (const T *)g, gs, count, (T *)out, ors, ocs);
    } else {
      ce_count<int32_t><<<1, 1024, 0, s>>>(m, nc, (const int32_t *)t, ts,
                                           ignore, count, bad);
      ROWS_LAUNCH2(ce_grad_kernel, T, int32_t, nc, m, s, m, nc, rs, cs,
                   (const T *)x, (const int32_t *)t, ts, ignore, eps,
                   reduction, (const T *)g, gs, count, (T *)out, ors, ocs);
    }
  });
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" size_t cuda_index_add_scratch(int64_t n) {
  size_t keys = align256((size_t)n * 8);
  return 4 * keys + align256(sort_temp(n)) + 256;
}

extern "C" int cuda_index_add(void *stream, int dtype, int64_t outer,
                              int64_t size, int64_t inner, void *out,
                              const void *src, int64_t n, const void *idx,
                              bool idx64, int64_t istride, void *scratch) {
  if (n == 0) return 0;
  if (n > 0x7FFFFFFFLL) return -1; /* CUB's item count is an int */
  cudaStream_t s = (cudaStream_t)stream;
  size_t kb = align256((size_t)n * 8), temp = sort_temp(n);
  unsigned long long *bad = (unsigned long long *)scratch;
  char *base = (char *)scratch + 256;
  int64_t *keys = (int64_t *)base, *vals = (int64_t *)(base + kb);
  int64_t *skeys = (int64_t *)(base + 2 * kb), *svals = (int64_t *)(base + 3 * kb);
  void *tmp = base + 4 * kb;
  unsigned blocks = (unsigned)((n + 255) / 256);
  if (idx64)
    ia_keys<int64_t><<<blocks, 256, 0, s>>>(n, (const int64_t *)idx, istride,
                                            size, keys, vals, bad);
  else
    ia_keys<int32_t><<<blocks, 256, 0, s>>>(n, (const int32_t *)idx, istride,
                                            size, keys, vals, bad);
  if (cub::DeviceRadixSort::SortPairs(tmp, temp, keys, skeys, vals, svals,
                                      (int)n, 0, 64, s) != cudaSuccess)
    return -1;
  int64_t total = outer * n * inner;
  if (total == 0) return cudaGetLastError() == cudaSuccess ? 0 : -1;
  unsigned eblocks = (unsigned)((total + 255) / 256);
  if ((total + 255) / 256 > 0x7FFFFFFFLL) return -1;
  bool ok = ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    ia_runs<T><<<eblocks, 256, 0, s>>>(outer, n, inner, size, skeys, svals,
                                       (const T *)src, (T *)out);
  });
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}
