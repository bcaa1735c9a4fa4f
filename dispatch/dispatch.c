/* Dispatch: key sets, the layer table and redispatch, and the backend
 * layer (infer → allocate → kernel). */
#include "dispatch/dispatch.h"

#include "core/error.h"
#include "core/tensor.h"
#include "dispatch/autograd.h"
#include "dispatch/propagate.h"
#include "dispatch/intercept.h"
#include "mesh/shard.h"
#include "ops/ops.h"
#include "runtime/backend.h"
#include "runtime/exec.h"
#include "sched/future.h"

static _Thread_local core_keyset tls_include;
static _Thread_local core_keyset tls_exclude;

core_keyset dispatch_tls_include(void) { return tls_include; }
core_keyset dispatch_tls_exclude(void) { return tls_exclude; }
void dispatch_tls_set_include(core_keyset ks) { tls_include = ks; }
void dispatch_tls_set_exclude(core_keyset ks) { tls_exclude = ks; }


static dt_status backend_layer(dt_op_call *c, core_key key);
static dt_status layer_cpu(dt_op_call *c) {
  return backend_layer(c, CORE_KEY_CPU);
}
static dt_status layer_cuda(dt_op_call *c) {
  return backend_layer(c, CORE_KEY_CUDA);
}

typedef dt_status (*dispatch_layer_fn)(dt_op_call *c);
static const dispatch_layer_fn layers[CORE_KEY_COUNT] = {
    [CORE_KEY_CPU] = layer_cpu,
    [CORE_KEY_CUDA] = layer_cuda,
    [CORE_KEY_DTENSOR] = dispatch_dtensor_layer,
    [CORE_KEY_AUTOGRAD] = dispatch_autograd_layer,
    [CORE_KEY_INTERCEPT] = dispatch_intercept_layer,
};
_Static_assert(sizeof layers / sizeof *layers == CORE_KEY_COUNT, "layer table");

static core_keyset call_keys(const dt_op_call *c) {
  core_keyset ks = 0;
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);)
    if (it.t) ks |= it.t->keys;
  if (!(ks & CORE_BACKEND_KEYS)) /* factories: their runtime's backend */
    ks |= CORE_KEYSET(c->rt ? c->rt->backend->key : CORE_KEY_CPU);
  return (ks | tls_include | dispatch_intercept_keys()) & ~tls_exclude;
}

dt_status dispatch_next(dt_op_call *c) {
  if (!c->keys)
    return core_error_set(DT_ERR_INTERNAL, "%s: no dispatch key left for op %s",
                        c->api, core_op_name(c->op));
  int key = 31 - __builtin_clz(c->keys);
  c->keys &= ~CORE_KEYSET(key);
  return layers[key](c);
}

dt_status dispatch_run(dt_op_call *c) {
  c->nout = 0;
  c->keys = call_keys(c);
  dt_status st = dispatch_next(c);
  if (st == DT_OK) core_error_succeeded();
  return st;
}

dt_tensor *dispatch_run1(dt_op_call *c) {
  if (dispatch_run(c) != DT_OK) return NULL;
  for (int i = 1; i < c->nout; i++) core_tensor_release(c->out[i]);
  return c->out[0];
}

void dispatch_release_outs(dt_op_call *c) {
  for (int i = 0; i < c->nout; i++) {
    core_tensor_release(c->out[i]);
    c->out[i] = NULL;
  }
  c->nout = 0;
}

/* One input's device and poison. */
static dt_status check_input(dt_op_call *c, const dt_tensor *t,
                             dt_runtime **rt, int *rank) {
  const core_storage *s = t->local.storage;
  if (!*rt) {
    *rt = s->rt;
    *rank = s->rank;
  } else if (s->rt != *rt || s->rank != *rank) {
    return core_error_set(DT_ERR_DEVICE,
                        "%s: expected all tensors on the same device, but "
                        "found cpu:%d and cpu:%d%s", c->api, *rank, s->rank,
                        s->rt != *rt ? " of another runtime" : "");
  }
  const core_poison *p = core_storage_poison(s);
  if (p) return core_error_set(p->status, "%s", p->message);
  return DT_OK;
}

