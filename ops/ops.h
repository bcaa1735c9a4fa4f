/* Prototypes of every op's infer and CPU kernel, generated from the op list,
 * plus helpers shared by the op files. */
#ifndef OPS_OPS_H
#define OPS_OPS_H

#include "core/call.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cpu/cpu.h"

/* ---- sharding rules (docs/sharding.md)
 * A rule lists the single-mesh-dim strategies of one call: each says, for
 * ONE mesh dim, the placement every tensor argument must have there and
 * the placement each output then has. The DTensor layer (dispatch/) runs
 * the rule once per call shape and expands it to n-D meshes: per mesh
 * dim it takes the strategy whose input redistributions cost least
 * (alpha-beta), the earliest listed on a tie. A rule sees the global
 * shapes (a DTensor handle's local.sizes are its global sizes) and the
 * outputs' global metas from infer, which ran first. A list argument's
 * entry applies to every element. Placements in a strategy never name a
 * Shard dim out of range. */
#define OPS_MAX_STRATEGIES 48
typedef struct ops_strategy {
  dt_placement out[CORE_CALL_MAX_OUTS];
  dt_placement in[CORE_CALL_MAX_ARGS];   /* by argument position */
} ops_strategy;
typedef struct ops_rule_set {
  int64_t mesh_size;   /* ranks along the mesh dim being decided */
  int n;
  ops_strategy s[OPS_MAX_STRATEGIES];
} ops_rule_set;
typedef void (*ops_rule_fn)(const dt_op_call *c, ops_rule_set *rs);

/* ---- backward formulas (docs/autograd.md)
 * An op's grad function maps the gradients of its outputs to those of its
 * tensor inputs, in terms of other ops: ops/ cannot call the dispatcher,
 * so the autograd layer (dispatch/autograd.c) hands it an environment
 * whose `run` dispatches a boxed call (grad mode off, DTensors in auto
 * redistribution) and keeps the result in an arena freed after the
 * formula: every tensor a formula gets from `run` (and from the helpers
 * below) is borrowed. The helpers take NULL inputs and return NULL (an
 * error is already set), so a formula checks once, at the end.
 *   fwd      the forward call as it ran (tensor arguments alive)
 *   out      the forward outputs' metas (fwd->meta); saved outputs are not
 *            kept, formulas recompute what they need
 *   gout[i]  the gradient of output i (NULL: none flowed, i.e. zero)
 *   gin[k]   set by the formula for the k-th tensor input (schema order,
 *            list elements flattened); NULL = zero; e->needs[k] false:
 *            the input needs none (the formula may skip it) */
typedef struct ops_grad_env ops_grad_env;
struct ops_grad_env {
  dt_tensor *(*run)(ops_grad_env *e, dt_op_call *c);
  const bool *needs;
  /* a 0-d constant of like's dtype on like's device (Replicate on its
   * mesh), borrowed */
  dt_tensor *(*constant)(ops_grad_env *e, const dt_tensor *like, double v);
  void *ctx;
  dt_status st;   /* the first failure of a helper (DT_OK: none) */
};
typedef dt_status (*ops_grad_fn)(ops_grad_env *e, const dt_op_call *fwd,
                                 dt_tensor *const *gout, dt_tensor **gin);

/* the cuda column is declared in every build and defined only with
 * DTORCH_CUDA (ops/<family>.c): without it nothing takes its address, and
 * scripts/check-op-columns.py checks each name has a definition */
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags)  \
  dt_status infer(dt_op_call *c);                                           \
  dt_status cpu(dt_op_call *c);                                              \
  dt_status cuda(dt_op_call *c);                                             \
  void rule(const dt_op_call *c, ops_rule_set *rs);                          \
  dt_status grad(ops_grad_env *e, const dt_op_call *fwd,                     \
                 dt_tensor *const *gout, dt_tensor **gin);
#include "core/op_list.h"
#undef CORE_OP

/* what ops/ provides per op: validation, the CPU kernel, the sharding
 * rule and the backward formula (ops/registry.c) */
