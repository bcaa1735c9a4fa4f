/* The CUDA kernels layer (built when DTORCH_CUDA is on; docs/cuda.md):
 * plain C entry points over (device pointer, sizes, strides, stream), no
 * runtime types, as kernels/cpu is for the CPU. The .cu files hold the
 * kernels and their launchers; the .c files the host glue over the CUDA
 * runtime API (device probe, streams, events, stream-ordered pools) and
 * the libraries opened with dlopen (cuBLAS, NCCL).
 *
 * Every function returns 0 on success, or -1 with a message in the
 * caller's buffer `why` (the CUDA error string and what was being done);
 * nothing here aborts. Streams and events are passed as void * so that
 * callers need no CUDA header. */
#ifndef KERNELS_CUDA_CUDA_H
#define KERNELS_CUDA_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- devices (kernels/cuda/device.c) */
/* The number of CUDA devices, or -1 with why set: no driver
 * (cudaGetDeviceCount's error string), or no device. */
int cuda_device_count(char *why, size_t n);

/* ---- one rank's stream and memory pool (kernels/cuda/device.c) */
typedef struct cuda_rank cuda_rank;
/* A non-blocking stream on `device` and a stream-ordered pool of at most
 * `capacity` bytes (0: the device's memory). */
int cuda_rank_create(cuda_rank **out, int device, int64_t capacity, char *why,
                     size_t n);
void cuda_rank_destroy(cuda_rank *r);     /* NULL: no-op */
void *cuda_rank_stream(cuda_rank *r);
/* makes r's GPU the calling thread's current device (a rank thread at its
 * start: kernels launch on the current device) */
int cuda_rank_bind(cuda_rank *r, char *why, size_t n);
int cuda_rank_device(const cuda_rank *r);
/* stream-ordered allocation: NULL + why when the rank's capacity or the
 * GPU is exhausted (the message names the rank's usage) */
void *cuda_rank_alloc(cuda_rank *r, size_t bytes, char *why, size_t n);
void cuda_rank_free(cuda_rank *r, void *p);
int64_t cuda_rank_used(const cuda_rank *r);

typedef enum cuda_copy_kind {
  CUDA_COPY_H2D, CUDA_COPY_D2H, CUDA_COPY_D2D
} cuda_copy_kind;
/* asynchronous on the rank's stream */
int cuda_rank_copy(cuda_rank *r, void *dst, const void *src, size_t bytes,
                   cuda_copy_kind kind, char *why, size_t n);
/* fn(arg) runs on a CUDA thread once the stream's work before it is done
 * (cudaLaunchHostFunc): futures complete from there, never by blocking a
 * rank thread */
int cuda_rank_host_fn(cuda_rank *r, void (*fn)(void *), void *arg, char *why,
                      size_t n);
/* events: record on r's stream; make r's stream wait for ev */
void *cuda_event_record(cuda_rank *r, char *why, size_t n);
int cuda_event_wait(cuda_rank *r, void *ev, char *why, size_t n);
bool cuda_event_done(void *ev);
void cuda_event_destroy(void *ev);
/* waits for ev (an offload thread, never a rank thread) */
int cuda_event_sync(void *ev, char *why, size_t n);
/* a synchronous copy from device memory of `device` to pageable host
 * memory, ordered after nothing (the caller waited for the producer) */
int cuda_copy_to_host(int device, void *dst, const void *src, size_t bytes,
                      char *why, size_t n);
/* waits for the stream (the API's synchronize points only) */
int cuda_rank_sync(cuda_rank *r, char *why, size_t n);

/* ---- kernels (the .cu files), asynchronous on `stream` */
/* Philox 4x32-10 of kernels/cuda/philox.h compiled by nvcc for the host:
 * tests compare it with the CPU backend's without a GPU */
void cuda_philox4x32_host(const uint32_t ctr[4], const uint32_t key[2],
                          uint32_t out[4]);
/* the CPU backend's uniform / normal transform of element index, nvcc's
 * host build (the device build is the same source) */
double cuda_philox_uniform_host(uint64_t seed, uint64_t index);
double cuda_philox_normal_host(uint64_t seed, uint64_t index);

/* dtypes are dt_dtype values (dtorch.h), passed as int */
/* dst[i] = uniform or normal element first + i of the stream, i < n */
int cuda_rand_fill(void *stream, void *dst, int dtype, int64_t n,
                   uint64_t seed, uint64_t first, bool normal);

#define CUDA_MAX_DIMS 8
/* A strided operand: sizes are the output's (broadcast dims have stride
 * 0), strides and offset in elements. */
typedef struct cuda_operand {
  void *data;
  int64_t strides[CUDA_MAX_DIMS];
} cuda_operand;

/* CUDA_GELU_BACKWARD: a * gelu'(b), the erf form (a the gradient); max /
 * min propagate NaN and keep a on ties; floordiv / rem are PyTorch's
 * floating floor_divide / remainder, as the CPU computes them */
