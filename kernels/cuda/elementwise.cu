/* Elementwise kernels: binary (broadcasting through stride-0 dims), unary,
 * affine (scalar add / mul) and strided copies with casts. Every kernel has
 * two paths: a generic one that turns the output's linear index into each
 * operand's offset through the sizes and strides, and a contiguous one
 * (every operand dense, the common case) that moves 16 bytes per load and
 * store where the pointers allow it, which is what keeps an add at the
 * memory's bandwidth. */
#include <math.h>

#include <type_traits>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/dtype.cuh"

namespace {

struct shape_t {
  int ndim;
  int64_t sizes[CUDA_MAX_DIMS];
};
struct strides_t {
  int64_t s[CUDA_MAX_DIMS];
};

__device__ __forceinline__ int64_t offset_of(int64_t i, const shape_t &sh,
                                             const strides_t &st) {
  int64_t off = 0;
  for (int d = sh.ndim - 1; d >= 0; d--) {
    int64_t q = i / sh.sizes[d];
    off += (i - q * sh.sizes[d]) * st.s[d];
    i = q;
  }
  return off;
}

/* PyTorch's floating floor division and remainder, as the CPU computes
 * them (kernels/cpu/pointwise.c): the quotient from fmod, corrected toward
 * -inf, rounded when fmod's error puts it past .5; x / 0 is IEEE's */
template <typename A> __device__ __forceinline__ A floordiv(A a, A b) {
  if (b == A(0)) return a / b;
  A mod = fmod(a, b), div = (a - mod) / b;
  if (mod != A(0) && (b < A(0)) != (mod < A(0))) div -= A(1);
  if (div == A(0)) return copysign(A(0), a / b);
  A f = floor(div);
  return div - f > A(0.5) ? f + A(1) : f;
}
template <typename A> __device__ __forceinline__ A remainder(A a, A b) {
  A mod = fmod(a, b);
  return mod != A(0) && (b < A(0)) != (mod < A(0)) ? mod + b : mod;
}

template <typename A> __device__ __forceinline__ A binop(int op, A x, A y) {
  switch (op) {
  case CUDA_ADD: return x + y;
  case CUDA_SUB: return x - y;
  case CUDA_MUL: return x * y;
  case CUDA_DIV: return x / y;
  /* NaN propagates; on ties (0 vs -0) x stays, as the CPU's */
  case CUDA_MAX: return x != x ? x : y != y ? y : (x < y ? y : x);
  case CUDA_MIN: return x != x ? x : y != y ? y : (y < x ? y : x);
  case CUDA_POW: return pow(x, y);
  case CUDA_FLOORDIV: return floordiv(x, y);
  case CUDA_REM: return remainder(x, y);
  default: { /* gelu backward: x * (Phi(y) + y phi(y)) */
    A cdf = A(0.5) * (A(1) + erf(y * A(0.7071067811865476)));
    A pdf = exp(A(-0.5) * y * y) * A(0.3989422804014327);
    return x * (cdf + y * pdf);
  }
  }
}

template <typename A> __device__ __forceinline__ A unop(int op, A x) {
  switch (op) {
  case CUDA_NEG: return -x;
  case CUDA_EXP: return exp(x);
  case CUDA_LOG: return log(x);
  case CUDA_SQRT: return sqrt(x);
  case CUDA_TANH: return tanh(x);
  case CUDA_SIGMOID: return A(1) / (A(1) + exp(-x));
  case CUDA_RELU: return x > A(0) ? x : (x != x ? x : A(0));
  case CUDA_SILU: return x / (A(1) + exp(-x));
  case CUDA_ABS: return fabs(x); /* -0 and -NaN lose their sign, as fabs */
  case CUDA_RSQRT: return A(1) / sqrt(x);
  case CUDA_SIN: return sin(x);
  case CUDA_COS: return cos(x);
  case CUDA_GELU_TANH: {
    A inner = A(0.7978845608028654) * (x + A(0.044715) * x * x * x);
    return A(0.5) * x * (A(1) + tanh(inner));
  }
  default: /* gelu, the erf form (PyTorch's default) */
    return A(0.5) * x * (A(1) + erf(x * A(0.7071067811865476)));
  }
}

template <typename T>
__global__ void binary_generic(int op, int64_t n, shape_t sh, T *out,
                               const T *a, strides_t sa, const T *b,
                               strides_t sb) {
  typedef typename ct_acc<T>::type A;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    A x = (A)ct_load(a[offset_of(i, sh, sa)]);
    A y = (A)ct_load(b[offset_of(i, sh, sb)]);
    out[i] = ct_store<T>(binop<A>(op, x, y));
  }
}

