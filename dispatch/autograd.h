/* Reverse-mode autograd (docs/autograd.md): the Autograd key's layer
 * records a graph node per differentiable op whose inputs require grad;
 * dispatch_backward walks the graph from a root in reverse creation
 * order, runs each op's backward formula (ops_defs[op].grad) through the
 * dispatcher — so on DTensors the gradients are DTensor ops and get their
 * placements from the same sharding rules — and accumulates into the
 * leaves' grads. */
#ifndef DISPATCH_AUTOGRAD_H
#define DISPATCH_AUTOGRAD_H

#include <stdbool.h>

#include "core/call.h"

/* the Autograd key's layer */
dt_status dispatch_autograd_layer(dt_op_call *c);

/* grad mode of this thread (on by default); set returns the previous */
bool dispatch_grad_enabled(void);
bool dispatch_set_grad_enabled(bool on);

/* a leaf's requires_grad (dt_tensor_set_requires_grad) */
dt_status dispatch_set_requires_grad(dt_tensor *t, bool on, const char *api);

/* d root / d leaves, seeded with `seed` (root's shape; retained by the
 * caller); the graph's saved tensors are released after unless
 * retain_graph. */
dt_status dispatch_backward(dt_tensor *root, dt_tensor *seed,
                            bool retain_graph, const char *api);

/* ones of t's shape, dtype and device (on a mesh: t's placements with
 * Partial made Replicate): the default seed of a backward */
dt_tensor *dispatch_ones_like_grad(const dt_tensor *t);

/* t's accumulated gradient (a new reference) or NULL */
dt_tensor *dispatch_grad(const dt_tensor *t);
/* replaces t's gradient with g (retained; NULL drops it) */
dt_status dispatch_set_grad(dt_tensor *t, dt_tensor *g, const char *api);
/* drops t's accumulated gradient (PyTorch's zero_grad(set_to_none)) */
void dispatch_clear_grad(dt_tensor *t);
/* the op name of the node that made t, or NULL for a leaf / no grad */
const char *dispatch_grad_fn_name(const dt_tensor *t);

/* records `out` = redistribute(`in`) when grad mode is on and `in`
 * requires grad (the backward redistributes the gradient back to `in`'s
 * placements, Partial made Replicate); false when out of host memory */
bool dispatch_autograd_redistributed(dt_tensor *in, dt_tensor *out);

/* records out = dt_dtensor_from_local(in) (from_local) or
 * dt_dtensor_to_local(in) (!from_local), inside an SPMD function, when
 * grad mode is on and in requires grad. The backwards are PyTorch's: a
 * from_local's takes the DTensor gradient to the made DTensor's
 * placements (Partial made Replicate) and then this rank's shard; a
 * to_local's makes this rank's gradient its shard of a DTensor laid out
 * as the input was. False when out of host memory. */
bool dispatch_autograd_spmd_local(dt_tensor *in, dt_tensor *out, bool from_local);

/* live graph nodes (tests: nothing leaks) */
int64_t dispatch_autograd_live_nodes(void);

#endif