typedef enum cuda_binary_op {
  CUDA_ADD, CUDA_SUB, CUDA_MUL, CUDA_DIV, CUDA_MAX, CUDA_MIN,
  CUDA_GELU_BACKWARD, CUDA_POW, CUDA_FLOORDIV, CUDA_REM, CUDA_BINARY_COUNT
} cuda_binary_op;
typedef enum cuda_unary_op {
  CUDA_NEG, CUDA_EXP, CUDA_LOG, CUDA_SQRT, CUDA_TANH, CUDA_SIGMOID,
  CUDA_RELU, CUDA_SILU, CUDA_GELU, CUDA_ABS, CUDA_RSQRT, CUDA_SIN, CUDA_COS,
  CUDA_GELU_TANH, CUDA_UNARY_COUNT
} cuda_unary_op;

/* out = a op b over `ndim` sizes (float32/float64/float16/bfloat16, out
 * contiguous): contiguous operands take a vectorised path */
int cuda_binary(void *stream, cuda_binary_op op, int dtype, int ndim,
                const int64_t *sizes, void *out, const cuda_operand *a,
                const cuda_operand *b);
/* out = op(a) elementwise */
int cuda_unary(void *stream, cuda_unary_op op, int dtype, int ndim,
               const int64_t *sizes, void *out, const cuda_operand *a);
/* out = a op s elementwise, s rounded to the compute type (the caller
 * rounds it to a float16/bfloat16 dtype first where the CPU does) */
int cuda_scalar(void *stream, cuda_binary_op op, int dtype, int ndim,
                const int64_t *sizes, void *out, const cuda_operand *a,
                double s);
/* out (bool, contiguous) = a op b, op 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge,
 * a and b of one float dtype, broadcast through stride-0 dims */
int cuda_compare(void *stream, int op, int dtype, int ndim,
                 const int64_t *sizes, void *out, const cuda_operand *a,
                 const cuda_operand *b);
/* out = a clamped to [lo, hi] (float dtypes; NaN stays, a NaN bound gives
 * NaN) */
int cuda_clamp(void *stream, int dtype, int ndim, const int64_t *sizes,
               void *out, const cuda_operand *a, double lo, double hi);
/* out (contiguous) = mask (bool) ? value (in dtype) : a */
int cuda_masked_fill(void *stream, int dtype, int ndim, const int64_t *sizes,
                     void *out, const cuda_operand *a,
                     const cuda_operand *mask, double value);
/* out[i] = start + i * step, computed in double, stored in dtype */
int cuda_arange(void *stream, int dtype, int64_t n, void *out, double start,
                double step);
/* out (bool, contiguous) = a and b (op 0), a or b (1), not a (2: b NULL),
 * each operand true when nonzero; a and b of one dtype */
int cuda_logical(void *stream, int op, int dtype, int ndim,
                 const int64_t *sizes, void *out, const cuda_operand *a,
                 const cuda_operand *b);
/* index_select: out (contiguous, `sizes`) = a with dim's coordinate j
 * read at idx[j * istride] (int64 if idx64, else int32); an index outside
 * [0, a_dim) writes 0 and lowers *bad (device memory, an unsigned 64-bit
 * word the caller set to all ones) to its position j; an empty output
 * still has its indices checked */
int cuda_index_select(void *stream, int dtype, int ndim, const int64_t *sizes,
                      void *out, const cuda_operand *a, int dim, int64_t a_dim,
                      const void *idx, bool idx64, int64_t istride, void *bad);
/* out (contiguous, dtype) = cond (bool) ? a : b */
int cuda_where(void *stream, int dtype, int ndim, const int64_t *sizes,
               void *out, const cuda_operand *cond, const cuda_operand *a,
               const cuda_operand *b);
/* out[i] = value for i < n */
int cuda_fill(void *stream, int dtype, int64_t n, void *out, double value);
/* a strided copy with a cast: out (contiguous, dtype od) = a (dtype ad) */
int cuda_copy_cast(void *stream, int od, int ad, int ndim,
                   const int64_t *sizes, void *out, const cuda_operand *a);
/* the same into a strided output (a slice of cat's output) */
int cuda_copy_strided(void *stream, int od, int ad, int ndim,
                      const int64_t *sizes, const cuda_operand *out,
                      const cuda_operand *a);
/* out (dense) = a scaled by 1 / (1 - p) where the uniform of stream
 * element offset + i is >= p, else 0: the CPU backend's dropout mask */
int cuda_dropout(void *stream, int dtype, int ndim, const int64_t *sizes,
                 void *out, const cuda_operand *a, double p, uint64_t seed,
                 uint64_t offset);

