/* CPU kernels: compute over (pointer, sizes, strides). No runtime types here
 * beyond the public dt_dtype; the ops layer turns tensors into cpu_views.
 *
 * Elementwise kernels run through a strided iterator (PyTorch's
 * TensorIterator idea): operands are broadcast to the output shape (stride 0
 * on broadcast dims), dims are coalesced where memory allows, and an inner
 * loop runs over the innermost dim. Inner loops have a contiguous fast path
 * on the native type and otherwise load blocks into a compute type
 * (float32 for float32/float16/bfloat16, float64, int64, bool), compute,
 * and store converting back. The iterator runs any linear range
 * [begin, end) of the output, so the scheduler can later split work into
 * fixed-size chunks that depend only on the sizes. */
#ifndef CPU_CPU_H
#define CPU_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dtorch/dtorch.h"

typedef struct cpu_view {
  char *data;                      /* first element */
  dt_dtype dtype;
  int ndim;
  int64_t sizes[DT_MAX_DIMS];
  int64_t strides[DT_MAX_DIMS];    /* in elements */
} cpu_view;

size_t cpu_dtype_size(dt_dtype d);

/* ---- the strided iterator */
#define CPU_ITER_MAX_OPS 4
typedef void (*cpu_inner_fn)(char **ptrs, const int64_t *byte_strides,
                             int64_t n, void *ctx);
typedef struct cpu_iter {
  int nops;                                   /* op 0 is the output */
  int ndim;                                   /* after coalescing */
  int64_t sizes[DT_MAX_DIMS];                 /* innermost first */
  int64_t strides[CPU_ITER_MAX_OPS][DT_MAX_DIMS]; /* bytes, innermost first */
  char *base[CPU_ITER_MAX_OPS];
  int64_t numel;
} cpu_iter;

/* Builds an iterator over out's shape; inputs must already have out's ndim
 * (callers expand them: size-1 dims get stride 0). */
void cpu_iter_init(cpu_iter *it, const cpu_view *ops, int nops);
/* Runs fn over output elements [begin, end) in row-major order. */
void cpu_iter_run(const cpu_iter *it, int64_t begin, int64_t end,
                  cpu_inner_fn fn, void *ctx);
/* Parallel chunks: fn over [0, n) in chunks of `grain` (boundaries depend
 * only on n and grain, so results are bitwise reproducible). The runtime
 * installs its work-stealing implementation; without one, or off a rank
 * thread, fn runs inline over the whole range. Contract kernels rely on
 * (per-block partials indexed by begin / grain): every call's begin is a
 * multiple of grain and its end is a multiple of grain or n. */
/* [p, p + bytes) towards L2, a line at a time: rows to come, fetched while
 * the current ones compute from cache, so memory keeps streaming (row
 * kernels: the rows two four-row groups on). A prefetch never faults:
 * addresses past a tensor's end cost the hint only. */
static inline void cpu_prefetch_l2(const char *p, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, 2);
}

/* Streaming (non-temporal) stores for large outputs written once: the
 * lines go to memory around the caches, so the read-for-ownership of every
 * output line (a third of a row norm's traffic) is saved, and the output
 * does not evict the inputs. Worth it when the output no longer fits the
 * caches of the cores that read it next: cpu_stream_min_bytes() and up
 * (layer_norm [4096, 1024] float32, 16 MB out: 1.3-1.7 -> 0.8-0.9 ms on
 * two Zen 4 CPUs with 32 MB of L3). cpu_stream_copy writes [dst, dst +
 * bytes) from src with non-temporal stores, as wide as the machine has
 * (kernels/cpu/stream.c), or memcpy where dst is not aligned for them (nor
 * bytes a multiple of 16). The stores are weakly ordered: a kernel calls
 * cpu_stream_fence before its chunk can be seen as done. */
#define CPU_STREAM_MIN_BYTES ((int64_t)8 << 20)
/* The output size from which kernels stream: CPU_STREAM_MIN_BYTES, or an
 * eighth of the last-level cache where that is more (stream.c) */
int64_t cpu_stream_min_bytes(void);
/* tests: stream from `bytes` on (0: the machine's value again) */
void cpu_stream_set_min_bytes(int64_t bytes);
void cpu_stream_copy(void *dst, const void *src, size_t bytes);
void cpu_stream_fence(void);

typedef void (*cpu_range_fn)(int64_t begin, int64_t end, void *ctx);
/* fn over [0, n) in chunks of grain (the runtime installs the
 * implementation: sched_parallel_for). Returns false when the op was
 * cancelled while it ran (dt_runtime_cancel): chunks were skipped and a
 * kernel should stop and return (its outputs are poisoned); true
 * otherwise. */
typedef bool (*cpu_parallel_fn)(int64_t n, int64_t grain, cpu_range_fn fn,
                                void *ctx);
