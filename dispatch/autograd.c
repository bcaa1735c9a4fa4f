/* Reverse-mode autograd (autograd.h, docs/autograd.md).
 *
 * Graph. A node is one recorded op call: a copy of the boxed forward call
 * holding references to its tensor inputs (the saved tensors: formulas
 * recompute what else they need), its creation sequence number and the
 * gradient buffers of its outputs during a backward. An output tensor's
 * autograd state (ag_meta, behind core_autograd) holds its node and its
 * output index; a leaf's holds its accumulated gradient. Edges are not
 * stored: an input with a node feeds that node's output, an input that
 * requires grad without one is a leaf. Nodes hold inputs, outputs hold
 * nodes, so the graph has no cycle and refcounts free it.
 *
 * Backward. The nodes reachable from the root, in decreasing creation
 * order (a node is always created after the nodes of its inputs, so this
 * is a topological order, as PyTorch's sequence numbers), each run once
 * with the sum of its outputs' gradients; gradients of inputs accumulate
 * into their nodes' buffers or the leaves' grads. Formulas run with grad
 * mode off and DTensor redistributions allowed (dispatch_dtensor_force_
 * auto): their placements follow the sharding rules.
 *
 * Threads. Grad mode is per thread. Any thread may build graphs and run
 * backward on its own graphs; two threads must not run backward through
 * the same node at once. Leaves may be shared: their gradient is read
 * and accumulated under a lock striped by address. */
#include "dispatch/autograd.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor.h"
#include "dispatch/dispatch.h"
#include "dispatch/propagate.h"
#include "mesh/handle.h"
#include "mesh/spmd_coll.h"
#include "ops/ops.h"

#define AG_REDISTRIBUTE ((int)CORE_OP_COUNT) /* a node's op: dt_redistribute */
#define AG_FROM_LOCAL (AG_REDISTRIBUTE + 1)  /* dt_dtensor_from_local */
#define AG_TO_LOCAL (AG_REDISTRIBUTE + 2)    /* dt_dtensor_to_local */
#define AG_STRIPES 64

typedef struct ag_node ag_node;
typedef struct ag_meta {
  core_autograd base;
  ag_node *fn;        /* the node that made this tensor (retained) or NULL */
  int out;            /* which of fn's outputs */
  dt_tensor *grad;    /* leaves: the accumulated gradient, or NULL */
} ag_meta;

struct ag_node {
  _Atomic int64_t refs;
  uint64_t seq;       /* creation order */
  int op;             /* core_op_id or AG_REDISTRIBUTE */
  dt_op_call call;    /* the forward call; tensor arguments retained */
  dt_tensor **list;   /* an L argument's elements (retained) */
  int nin;            /* tensor inputs, schema order, lists flattened */
  dt_tensor **in;     /* nin entries, borrowed from call / list */
  int64_t *ver;       /* nin entries: each input's version when saved
                         (core_tensor_version; docs/inplace.md) */
  int nout;
  dt_placement *pl;   /* AG_FROM_LOCAL: the made DTensor's placements */
  bool freed;         /* the saved tensors were released by a backward */
  uint64_t pass;      /* the backward that last collected it */
  dt_tensor *gbuf[CORE_CALL_MAX_OUTS];
};

static _Atomic uint64_t node_seq, pass_seq;
static _Atomic int64_t live_nodes;
static _Thread_local bool tls_no_grad; /* grad mode on by default */
static pthread_mutex_t stripes[AG_STRIPES];
static pthread_once_t stripes_once = PTHREAD_ONCE_INIT;

static void stripes_init(void) {
  for (int i = 0; i < AG_STRIPES; i++) pthread_mutex_init(&stripes[i], NULL);
}
static pthread_mutex_t *stripe_of(const dt_tensor *t) {
  pthread_once(&stripes_once, stripes_init);
  return &stripes[((uintptr_t)t >> 6) % AG_STRIPES];
}

bool dispatch_grad_enabled(void) { return !tls_no_grad; }
bool dispatch_set_grad_enabled(bool on) {
  bool was = !tls_no_grad;
  tls_no_grad = !on;
  return was;
}
int64_t dispatch_autograd_live_nodes(void) {
  return atomic_load_explicit(&live_nodes, memory_order_relaxed);
}