/* the fused optimiser updates over n dense elements of one float dtype
 * (kernels/cuda/optim.cu): out = beta buf + (1 - beta) (x or x^2), and
 * out = decay p - step m / (sqrt(v) + eps) */
int cuda_adam_moment(void *stream, int dtype, int64_t n, void *out,
                     const void *buf, const void *x, double beta,
                     bool squared);
int cuda_adamw_apply(void *stream, int dtype, int64_t n, void *out,
                     const void *p, const void *m, const void *v, double step,
                     double eps, double decay);

/* Rows of elements (kernels/cuda/rows.cu): the outer dims index rows, the
 * inner dims the elements of a row; each has sizes and the strides of the
 * input x and the output y, in elements. */
typedef struct cuda_rows {
  int nouter, ninner;
  int64_t outer[CUDA_MAX_DIMS], x_outer[CUDA_MAX_DIMS], y_outer[CUDA_MAX_DIMS];
  int64_t inner[CUDA_MAX_DIMS], x_inner[CUDA_MAX_DIMS], y_inner[CUDA_MAX_DIMS];
} cuda_rows;
/* y[row] = op over the row's elements: 0 sum, 1 mean, 2 max, 3 min,
 * 4 prod (float dtypes; accumulated in double) */
int cuda_reduce(void *stream, int op, int dtype, const cuda_rows *g,
                void *out, const void *x);
/* var of each row, as the CPU: a refined mean, squared deviations over
 * N - correction (NaN when not positive); double accumulation */
int cuda_var(void *stream, int dtype, const cuda_rows *g, int64_t correction,
             void *out, const void *x);
/* int64 index (row-major over the inner dims) of each row's first maximum
 * (max) or minimum; a NaN wins, the first one */
int cuda_argext(void *stream, bool max, int dtype, const cuda_rows *g,
                void *out, const void *x);
/* cross_entropy of m rows of nc class logits (row r at r * rs, class c at
 * c * cs, elements) with class-index targets t[r * ts] (int64 if idx64,
 * else int32): the CPU's losses (lse - (1 - eps) x_t - eps mean(x), 0 for
 * ignore); reduction 0 mean over counted rows (NaN if none), 1 sum, 2
 * none (out[r * os] per row). scratch: 16 m + 8 bytes of device memory;
 * its last 8 bytes must hold all ones, and keep the position of the first
 * target out of range */
int cuda_cross_entropy(void *stream, int dtype, bool idx64, int64_t m,
                       int64_t nc, int64_t rs, int64_t cs, const void *x,
                       const void *t, int64_t ts, int64_t ignore, double eps,
                       int reduction, void *out, int64_t os, void *scratch);
/* cross_entropy's gradient w.r.t. [m, nc] logits (strides as
 * cuda_cross_entropy's) with class-index targets: out row r (at r * ors,
 * class c at c * ocs) = w (softmax - q), q the (1 - eps) one-hot plus
 * eps / nc; w = g[r * gs] (reduction 2, none), g[0] (1, sum) or g[0] over
 * the targets not equal to ignore (0, mean); zero rows where the target is
 * ignore (kernels/cuda/grad.cu). scratch: 16 bytes of device memory whose
 * last 8 must hold all ones; they keep the position of the first target
 * out of range (its row is zeros too) */
int cuda_cross_entropy_backward(void *stream, int dtype, bool idx64,
                                int64_t m, int64_t nc, int64_t rs, int64_t cs,
                                const void *x, const void *t, int64_t ts,
                                int64_t ignore, double eps, int reduction,
                                const void *g, int64_t gs, void *out,
                                int64_t ors, int64_t ocs, void *scratch);
/* index_add along a dim, contiguous operands seen as [outer, size, inner]
 * (out) and [outer, n, inner] (src): out[o, idx[j], i] += src[o, j, i]
 * for j in order, each sum rounded to the dtype (the CPU's bits; CUB's
 * stable radix sort, no atomics). scratch: cuda_index_add_scratch(n)
 * bytes of device memory whose first 8 must hold all ones; they keep the
 * position j of the first index outside [0, size), which adds nothing */
size_t cuda_index_add_scratch(int64_t n);
int cuda_index_add(void *stream, int dtype, int64_t outer, int64_t size,
                   int64_t inner, void *out, const void *src, int64_t n,
                   const void *idx, bool idx64, int64_t istride,
                   void *scratch);
/* softmax or log_softmax of each row (max-shifted, sums in double) */
int cuda_softmax(void *stream, bool log_softmax, int dtype,
                 const cuda_rows *g, void *out, const void *x);
/* layer_norm (rms = false) or rms_norm of each row (one inner dim), with
 * optional weight and bias (NULL) of x's dtype, dense, one per element */
int cuda_norm(void *stream, bool rms, int dtype, const cuda_rows *g,
              void *out, const void *x, const void *w, const void *b,
              double eps);

