/* Dispatch: key sets, the layer table and redispatch, and the backend
 * layer (infer → allocate → kernel). */
#include "dispatch/dispatch.h"

#include "core/error.h"
#include "runtime/exec.h"
#include "dispatch/intercept.h"
#include "ops/ops.h"
#include "core/tensor.h"

static _Thread_local dt_keyset tls_include;
static _Thread_local dt_keyset tls_exclude;

dt_keyset dt_tls_include(void) { return tls_include; }
dt_keyset dt_tls_exclude(void) { return tls_exclude; }
void dt_tls_set_include(dt_keyset ks) { tls_include = ks; }
void dt_tls_set_exclude(dt_keyset ks) { tls_exclude = ks; }

/* A layer that has nothing to do yet passes the call down. */
static dt_status layer_fallthrough(dt_op_call *c) { return dt_redispatch(c); }

/* The DTensor layer: ops on DTensors need sharding propagation (the next
 * piece of the roadmap); until then a clear error. */
static dt_status layer_dtensor(dt_op_call *c) {
  return dt_error_set(DT_ERR_UNSUPPORTED,
                      "%s: op %s on a distributed tensor needs sharding "
                      "propagation, which this build does not have yet; use "
                      "dt_redistribute, dt_to_host or dt_local_to_host",
                      c->api, dt_op_name(c->op));
}

static dt_status layer_cuda(dt_op_call *c) {
  return dt_error_set(DT_ERR_DEVICE,
                      "%s: the CUDA backend is not built into this dtorch",
                      c->api);
}

typedef dt_status (*dt_layer_fn)(dt_op_call *c);
static const dt_layer_fn layers[DT_KEY_COUNT] = {
    [DT_KEY_CPU] = dt_backend_run,
    [DT_KEY_CUDA] = layer_cuda,
    [DT_KEY_DTENSOR] = layer_dtensor,
    [DT_KEY_AUTOGRAD] = layer_fallthrough,
    [DT_KEY_INTERCEPT] = dt_intercept_layer,
};
_Static_assert(sizeof layers / sizeof *layers == DT_KEY_COUNT, "layer table");

static dt_keyset call_keys(const dt_op_call *c) {
  const char *s = dt_op_schema(c->op);
  dt_keyset ks = 0;
  for (int i = 0; s[i]; i++) {
    if (s[i] == 'T' || s[i] == 't') {
      if (c->args[i].t) ks |= c->args[i].t->keys;
    } else if (s[i] == 'L') {
      for (int j = 0; j < c->args[i].list.n; j++)
        if (c->args[i].list.v[j]) ks |= c->args[i].list.v[j]->keys;
    }
  }
  if (!(ks & DT_BACKEND_KEYS)) ks |= DT_KEYSET(DT_KEY_CPU); /* factories */
  return (ks | tls_include | dt_intercept_keys()) & ~tls_exclude;
}

dt_status dt_redispatch(dt_op_call *c) {
  if (!c->keys)
    return dt_error_set(DT_ERR_INTERNAL, "%s: no dispatch key left for op %s",
                        c->api, dt_op_name(c->op));
  int key = 31 - __builtin_clz(c->keys);
  c->keys &= ~DT_KEYSET(key);
  return layers[key](c);
}

dt_status dt_dispatch(dt_op_call *c) {
  c->nout = 0;
  c->keys = call_keys(c);
  return dt_redispatch(c);
}

dt_tensor *dt_dispatch1(dt_op_call *c) {
  if (dt_dispatch(c) != DT_OK) return NULL;
  for (int i = 1; i < c->nout; i++) dt_tensor_release(c->out[i]);
  return c->out[0];
}

static void release_outs(dt_op_call *c) {
  for (int i = 0; i < c->nout; i++) {
    dt_tensor_release(c->out[i]);
    c->out[i] = NULL;
  }
  c->nout = 0;
}

/* One input's device and poison. */
static dt_status check_input(dt_op_call *c, const dt_tensor *t,
                             dt_runtime **rt, int *rank) {
  const dt_storage *s = t->local.storage;
  if (!*rt) {
    *rt = s->rt;
    *rank = s->rank;
  } else if (s->rt != *rt || s->rank != *rank) {
    return dt_error_set(DT_ERR_DEVICE,
                        "%s: expected all tensors on the same device, but "
                        "found cpu:%d and cpu:%d%s", c->api, *rank, s->rank,
                        s->rt != *rt ? " of another runtime" : "");
  }
  const dt_poison *p = dt_storage_poison(s);
  if (p) return dt_error_set(p->status, "%s", p->message);
  return DT_OK;
}