/* contiguous: V elements of T per 16-byte vector */
template <typename T>
__global__ void binary_dense(int op, int64_t n, T *out, const T *a,
                             const T *b) {
  typedef typename ct_acc<T>::type A;
  constexpr int V = 16 / sizeof(T);
  int64_t nv = n / V;
  int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv;
       i += step) {
    uint4 va = ((const uint4 *)a)[i], vb = ((const uint4 *)b)[i], vo;
    const T *xa = (const T *)&va, *xb = (const T *)&vb;
    T *xo = (T *)&vo;
#pragma unroll
    for (int k = 0; k < V; k++)
      xo[k] = ct_store<T>(binop<A>(op, (A)ct_load(xa[k]), (A)ct_load(xb[k])));
    ((uint4 *)out)[i] = vo;
  }
  for (int64_t i = nv * V + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
       i < n; i += step)
    out[i] = ct_store<T>(binop<A>(op, (A)ct_load(a[i]), (A)ct_load(b[i])));
}

/* mode 0: op(x); 2: x (binary op beta) alpha, the
 * binary ops' codes (a scalar second operand); 3: clamp to [alpha, beta]
 * as the CPU does (x unless a bound is strictly past it, so NaN and -0.0
 * stay; a NaN bound gives NaN) */
template <typename T>
__global__ void unary_kernel(int op, int mode, double alpha, double beta,
                             int64_t n, shape_t sh, T *out, const T *a,
                             strides_t sa, bool dense) {
  typedef typename ct_acc<T>::type A;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    A x = (A)ct_load(a[dense ? i : offset_of(i, sh, sa)]);
    A y;
    if (mode == 3) {
      A lo = (A)alpha, hi = (A)beta;
      y = x < lo ? lo : x;
      y = y > hi ? hi : y;
      if (lo != lo || hi != hi) y = (A)nan(""); /* the CPU's quiet NaN */
    } else {
      y = mode == 2 ? binop<A>((int)beta, x, (A)alpha) : unop<A>(op, x);
    }
    out[i] = ct_store<T>(y);
  }
}

template <typename T>
__global__ void compare_kernel(int op, int64_t n, shape_t sh, bool *out,
                               const T *a, strides_t sa, const T *b,
                               strides_t sb) {
  typedef typename ct_acc<T>::type A;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    A x = (A)ct_load(a[offset_of(i, sh, sa)]);
    A y = (A)ct_load(b[offset_of(i, sh, sb)]);
    bool r;
    switch (op) {
    case 0: r = x == y; break;
    case 1: r = x != y; break;
    case 2: r = x < y; break;
    case 3: r = x <= y; break;
    case 4: r = x > y; break;
    default: r = x >= y; break;
    }
    out[i] = r;
  }
}

template <typename T>
__global__ void where_kernel(int64_t n, shape_t sh, T *out, const bool *c,
                             strides_t sc, const T *a, strides_t sa,
                             const T *b, strides_t sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = c[offset_of(i, sh, sc)] ? a[offset_of(i, sh, sa)]
                                     : b[offset_of(i, sh, sb)];
}

template <typename T>
__global__ void masked_fill_kernel(int64_t n, shape_t sh, T *out,
                                   const T *a, strides_t sa, const bool *m,
                                   strides_t sm, double value) {
  T v = ct_store<T>(value);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = m[offset_of(i, sh, sm)] ? v : a[offset_of(i, sh, sa)];
}

template <typename T>
__global__ void arange_kernel(int64_t n, T *out, double start, double step) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = ct_store<T>(__dadd_rn(start, __dmul_rn((double)i, step)));
}