/* ---- nodes */
static void node_free_saved(ag_node *n) {
  if (n->freed) return;
  n->freed = true;
  for (int k = 0; k < n->nin; k++) core_tensor_release(n->in[k]);
  for (int k = 0; k < n->nin; k++) n->in[k] = NULL;
}

static void node_release(ag_node *n) {
  /* acq_rel: every use of the node happens-before its free */
  if (!n || atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1)
    return;
  node_free_saved(n);
  for (int i = 0; i < CORE_CALL_MAX_OUTS; i++) core_tensor_release(n->gbuf[i]);
  free(n->list);
  free(n->pl);
  free(n->in);
  free(n->ver);
  free(n);
  atomic_fetch_sub_explicit(&live_nodes, 1, memory_order_relaxed);
}

static int count_inputs(const dt_op_call *c) {
  return core_call_num_tensor_inputs(c);
}

/* a node for call c (its outputs made); NULL when out of host memory */
static const char *node_name(const ag_node *n);

static ag_node *node_make(const dt_op_call *c, int op, int nin) {
  ag_node *n = calloc(1, sizeof *n);
  dt_tensor **in = calloc((size_t)(nin ? nin : 1), sizeof *in);
  int64_t *ver = calloc((size_t)(nin ? nin : 1), sizeof *ver);
  if (!n || !in || !ver) {
    free(n);
    free(in);
    free(ver);
    return NULL;
  }
  atomic_init(&n->refs, 1);
  n->op = op;
  n->in = in;
  n->ver = ver;
  n->nin = nin;
  if (c) {
    n->call = *c;
    n->nout = c->nout;
    n->call.nout = 0;
    memset(n->call.out, 0, sizeof n->call.out);
  }
  n->seq = atomic_fetch_add_explicit(&node_seq, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&live_nodes, 1, memory_order_relaxed);
  return n;
}

/* saves c's tensor arguments into n (retained; a list copied) */
static bool node_save_inputs(ag_node *n) {
  dt_op_call *c = &n->call;
  int li = core_op_list_pos(c->op), k = 0;
  if (li >= 0) {
    int m = c->args[li].list.n;
    n->list = malloc(sizeof *n->list * (size_t)(m ? m : 1));
    if (!n->list) {
      n->nin = 0; /* nothing saved yet */
      return false;
    }
  }
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);) {
    n->ver[k] = it.t ? core_tensor_version(it.t) : 0;
    n->in[k++] = core_tensor_retain(it.t);
    if (it.elem >= 0) n->list[it.elem] = it.t;
  }
  if (li >= 0) c->args[li].list.v = n->list;
  return true;
}

/* ---- tensors' autograd state */
static ag_meta *meta_of(const dt_tensor *t) { return (ag_meta *)t->ag; }

static void meta_release(core_autograd *a) {
  ag_meta *m = (ag_meta *)a;
  node_release(m->fn);
  core_tensor_release(m->grad);
  free(m);
}

static ag_meta *meta_new(void) {
  ag_meta *m = calloc(1, sizeof *m);
  if (m) m->base.release = meta_release;
  return m;
}

/* a leaf's autograd state, made on first use (its stripe lock held) */
static dt_status ensure_meta(dt_tensor *t, const char *api) {
  if (t->ag) return DT_OK;
  ag_meta *m = meta_new();
  if (!m) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", api);
  /* release: the state is whole before another thread's node_of sees it */
  __atomic_store_n(&t->ag, &m->base, __ATOMIC_RELEASE);
  return DT_OK;
}

/* the node that made t, or NULL (a leaf, or no grad). A leaf's state may
 * be made concurrently by ensure_meta: acquire, pairs with its release.
 * A non-leaf's is set before the tensor is returned and never changes. */
static ag_node *node_of(const dt_tensor *t) {
  core_autograd *a = t ? __atomic_load_n(&t->ag, __ATOMIC_ACQUIRE) : NULL;
  return a ? ((ag_meta *)a)->fn : NULL;
}