/* Where the op runs: its inputs' device (all the same), or the factory's. */
static dt_status call_device(dt_op_call *c, dt_runtime **rt, int *rank) {
  const char *s = dt_op_schema(c->op);
  *rt = NULL;
  *rank = 0;
  dt_status st = DT_OK;
  for (int i = 0; s[i] && st == DT_OK; i++) {
    if ((s[i] == 'T' || s[i] == 't') && c->args[i].t)
      st = check_input(c, c->args[i].t, rt, rank);
    else if (s[i] == 'L')
      for (int j = 0; j < c->args[i].list.n && st == DT_OK; j++)
        st = check_input(c, c->args[i].list.v[j], rt, rank);
  }
  if (st != DT_OK) return st;
  if (!*rt) {
    *rt = c->rt;
    *rank = c->rank;
  }
  if (!*rt)
    return dt_error_set(DT_ERR_INTERNAL, "%s: op %s has no device", c->api,
                        dt_op_name(c->op));
  if (atomic_load_explicit(&(*rt)->dead, memory_order_acquire))
    return dt_error_set(DT_ERR_DEVICE, "%s: the tensors' runtime was "
                        "destroyed", c->api);
  return DT_OK;
}

/* Ops whose kernels validate data (indices): the call waits for the
 * result, so a bad index fails the call as on PyTorch's CPU. */
static bool checks_data(dt_op_id op) {
  return op == DT_OP_EMBEDDING || op == DT_OP_INDEX_SELECT ||
         op == DT_OP_CROSS_ENTROPY;
}

static dt_status wait_for_outputs(dt_op_call *c, dt_runtime *rt, int rank) {
  dt_future *f = dt_exec_barrier(rt, rank);
  if (!f) return dt_last_status();
  dt_status st = dt_future_wait(f, -1);
  dt_future_release(f);
  for (int i = 0; st == DT_OK && i < c->nout; i++) {
    const dt_poison *p = dt_storage_poison(c->out[i]->local.storage);
    if (p) st = dt_error_set(p->status, "%s", p->message);
  }
  return st;
}

static dt_status make_outputs(dt_op_call *c, dt_runtime *rt, int rank,
                              bool *fresh) {
  *fresh = false;
  for (int i = 0; i < c->nmeta; i++) {
    const dt_meta *m = &c->meta[i];
    dt_tensor *t;
    if (m->alias >= 0) {
      const dt_tensor *base = c->args[m->alias].t;
      t = dt_tensor_make(m->dtype, m->ndim, m->sizes, m->strides, m->offset,
                         base->local.storage);
    } else {
      t = dt_tensor_alloc(m->dtype, m->ndim, m->sizes, rt, rank, c->api);
      *fresh = true;
    }
    if (!t) return dt_last_status();
    t->requires_grad = c->requires_grad;
    if (c->requires_grad) t->keys |= DT_KEYSET(DT_KEY_AUTOGRAD);
    c->out[c->nout++] = t;
  }
  return DT_OK;
}

dt_status dt_backend_run(dt_op_call *c) {
  const dt_op_def *d = &dt_op_defs[c->op];
  if (c->nout)
    return dt_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: op %s was already run for this call", c->api,
                        dt_op_name(c->op));
  dt_runtime *rt;
  int rank;
  dt_status st = call_device(c, &rt, &rank);
  if (st != DT_OK) return st;
  c->nmeta = 1;
  c->meta[0].alias = -1;
  c->meta[0].offset = 0;
  c->kernel = d->cpu;
  st = d->infer(c);
  if (st != DT_OK) return st;
  DT_ASSERT(c->nmeta >= 1 && c->nmeta <= DT_CALL_MAX_OUTS);
  bool fresh;
  st = make_outputs(c, rt, rank, &fresh);
  if (st == DT_OK && fresh) st = dt_exec_publish_op(c, rt, rank);
  if (st == DT_OK && fresh && checks_data(c->op))
    st = wait_for_outputs(c, rt, rank);
  if (st != DT_OK) release_outs(c);
  return st;
}