/* op 0 and, 1 or (a, b nonzero), 2 not (a) */
template <typename T>
__global__ void logical_kernel(int op, int64_t n, shape_t sh, bool *out,
                               const T *a, strides_t sa, const T *b,
                               strides_t sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    bool x = ct_load(a[offset_of(i, sh, sa)]) != 0;
    if (op == 2) {
      out[i] = !x;
      continue;
    }
    bool y = ct_load(b[offset_of(i, sh, sb)]) != 0;
    out[i] = op == 0 ? x && y : x || y;
  }
}

/* out [.., k, ..] (contiguous) = a with dim d's coordinate j replaced by
 * idx[j * istride]; an index outside [0, a_dim) writes 0 and lowers *bad
 * to its position (the first one is reported) */
/* an empty output still has its indices checked (the CPU reports a bad
 * one): the k indices alone */
template <typename I>
__global__ void index_check(int64_t k, int64_t a_dim, const I *idx,
                            int64_t istride, unsigned long long *bad) {
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < k;
       j += (int64_t)gridDim.x * blockDim.x) {
    int64_t v = (int64_t)idx[j * istride];
    if (v < 0 || v >= a_dim) atomicMin(bad, (unsigned long long)j);
  }
}

template <typename T, typename I>
__global__ void index_kernel(int64_t n, shape_t sh, int d, int64_t a_dim,
                             T *out, const T *a, strides_t sa, const I *idx,
                             int64_t istride, unsigned long long *bad) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t rest = i, off = 0;
    bool ok = true;
    for (int k = sh.ndim - 1; k >= 0; k--) {
      int64_t q = rest / sh.sizes[k], c = rest - q * sh.sizes[k];
      rest = q;
      if (k == d) {
        int64_t v = (int64_t)idx[c * istride];
        if (v < 0 || v >= a_dim) {
          atomicMin(bad, (unsigned long long)c);
          ok = false;
          v = 0;
        }
        c = v;
      }
      off += c * sa.s[k];
    }
    out[i] = ok ? a[off] : ct_store<T>(0.0);
  }
}

template <typename T>
__global__ void fill_kernel(int64_t n, T *out, double v) {
  T x = ct_store<T>(v);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = x;
}

/* a copy of one type moves the bits (an int64 past 2^53 survives); a
 * cast is the CPU's (ct_cast) */
template <typename O, typename I>
__global__ void copy_kernel(int64_t n, shape_t sh, O *out, strides_t so,
                            bool dense_out, const I *a, strides_t sa) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const I v = a[offset_of(i, sh, sa)];
    O *dst = &out[dense_out ? i : offset_of(i, sh, so)];
    if constexpr (std::is_same<O, I>::value)
      *dst = v;
    else
      *dst = ct_cast<O, I>(v);
  }
}

int64_t make_shape(int ndim, const int64_t *sizes, shape_t *sh) {
  sh->ndim = ndim;
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= (sh->sizes[d] = sizes[d]);
  return n;
}

strides_t strides_of(const cuda_operand *o, int ndim) {
  strides_t s;
  for (int d = 0; d < ndim; d++) s.s[d] = o->strides[d];
  return s;
}

bool dense(const cuda_operand *o, const shape_t &sh) {
  int64_t want = 1;
  for (int d = sh.ndim - 1; d >= 0; d--) {
    if (sh.sizes[d] != 1 && o->strides[d] != want) return false;
    want *= sh.sizes[d];
  }
  return true;
}

int launched(bool ok) {
  return ok && cudaGetLastError() == cudaSuccess ? 0 : -1;
}

} // namespace

extern "C" int cuda_binary(void *stream, cuda_binary_op op, int dtype, int ndim,
                           const int64_t *sizes, void *out,
                           const cuda_operand *a, const cuda_operand *b) {
  shape_t sh;
  int64_t n = make_shape(ndim, sizes, &sh);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  bool dn = dense(a, sh) && dense(b, sh) &&
            (((uintptr_t)out | (uintptr_t)a->data | (uintptr_t)b->data) & 15) == 0;
  return launched(ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    if (dn)
      binary_dense<T><<<ct_blocks(n / (16 / sizeof(T)) + 1, 256), 256, 0, s>>>(
          (int)op, n, (T *)out, (const T *)a->data, (const T *)b->data);
    else
      binary_generic<T><<<ct_blocks(n, 256), 256, 0, s>>>(
          (int)op, n, sh, (T *)out, (const T *)a->data, strides_of(a, ndim),
          (const T *)b->data, strides_of(b, ndim));
  }));
}