/* The data movement of reducing collectives emulated on one GPU
 * (kernels/cuda/coll.cu): elements [begin, end) of the n inputs reduced
 * in member order (op: 0 sum, 1 avg, 2 max, 3 min, 4 prod; float dtypes)
 * and written to all nout outputs (an all_reduce member's segment: every
 * member's output; reduce_scatter: its own). Ordering against the other
 * members' streams is the caller's (events; sim/coll_device.c). */
#define CUDA_COLL_MAX 16
int cuda_reduce_ptrs(void *stream, int op, int dtype, int n,
                     const void *const *in, int nout, void *const *out,
                     int64_t begin, int64_t end);

/* ---- libraries opened at run time (kernels/cuda/libs.c) */
/* opens cuBLAS (and NCCL if nccl) once; -1 + why if missing */
int cuda_libs_open(bool nccl, char *why, size_t n);
/* C[b] = A[b] @ B[b] for b < batch, row-major, contiguous, float32 /
 * float16 / bfloat16 inputs with float32 accumulation
 * (cublasGemmStridedBatchedEx), on r's stream with r's cuBLAS handle */
int cuda_gemm(cuda_rank *r, int dtype, int64_t batch, int64_t m, int64_t n,
              int64_t k, const void *a, const void *b, void *c, char *why,
              size_t nwhy);
/* C [m, n] = A [m, k] @ B^T with B [n, k] row-major (nn.Linear's weight) */
int cuda_gemm_nt(cuda_rank *r, int dtype, int64_t m, int64_t n, int64_t k,
                 const void *a, const void *b, void *c, char *why,
                 size_t nwhy);

/* ---- NCCL, opened at run time (kernels/cuda/nccl.c): collectives
 * between ranks on different GPUs. dtype: dt_dtype (bool travels as
 * uint8; its sum is or, its prod and), op: dt_reduce_op, as int. Each
 * call is asynchronous on `stream`; calls between cuda_nccl_group(c, true)
 * and cuda_nccl_group(c, false) are fused (send/recv pairs).
 * Communicators are non-blocking: a call that NCCL is still working on
 * (ncclInProgress) is waited for by polling the communicator's state, at
 * most timeout_ns (<= 0: no limit), and no longer once *cancel (read with
 * acquire) is nonzero; either ends the call with an error. */
typedef struct cuda_nccl_comm cuda_nccl_comm;
/* 128 bytes naming a new communicator (ncclGetUniqueId) */
#define CUDA_NCCL_ID_BYTES 128
int cuda_nccl_unique_id(void *id, char *why, size_t n);
/* member's communicator of nranks on `device` (ncclCommInitRankConfig):
 * done when every member made the same call with the same id, each from
 * its own thread; a member that never comes makes the others fail after
 * timeout_ns, or when *cancel is set */
int cuda_nccl_comm_init(cuda_nccl_comm **c, int nranks, const void *id,
                        int member, int device, int64_t timeout_ns,
                        const int *cancel, char *why, size_t n);
/* finalizes and destroys c; aborts one in error or that does not finish */
void cuda_nccl_comm_destroy(cuda_nccl_comm *c);
/* ncclCommAbort: stops c's work on the GPU (a kernel waiting for a member
 * that failed) and frees it; callable from any thread not using c */
void cuda_nccl_comm_abort(cuda_nccl_comm *c);
/* the communicator's asynchronous error (ncclCommGetAsyncError) */
int cuda_nccl_check(cuda_nccl_comm *c, char *why, size_t n);
int cuda_nccl_all_reduce(cuda_nccl_comm *c, void *stream, const void *in,
                         void *out, int64_t count, int dtype, int op,
                         char *why, size_t n);
int cuda_nccl_broadcast(cuda_nccl_comm *c, void *stream, const void *in,
                        void *out, int64_t count, int dtype, int root,
                        char *why, size_t n);
int cuda_nccl_reduce(cuda_nccl_comm *c, void *stream, const void *in,
                     void *out, int64_t count, int dtype, int op, int root,
                     char *why, size_t n);
int cuda_nccl_all_gather(cuda_nccl_comm *c, void *stream, const void *in,
                         void *out, int64_t each, int dtype, char *why,
                         size_t n);
int cuda_nccl_reduce_scatter(cuda_nccl_comm *c, void *stream, const void *in,
                             void *out, int64_t each, int dtype, int op,
                             char *why, size_t n);
int cuda_nccl_send(cuda_nccl_comm *c, void *stream, const void *buf,
                   int64_t count, int dtype, int peer, char *why, size_t n);
int cuda_nccl_recv(cuda_nccl_comm *c, void *stream, void *buf, int64_t count,
                   int dtype, int peer, char *why, size_t n);
int cuda_nccl_group(cuda_nccl_comm *c, bool start, char *why, size_t n);

#ifdef __cplusplus
}
#endif
#endif