typedef struct ops_def {
  core_infer_fn infer;
  core_kernel_fn cpu;
  ops_rule_fn rule;
  ops_grad_fn grad;   /* ops_grad_none: not differentiable */
} ops_def;

/* the op list's CORE_OP_CHECKS_DATA flag of op (core/call.h) */
static inline bool ops_checks_data(core_op_id op) {
  return (core_op_flags(op) & CORE_OP_CHECKS_DATA) != 0;
}
/* the cuda column's marker for an op without a CUDA kernel: the host
 * fallback runs it (DTORCH_CUDA_FALLBACK=1), else DT_ERR_UNSUPPORTED; the
 * CUDA table holds NULL for it (ops/cuda_ops.c) */
dt_status ops_cuda_host_fallback(dt_op_call *c);

/* an index argument: int32 or int64, else DT_ERR_DTYPE naming arg */
dt_status ops_check_index_dtype(const dt_op_call *c, const char *arg,
                                const dt_tensor *t);
/* a 0-d view as [1], in place (kernels want at least one dim) */
static inline void ops_view_at_least_1d(cpu_view *v) {
  if (v->ndim == 0) {
    v->ndim = 1;
    v->sizes[0] = 1;
    v->strides[0] = 1;
  }
}

/* ---- rule building blocks (ops/rule.c) */
/* Appends a strategy with every tensor argument and output Replicate;
 * NULL when the set is full (the rule stops adding). */
ops_strategy *ops_rule_add(const dt_op_call *c, ops_rule_set *rs);
/* Pointwise with broadcasting over the tensor arguments in `args` (a bit
 * per argument position): all Replicate, then for each output dim d the
 * strategy sharding d of the output and of every argument whose aligned
 * dim has the output's size (a broadcast dim stays Replicate). */
void ops_rule_pointwise(const dt_op_call *c, ops_rule_set *rs, unsigned args);
/* For each dim d < ndim but `skip` (-1: none): argument `arg` S(d), the
 * output S(d + shift) — ops whose output keeps the argument's dims. */
void ops_rule_shard_dims(const dt_op_call *c, ops_rule_set *rs, int arg,
                         int ndim, int skip, int shift);
/* Partial kinds: every argument in `args` P(in), the others in `repl`
 * Replicate, the output P(out). */
void ops_rule_partial(const dt_op_call *c, ops_rule_set *rs, unsigned args,
                      unsigned repl, dt_reduce_op in, dt_reduce_op out);
static inline dt_placement ops_shard(int dim) {
  return (dt_placement){.kind = DT_PLACEMENT_SHARD, .dim = dim};
}
static inline dt_placement ops_partial(dt_reduce_op op) {
  return (dt_placement){.kind = DT_PLACEMENT_PARTIAL, .reduce = op};
}
/* [lo, hi) chunking of n over k shards (torch.chunk): the chunk size */
static inline int64_t ops_chunk(int64_t n, int64_t k) { return (n + k - 1) / k; }

extern const ops_def ops_defs[CORE_OP_COUNT];
/* A rank's part c of a DTensor mean whose reduced dims hold no element in
 * the global tensor (ops/reduce.c): its value is 0 / 0 = NaN, as on one
 * device, not the Partial identity 0 a rank with an empty shard of a
 * non-empty reduction holds. */
bool ops_reduce_mean_of_nothing(const dt_op_call *c);
/* registers the CUDA backend's kernel table (ops/cuda_ops.c; a no-op in a
 * build without CUDA) */
void ops_cuda_register(void);
/* a slice [start, end) by step of a dim of n: its length; *start clamped
 * to [0, n] after wrapping a negative one (ops/grad_ops.c) */
int64_t ops_slice_len(int64_t n, int64_t *start, int64_t end, int64_t step);
/* runs c's CPU kernel on host copies of its device tensors and copies the
 * outputs back (ops/host_fallback.c; a backend's host_fallback) */
dt_status ops_host_fallback(dt_op_call *c);


/* A kernel-side view of a tensor: pointer to its first element, sizes and
 * strides in elements, dtype. */