/* Where the op runs: its inputs' device (all the same), or the factory's. */
static dt_status call_device(dt_op_call *c, dt_runtime **rt, int *rank) {
  *rt = NULL;
  *rank = 0;
  dt_status st = DT_OK;
  /* an absent optional is skipped; a list element is checked as it is */
  for (core_arg_it it = core_call_args(c); st == DT_OK && core_arg_next(&it);)
    if (it.t || it.elem >= 0) st = check_input(c, it.t, rt, rank);
  if (st != DT_OK) return st;
  if (!*rt) {
    *rt = c->rt;
    *rank = c->rank;
  }
  if (!*rt)
    return core_error_set(DT_ERR_INTERNAL, "%s: op %s has no device", c->api,
                        core_op_name(c->op));
  if (atomic_load_explicit(&(*rt)->dead, memory_order_acquire))
    return core_error_set(DT_ERR_DEVICE, "%s: the tensors' runtime was "
                        "destroyed", c->api);
  return DT_OK;
}


dt_status dispatch_wait_outputs(dt_op_call *c, dt_runtime *rt, int rank) {
  dt_future *f = runtime_publish_barrier(rt, rank);
  if (!f) return core_last_status();
  dt_status st = sched_future_wait(f, -1);
  sched_future_release(f);
  for (int i = 0; st == DT_OK && i < c->nout; i++) {
    const core_poison *p = mesh_tensor_poison(c->out[i]);
    if (p) st = core_error_set(p->status, "%s", p->message);
  }
  return st;
}

static dt_status make_outputs(dt_op_call *c, dt_runtime *rt, int rank,
                              bool *fresh) {
  *fresh = false;
  for (int i = 0; i < c->nmeta; i++) {
    const core_meta *m = &c->meta[i];
    dt_tensor *t;
    if (m->alias >= 0) {
      const dt_tensor *base = c->args[m->alias].t;
      t = core_tensor_make(m->dtype, m->ndim, m->sizes, m->strides, m->offset,
                         base->local.storage);
    } else {
      t = runtime_tensor_alloc(m->dtype, m->ndim, m->sizes, rt, rank, c->api);
      *fresh = true;
    }
    if (!t) return core_last_status();
    t->requires_grad = c->requires_grad;
    if (c->requires_grad) t->keys |= CORE_KEYSET(CORE_KEY_AUTOGRAD);
    c->out[c->nout++] = t;
  }
  return DT_OK;
}

/* The kernel the backend of `key` runs for c on rt's ranks. */
static dt_status backend_kernel(dt_op_call *c, core_key key, dt_runtime *rt) {
  const runtime_backend *be = runtime_backend_of_key(key);
  if (!be)
    return core_error_set(DT_ERR_DEVICE, "%s: the %s backend is not built "
                          "into this dtorch", c->api,
                          key == CORE_KEY_CUDA ? "CUDA" : "requested");
  if (rt->backend != be)
    return core_error_set(DT_ERR_DEVICE, "%s: expected all tensors on one "
                          "device kind, but found %s and %s tensors", c->api,
                          be->name, rt->backend->name);
  c->kernel = runtime_kernel_of(rt, c->op);
  if (!c->kernel) return runtime_no_kernel(rt, c->api, c->op);
  return DT_OK;
}

dt_status dispatch_backend(dt_op_call *c) {
  return backend_layer(c, CORE_KEY_CPU);
}

static dt_status backend_layer(dt_op_call *c, core_key key) {
  const ops_def *d = &ops_defs[c->op];
  if (c->nout)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: op %s was already run for this call", c->api,
                        core_op_name(c->op));
  dt_runtime *rt;
  int rank;
  dt_status st = call_device(c, &rt, &rank);
  if (st != DT_OK) return st;
  c->nmeta = 1;
  c->meta[0].alias = -1;
  c->meta[0].offset = 0;
  if ((st = backend_kernel(c, key, rt)) != DT_OK) return st;
  st = d->infer(c);
  if (st != DT_OK) return st;
  CORE_ASSERT(c->nmeta >= 1 && c->nmeta <= CORE_CALL_MAX_OUTS);
  bool fresh;
  st = make_outputs(c, rt, rank, &fresh);
  if (st == DT_OK && fresh) st = runtime_publish_op(c, rt, rank);
  if (st == DT_OK && fresh && ops_checks_data(c->op))
    st = dispatch_wait_outputs(c, rt, rank);
  if (st != DT_OK) dispatch_release_outs(c);
  return st;
}
