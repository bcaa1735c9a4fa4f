/* The host fallback of device backends (runtime/backend.h, host_fallback;
 * docs/cuda.md): an op whose device kernel is missing runs its CPU kernel
 * on host copies of its tensors. Each distinct storage the call touches
 * (tensor arguments, list elements, a DTensor rank's whole shards, the
 * outputs) is copied to host memory in the rank's stream order; the rank
 * waits for those copies, runs the CPU kernel on handles that point at
 * the copies (same sizes, strides and offsets), copies the outputs back
 * and waits again before freeing the host copies. The results are the
 * CPU backend's, bit for bit; the cost is two waits of the rank for its
 * stream and the bytes of every storage touched (a view's whole storage).
 * Off unless the runtime was made with DTORCH_CUDA_FALLBACK=1, as
 * PyTorch's PYTORCH_ENABLE_MPS_FALLBACK: a silent slow path would hide
 * where the time goes; the first fallback of each op says so on stderr. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host_alloc.h"
#include "core/tensor.h"
#include "ops/ops.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"

#define MAX_LIST 64
#define MAX_STAGED (2 * CORE_CALL_MAX_ARGS + MAX_LIST + CORE_CALL_MAX_OUTS)

typedef struct staged {
  const core_storage *dev; /* the device storage */
  core_storage host;       /* its host copy (data malloc'd) */
  bool out;                /* an output: copied back */
} staged;

typedef struct fallback {
  dt_runtime *rt;
  int rank;
  const runtime_backend *be;
  staged s[MAX_STAGED];
  int n;
  dt_tensor handles[MAX_STAGED];
  int nhandles;
  dt_status st;
} fallback;

static dt_status fail(fallback *f, dt_status st, const char *api,
                      const char *what) {
  if (f->st == DT_OK)
    f->st = st == DT_ERR_OUT_OF_MEMORY
                ? core_error_set(st, "%s: host fallback: out of host memory "
                                 "for %s", api, what)
                : st;
  return f->st;
}

/* the host copy of storage d (made once per storage) */
static core_storage *stage(fallback *f, const core_storage *d, bool out,
                           const char *api) {
  for (int i = 0; i < f->n; i++)
    if (f->s[i].dev == d) {
      f->s[i].out |= out;
      return &f->s[i].host;
    }
  CORE_ASSERT(f->n < MAX_STAGED); /* one per handle at most */
  staged *s = &f->s[f->n++];
  memset(s, 0, sizeof *s);
  s->dev = d;
  s->out = out;
  s->host.refcount = 1;
  s->host.nbytes = d->nbytes;
  s->host.rank = d->rank;
  s->host.key = CORE_KEY_CPU;
  s->host.data = d->nbytes ? core_host_malloc(d->nbytes) : NULL;
  if (d->nbytes && !s->host.data) {
    fail(f, DT_ERR_OUT_OF_MEMORY, api, "a tensor's copy");
    return NULL;
  }
  if (!out && d->nbytes && d->data &&
      f->be->copy(f->rt, f->rank, s->host.data, d->data, d->nbytes,
                  RUNTIME_COPY_D2H) != DT_OK) {
    fail(f, core_last_status(), api, "");
    return NULL;
  }
  return &s->host;
}

/* a handle like t over its storage's host copy (NULL stays NULL) */
static const dt_tensor *shadow(fallback *f, const dt_tensor *t, bool out,
                               const char *api) {
  if (!t || f->st != DT_OK) return t;
  dt_tensor *h = &f->handles[f->nhandles++];
  /* field by field, only what never changes once the op was issued: t's
   * refcount, keys and autograd node are the issuing thread's to change
   * (autograd attaches after the publish) and no kernel reads them */
  memset(h, 0, sizeof *h);
  atomic_init(&h->refcount, 1);
  h->keys = CORE_KEYSET(CORE_KEY_CPU);
  h->dtype = t->dtype;
  h->local = t->local;
  h->spec = t->spec;
  if (t->local.storage) h->local.storage = stage(f, t->local.storage, out, api);
  return h;
}