/* makes out a non-leaf output `idx` of n */
static bool attach(dt_tensor *out, ag_node *n, int idx) {
  if (out->ag || !core_dtype_is_float(out->dtype)) return true;
  ag_meta *m = meta_new();
  if (!m) return false;
  m->fn = n;
  m->out = idx;
  atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
  out->ag = &m->base;
  out->requires_grad = true;
  out->keys |= CORE_KEYSET(CORE_KEY_AUTOGRAD);
  return true;
}

static bool any_requires_grad(const dt_op_call *c) {
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);)
    if (it.t && it.t->requires_grad) return true;
  return false;
}

/* t is one of c's T / t arguments (list elements are not) */
static bool is_input(const dt_op_call *c, const dt_tensor *t) {
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);)
    if (it.elem < 0 && it.t == t) return true;
  return false;
}

/* ---- the layer */
dt_status dispatch_autograd_layer(dt_op_call *c) {
  if (tls_no_grad || ops_defs[c->op].grad == ops_grad_none || !any_requires_grad(c))
    return dispatch_next(c);
  dt_status st = dispatch_next(c);
  if (st != DT_OK) return st;
  ag_node *n = node_make(c, c->op, count_inputs(c));
  bool ok = n && node_save_inputs(n);
  for (int i = 0; ok && i < c->nout; i++)
    if (!is_input(c, c->out[i])) ok = attach(c->out[i], n, i);
  node_release(n); /* the outputs hold it now */
  if (ok) return DT_OK;
  for (int i = 0; i < c->nout; i++) {
    core_tensor_release(c->out[i]);
    c->out[i] = NULL;
  }
  c->nout = 0;
  return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory for "
                        "the autograd graph", c->api);
}

bool dispatch_autograd_redistributed(dt_tensor *in, dt_tensor *out) {
  if (tls_no_grad || !in->requires_grad || !out || out == in) return true;
  ag_node *n = node_make(NULL, AG_REDISTRIBUTE, 1);
  if (!n) return false;
  n->nout = 1;
  n->ver[0] = core_tensor_version(in);
  n->in[0] = core_tensor_retain(in);
  bool ok = attach(out, n, 0);
  node_release(n);
  return ok;
}

bool dispatch_autograd_spmd_local(dt_tensor *in, dt_tensor *out, bool from_local) {
  if (tls_no_grad || !in->requires_grad || !out) return true;
  ag_node *n = node_make(NULL, from_local ? AG_FROM_LOCAL : AG_TO_LOCAL, 1);
  if (!n) return false;
  if (from_local) {
    int nd = out->spec->mesh->ndim;
    n->pl = malloc(sizeof *n->pl * (size_t)nd);
    if (!n->pl) {
      node_release(n);
      return false;
    }
    memcpy(n->pl, out->spec->placements, sizeof *n->pl * (size_t)nd);
  }
  n->nout = 1;
  n->ver[0] = core_tensor_version(in);
  n->in[0] = core_tensor_retain(in);
  bool ok = attach(out, n, 0);
  node_release(n);
  return ok;
}

dt_status dispatch_set_requires_grad(dt_tensor *t, bool on, const char *api) {
  if (node_of(t))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: only a leaf's "
                          "requires_grad can change; this tensor was made by "
                          "%s (detach it first)", api, dispatch_grad_fn_name(t));
  if (on && !core_dtype_is_float(t->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: only floating tensors can require "
                          "grad, got %s", api, core_dtype_name(t->dtype));
  t->requires_grad = on;
  if (on) t->keys |= CORE_KEYSET(CORE_KEY_AUTOGRAD);
  else t->keys &= ~CORE_KEYSET(CORE_KEY_AUTOGRAD);
  return DT_OK;
}

const char *dispatch_grad_fn_name(const dt_tensor *t) {
  ag_node *n = node_of(t);
  if (!n) return NULL;
  return node_name(n);
}

dt_tensor *dispatch_grad(const dt_tensor *t) {
  if (!t || !t->ag) return NULL;
  pthread_mutex_t *mu = stripe_of(t);
  pthread_mutex_lock(mu);
  dt_tensor *g = core_tensor_retain(meta_of(t)->grad);
  pthread_mutex_unlock(mu);
  return g;
}

