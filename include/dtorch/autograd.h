/* dtorch's autograd API: gradients of DTensor programs, in-place writes
 * and the version counters that guard them, optimisers and gradient
 * clipping. Part of the public API: <dtorch/dtorch.h> includes it; it may
 * also be included on its own. The conventions are dtorch.h's (its top). */
#ifndef DTORCH_AUTOGRAD_H
#define DTORCH_AUTOGRAD_H

#include "dtorch/dtorch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- autograd (docs/autograd.md)
 * A tensor made with options.requires_grad (or dt_tensor_set_requires_grad)
 * is a leaf; every differentiable op on it records a graph node, and so
 * does dt_redistribute. dt_backward walks the graph from a scalar and
 * accumulates d(loss)/d(leaf) into each leaf's grad (summing over calls
 * until dt_zero_grad). On DTensors the backward ops are DTensor ops: the
 * gradients get placements from the sharding rules (a Replicate weight
 * used by Shard(0) activations gets a Partial(sum) gradient — the DP
 * all-reduce happens where it is needed, and dt_comm_count shows it);
 * redistributions the backward needs are inserted whatever the
 * auto_redistribute mode. Grad mode is per thread. Any thread may run
 * backward on its graphs; two threads must not run backward through the
 * same nodes at once. */
/* d loss / d leaves; loss has one element; seeded with 1 */
DT_API dt_status  dt_backward(dt_tensor *loss);
typedef struct dt_backward_options {
  dt_tensor *grad;      /* the seed (root's shape and dtype); NULL = ones */
  bool retain_graph;    /* keep the saved tensors for another backward */
  uint64_t reserved[4]; /* zero; later fields are carved from here */
} dt_backward_options;
DT_API dt_status  dt_backward_ex(dt_tensor *root, const dt_backward_options *o);
/* the accumulated gradient of a leaf (a new reference) or NULL if none */
DT_API dt_tensor *dt_grad(const dt_tensor *t);
/* drops t's accumulated gradient (the next backward starts from none) */
DT_API void       dt_zero_grad(dt_tensor *t);
/* a leaf's requires_grad; a non-leaf (made by an op) cannot change */
DT_API dt_status  dt_tensor_set_requires_grad(dt_tensor *t, bool requires_grad);
/* this thread's grad mode (on by default); set returns the previous one:
 *   bool was = dt_set_grad_enabled(false);  ... no graph ...
 *   dt_set_grad_enabled(was); */
DT_API bool       dt_grad_enabled(void);
DT_API bool       dt_set_grad_enabled(bool enabled);
/* the op that made t ("matmul", "redistribute", ...) or NULL for a leaf */
DT_API const char *dt_tensor_grad_fn(const dt_tensor *t);
/* graph nodes alive in the process (a leak check) */
DT_API int64_t    dt_autograd_live_nodes(void);

/* ---- in-place (docs/inplace.md)
 * The storage writes PyTorch's in-place methods are built on. A write is a
 * record on the stream of the rank that holds dst (every rank of a
 * DTensor's mesh): it runs after every op issued before it that reads or
 * writes dst's storage (a pending dt_to_host_async of dst included, which
 * gets the old values) and before every op issued after it, with no wait
 * on the caller's thread. Each storage (a DTensor: its set of shards)
 * has a version that every write bumps at the call; autograd records the
 * versions of the tensors a node saves, and dt_backward fails, naming the
 * op, when a saved value its formula reads was written since. */
/* Writes src's values into dst's storage through dst's view (strides,
 * offset), as torch.Tensor.copy_: src is broadcast to dst's shape and cast
 * to dst's dtype; overlapping views of one storage are read before the
 * write. DTensors: dst and src on one mesh; src is redistributed to dst's
 * placements first (a collective, counted by dt_comm_count); each rank
 * writes its shard. A failed src (an op it came from failed) poisons dst.
 * Returns: DT_OK once the write is issued. Errors: NULL (DT_ERR_INVALID_
 * ARGUMENT); shapes not broadcastable (DT_ERR_SHAPE); dst and src on
 * different devices (DT_ERR_DEVICE) or meshes, one a DTensor and one not
 * (DT_ERR_MESH); dst Partial (DT_ERR_PLACEMENT); dst a view of a DTensor,
 * which dtorch makes as a copy (DT_ERR_UNSUPPORTED); dst with elements
 * that share memory, e.g. an expand (DT_ERR_INVALID_ARGUMENT); with grad
 * mode on, dst a leaf that requires grad (DT_ERR_INVALID_ARGUMENT, as
 * PyTorch), or dst or src in a graph (DT_ERR_UNSUPPORTED: not recorded);
 * the runtime destroyed (DT_ERR_DEVICE).
 * Ownership: borrows both; the record holds references until it ran.
 * Thread safety: any thread; writes issued to one storage run in issue
 * order; writes from several threads to disjoint views of one tensor are
 * safe, to overlapping ones the order is the order the calls were made. */