static void unstage(fallback *f) {
  for (int i = 0; i < f->n; i++) free(f->s[i].host.data);
}

/* copies the outputs back and waits (the host copies are then free) */
static dt_status copy_back(fallback *f, const char *api) {
  for (int i = 0; i < f->n && f->st == DT_OK; i++) {
    staged *s = &f->s[i];
    if (s->out && s->host.nbytes &&
        f->be->copy(f->rt, f->rank, (void *)s->dev->data, s->host.data,
                    s->host.nbytes, RUNTIME_COPY_H2D) != DT_OK)
      fail(f, core_last_status(), api, "");
  }
  dt_status st = f->be->stream_sync(f->rt, f->rank);
  return f->st != DT_OK ? f->st : st;
}

/* once per op and process: which ops run on the host, as PyTorch's MPS
 * fallback warns (DTORCH_CUDA_FALLBACK_QUIET=1 silences it) */
static _Atomic bool warned[CORE_OP_COUNT];

static void warn_once(const dt_op_call *c, const char *backend) {
  /* relaxed: a best-effort note, one exchange decides who prints */
  if (atomic_load_explicit(&warned[c->op], memory_order_relaxed) ||
      atomic_exchange_explicit(&warned[c->op], true, memory_order_relaxed))
    return;
  const char *q = getenv("DTORCH_CUDA_FALLBACK_QUIET");
  if (q && *q && strcmp(q, "0") != 0) return;
  fprintf(stderr, "dtorch: op %s has no %s kernel: it runs on the host "
          "(DTORCH_CUDA_FALLBACK=1; slow, bitwise the CPU's)\n",
          core_op_name(c->op), backend);
}

dt_status ops_host_fallback(dt_op_call *c) {
  const core_storage *os = c->out[0]->local.storage;
  fallback *f = core_host_malloc(sizeof *f);
  if (!f)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: host fallback: out of "
                          "host memory", c->api);
  f->rt = os->rt;
  f->rank = os->rank;
  f->be = f->rt->backend;
  if (f->be->kernels) warn_once(c, f->be->name); /* (emulation: all ops) */
  f->n = f->nhandles = 0;
  f->st = DT_OK;
  dt_op_call h = *c;
  core_shard_ctx ctx;
  const dt_tensor *list[MAX_LIST];
  int li = core_op_list_pos(c->op);
  if (li >= 0) {
    if (c->args[li].list.n > MAX_LIST) {
      free(f);
      return core_error_set(DT_ERR_UNSUPPORTED, "%s: host fallback: a list "
                            "of %d tensors (at most %d)", c->api,
                            c->args[li].list.n, MAX_LIST);
    }
    h.args[li].list.v = (dt_tensor *const *)list;
  }
  /* every tensor argument by its host copy (an absent optional: NULL) */
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);) {
    const dt_tensor *s = shadow(f, it.t, false, c->api);
    if (it.elem >= 0) list[it.elem] = s;
    else h.args[it.pos].t = (dt_tensor *)s;
  }
  if (c->shard) {
    ctx = *c->shard;
    for (int i = 0; i < CORE_CALL_MAX_ARGS; i++)
      ctx.whole[i] = shadow(f, ctx.whole[i], false, c->api);
    h.shard = &ctx;
  }
  for (int o = 0; o < c->nout; o++)
    h.out[o] = (dt_tensor *)shadow(f, c->out[o], true, c->api);
  /* the inputs' copies have landed */
  if (f->st == DT_OK && f->be->stream_sync(f->rt, f->rank) != DT_OK)
    fail(f, core_last_status(), c->api, "");
  dt_status st = f->st == DT_OK ? ops_defs[c->op].cpu(&h) : f->st;
  if (st == DT_OK) st = copy_back(f, c->api);
  unstage(f);
  free(f);
  return st;
}
