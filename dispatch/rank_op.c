/* The ranks' side of a DTensor op (propagate.h): every mesh rank builds its
 * local call — each tensor argument becomes the rank's shard (its
 * storage, the box of its placements), narrowed to the box the strategy
 * asks for (a Replicate input read as a Shard), or zeros where a
 * Replicate input counts as a Partial(sum) term off coordinate 0 — makes
 * its outputs' shards and runs the op's CPU kernel on them. View ops run
 * on the local shard and are made contiguous (a DTensor's shards are
 * boxes). A failed input or allocation poisons the rank's outputs with
 * the first error. Ranks outside the mesh return at once. */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host_alloc.h"
#include "core/tensor.h"
#include "dispatch/propagate.h"
#include "mesh/handle.h"
#include "mesh/shard.h"
#include "ops/ops.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"
#include "sched/trace_recorder.h"

/* a stack handle over storage s (no refcount traffic: the record holds
 * the real handles) */
static void local_init(dt_tensor *l, dt_dtype dtype, core_storage *s, int n,
                       const int64_t *sizes, const int64_t *strides,
                       int64_t offset) {
  memset(l, 0, sizeof *l);
  atomic_init(&l->refcount, 1);
  l->keys = CORE_KEYSET(s ? (core_key)s->key : CORE_KEY_CPU);
  l->dtype = dtype;
  l->local.storage = s;
  l->local.ndim = n;
  l->local.offset = offset;
  for (int i = 0; i < n; i++) {
    l->local.sizes[i] = sizes[i];
    l->local.strides[i] = strides[i];
  }
}

typedef struct rank_call {
  dt_op_call c;
  core_shard_ctx ctx;
  dt_tensor in[CORE_CALL_MAX_ARGS], whole[CORE_CALL_MAX_ARGS];
  dt_tensor *list_locals;          /* the list argument's handles */
  dt_tensor **list_ptrs;
  core_storage *list_zero_st;      /* per list element, as zero_st */
  mesh_buf *list_zero_buf;
  int list_n;
  dt_tensor out[CORE_CALL_MAX_OUTS];
  core_storage zero_st[CORE_CALL_MAX_ARGS];  /* zeros standing in for inputs */
  mesh_buf zero_buf[CORE_CALL_MAX_ARGS];
  bool empty_input;
} rank_call;

/* Off coordinate 0 of a mesh dim where t is Replicate but read as
 * Partial(sum|prod), the rank's term is the identity, not t. */
static bool identity_term(const dt_tensor *t, const dt_placement *to,
                          const dt_mesh *m, int idx, double *value) {
  int64_t coords[DT_MAX_DIMS];
  mesh_index_coords(m, idx, coords);
  for (int md = 0; md < m->ndim; md++) {
    const dt_placement p = to[md];
    if (t->spec->placements[md].kind != DT_PLACEMENT_REPLICATE ||
        p.kind != DT_PLACEMENT_PARTIAL || coords[md] == 0)
      continue;
    if (p.reduce == DT_REDUCE_SUM) { *value = 0; return true; }
    if (p.reduce == DT_REDUCE_PROD) { *value = 1; return true; }
  }
  return false;
}

/* the rank's view of argument t at position pos (a list element: not in
 * the shard context); zst/zbuf: where its identity stand-in lives */
