/* Row kernels: reductions over any dims, softmax / log_softmax over one
 * dim, layer_norm / rms_norm over the last dim. The operand is seen as
 * rows (the outer dims) of elements (the inner dims), each with its own
 * strides for the input and the output (kernels/cuda/cuda.h, cuda_rows).
 * A row is handled by one warp when it is short (<= 1024 elements) and by
 * one block of 1024 threads otherwise; sums accumulate in double, so the
 * results are within rounding of the CPU backend's, whatever the order.
 * A reduction with few long rows keeps few SMs busy (no split-row partial
 * sums yet). */
#include <math.h>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/rows.cuh"

namespace {

struct rows_t {
  cuda_rows g;
};

template <typename T, int G>
__global__ void reduce_kernel(int op, double init, rows_t R, int64_t rows,
                              int64_t count, T *y, const T *x) {
  __shared__ double smem[32];
  int64_t row = row_of<G>();
  if (row >= rows) return; /* whole groups leave together */
  int64_t xo, yo;
  offsets(row, R.g.nouter, R.g.outer, R.g.x_outer, R.g.y_outer, &xo, &yo);
  double acc = init;
  for (int64_t i = lane_of<G>(); i < count; i += G) {
    int64_t xi, unused;
    offsets(i, R.g.ninner, R.g.inner, R.g.x_inner, R.g.x_inner, &xi, &unused);
    acc = pick(op, acc, (double)ct_load(x[xo + xi]));
  }
  acc = group_reduce<G>(op, acc, smem);
  if (lane_of<G>() == 0) y[yo] = ct_store<T>(op == 1 ? acc / (double)count : acc);
}

template <typename T, int G>
__global__ void softmax_kernel(bool logsm, rows_t R, int64_t rows,
                               int64_t count, T *y, const T *x) {
  __shared__ double smem[32];
  int64_t row = row_of<G>();
  if (row >= rows) return;
  int64_t xo, yo;
  offsets(row, R.g.nouter, R.g.outer, R.g.x_outer, R.g.y_outer, &xo, &yo);
  double m = -INFINITY;
  for (int64_t i = lane_of<G>(); i < count; i += G) {
    int64_t xi, yi;
    offsets(i, R.g.ninner, R.g.inner, R.g.x_inner, R.g.y_inner, &xi, &yi);
    m = pick(2, m, (double)ct_load(x[xo + xi]));
  }
  m = group_reduce<G>(2, m, smem);
  double s = 0;
  for (int64_t i = lane_of<G>(); i < count; i += G) {
    int64_t xi, yi;
    offsets(i, R.g.ninner, R.g.inner, R.g.x_inner, R.g.y_inner, &xi, &yi);
    s += exp((double)ct_load(x[xo + xi]) - m);
  }
  s = group_reduce<G>(0, s, smem);
  double ls = log(s);
  for (int64_t i = lane_of<G>(); i < count; i += G) {
    int64_t xi, yi;
    offsets(i, R.g.ninner, R.g.inner, R.g.x_inner, R.g.y_inner, &xi, &yi);
    double v = (double)ct_load(x[xo + xi]) - m;
    y[yo + yi] = ct_store<T>(logsm ? v - ls : exp(v) / s);
  }
}

/* over the last dim: inner is one dim of `count` elements */
template <typename T, int G>
__global__ void norm_kernel(bool rms, double eps, rows_t R, int64_t rows,
                            int64_t count, T *y, const T *x, const T *w,
                            const T *b) {
  __shared__ double smem[32];
  int64_t row = row_of<G>();
  if (row >= rows) return;
  int64_t xo, yo, sx = R.g.x_inner[0], sy = R.g.y_inner[0];
  offsets(row, R.g.nouter, R.g.outer, R.g.x_outer, R.g.y_outer, &xo, &yo);
  double mean = 0;
  if (!rms) {
    for (int64_t i = lane_of<G>(); i < count; i += G)
      mean += (double)ct_load(x[xo + i * sx]);
    mean = group_reduce<G>(0, mean, smem) / (double)count;
  }
  double ss = 0;
  for (int64_t i = lane_of<G>(); i < count; i += G) {
    double d = (double)ct_load(x[xo + i * sx]) - mean;
    ss += d * d;
  }
  double rstd = 1.0 / sqrt(group_reduce<G>(0, ss, smem) / (double)count + eps);
  for (int64_t i = lane_of<G>(); i < count; i += G) {
    double v = ((double)ct_load(x[xo + i * sx]) - mean) * rstd;
    if (w) v *= (double)ct_load(w[i]);
    if (b) v += (double)ct_load(b[i]);
    y[yo + i * sy] = ct_store<T>(v);
  }
}

/* the sum over the row of f(x), each group's lanes in stride order */
template <typename T, int G, typename F>
__device__ double row_sum(const rows_t &R, int64_t xo, int64_t count,
                          const T *x, double *smem, F f) {
  double s = 0;
  for (int64_t i = lane_of<G>(); i < count; i += G) {
    int64_t xi, unused;
    offsets(i, R.g.ninner, R.g.inner, R.g.x_inner, R.g.x_inner, &xi, &unused);
    s += f((double)ct_load(x[xo + xi]));
  }
  return group_reduce<G>(0, s, smem);
}

/* var as the CPU computes it: the mean, refined once by the mean deviation
 * from it, then the squared deviations over N - correction (NaN when that
 * is not positive) */
template <typename T, int G>
__global__ void var_kernel(int64_t corr, rows_t R, int64_t rows,
                           int64_t count, T *y, const T *x) {
  __shared__ double smem[32];
  int64_t row = row_of<G>();
  if (row >= rows) return;
  int64_t xo, yo;
  offsets(row, R.g.nouter, R.g.outer, R.g.x_outer, R.g.y_outer, &xo, &yo);
  double n = (double)count;
  double mean = row_sum<T, G>(R, xo, count, x, smem,
                              [](double v) { return v; }) / n;
  mean += row_sum<T, G>(R, xo, count, x, smem,
                        [mean](double v) { return v - mean; }) / n;
  double ss = row_sum<T, G>(R, xo, count, x, smem, [mean](double v) {
    return (v - mean) * (v - mean);
  });
  if (lane_of<G>() == 0)
    y[yo] = ct_store<T>(count - corr <= 0 ? nan("") : ss / (double)(count - corr));
}

/* (value, index) of the row's first extreme: NaN wins (the first NaN),
 * ties go to the lower index */
__device__ __forceinline__ bool better(bool max, double a, int64_t ia,
                                       double b, int64_t ib) {
  bool an = a != a, bn = b != b;
  if (an || bn) return an && (!bn || ia < ib);
  if (a != b) return max ? a > b : a < b;
  return ia < ib;
}

template <typename T, int G>
__global__ void argext_kernel(bool max, rows_t R, int64_t rows, int64_t count,
                              int64_t *y, const T *x) {
  __shared__ double sv[32];
  __shared__ int64_t si[32];
  int64_t row = row_of<G>();
  if (row >= rows) return;
  int64_t xo, yo;
  offsets(row, R.g.nouter, R.g.outer, R.g.x_outer, R.g.y_outer, &xo, &yo);
  double v = max ? -INFINITY : INFINITY;
  int64_t vi = INT64_MAX;
  for (int64_t i = lane_of<G>(); i < count; i += G) {
    int64_t xi, unused;
    offsets(i, R.g.ninner, R.g.inner, R.g.x_inner, R.g.x_inner, &xi, &unused);
    double e = (double)ct_load(x[xo + xi]);
    if (better(max, e, i, v, vi)) {
      v = e;
      vi = i;
    }
  }
  for (int round = 0; round < (G == 32 ? 1 : 2); round++) {
    for (int o = 16; o > 0; o >>= 1) {
      double ov = __shfl_xor_sync(0xffffffffu, v, o);
      int64_t oi = __shfl_xor_sync(0xffffffffu, vi, o);
      if (better(max, ov, oi, v, vi)) {
        v = ov;
        vi = oi;
      }
    }
    if (G == 32) break;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) {
      sv[warp] = v;
      si[warp] = vi;
    }
    __syncthreads();
    bool have = lane < (int)(blockDim.x >> 5);
    v = have ? sv[lane] : (max ? -INFINITY : INFINITY);
    vi = have ? si[lane] : INT64_MAX;
  }
  /* an all -inf (argmax) row keeps index 0 */
  if (lane_of<G>() == 0) y[yo] = vi == INT64_MAX ? 0 : vi;
}