static inline cpu_view ops_view_of(const dt_tensor *t) {
  cpu_view v = {0}; /* dims past ndim zeroed: the struct is copied around */
  v.data = core_tensor_data(t);
  v.dtype = t->dtype;
  v.ndim = t->local.ndim;
  for (int i = 0; i < v.ndim; i++) {
    v.sizes[i] = t->local.sizes[i];
    v.strides[i] = t->local.strides[i];
  }
  return v;
}

/* Sets meta[0] to a fresh output of dtype and shape. */
static inline void ops_meta_set(core_meta *m, dt_dtype dtype, int ndim,
                                const int64_t *sizes) {
  m->dtype = dtype;
  m->ndim = ndim;
  for (int i = 0; i < ndim; i++) m->sizes[i] = sizes[i];
  m->alias = -1;
  m->offset = 0;
}

/* The compute type of a copy from dtype src into dtype dst (cast, cat,
 * stack): the native type when they are equal; int64 between integers and
 * bools (all 64 bits kept); float32 from an integer or bool into
 * float32/float16/bfloat16, so each value is rounded once, as (float)x
 * (through double, an int64 would be rounded to 53 bits and then again to
 * 24); float32 between float32, float16 and bfloat16 (float32 holds each
 * of their values exactly, so the value is rounded once, into dst: the
 * same results as through float64, and a float32 -> bfloat16 cast of 16M
 * 2.8-3.0 -> 2.3-2.4 ms without the round trip); else float64, which holds every
 * float value exactly (float64 -> float16 through float32 would round
 * twice). */
static inline dt_dtype ops_copy_type(dt_dtype dst, dt_dtype src) {
  bool fd = core_dtype_is_float(dst), fs = core_dtype_is_float(src);
  if (dst == src) return cpu_compute_type(dst);
  if (!fd && !fs) return DT_INT64;
  if (fd && !fs && dst != DT_FLOAT64) return DT_FLOAT32;
  if (fd && fs && dst != DT_FLOAT64 && src != DT_FLOAT64) return DT_FLOAT32;
  return DT_FLOAT64;
}

/* True when the product of sizes, a size 0 counted as 1, fits int64: then
 * numel fits, and so do the contiguous strides (core/tensor.c) of a
 * tensor of these sizes — a 0 elsewhere must not hide an overflow of the
 * rest, as core_numel_checked lets it. The shape check of every op that
 * makes a new shape (factories, view, reshape, expand). */
static inline bool ops_sizes_fit(const int64_t *sizes, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++)
    if (sizes[i] > 1 && __builtin_mul_overflow(p, sizes[i], &p)) return false;
  return true;
}

/* Broadcasts two shapes (PyTorch rules) into out; error names c->api. */
dt_status ops_broadcast_shapes(const dt_op_call *c, const int64_t *a, int na,
                               const int64_t *b, int nb, int64_t *out,
                               int *nout);
/* Normalises dim for a tensor of ndim dims; error names c->api and arg. */
dt_status ops_wrap_dim(const dt_op_call *c, const char *arg, int64_t dim,
                       int ndim, int *out);

/* The values integer dtype d holds, as doubles: int32 [-2^31, 2^31 - 1],
 * int64 [-2^63, 2^63 - 1024] (the largest double below 2^63), uint8
 * [0, 255]; false for the floating dtypes and bool, which take any double.
 * The one table of integer ranges for the checks below and clamp's. */
bool ops_int_range(dt_dtype d, double *lo, double *hi);
/* The error for a double argument `arg` = v that dtype d cannot hold:
 * DT_ERR_INVALID_ARGUMENT, "<api>: <arg> <v> cannot be converted to <d>
 * without overflow" (PyTorch's words). */
dt_status ops_scalar_overflow(const dt_op_call *c, const char *arg, double v,
                              dt_dtype d);
/* Checks that the double `v` (argument `arg`) can be stored in dtype d,
 * as PyTorch's "value cannot be converted to type X without overflow":
 * always for the floating dtypes and bool (v != 0); for the integer dtypes
 * v must not be NaN or infinite and, truncated toward zero, must lie in
 * int32 [-2^31, 2^31), int64 [-2^63, 2^63), or uint8 [-255, 255] (PyTorch's
 * rule for an integer scalar: a negative one wraps modulo 256, -1 → 255).
 * A double out of int64's range is undefined behaviour in C, so every op
 * that stores a double argument into an integer tensor checks it here.
 * Error: ops_scalar_overflow. */