static void make_input(rank_call *r, mesh_rank_mem *rm, int pos, bool ctx,
                       const dt_tensor *t, const dt_placement *to,
                       const dt_mesh *m, int idx, dt_tensor *in,
                       dt_tensor *whole, core_storage *zst, mesh_buf *zbuf) {
  const core_spec *s = t->spec;
  mesh_box have = mesh_box_of(m, s->placements, &s->shape, idx);
  /* read as placed (most arguments): the same box */
  bool as_placed = !memcmp(to, s->placements, sizeof *to * (size_t)m->ndim);
  mesh_box want = as_placed ? have : mesh_box_of(m, to, &s->shape, idx);
  int64_t strides[DT_MAX_DIMS], offset = 0;
  core_contiguous_strides(have.len, have.n, strides);
  core_storage *st = s->storages[idx];
  const core_poison *p = core_storage_poison(st);
  if (p) mesh_rank_note(rm, p->status, p->message);
  local_init(whole, t->dtype, st, have.n, have.len, strides, 0);
  for (int d = 0; d < have.n; d++) offset += (want.off[d] - have.off[d]) * strides[d];
  local_init(in, t->dtype, st, want.n, want.len, strides, offset);
  if (ctx) {
    r->ctx.global[pos] = s->shape;
    memcpy(r->ctx.off[pos], want.off, sizeof want.off);
    r->ctx.whole[pos] = whole;
  }
  if (!mesh_box_numel(&want)) r->empty_input = true;
  double v;
  if (!as_placed && identity_term(t, to, m, idx, &v)) {
    size_t bytes = (size_t)mesh_box_numel(&want) * core_dtype_size(t->dtype);
    *zbuf = mesh_rank_alloc(rm, bytes);
    if (!zbuf->p ||
        mesh_fill(rm, zbuf->p, t->dtype, mesh_box_numel(&want), v) != DT_OK)
      return;
    memset(zst, 0, sizeof *zst);
    /* the rank's device, as the shard it stands for (no reference on rt:
     * the stand-in is never released) */
    zst->key = st->key;
    zst->rt = st->rt;
    zst->rank = st->rank;
    zst->data = zbuf->p;
    zst->nbytes = bytes;
    core_contiguous_strides(want.len, want.n, strides);
    local_init(in, t->dtype, zst, want.n, want.len, strides, 0);
  }
}

/* the rank's locals of a list argument of n (> 0) tensors */
static bool alloc_list(rank_call *r, mesh_rank_mem *rm, int n) {
  r->list_locals = core_host_malloc(sizeof(dt_tensor) * 2 * (size_t)n);
  r->list_ptrs = core_host_malloc(sizeof(dt_tensor *) * (size_t)n);
  r->list_zero_st = core_host_malloc(sizeof(core_storage) * (size_t)n);
  r->list_zero_buf = core_host_calloc((size_t)n, sizeof(mesh_buf));
  if (r->list_locals && r->list_ptrs && r->list_zero_st && r->list_zero_buf)
    return true;
  mesh_rank_note(rm, DT_ERR_OUT_OF_MEMORY, "out of host memory for a "
                 "tensor list");
  return false;
}

static bool make_inputs(rank_call *r, mesh_rank_mem *rm,
                        const dispatch_dtensor_job *j, int idx) {
  for (core_arg_it it = core_args(j->op, j->args); core_arg_next(&it);) {
    int i = it.pos, e = it.elem;
    const dt_placement *want = dispatch_job_in(j, i);
    if (e < 0) {
      if (!it.t) continue; /* an absent optional */
      make_input(r, rm, i, true, it.t, want, j->mesh, idx, &r->in[i],
                 &r->whole[i], &r->zero_st[i], &r->zero_buf[i]);
      r->c.args[i].t = &r->in[i];
      continue;
    }
    /* a list element; the list's locals are made at its first (an empty
     * list yields none and needs none: its kernel reads no element) */
    int n = j->args[i].list.n;
    if (e == 0) {
      if (!alloc_list(r, rm, n)) return false;
      r->c.args[i].list.v = r->list_ptrs;
    }
    make_input(r, rm, i, false, it.t, want, j->mesh, idx, &r->list_locals[e],
               &r->list_locals[n + e], &r->list_zero_st[e],
               &r->list_zero_buf[e]);
    r->list_n = e + 1;
    r->list_ptrs[e] = &r->list_locals[e];
  }
  return rm->st == DT_OK;
}

/* the outputs' shards: allocated now (or poisoned with the first error) */
static void make_outputs(rank_call *r, mesh_rank_mem *rm,
                         const dispatch_dtensor_job *j, int idx) {
  for (int o = 0; o < j->nout; o++) {
    mesh_box box;
    core_storage *st = mesh_rank_storage_box(rm, j->out[o], idx, &box);
    mesh_buf b = mesh_rank_alloc(rm, st->nbytes);
    mesh_rank_finish(rm, st, b);
    int64_t strides[DT_MAX_DIMS];
    core_contiguous_strides(box.len, box.n, strides);
    local_init(&r->out[o], j->out[o]->dtype, st, box.n, box.len, strides, 0);
    r->c.out[o] = &r->out[o];
    core_meta *m = &r->c.meta[o];
    m->dtype = j->out[o]->dtype;
    m->ndim = box.n;
    memcpy(m->sizes, box.len, sizeof box.len);
    m->alias = -1;
    m->offset = 0;
  }
}

/* the identity of a Partial kind in dtype d (a rank with no elements to
 * reduce holds it) */