static int unary_launch(void *stream, int op, int mode, double alpha,
                        double beta, int dtype, int ndim, const int64_t *sizes,
                        void *out, const cuda_operand *a) {
  shape_t sh;
  int64_t n = make_shape(ndim, sizes, &sh);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  bool dn = dense(a, sh);
  return launched(ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    unary_kernel<T><<<ct_blocks(n, 256), 256, 0, s>>>(
        op, mode, alpha, beta, n, sh, (T *)out, (const T *)a->data,
        strides_of(a, ndim), dn);
  }));
}

extern "C" int cuda_unary(void *stream, cuda_unary_op op, int dtype, int ndim,
                          const int64_t *sizes, void *out,
                          const cuda_operand *a) {
  return unary_launch(stream, (int)op, 0, 0, 0, dtype, ndim, sizes, out, a);
}

extern "C" int cuda_scalar(void *stream, cuda_binary_op op, int dtype,
                           int ndim, const int64_t *sizes, void *out,
                           const cuda_operand *a, double s) {
  return unary_launch(stream, 0, 2, s, (double)op, dtype, ndim, sizes, out,
                      a);
}

extern "C" int cuda_clamp(void *stream, int dtype, int ndim,
                          const int64_t *sizes, void *out,
                          const cuda_operand *a, double lo, double hi) {
  return unary_launch(stream, 0, 3, lo, hi, dtype, ndim, sizes, out, a);
}

extern "C" int cuda_fill(void *stream, int dtype, int64_t n, void *out,
                         double value) {
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  return launched(ct_dispatch_all(dtype, [&](auto z) {
    typedef decltype(z) T;
    fill_kernel<T><<<ct_blocks(n, 256), 256, 0, s>>>(n, (T *)out, value);
  }));
}

extern "C" int cuda_copy_cast(void *stream, int od, int ad, int ndim,
                              const int64_t *sizes, void *out,
                              const cuda_operand *a) {
  cuda_operand o = {out, {0}};
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    o.strides[d] = s;
    s *= sizes[d];
  }
  return cuda_copy_strided(stream, od, ad, ndim, sizes, &o, a);
}

extern "C" int cuda_copy_strided(void *stream, int od, int ad, int ndim,
                                 const int64_t *sizes, const cuda_operand *o,
                                 const cuda_operand *a) {
  shape_t sh;
  int64_t n = make_shape(ndim, sizes, &sh);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  strides_t sa = strides_of(a, ndim), so = strides_of(o, ndim);
  bool dn = dense(o, sh);
  void *out = o->data;
  bool inner = false;
  bool ok = ct_dispatch_all(od, [&](auto zo) {
    typedef decltype(zo) O;
    inner = ct_dispatch_all(ad, [&](auto zi) {
      typedef decltype(zi) I;
      copy_kernel<O, I><<<ct_blocks(n, 256), 256, 0, s>>>(
          n, sh, (O *)out, so, dn, (const I *)a->data, sa);
    });
  });
  return launched(ok && inner);
}

extern "C" int cuda_compare(void *stream, int op, int dtype, int ndim,
                            const int64_t *sizes, void *out,
                            const cuda_operand *a, const cuda_operand *b) {
  shape_t sh;
  int64_t n = make_shape(ndim, sizes, &sh);
  if (n == 0) return 0;
  if (op < 0 || op > 5) return -1;
  cudaStream_t s = (cudaStream_t)stream;
  return launched(ct_dispatch_float(dtype, [&](auto z) {
    typedef decltype(z) T;
    compare_kernel<T><<<ct_blocks(n, 256), 256, 0, s>>>(
        op, n, sh, (bool *)out, (const T *)a->data, strides_of(a, ndim),
        (const T *)b->data, strides_of(b, ndim));
  }));
}