dt_status dispatch_set_grad(dt_tensor *t, dt_tensor *g, const char *api) {
  pthread_mutex_t *mu = stripe_of(t);
  pthread_mutex_lock(mu);
  dt_status st = ensure_meta(t, api);
  dt_tensor *old = NULL;
  if (st == DT_OK) {
    old = meta_of(t)->grad;
    meta_of(t)->grad = core_tensor_retain(g);
  }
  pthread_mutex_unlock(mu);
  core_tensor_release(old);
  return st;
}

void dispatch_clear_grad(dt_tensor *t) {
  if (!t || !t->ag) return;
  pthread_mutex_t *mu = stripe_of(t);
  pthread_mutex_lock(mu);
  dt_tensor *g = meta_of(t)->grad;
  meta_of(t)->grad = NULL;
  pthread_mutex_unlock(mu);
  core_tensor_release(g);
}

/* ---- running formulas */
typedef struct arena {
  dt_tensor **v;
  int n, cap;
} arena;

/* keeps t (a new reference, or NULL after an error) in the arena; returns
 * it borrowed, or NULL */
static dt_tensor *arena_keep(arena *a, dt_tensor *t) {
  if (!t) return NULL;
  if (a->n == a->cap) {
    int cap = a->cap ? 2 * a->cap : 16;
    dt_tensor **v = realloc(a->v, sizeof *v * (size_t)cap);
    if (!v) {
      core_tensor_release(t);
      core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_backward: out of host memory "
                     "in a backward formula");
      return NULL;
    }
    a->v = v;
    a->cap = cap;
  }
  return a->v[a->n++] = t;
}

static dt_tensor *env_run(ops_grad_env *e, dt_op_call *c) {
  return arena_keep(e->ctx, dispatch_run1(c));
}

/* `shape` filled with v, of like's dtype, on like's device or mesh (a
 * Partial of like's made Replicate) */
static dt_tensor *full_like(const dt_tensor *like, dt_shape shape, double v) {
  if (like->spec) {
    dt_placement pl[DT_MAX_DIMS];
    for (int d = 0; d < like->spec->mesh->ndim; d++) {
      pl[d] = like->spec->placements[d];
      if (pl[d].kind == DT_PLACEMENT_PARTIAL || shape.ndim == 0) pl[d] = DT_REPLICATE;
    }
    return mesh_dtensor_factory(CORE_OP_FULL, shape, like->dtype, like->spec->mesh,
                                pl, v, NULL, "dt_backward");
  }
  dt_op_call c;
  core_call_init(&c, CORE_OP_FULL, "dt_backward");
  core_call_ints(&c, shape);
  core_call_dtype(&c, like->dtype);
  core_call_double(&c, v);
  c.rt = like->local.storage->rt;
  c.rank = like->local.storage->rank;
  return dispatch_run1(&c);
}

static dt_tensor *env_constant(ops_grad_env *e, const dt_tensor *like, double v) {
  return arena_keep(e->ctx, full_like(like, (dt_shape){0}, v));
}

static void arena_free(arena *a) {
  for (int i = 0; i < a->n; i++) core_tensor_release(a->v[i]);
  free(a->v);
}

static dt_tensor *run2(core_op_id op, const char *api, dt_tensor *a, dt_tensor *b) {
  dt_op_call c;
  core_call_init(&c, op, api);
  core_call_tensor(&c, a);
  core_call_tensor(&c, b);
  return dispatch_run1(&c);
}

/* the backward of a redistribute: the gradient back to the input's
 * placements, a Partial made Replicate (the gradient of a sum is the
 * same on every member) */
static dt_status redistribute_back(ag_node *n, ops_grad_env *e, dt_tensor *const *gout,
                                   dt_tensor **gin) {
  const dt_tensor *in = n->in[0];
  if (!gout[0] || !e->needs[0]) return DT_OK;
  if (!in->spec || !gout[0]->spec) {
    gin[0] = gout[0];
    return DT_OK;
  }
  dt_placement pl[DT_MAX_DIMS];
  int nd = in->spec->mesh->ndim;
  for (int d = 0; d < nd; d++) {
    pl[d] = in->spec->placements[d];
    if (pl[d].kind == DT_PLACEMENT_PARTIAL) pl[d] = DT_REPLICATE;
  }
  gin[0] = arena_keep(e->ctx, mesh_redistribute(gout[0], in->spec->mesh, pl));
  return gin[0] ? DT_OK : core_last_status();
}