static double partial_identity(dt_reduce_op op, dt_dtype d) {
  double lo = -INFINITY, hi = INFINITY;
  if (d == DT_BOOL) { lo = 0; hi = 1; }
  else if (!core_dtype_is_float(d)) ops_int_range(d, &lo, &hi);
  switch (op) {
  case DT_REDUCE_MAX: return lo;
  case DT_REDUCE_MIN: return hi;
  case DT_REDUCE_PROD: return 1;
  default: return 0;
  }
}

/* the reductions are the ops with the reduction rule: a column of the op
 * list, not a range of its order */
static bool is_reduction(core_op_id op) {
  return ops_defs[op].rule == ops_reduce_rule;
}

/* a view op on the rank: the view of the local shard, copied into the
 * contiguous output shard */
static dt_status run_view(rank_call *r, mesh_rank_mem *rm) {
  dt_op_call *c = &r->c;
  dt_tensor *out = c->out[0];
  if (c->op == CORE_OP_VIEW || c->op == CORE_OP_RESHAPE || c->op == CORE_OP_EXPAND) {
    c->args[1].ints.ndim = out->local.ndim; /* the local shape */
    memcpy(c->args[1].ints.dims, out->local.sizes, sizeof(int64_t) * (size_t)out->local.ndim);
  }
  if (c->op == CORE_OP_VIEW) c->op = CORE_OP_RESHAPE; /* a narrowed shard may not be viewable */
  c->nmeta = 1;
  c->meta[0].alias = -1;
  c->meta[0].offset = 0;
  dt_status st = ops_defs[c->op].infer(c);
  if (st != DT_OK) return st;
  c->meta[0].dtype = out->dtype; /* infer overwrote the local out meta */
  if (c->meta[0].alias < 0) { /* a copy: the backend's kernel for the op */
    const runtime_backend *be = rm->rt->backend;
    core_kernel_fn k = be->kernels ? be->kernels[c->op] : NULL;
    return k && k != ops_alias_cpu ? k(c) : ops_copy_cpu(c);
  }
  const dt_tensor *a = c->args[c->meta[0].alias].t;
  cpu_view src = {.data = a->local.storage->data
                              ? (char *)a->local.storage->data +
                                    c->meta[0].offset * (int64_t)core_dtype_size(a->dtype)
                              : NULL,
                  .dtype = a->dtype, .ndim = c->meta[0].ndim};
  memcpy(src.sizes, c->meta[0].sizes, sizeof src.sizes);
  memcpy(src.strides, c->meta[0].strides, sizeof src.strides);
  cpu_view dst = ops_view_of(out);
  return mesh_copy_view(rm, &dst, &src);
}

static dt_status run_kernel(rank_call *r, const dispatch_dtensor_job *j,
                            mesh_rank_mem *rm) {
  dt_op_call *c = &r->c;
  const dt_placement *out = dispatch_job_out(j, 0);
  if (r->empty_input && is_reduction(c->op)) { /* nothing to reduce here */
    for (int md = 0; md < j->nd; md++)
      if (out[md].kind == DT_PLACEMENT_PARTIAL) {
        dt_tensor *o = c->out[0];
        /* a mean over no element at all is NaN on every rank (their
         * Partial terms then reduce to NaN, as one device gives) */
        double v = ops_reduce_mean_of_nothing(c)
                       ? NAN : partial_identity(out[md].reduce, o->dtype);
        return mesh_fill(rm, core_tensor_data(o), o->dtype, core_numel(o), v);
      }
  }
  core_kernel_fn k = ops_defs[c->op].cpu;
  if (k == ops_alias_cpu || k == ops_copy_cpu) return run_view(r, rm);
  /* the kernel of the ranks' backend, looked up when the op was issued
   * (which refused an op without one) */
  return j->kernel(c);
}

/* the timeline's args of this rank's slice: placements of the first
 * tensor input and the output, the output's local shape */
static void trace_args(const rank_call *r, const dispatch_dtensor_job *j) {
  char in[48] = "-", out[48], shape[48];
  const char *s = core_op_schema(j->op);
  for (int i = 0; s[i]; i++)
    if (s[i] == 'T') {
      mesh_placements_str(dispatch_job_in(j, i), j->nd, in, sizeof in);
      break;
    }
  mesh_placements_str(dispatch_job_out(j, 0), j->nd, out, sizeof out);
  const dt_tensor *o = r->c.out[0];
  int n = snprintf(shape, sizeof shape, "[");
  for (int d = 0; d < o->local.ndim && n < (int)sizeof shape; d++)
    n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%lld", d ? ", " : "",
                  (long long)o->local.sizes[d]);
  if (n < (int)sizeof shape) snprintf(shape + n, sizeof shape - (size_t)n, "]");
  sched_trace_record_args("\"api\":\"%s\",\"in0\":\"%s\",\"out\":\"%s\","
                          "\"local_shape\":\"%s\"", j->api, in, out, shape);
}