/* ops_check_scalar, and for float16/bfloat16/float32 a finite value past
 * the dtype's largest finite one fails too (PyTorch's check of masked_fill
 * values and pow exponents; infinities and NaN pass). */
dt_status ops_check_scalar_exact(const dt_op_call *c, const char *arg, double v,
                                 dt_dtype d);
/* A scalar of kind k (dtorch.h, dt_scalar_kind): an error naming c->api
 * and arg unless k is in the enum and v fits it (INT: an integer in
 * [-2^63, 2^63), or +-inf where inf_ok; BOOL: 0 or 1). */
dt_status ops_check_kind(const dt_op_call *c, const char *arg, double v,
                         int64_t k, bool inf_ok);
/* v, an integral scalar, as a uint8 / int32 result converts it (modulo
 * 2^8 / 2^32, as PyTorch); other dtypes: v itself */
double ops_wrap_int(double v, dt_dtype d);
dt_status ops_check_scalar(const dt_op_call *c, const char *arg, double v,
                           dt_dtype d);

/* ---- backward building blocks (ops/grad.c): each runs one op through
 * e->run and returns the result borrowed (see "backward formulas"); a
 * NULL tensor argument gives NULL (the failure is in e->st already). A
 * formula ends with `return e->st;`. */
/* any call: sig lists the arguments as schema letters (T tensor, s double,
 * i int64_t, I dt_shape, b bool passed as int, D dt_dtype passed as int) */
dt_tensor *ops_g_call(ops_grad_env *e, core_op_id op, const char *sig, ...);
dt_tensor *ops_g_t(ops_grad_env *e, core_op_id op, dt_tensor *a);
dt_tensor *ops_g_tt(ops_grad_env *e, core_op_id op, dt_tensor *a, dt_tensor *b);
dt_tensor *ops_g_ttt(ops_grad_env *e, core_op_id op, dt_tensor *a, dt_tensor *b,
                     dt_tensor *c);
dt_tensor *ops_g_ts(ops_grad_env *e, core_op_id op, dt_tensor *a, double s);
dt_tensor *ops_g_ti(ops_grad_env *e, core_op_id op, dt_tensor *a, int64_t i);
dt_tensor *ops_g_tii(ops_grad_env *e, core_op_id op, dt_tensor *a, int64_t i,
                     int64_t j);
dt_tensor *ops_g_tI(ops_grad_env *e, core_op_id op, dt_tensor *a, dt_shape s);
/* narrow(a, dim, start, len) */
dt_tensor *ops_g_narrow(ops_grad_env *e, dt_tensor *a, int64_t dim,
                        int64_t start, int64_t len);
/* e->constant, failures kept */
dt_tensor *ops_g_const(ops_grad_env *e, const dt_tensor *like, double v);
/* zeros of `shape` with src at [start:end:step] along dim */
dt_tensor *ops_g_slice_scatter(ops_grad_env *e, dt_tensor *src, dt_shape shape,
                               int64_t dim, int64_t start, int64_t end,
                               int64_t step);
/* sum/mean over dims (ndim 0 = all) */
dt_tensor *ops_g_reduce(ops_grad_env *e, core_op_id op, dt_tensor *a,
                        dt_shape dims, bool keepdim);
dt_tensor *ops_g_masked_fill(ops_grad_env *e, dt_tensor *a, dt_tensor *mask,
                             double v);
dt_tensor *ops_g_cast(ops_grad_env *e, dt_tensor *a, dt_dtype d);
/* g summed down to `sizes` (the broadcasting it went through undone) */
dt_tensor *ops_g_sum_to(ops_grad_env *e, dt_tensor *g, const int64_t *sizes,
                        int ndim);
/* a's shape as a dt_shape */
dt_shape ops_g_shape(const dt_tensor *a);

#endif