/* the backward of dt_dtensor_from_local (PyTorch's): the DTensor
 * gradient back to the made DTensor's placements (Partial made
 * Replicate), then this rank's shard */
static dt_status from_local_back(ag_node *n, ops_grad_env *e, dt_tensor *const *gout,
                                 dt_tensor **gin) {
  if (!gout[0] || !e->needs[0]) return DT_OK;
  dt_tensor *g = gout[0];
  if (!g->spec) return core_error_set(DT_ERR_INTERNAL, "from_local: the "
                                      "gradient is no DTensor");
  dt_placement pl[DT_MAX_DIMS];
  int nd = g->spec->mesh->ndim;
  for (int d = 0; d < nd; d++)
    pl[d] = n->pl[d].kind == DT_PLACEMENT_PARTIAL ? DT_REPLICATE : n->pl[d];
  dt_tensor *r = arena_keep(e->ctx, mesh_redistribute(g, g->spec->mesh, pl));
  if (!r) return core_last_status();
  gin[0] = arena_keep(e->ctx, mesh_spmd_to_local(r));
  return gin[0] ? DT_OK : core_last_status();
}

/* the backward of dt_dtensor_to_local (PyTorch's): this rank's gradient
 * as its shard of a DTensor laid out as the input was */
static dt_status to_local_back(ag_node *n, ops_grad_env *e, dt_tensor *const *gout,
                               dt_tensor **gin) {
  const dt_tensor *in = n->in[0];
  if (!gout[0] || !e->needs[0]) return DT_OK;
  const core_spec *sp = in->spec;
  gin[0] = arena_keep(e->ctx, mesh_spmd_from_local(gout[0], sp->mesh,
                                                   sp->placements, &sp->shape));
  return gin[0] ? DT_OK : core_last_status();
}

static bool same_shape(const dt_tensor *a, const dt_tensor *b) {
  if (a->local.ndim != b->local.ndim) return false;
  for (int d = 0; d < a->local.ndim; d++)
    if (a->local.sizes[d] != b->local.sizes[d]) return false;
  return true;
}

static const char *node_name(const ag_node *n) {
  switch (n->op) {
  case AG_REDISTRIBUTE: return "redistribute";
  case AG_FROM_LOCAL: return "from_local";
  case AG_TO_LOCAL: return "to_local";
  default: return core_op_name((core_op_id)n->op);
  }
}

/* g (a new reference, consumed) into `into` (*into may be NULL) */
static dt_status accumulate(dt_tensor **into, dt_tensor *g, const char *api) {
  if (!*into) {
    *into = g;
    return DT_OK;
  }
  dt_tensor *s = run2(CORE_OP_ADD, api, *into, g);
  core_tensor_release(g);
  if (!s) return core_last_status();
  core_tensor_release(*into);
  *into = s;
  return DT_OK;
}

/* input t of a node receives gradient g (a new reference, consumed) */
static dt_status feed(dt_tensor *t, dt_tensor *g, const char *api) {
  if (g->dtype != t->dtype) { /* a formula that promoted: back to t's dtype */
    dt_op_call c;
    core_call_init(&c, CORE_OP_CAST, api);
    core_call_tensor(&c, g);
    core_call_dtype(&c, t->dtype);
    dt_tensor *cg = dispatch_run1(&c);
    core_tensor_release(g);
    if (!cg) return core_last_status();
    g = cg;
  }
  ag_node *n = node_of(t);
  if (n) return accumulate(&n->gbuf[meta_of(t)->out], g, api);
  pthread_mutex_t *mu = stripe_of(t);
  pthread_mutex_lock(mu);
  dt_status st = ensure_meta(t, api);
  if (st == DT_OK) st = accumulate(&meta_of(t)->grad, g, api);
  else core_tensor_release(g);
  pthread_mutex_unlock(mu);
  return st;
}

static dt_status formula_failed(const ag_node *n, const char *api) {
  dt_status st = core_last_status();
  char msg[512];
  snprintf(msg, sizeof msg, "%s", core_last_error());
  return core_error_set(st == DT_OK ? DT_ERR_INTERNAL : st,
                        "%s: the backward of %s failed: %s", api, node_name(n), msg);
}