/* One rank_call per rank thread, reused record after record (a call is
 * several KiB: a malloc and free of it per record was a tenth of a small
 * op's cost on 8 ranks); a nested exec on the same thread (a rank that
 * helps another inside a record) finds the slot taken and allocates. The
 * key's destructor frees it when the thread exits. */
static _Thread_local rank_call *tls_call;
static pthread_key_t call_key;
static pthread_once_t call_once = PTHREAD_ONCE_INIT;
static void make_call_key(void) { pthread_key_create(&call_key, free); }

static rank_call *call_take(void) {
  rank_call *r = tls_call;
  if (r) {
    tls_call = NULL;
    return r;
  }
  return core_host_malloc(sizeof *r);
}

static void call_give(rank_call *r) {
  if (tls_call) {
    free(r);
    return;
  }
  pthread_once(&call_once, make_call_key);
  if (pthread_getspecific(call_key) != r && pthread_setspecific(call_key, r) != 0) {
    free(r);
    return;
  }
  tls_call = r;
}

void dispatch_dtensor_exec(void *arg, dt_runtime *rt, int rank) {
  const dispatch_dtensor_job *j = arg;
  const dt_mesh *m = j->mesh;
  int idx = rank < m->rt_ranks ? m->pos[rank] : -1;
  if (idx < 0) return;
  rank_call *r = call_take();
  mesh_rank_mem rm;
  mesh_rank_mem_init(&rm, rt, rank, j->api);
  if (!r) {
    mesh_rank_note(&rm, DT_ERR_OUT_OF_MEMORY, "out of host memory for a "
                   "rank's call");
    for (int o = 0; o < j->nout; o++)
      mesh_rank_finish(&rm, mesh_rank_storage(&rm, j->out[o], idx), (mesh_buf){NULL});
    return;
  }
  memset(r, 0, offsetof(rank_call, in));
  core_call_init(&r->c, j->op, j->api);
  r->c.nargs = j->nargs;
  memcpy(r->c.args, j->args, sizeof(core_value) * (size_t)j->nargs);
  r->c.nout = j->nout;
  r->c.nmeta = j->nout;
  r->c.shard = &r->ctx;
  r->list_locals = NULL;
  r->list_ptrs = NULL;
  r->list_zero_st = NULL;
  r->list_zero_buf = NULL;
  r->list_n = 0;
  r->empty_input = false;
  for (int i = 0; i < CORE_CALL_MAX_ARGS; i++) r->zero_buf[i].p = NULL;
  bool ok = make_inputs(r, &rm, j, idx);
  make_outputs(r, &rm, j, idx);
  if (sched_trace_in_record() && j->nout > 0) trace_args(r, j);
  if (ok && rm.st == DT_OK) {
    dt_status st = run_kernel(r, j, &rm);
    if (st != DT_OK)
      for (int o = 0; o < j->nout; o++)
        core_storage_set_poison(j->out[o]->spec->storages[idx], st,
                                core_last_error());
  }
  for (int i = 0; i < CORE_CALL_MAX_ARGS; i++) mesh_rank_free(&rm, r->zero_buf[i]);
  for (int e = 0; e < r->list_n; e++) mesh_rank_free(&rm, r->list_zero_buf[e]);
  free(r->list_zero_st);
  free(r->list_zero_buf);
  free(r->list_locals);
  free(r->list_ptrs);
  call_give(r);
}

void dispatch_dtensor_done(void *arg) {
  dispatch_dtensor_job *j = arg;
  /* the T / t arguments; the list's elements are j->list's */
  for (core_arg_it it = core_args(j->op, j->args); core_arg_next(&it);)
    if (it.elem < 0) core_tensor_release(it.t);
  for (int e = 0; j->list && e < j->args[j->list_arg].list.n; e++)
    core_tensor_release(j->list[e]);
  for (int o = 0; o < j->nout; o++) core_tensor_release(j->out[o]);
  free(j->list);
  mesh_release(j->mesh);
  free(j);
}