DT_API dt_status  dt_copy_(dt_tensor *dst, dt_tensor *src);
/* Returns: the version of t's storage (0 when made, +1 per dt_copy_ into
 * it or any view of it; PyTorch's tensor._version). Errors: t NULL (-1).
 * Ownership: borrows t. Thread safety: any thread. */
DT_API int64_t    dt_tensor_version(const dt_tensor *t);
/* Returns: a new handle on t's storage (a DTensor: its shards) with t's
 * layout that requires no grad and has no grad_fn (torch.Tensor.detach);
 * writes through either reach both and bump one version. Errors: t NULL.
 * Ownership: caller releases. Thread safety: any thread. */
DT_API dt_tensor *dt_detach(dt_tensor *t);
/* Sets a leaf's accumulated gradient to grad (retained; NULL clears), as
 * assigning torch.Tensor.grad. Returns: DT_OK. Errors: leaf NULL or made
 * by an op (DT_ERR_INVALID_ARGUMENT); grad of another shape (DT_ERR_SHAPE),
 * dtype (DT_ERR_DTYPE) or mesh (DT_ERR_MESH). Ownership: borrows both.
 * Thread safety: any thread (the striped lock of the gradient). */
DT_API dt_status  dt_set_grad(dt_tensor *leaf, dt_tensor *grad);

/* ---- optimisers (docs/autograd.md)
 * `params` is an array of n parameter SLOTS that the optimiser keeps
 * (borrowed: the array must outlive the optimiser). A step computes each
 * new value with grad mode off and puts it in its slot, params[i] (a fresh
 * leaf that requires grad; the optimiser releases the old handle, which
 * the slot owned), as JAX's optax does: in-flight ops keep reading the old
 * values, nothing is overwritten under them. Keep a model's parameters in
 * such an array and read params[i] after each step:
 *   dt_tensor *p[2] = {w, b};        // the array now owns w and b
 *   dt_optimizer *opt = dt_adamw_create(p, 2, &(dt_adamw_options){.lr = 1e-3});
 *   ... forward with p[0], p[1]; dt_backward(loss); dt_optimizer_step(opt); A parameter's gradient is first redistributed to the
 * parameter's placements (a Partial(sum) gradient of a Replicate weight:
 * the DP all-reduce; of a Shard weight: a reduce-scatter); a parameter
 * without a gradient is left as it is. Options with 0 take PyTorch's
 * defaults where noted. */
typedef struct dt_optimizer dt_optimizer;
typedef struct dt_sgd_options {
  double lr;            /* required, > 0 */
  double momentum;      /* 0: plain SGD */
  double weight_decay;  /* L2, added to the gradient */
  bool nesterov;
  uint64_t reserved[4]; /* zero; later fields are carved from here */
} dt_sgd_options;
typedef struct dt_adamw_options {
  double lr;            /* 0: 1e-3 */
  double beta1, beta2;  /* 0: 0.9, 0.999 */
  double eps;           /* 0: 1e-8 */
  double weight_decay;  /* decoupled; 0: none (PyTorch's default is 0.01:
                           pass it) */
  uint64_t reserved[4]; /* zero; later fields (amsgrad, ...) */
} dt_adamw_options;
DT_API dt_optimizer *dt_sgd_create(dt_tensor **params, int n,
                                   const dt_sgd_options *o);
DT_API dt_optimizer *dt_adamw_create(dt_tensor **params, int n,
                                     const dt_adamw_options *o);
DT_API dt_status  dt_optimizer_step(dt_optimizer *opt);
/* drops every parameter's gradient */
DT_API void       dt_optimizer_zero_grad(dt_optimizer *opt);
DT_API int64_t    dt_optimizer_steps(const dt_optimizer *opt);
/* frees the optimiser (not the parameters: the slots keep them); NULL
 * no-op. An optimiser has one owner (no retain): _free. */
DT_API void       dt_optimizer_free(dt_optimizer *opt);
DT_API void       dt_optimizer_release(dt_optimizer *opt);   /* alias of _free */
/* The fused kernels under AdamW's step, for custom optimisers: one pass
 * each. Inputs of one shape (no broadcasting), floating; the result has
 * the first input's dtype; on DTensors, pointwise (no Partial).
 *   dt_adam_moment:  beta * buf + (1 - beta) * (squared ? x * x : x)
 *   dt_adamw_apply:  decay * p - step * m / (sqrt(v) + eps) */
DT_API dt_tensor *dt_adam_moment(dt_tensor *buf, dt_tensor *x, double beta,
                                 bool squared);
DT_API dt_tensor *dt_adamw_apply(dt_tensor *p, dt_tensor *m, dt_tensor *v,
                                 double step, double eps, double decay);
/* Scales the gradients of params so that their global 2-norm (over every
 * shard of every parameter) is at most max_norm, as
 * torch.nn.utils.clip_grad_norm_; *total_norm (may be NULL) gets the norm
 * before clipping. Waits for the gradients. */
DT_API dt_status  dt_clip_grad_norm(dt_tensor *const *params, int n,
                                    double max_norm, double *total_norm);

#ifdef __cplusplus
}
#endif
#endif /* DTORCH_AUTOGRAD_H */