void cpu_set_parallel(cpu_parallel_fn impl);
bool cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void *ctx);
/* As cpu_parallel_for for a fn whose units may run in separate calls
 * (fn(b, e) == fn(b, x); fn(x, e)): a rank that stole a chunk may leave
 * it between units for its own work (sched_parallel_steps). Without an
 * implementation installed it is cpu_parallel_for. */
void cpu_set_parallel_steps(cpu_parallel_fn impl);
bool cpu_parallel_steps(int64_t n, int64_t grain, cpu_range_fn fn, void *ctx);
#define CPU_GRAIN 65536 /* elements per chunk of elementwise work */
#define CPU_BLOCK 256   /* elements converted to the compute type at once */
/* cpu_iter_run over the whole output, in CPU_GRAIN chunks */
void cpu_iter_run_parallel(const cpu_iter *it, cpu_inner_fn fn, void *ctx);

/* Broadcast view: v with its dims right-aligned to ndim/sizes, stride 0 where
 * v has size 1 and sizes does not. */
cpu_view cpu_view_broadcast(const cpu_view *v, int ndim, const int64_t *sizes);

/* The instruction set the cloned kernels run at here: "avx512", "avx2" or
 * "sse2" (baseline x86-64), capped by the build's DTORCH_SIMD_MAX
 * (kernels/cpu/vmath.h); where nothing is cloned (clang, ThreadSanitizer,
 * DTORCH_SIMD_MAX=baseline) the level the compiler flags allow, "generic"
 * off x86. */
const char *cpu_simd_level(void);

/* ---- conversions between storage dtypes and compute types */
/* compute type used for a storage dtype: f32 for float32/16/bf16, f64, i64
 * for integers, bool for bool */
dt_dtype cpu_compute_type(dt_dtype d);
/* n elements from src (dtype sd, byte stride ss) to a contiguous dst of
 * compute type ct (DT_FLOAT32, DT_FLOAT64, DT_INT64 or DT_BOOL). */
void cpu_load(void *dst, dt_dtype ct, const char *src, dt_dtype sd,
              int64_t ss, int64_t n);
/* n elements from a contiguous src of compute type ct to dst (dtype dd). */
void cpu_store(char *dst, dt_dtype dd, int64_t ds, const void *src,
               dt_dtype ct, int64_t n);

/* ---- pointwise ops */
typedef enum cpu_binary_op {
  CPU_ADD, CPU_SUB, CPU_MUL, CPU_DIV, CPU_POW, CPU_MAX, CPU_MIN,
  CPU_FLOORDIV, CPU_REM, /* PyTorch's floor_divide and remainder */
  CPU_EQ, CPU_NE, CPU_LT, CPU_LE, CPU_GT, CPU_GE, CPU_AND, CPU_OR,
  CPU_BINARY_COUNT
} cpu_binary_op;
typedef enum cpu_unary_op {
  CPU_NEG, CPU_ABS, CPU_EXP, CPU_LOG, CPU_SQRT, CPU_RSQRT, CPU_SIN, CPU_COS,
  CPU_TANH, CPU_SIGMOID, CPU_RELU, CPU_SILU, CPU_GELU, CPU_GELU_TANH,
  CPU_NOT, CPU_COPY, CPU_UNARY_COUNT
} cpu_unary_op;

/* out = a op b; out, a, b already broadcast to out's shape; ct = compute
 * type of the inputs (comparisons/logical ops write bool outputs); an
 * operand whose dtype is not `via` is rounded to via before computing
 * (PyTorch's common dtype; DT_DTYPE_COUNT: never), b only if round_b. */
bool cpu_binary(cpu_binary_op op, dt_dtype ct, dt_dtype via, bool round_b,
                const cpu_view *out, const cpu_view *a, const cpu_view *b);
/* (cpu_binary returns true when an integer floor division or remainder
 * divided by zero: those elements hold 0 and the op must fail) */
/* contiguous arrays already in the compute type ct (comparisons write
 * bool): the iterator's innermost fast path, callable directly */
void cpu_binary_flat(cpu_binary_op op, dt_dtype ct, int64_t n, void *out,
                     const void *a, const void *b);
/* cpu_binary_flat over CPU_GRAIN chunks in parallel */
void cpu_binary_contig(cpu_binary_op op, dt_dtype ct, int64_t n, void *out,
                       const void *a, const void *b);
/* out = a op s (scalar second operand) */
void cpu_binary_scalar(cpu_binary_op op, dt_dtype ct, const cpu_view *out,
                       const cpu_view *a, double s);
/* A same-dtype copy (op 0 out, op 1 in) whose input crosses the output's
 * rows, done in tiles over the iterator's two innermost dims (transpose.c);
 * false (nothing copied) when the layout does not call for it. */