/* cross_entropy with class-index targets over rows of logits (row r at
 * r * rs, class c at c * cs), the CPU's per-position loss: lse (a NaN or
 * infinite max is the lse) minus (1 - eps) x_t, minus eps times the row's
 * mean when smoothing; ignore_index gives 0, uncounted; a target out of
 * range lowers *bad to its position. loss / cnt: one double per row */
template <typename T, typename I, int G>
__global__ void ce_kernel(int64_t m, int64_t nc, int64_t rs, int64_t cs,
                          const T *x, const I *t, int64_t ts, int64_t ignore,
                          double eps, double *loss, double *cnt,
                          unsigned long long *bad, T *out, int64_t os) {
  __shared__ double smem[32];
  int64_t row = row_of<G>();
  if (row >= m) return;
  const T *rx = x + row * rs;
  double sx = 0;
  double lse = row_lse<T, G>(rx, nc, cs, smem, eps != 0 ? &sx : nullptr);
  if (lane_of<G>() != 0) return;
  int64_t c = (int64_t)t[row * ts];
  double l = 0, counted = 0;
  if (c != ignore) {
    if (c < 0 || c >= nc) {
      atomicMin(bad, (unsigned long long)row);
    } else {
      l = lse - (1 - eps) * (double)ct_load(rx[c * cs]);
      if (eps != 0) l -= eps * sx / (double)nc;
      counted = 1;
    }
  }
  loss[row] = l;
  cnt[row] = counted;
  if (out) out[row * os] = ct_store<T>(l);
}