/* Ops whose backward formulas read only their inputs' metadata (shapes,
 * dtypes, placements), never their values: an in-place write into such
 * an input after the forward leaves the gradient right, as PyTorch's
 * formulas for these ops save no tensor. */
static bool reads_metadata_only(int op) {
  switch (op) {
  case AG_REDISTRIBUTE: case AG_FROM_LOCAL: case AG_TO_LOCAL:
  case CORE_OP_ADD: case CORE_OP_SUB: case CORE_OP_NEG:
  case CORE_OP_ADD_SCALAR: case CORE_OP_SUB_SCALAR:
  case CORE_OP_MUL_SCALAR: case CORE_OP_DIV_SCALAR:
  case CORE_OP_VIEW: case CORE_OP_RESHAPE: case CORE_OP_TRANSPOSE:
  case CORE_OP_PERMUTE: case CORE_OP_SLICE: case CORE_OP_NARROW:
  case CORE_OP_SELECT: case CORE_OP_EXPAND: case CORE_OP_SQUEEZE:
  case CORE_OP_SQUEEZE_ALL: case CORE_OP_UNSQUEEZE: case CORE_OP_FLATTEN:
  case CORE_OP_CONTIGUOUS: case CORE_OP_CLONE: case CORE_OP_CAST:
  case CORE_OP_SUM: case CORE_OP_MEAN: case CORE_OP_CAT: case CORE_OP_STACK:
    return true;
  default:
    return false;
  }
}

/* PyTorch's check of saved tensors: a value the formula reads was
 * overwritten in place (dt_copy_) after the node saved it */
static dt_status check_versions(const ag_node *n, const char *api) {
  if (reads_metadata_only(n->op)) return DT_OK;
  for (int k = 0; k < n->nin; k++) {
    const dt_tensor *t = n->in[k];
    int64_t now = t ? core_tensor_version(t) : 0;
    if (!t || now == n->ver[k]) continue;
    char b[CORE_SHAPE_STR_LEN];
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                          "%s: one of the variables needed for gradient "
                          "computation has been modified by an inplace "
                          "operation: input %d of %s (%s %s) is at version "
                          "%lld; expected version %lld instead",
                          api, k, node_name(n), core_dtype_name(t->dtype),
                          core_shape_str(t->local.sizes, t->local.ndim, b,
                                         sizeof b),
                          (long long)now, (long long)n->ver[k]);
  }
  return DT_OK;
}

static dt_status run_node(ag_node *n, const char *api) {
  bool any = false;
  for (int i = 0; i < n->nout; i++) any |= n->gbuf[i] != NULL;
  if (!any) return DT_OK;
  dt_status vst = check_versions(n, api);
  if (vst != DT_OK) return vst;
  bool *needs = calloc((size_t)n->nin + 1, sizeof *needs);
  dt_tensor **gin = calloc((size_t)n->nin + 1, sizeof *gin);
  if (!needs || !gin) {
    free(needs);
    free(gin);
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", api);
  }
  for (int k = 0; k < n->nin; k++) needs[k] = n->in[k] && n->in[k]->requires_grad;
  arena a = {0};
  ops_grad_env e = {.run = env_run, .constant = env_constant, .needs = needs, .ctx = &a};
  dt_status st = n->op == AG_REDISTRIBUTE ? redistribute_back(n, &e, n->gbuf, gin)
                 : n->op == AG_FROM_LOCAL ? from_local_back(n, &e, n->gbuf, gin)
                 : n->op == AG_TO_LOCAL   ? to_local_back(n, &e, n->gbuf, gin)
                 : ops_defs[n->op].grad(&e, &n->call, n->gbuf, gin);
  if (st != DT_OK) st = formula_failed(n, api);
  for (int k = 0; st == DT_OK && k < n->nin; k++)
    if (gin[k] && needs[k] && !same_shape(gin[k], n->in[k]))
      st = core_error_set(DT_ERR_INTERNAL, "%s: the backward of %s made a "
                          "gradient of the wrong shape for input %d", api,
                          node_name(n), k);
  for (int k = 0; st == DT_OK && k < n->nin; k++)
    if (gin[k] && needs[k]) st = feed(n->in[k], core_tensor_retain(gin[k]), api);
  arena_free(&a);
  free(needs);
  free(gin);
  return st;
}