bool cpu_copy_transposed(const cpu_iter *it, size_t es);
/* out = op(a); CPU_COPY converts dtype (cast, contiguous, clone) */
void cpu_unary(cpu_unary_op op, dt_dtype ct, const cpu_view *out,
               const cpu_view *a);
void cpu_clamp(dt_dtype ct, const cpu_view *out, const cpu_view *a,
               double lo, double hi);
/* out = cond ? a : b (all broadcast; cond bool-like) */
void cpu_where(dt_dtype ct, const cpu_view *out, const cpu_view *cond,
               const cpu_view *a, const cpu_view *b);
/* fills a contiguous buffer of n elements of dtype d with value v */
void cpu_fill(void *dst, dt_dtype d, int64_t n, double v);

/* ---- random (Philox 4x32-10, counter-based) */
/* Four 32-bit outputs for counter (c0..c3) and key (k0, k1). */
void cpu_philox4x32(const uint32_t ctr[4], const uint32_t key[2],
                    uint32_t out[4]);
/* Element i of the stream (seed, offset): uniform in [0, 1) and N(0, 1).
 * Depends only on (seed, offset + i): a shard computes its own slice. */
double cpu_philox_uniform(uint64_t seed, uint64_t index);
double cpu_philox_normal(uint64_t seed, uint64_t index);
/* out[j] = cpu_philox_uniform(seed, first + j) for j in [0, n), computed
 * a block at a time */
void cpu_philox_uniform_block(uint64_t seed, uint64_t first, int64_t n,
                              double *out);
/* dst[j] for j in [0, n): element (first + j) of the stream */
void cpu_rand_fill(void *dst, dt_dtype d, int64_t n, uint64_t seed,
                   uint64_t first, bool normal);

/* ---- backward kernels (grad.c) */
/* out = grad · d/dx gelu(x) (exact gelu: Φ(x) + x·φ(x)); out, grad, x
 * broadcast to out's shape; ct = out's compute type (float32 or float64) */
void cpu_gelu_backward(dt_dtype ct, const cpu_view *out, const cpu_view *grad,
                       const cpu_view *x);
/* out (already zeroed or holding what to add to) += src along dim at the
 * indices of idx (int32/int64, read row-major): out[..., idx[j], ...] +=
 * src[..., j, ...], duplicates accumulating in index order; src has out's
 * sizes except sizes[dim] = numel(idx). Returns DT_OK, or
 * DT_ERR_INVALID_ARGUMENT for the first index outside [0, out->sizes[dim])
 * (its row-major position in *bad_pos, its value in *bad_val; nothing is
 * written then). */
dt_status cpu_index_add(const cpu_view *out, int dim, const cpu_view *idx,
                        const cpu_view *src, int64_t *bad_pos,
                        int64_t *bad_val);
/* the number of elements of an int32/int64 view that are not `value` */
int64_t cpu_count_not_equal(const cpu_view *idx, int64_t value);
/* The gradient of cross-entropy w.r.t. logits [N, C, d1, ...] (a [C] row
 * as [1, C]) into out (the logits' shape, any strides), in double: per
 * position, w·(softmax(x)·Σq − q) with q = (1 − ε)·target + ε/C for
 * probability targets (float, the logits' shape), q = (1 − ε)·onehot + ε/C
 * (Σq = 1) for class indices (int32/int64 [N, d1, ...]; a target equal to
 * ignore_index gives a zero row). w = grad's element of the position
 * (grad: [N, d1, ...], reduction NONE) or `scale` (grad == NULL: SUM/MEAN,
 * the caller folds the mean's denominator in). Returns DT_OK, or
 * DT_ERR_INVALID_ARGUMENT for the first class index outside [0, C) that is
 * not ignore_index (its position and value in *bad_pos / *bad_val). */
typedef struct cpu_ce_grad_args {
  const cpu_view *logits, *target;
  bool probabilities;
  int64_t ignore_index;
  double label_smoothing;
  const cpu_view *grad;
  double scale;
} cpu_ce_grad_args;
dt_status cpu_cross_entropy_backward(const cpu_view *out,
                                     const cpu_ce_grad_args *a,
                                     int64_t *bad_pos, int64_t *bad_val);

/* ---- fused optimiser updates (kernels/cpu/optim.c) */
/* out = beta buf + (1 - beta) (squared ? x*x : x) */
void cpu_adam_moment(dt_dtype ct, const cpu_view *out, const cpu_view *buf,
                     const cpu_view *x, double beta, bool squared);
/* out = decay p - step m / (sqrt(v) + eps) */
void cpu_adamw_apply(dt_dtype ct, const cpu_view *out, const cpu_view *p,
                     const cpu_view *m, const cpu_view *v, double step,
                     double eps, double decay);

#endif