extern "C" int cuda_where(void *stream, int dtype, int ndim,
                          const int64_t *sizes, void *out,
                          const cuda_operand *cond, const cuda_operand *a,
                          const cuda_operand *b) {
  shape_t sh;
  int64_t n = make_shape(ndim, sizes, &sh);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  return launched(ct_dispatch_all(dtype, [&](auto z) {
    typedef decltype(z) T;
    where_kernel<T><<<ct_blocks(n, 256), 256, 0, s>>>(
        n, sh, (T *)out, (const bool *)cond->data, strides_of(cond, ndim),
        (const T *)a->data, strides_of(a, ndim), (const T *)b->data,
        strides_of(b, ndim));
  }));
}

extern "C" int cuda_masked_fill(void *stream, int dtype, int ndim,
                                const int64_t *sizes, void *out,
                                const cuda_operand *a,
                                const cuda_operand *mask, double value) {
  shape_t sh;
  int64_t n = make_shape(ndim, sizes, &sh);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  return launched(ct_dispatch_all(dtype, [&](auto z) {
    typedef decltype(z) T;
    masked_fill_kernel<T><<<ct_blocks(n, 256), 256, 0, s>>>(
        n, sh, (T *)out, (const T *)a->data, strides_of(a, ndim),
        (const bool *)mask->data, strides_of(mask, ndim), value);
  }));
}

extern "C" int cuda_arange(void *stream, int dtype, int64_t n, void *out,
                           double start, double step) {
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  return launched(ct_dispatch_all(dtype, [&](auto z) {
    typedef decltype(z) T;
    arange_kernel<T><<<ct_blocks(n, 256), 256, 0, s>>>(n, (T *)out, start,
                                                       step);
  }));
}

extern "C" int cuda_logical(void *stream, int op, int dtype, int ndim,
                            const int64_t *sizes, void *out,
                            const cuda_operand *a, const cuda_operand *b) {
  shape_t sh;
  int64_t n = make_shape(ndim, sizes, &sh);
  if (n == 0) return 0;
  if (op < 0 || op > 2) return -1;
  cudaStream_t s = (cudaStream_t)stream;
  strides_t sb = b ? strides_of(b, ndim) : strides_t();
  return launched(ct_dispatch_all(dtype, [&](auto z) {
    typedef decltype(z) T;
    logical_kernel<T><<<ct_blocks(n, 256), 256, 0, s>>>(
        op, n, sh, (bool *)out, (const T *)a->data, strides_of(a, ndim),
        b ? (const T *)b->data : (const T *)a->data, sb);
  }));
}

extern "C" int cuda_index_select(void *stream, int dtype, int ndim,
                                 const int64_t *sizes, void *out,
                                 const cuda_operand *a, int dim, int64_t a_dim,
                                 const void *idx, bool idx64,
                                 int64_t istride, void *bad) {
  shape_t sh;
  int64_t n = make_shape(ndim, sizes, &sh);
  if (dim < 0 || dim >= ndim) return -1;
  cudaStream_t s = (cudaStream_t)stream;
  if (n == 0) {
    int64_t k = sizes[dim];
    if (k == 0) return 0;
    if (idx64)
      index_check<int64_t><<<ct_blocks(k, 256), 256, 0, s>>>(
          k, a_dim, (const int64_t *)idx, istride, (unsigned long long *)bad);
    else
      index_check<int32_t><<<ct_blocks(k, 256), 256, 0, s>>>(
          k, a_dim, (const int32_t *)idx, istride, (unsigned long long *)bad);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
  }
  strides_t sa = strides_of(a, ndim);
  return launched(ct_dispatch_all(dtype, [&](auto z) {
    typedef decltype(z) T;
    if (idx64)
      index_kernel<T, int64_t><<<ct_blocks(n, 256), 256, 0, s>>>(
          n, sh, dim, a_dim, (T *)out, (const T *)a->data, sa,
          (const int64_t *)idx, istride, (unsigned long long *)bad);
    else
      index_kernel<T, int32_t><<<ct_blocks(n, 256), 256, 0, s>>>(
          n, sh, dim, a_dim, (T *)out, (const T *)a->data, sa,
          (const int32_t *)idx, istride, (unsigned long long *)bad);
  }));
}