/* ---- backward */
typedef struct nodes {
  ag_node **v;
  int n, cap;
} nodes;

static bool nodes_push(nodes *s, ag_node *n) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    ag_node **v = realloc(s->v, sizeof *v * (size_t)cap);
    if (!v) return false;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = n;
  return true;
}

static int by_seq_desc(const void *a, const void *b) {
  uint64_t x = (*(ag_node *const *)a)->seq, y = (*(ag_node *const *)b)->seq;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* every node reachable from root's, into out (reverse creation order) */
static dt_status collect(ag_node *root, nodes *out, const char *api) {
  uint64_t pass = atomic_fetch_add_explicit(&pass_seq, 1, memory_order_relaxed) + 1;
  nodes stack = {0};
  root->pass = pass;
  dt_status st = nodes_push(&stack, root) ? DT_OK : DT_ERR_OUT_OF_MEMORY;
  while (st == DT_OK && stack.n) {
    ag_node *n = stack.v[--stack.n];
    if (n->freed) {
      st = core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: the graph through %s "
                          "was freed by an earlier backward; pass "
                          "retain_graph to the first one to go through it "
                          "twice", api, node_name(n));
      break;
    }
    /* held until the backward ends: freeing one node's saved tensors can
     * drop the last reference to another collected node */
    if (nodes_push(out, n)) atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
    else st = DT_ERR_OUT_OF_MEMORY;
    for (int k = 0; st == DT_OK && k < n->nin; k++) {
      ag_node *m = n->in[k] && n->in[k]->requires_grad ? node_of(n->in[k]) : NULL;
      if (m && m->pass != pass) {
        m->pass = pass;
        if (!nodes_push(&stack, m)) st = DT_ERR_OUT_OF_MEMORY;
      }
    }
  }
  free(stack.v);
  if (st == DT_ERR_OUT_OF_MEMORY)
    return core_error_set(st, "%s: out of host memory walking the graph", api);
  if (out->n > 1) qsort(out->v, (size_t)out->n, sizeof *out->v, by_seq_desc);
  return st;
}

dt_tensor *dispatch_ones_like_grad(const dt_tensor *t) {
  dt_shape s = {.ndim = t->local.ndim};
  for (int d = 0; d < s.ndim; d++) s.dims[d] = t->local.sizes[d];
  return full_like(t, s, 1.0);
}

dt_status dispatch_backward(dt_tensor *root, dt_tensor *seed, bool retain_graph,
                            const char *api) {
  if (!root->requires_grad)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: the tensor does not "
                          "require grad (no input of the ops that made it "
                          "requires grad, or grad mode was off)", api);
  bool was_grad = dispatch_set_grad_enabled(false);
  bool was_auto = dispatch_dtensor_force_auto(true);
  dt_status st;
  ag_node *rn = node_of(root);
  if (!rn) { /* a leaf: its own gradient */
    st = feed(root, core_tensor_retain(seed), api);
  } else {
    nodes order = {0};
    st = collect(rn, &order, api);
    if (st == DT_OK) st = accumulate(&rn->gbuf[meta_of(root)->out],
                                     core_tensor_retain(seed), api);
    for (int i = 0; st == DT_OK && i < order.n; i++) {
      ag_node *n = order.v[i];
      st = run_node(n, api);
      for (int o = 0; o < CORE_CALL_MAX_OUTS; o++) {
        core_tensor_release(n->gbuf[o]);
        n->gbuf[o] = NULL;
      }
    }
    for (int i = 0; i < order.n; i++) {
      for (int o = 0; o < CORE_CALL_MAX_OUTS; o++) {
        core_tensor_release(order.v[i]->gbuf[o]);
        order.v[i]->gbuf[o] = NULL;
      }
      if (st == DT_OK && !retain_graph) node_free_saved(order.v[i]);
    }
    for (int i = 0; i < order.n; i++) node_release(order.v[i]);
    free(order.v);
  }
  dispatch_dtensor_force_auto(was_auto);
  dispatch_set_grad_enabled(was_grad);
  if (st == DT_OK) core_error_succeeded();
  return st;
}