/* the reduction of the losses: a sum over rows (or over counted rows for
 * the mean; NaN when none), one block, a fixed order */
template <typename T>
__global__ void ce_finish(int64_t m, bool mean, const double *loss,
                          const double *cnt, T *out) {
  __shared__ double smem[32];
  double a = 0, b = 0;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
    a += loss[i];
    b += cnt[i];
  }
  a = group_reduce<1024>(0, a, smem);
  b = group_reduce<1024>(0, b, smem);
  if (threadIdx.x == 0)
    out[0] = ct_store<T>(!mean ? a : b != 0 ? a / b : nan(""));
}

int64_t count_of(const cuda_rows *g, int64_t *rows) {
  int64_t r = 1, n = 1;
  for (int d = 0; d < g->nouter; d++) r *= g->outer[d];
  for (int d = 0; d < g->ninner; d++) n *= g->inner[d];
  *rows = r;
  return n;
}

} // namespace

extern "C" int cuda_reduce(void *stream, int op, int dtype, const cuda_rows *g,
                           void *out, const void *x) {
  int64_t rows, count = count_of(g, &rows);
  if (rows == 0) return 0;
  if (!rows_fit(rows) || op < 0 || op > 4) return -1;
  cudaStream_t s = (cudaStream_t)stream;
  rows_t R = {*g};
  double init = identity(op);
  bool ok = ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    ROWS_LAUNCH(reduce_kernel, T, count, rows, s, op, init, R, rows, count,
                (T *)out, (const T *)x);
  });
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int cuda_softmax(void *stream, bool logsm, int dtype,
                            const cuda_rows *g, void *out, const void *x) {
  int64_t rows, count = count_of(g, &rows);
  if (rows == 0 || count == 0) return 0;
  if (!rows_fit(rows)) return -1;
  cudaStream_t s = (cudaStream_t)stream;
  rows_t R = {*g};
  bool ok = ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    ROWS_LAUNCH(softmax_kernel, T, count, rows, s, logsm, R, rows, count,
                (T *)out, (const T *)x);
  });
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int cuda_norm(void *stream, bool rms, int dtype, const cuda_rows *g,
                         void *out, const void *x, const void *w,
                         const void *b, double eps) {
  int64_t rows, count = count_of(g, &rows);
  if (rows == 0 || count == 0) return 0;
  if (!rows_fit(rows) || g->ninner != 1) return -1;
  cudaStream_t s = (cudaStream_t)stream;
  rows_t R = {*g};
  bool ok = ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    ROWS_LAUNCH(norm_kernel, T, count, rows, s, rms, eps, R, rows, count,
                (T *)out, (const T *)x, (const T *)w, (const T *)b);
  });
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int cuda_var(void *stream, int dtype, const cuda_rows *g,
                        int64_t correction, void *out, const void *x) {
  int64_t rows, count = count_of(g, &rows);
  if (rows == 0) return 0;
  if (!rows_fit(rows)) return -1;
  cudaStream_t s = (cudaStream_t)stream;
  rows_t R = {*g};
  bool ok = ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    ROWS_LAUNCH(var_kernel, T, count, rows, s, correction, R, rows, count,
                (T *)out, (const T *)x);
  });
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int cuda_argext(void *stream, bool max, int dtype,
                           const cuda_rows *g, void *out, const void *x) {
  int64_t rows, count = count_of(g, &rows);
  if (rows == 0) return 0;
  if (!rows_fit(rows)) return -1;
  cudaStream_t s = (cudaStream_t)stream;
  rows_t R = {*g};
  bool ok = ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    ROWS_LAUNCH(argext_kernel, T, count, rows, s, max, R, rows, count,
                (int64_t *)out, (const T *)x);
  });
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int cuda_cross_entropy(void *stream, int dtype, bool idx64,
                                  int64_t m, int64_t nc, int64_t rs,
                                  int64_t cs, const void *x, const void *t,
                                  int64_t ts, int64_t ignore, double eps,
                                  int reduction, void *out, int64_t os,
                                  void *scratch) {
  if (!rows_fit(m)) return -1;
  cudaStream_t s = (cudaStream_t)stream;
  double *loss = (double *)scratch, *cnt = loss + m;
  unsigned long long *bad = (unsigned long long *)(cnt + m);
  bool none = reduction == 2;
  bool ok = ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    T *o = none ? (T *)out : nullptr;
    if (m == 0) {
      /* no positions: the mean is NaN, the sum 0 (ce_finish of none) */
    } else if (idx64)
      ROWS_LAUNCH2(ce_kernel, T, int64_t, nc, m, s, m, nc, rs, cs,
                   (const T *)x, (const int64_t *)t, ts, ignore, eps, loss,
                   cnt, bad, o, os);
    else
      ROWS_LAUNCH2(ce_kernel, T, int32_t, nc, m, s, m, nc, rs, cs,
                   (const T *)x, (const int32_t *)t, ts, ignore, eps, loss,
                   cnt, bad, o, os);
    if (!none)
      ce_finish<T><<<1, 1024, 0, s>>>(m, reduction == 0, loss, cnt, (T *)out);
  });
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}
