/* Records and their execution on the rank threads (see exec.h).
 *
 * A record is written in place in the pool's ring-parallel array by the
 * issuing thread and read by the rank(s) it is addressed to. It holds
 * references on every tensor it names (inputs and outputs), taken when it
 * is published and dropped by the rank after it ran, so storage a record
 * uses cannot die before the record runs. */
#include "runtime/backend.h"
#include "runtime/exec.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/host_alloc.h"
#include "core/tensor.h"
#include "kernels/cpu/cpu.h"
#include "sched/fault_table.h"
#include "sched/future.h"
#include "runtime/dry.h"
#include "runtime/spmd_run.h"
#include "sched/trace_recorder.h"
#include "sim/collectives.h"

/* A barrier of a device backend (CUDA): ranks arrive when their streams
 * are done, later than their threads pass the record, whose ring slot may
 * be reused by then; so the count lives here, freed by the last arrival. */
typedef struct device_barrier {
  _Atomic int pending;
  dt_future *future;
} device_barrier;

static void device_barrier_arrive(void *p) {
  device_barrier *b = p;
  /* acq_rel: every rank's stream work happens-before the completion */
  if (atomic_fetch_sub_explicit(&b->pending, 1, memory_order_acq_rel) != 1)
    return;
  sched_future_complete(b->future, DT_OK, NULL);
  sched_future_release(b->future);
  free(b);
}

typedef enum rec_kind { REC_OP, REC_FREE, REC_TO_HOST, REC_BARRIER,
                        REC_CALL } rec_kind;

typedef struct exec_record {
  rec_kind kind;
  _Atomic int pending;          /* REC_BARRIER: ranks still to run it */
  dt_future *future;            /* REC_TO_HOST, REC_BARRIER */
  dt_tensor **lists[CORE_CALL_MAX_ARGS]; /* REC_OP: copies of tensor lists */
  void *staging;                /* REC_OP from_host: copy of the host data */
  core_storage *storage;          /* REC_FREE */
  struct { dt_tensor *t; void *dst; size_t bytes; } host;
  struct { runtime_call_fn fn; runtime_done_fn done; void *arg;
           const char *name; sched_help_kind help; } call_fn; /* REC_CALL */
  struct device_barrier *dbar;  /* REC_BARRIER of a device backend */
  bool event;                   /* REC_BARRIER: dt_event_record's */
  uint64_t flow;                /* trace: first flow id, 0: none */
  bool flow_all;                /* trace: one id per rank (flow + rank) */
  dt_op_call call;              /* REC_OP */
} exec_record;

size_t runtime_exec_record_size(void) { return sizeof(exec_record); }

/* Binds the calling rank thread to the (i mod k)-th of the k CPUs its
 * affinity mask (inherited from the thread that made the runtime) allows;
 * nothing if that mask cannot be read. */
static void pin_to_cpu(int i) {
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  int k = CPU_COUNT(&allowed), want = i % (k > 0 ? k : 1);
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &allowed) || seen++ != want) continue;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    return;
  }
}

/* Names the rank's thread "dt-rank-<rank>" (what gdb, perf, top -H and
 * /proc/<pid>/task/<tid>/comm show), so a stack or profile says which rank
 * it is. (BLAS needs nothing here: the runtime set OpenBLAS to one thread
 * process-wide before starting the ranks.) Marks the thread for host
 * allocation fault injection (core/host_alloc.h). Brings up the rank's device
 * (runtime_backend.rank_init). */
void runtime_exec_rank_init(void *ctx, int rank) {
  rank += ((dt_runtime *)ctx)->first_rank; /* the pool's index → global */
  char name[16]; /* the kernel's limit, with the NUL */
  snprintf(name, sizeof name, "dt-rank-%d", rank);
  pthread_setname_np(pthread_self(), name);
  core_fault_mark_thread(rank);
  dt_runtime *rt = ctx;
  runtime_gate_mark_own(rt); /* its publishes need no gate (gate.c) */
  /* the local index, shifted by the process's index: processes of one
   * job sharing a node (mpirun --bind-to none) put their first ranks, the
   * leaders of their cross-process collectives, on different CPUs */
  if (rt->pin_ranks) pin_to_cpu(rank - rt->first_rank + rt->proc);
  /* the rank's device (CUDA: its GPU current on this thread); a failure
   * shows in the rank's first kernel launch, which then fails with it */
  if (rt->backend->rank_init) (void)rt->backend->rank_init(rt, rank);
}

/* ---- poison */
static void poison_outputs(dt_op_call *c, dt_status st, const char *msg) {
  for (int i = 0; i < c->nout; i++)
    if (c->meta[i].alias < 0) core_storage_set_poison(c->out[i]->local.storage, st, msg);
}

/* ---- refs held by an op record */
static void for_each_tensor(dt_op_call *c, exec_record *r, bool retain) {
  /* a list's elements from the record's own copy of the list */
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);) {
    dt_tensor *t = it.elem < 0 ? it.t : r->lists[it.pos][it.elem];
    if (!t) continue;
    if (retain) core_tensor_retain(t);
    else core_tensor_release(t);
  }
  for (int i = 0; i < c->nout; i++)
    if (retain) core_tensor_retain(c->out[i]);
    else core_tensor_release(c->out[i]);
}

static const core_poison *input_poison(const dt_op_call *c, const exec_record *r) {
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);) {
    const dt_tensor *t = it.elem < 0 ? it.t : r->lists[it.pos][it.elem];
    const core_poison *p = t ? core_storage_poison(t->local.storage) : NULL;
    if (p) return p;
  }
  return NULL;
}

static dt_status cancelled(const dt_op_call *c, const char **msg) {
  dt_status st = core_error_set(DT_ERR_TIMEOUT, "%s: cancelled by dt_runtime_cancel", c->api);
  *msg = core_last_error();
  return st;
}

static void exec_op(exec_record *r, dt_runtime *rt, int rank) {
  dt_op_call *c = &r->call;
  const core_poison *in = input_poison(c, r);
  dt_status st = in ? in->status : DT_OK;
  const char *msg = in ? in->message : NULL;
  char why[128];
  if (__builtin_expect(sched_faults_armed(rt->faults), 0) && st == DT_OK &&
      sched_fault_take_at(rt->faults, rank, SCHED_FAULT_RANK_FAIL, why, sizeof why)) {
    st = core_error_set(DT_ERR_FAULT, "%s: %s", c->api, why);
    msg = core_last_error();
  }
  /* dt_runtime_cancel stops ops whose outputs are all fresh (it poisons
   * them): checked before anything is allocated, and after the kernel (a
   * loop cut short) */
  bool fresh = true;
  for (int i = 0; i < c->nout; i++) fresh = fresh && c->meta[i].alias < 0;
  if (st == DT_OK && fresh && sched_cancel_arm()) st = cancelled(c, &msg);
  for (int i = 0; st == DT_OK && i < c->nout; i++) {
    if (c->meta[i].alias >= 0) continue;
    core_storage *s = c->out[i]->local.storage;
    const char *err;
    s->data = rt->backend->alloc(rt, rank, s->nbytes, &err);
    if (s->data && rt->backend->tag)
      rt->backend->tag(s->data, c->api, c->out[i]->dtype,
                       c->out[i]->local.ndim, c->out[i]->local.sizes);
    else if (!s->data) {
      st = core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: %s", c->api, err);
      msg = core_last_error();
    }
  }
  runtime_note_memory(rt, rank);
  if (st == DT_OK && (st = c->kernel(c)) != DT_OK)
    msg = core_last_error();
  if (st == DT_OK && fresh && sched_cancelled()) st = cancelled(c, &msg);
  if (st != DT_OK) poison_outputs(c, st, msg);
  for_each_tensor(c, r, false);
  for (int i = 0; i < CORE_CALL_MAX_ARGS; i++) free(r->lists[i]);
  free(r->staging);
}

/* A device backend's fetch (CUDA): the backend's to_host, which completes
 * the future from its offload thread; else one copy and the rank waits
 * for its stream. */
/* a strided device tensor: packed into a device buffer of the rank
 * (copy_view), copied over; the rank waits for its stream */
static dt_status strided_to_host(dt_tensor *t, void *dst, size_t bytes,
                                 dt_runtime *rt, int rank) {
  const runtime_backend *be = rt->backend;
  const char *err;
  void *tmp = be->alloc(rt, rank, bytes, &err);
  if (!tmp)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_to_host: packing a "
                          "strided tensor: %s", err);
  cpu_view src = {.data = core_tensor_data(t), .dtype = t->dtype,
                  .ndim = t->local.ndim};
  memcpy(src.sizes, t->local.sizes, sizeof src.sizes);
  memcpy(src.strides, t->local.strides, sizeof src.strides);
  cpu_view packed = src;
  packed.data = tmp;
  core_contiguous_strides(packed.sizes, packed.ndim, packed.strides);
  dt_status st = be->copy_view(rt, rank, &packed, &src);
  if (st == DT_OK) st = be->copy(rt, rank, dst, tmp, bytes, RUNTIME_COPY_D2H);
  if (st == DT_OK) st = be->stream_sync(rt, rank);
  be->free(rt, rank, tmp);
  return st;
}

/* a fault marked while the rank waited for its stream (the work the copy
 * read may have been cut short) fails the fetch */
static dt_status fault_after_sync(dt_runtime *rt, int rank, dt_status st) {
  const char *fault = st == DT_OK ? runtime_rank_fault_of(rt, rank) : NULL;
  return fault ? core_error_set(DT_ERR_DEVICE, "%s", fault) : st;
}

static void device_to_host(exec_record *r, dt_runtime *rt, int rank) {
  dt_tensor *t = r->host.t;
  const runtime_backend *be = rt->backend;
  dt_status st = DT_OK;
  if (r->host.bytes && !core_layout_is_contiguous(t->local.sizes,
                                                  t->local.strides,
                                                  t->local.ndim)) {
    st = strided_to_host(t, r->host.dst, r->host.bytes, rt, rank);
    st = fault_after_sync(rt, rank, st);
    sched_future_complete(r->future, st, st == DT_OK ? NULL : core_last_error());
    return;
  }
  if (st == DT_OK && be->to_host) { /* completes the future later */
    st = be->to_host(rt, rank, t, r->host.dst, r->host.bytes, r->future);
    if (st == DT_OK) return;
  }
  if (st == DT_OK && r->host.bytes)
    st = be->copy(rt, rank, r->host.dst, core_tensor_data(t), r->host.bytes,
                  RUNTIME_COPY_D2H);
  if (st == DT_OK) st = be->stream_sync(rt, rank);
  st = fault_after_sync(rt, rank, st);
  sched_future_complete(r->future, st, st == DT_OK ? NULL : core_last_error());
}

static void exec_to_host(exec_record *r, dt_runtime *rt, int rank) {
  dt_tensor *t = r->host.t;
  const core_poison *p = core_storage_poison(t->local.storage);
  const char *fault = runtime_rank_fault_of(rt, rank);
  if (p) {
    sched_future_complete(r->future, p->status, p->message);
  } else if (fault) {
    sched_future_complete(r->future, DT_ERR_DEVICE, fault);
  } else if (rt->backend->key != CORE_KEY_CPU) {
    device_to_host(r, rt, rank);
  } else {
    if (r->host.bytes) {
      cpu_view src = {.data = core_tensor_data(t), .dtype = t->dtype,
                      .ndim = t->local.ndim};
      memcpy(src.sizes, t->local.sizes, sizeof src.sizes);
      memcpy(src.strides, t->local.strides, sizeof src.strides);
      cpu_view out = src;
      out.data = r->host.dst;
      core_contiguous_strides(out.sizes, out.ndim, out.strides);
      cpu_unary(CPU_COPY, cpu_compute_type(t->dtype), &out, &src);
    }
    sched_future_complete(r->future, DT_OK, NULL);
  }
  sched_future_release(r->future);
  core_tensor_release(t);
}

bool runtime_exec_pending(void *ctx, int rank) {
  dt_runtime *rt = ctx;
  rank += rt->first_rank;
  /* relaxed: a hint; the drain's acquire exchange reads the stack */
  return atomic_load_explicit(&rt->ranks[rank].remote_free,
                              memory_order_relaxed) != NULL;
}

void runtime_wait_remote_frees(dt_runtime *rt) {
  /* a parked owner drains when woken (storage.c does not wake it at the
   * hand-over): wake every owner that holds some first, so they drain
   * side by side, then wait for each (relaxed: a hint; the wait below
   * reads the count with acquire) */
  for (int r = 0; r < rt->nranks; r++)
    if (atomic_load_explicit(&rt->ranks[r].remote_pending, memory_order_relaxed))
      sched_pool_wake(rt->pool, r - rt->first_rank);
  long sleep_ns = 1000;
  for (int r = 0, round = 0; r < rt->nranks;) {
    /* acquire: pairs with the drain's release decrement (the frees and
     * their memory counts are done when the count reads 0) */
    if (atomic_load_explicit(&rt->ranks[r].remote_pending,
                             memory_order_acquire) == 0) {
      r++;
      round = 0;
      sleep_ns = 1000;
      continue;
    }
    /* again now and then: a wake-up that raced with the owner's parking
     * finds it parked the next time (one that finds it awake is a no-op) */
    if (round % 64 == 63) sched_pool_wake(rt->pool, r - rt->first_rank);
    if (round++ < 64) {
      sched_yield();
    } else {
      struct timespec ts = {0, sleep_ns};
      nanosleep(&ts, NULL);
      if (sleep_ns < 100000) sleep_ns *= 2;
    }
  }
}

void runtime_exec_idle(void *ctx, int rank) {
  runtime_drain_remote_frees(ctx, rank + ((dt_runtime *)ctx)->first_rank);
}

void runtime_drain_remote_frees(dt_runtime *rt, int rank) {
  /* acquire: pairs with the release CAS in core_storage_release's push */
  core_storage *s = atomic_exchange_explicit(&rt->ranks[rank].remote_free, NULL,
                                           memory_order_acquire);
  int64_t n = 0;
  while (s) {
    core_storage *next = s->next_free;
    runtime_storage_destroy_on_rank(s, rt, rank);
    s = next;
    n++;
  }
  /* release: the frees (and the memory counts) before the count drops */
  if (n) atomic_fetch_sub_explicit(&rt->ranks[rank].remote_pending, n,
                                   memory_order_release);
}

static const char *rec_name(const exec_record *r);
static void exec_kind(dt_runtime *rt, exec_record *r, int rank);

static void exec_any(dt_runtime *rt, exec_record *r, int rank) {
  if (atomic_load_explicit(&rt->ranks[rank].remote_free, memory_order_relaxed))
    runtime_drain_remote_frees(rt, rank);
  /* what this rank runs, for a collective watchdog's report (relaxed:
   * read only for that; runtime_rank_where) */
  _Atomic(const char *) *where = &rt->ranks[rank].where;
  atomic_store_explicit(where, rec_name(r), memory_order_relaxed);
  exec_kind(rt, r, rank);
  atomic_store_explicit(where, NULL, memory_order_relaxed);
}

const char *runtime_rank_where(void *ctx, int rank) {
  dt_runtime *rt = ctx;
  /* relaxed: a report (exec_any, runtime/spmd_run.c) */
  const char *w = atomic_load_explicit(&rt->ranks[rank].where, memory_order_relaxed);
  if (w) return w;
  return atomic_load_explicit(&rt->ranks[rank].in_spmd, memory_order_relaxed)
             ? "its SPMD function" : NULL;
}

/* dt_event_record on a device backend: the event on the rank's stream,
 * carried by the future for waiting streams. Without one (record failed:
 * the stream is dead) they wait for the future on the host. */
static void tag_event(dt_runtime *rt, int rank, dt_future *f) {
  const runtime_backend *b = rt->backend;
  if (b->key == CORE_KEY_CPU) return;
  void *ev = b->event_record(rt, rank);
  if (ev) sched_future_set_event(f, b, ev, b->event_destroy);
}

static void exec_kind(dt_runtime *rt, exec_record *r, int rank) {
  switch (r->kind) {
  case REC_OP: exec_op(r, rt, rank); break;
  case REC_FREE: runtime_storage_destroy_on_rank(r->storage, rt, rank); break;
  case REC_TO_HOST: exec_to_host(r, rt, rank); break;
  case REC_CALL:
    r->call_fn.fn(r->call_fn.arg, rt, rank);
    /* acq_rel: every rank's work happens-before done() on the last one */
    if (atomic_fetch_sub_explicit(&r->pending, 1, memory_order_acq_rel) == 1 &&
        r->call_fn.done)
      r->call_fn.done(r->call_fn.arg);
    break;
  case REC_BARRIER:
    if (r->event) tag_event(rt, rank, r->dbar ? r->dbar->future : r->future);
    if (r->dbar) { /* arrives when the stream is done, off this thread */
      if (rt->backend->when_done(rt, rank, device_barrier_arrive, r->dbar) !=
          DT_OK) {
        rt->backend->stream_sync(rt, rank);
        device_barrier_arrive(r->dbar);
      }
      break;
    }
    /* acq_rel: every rank's earlier records happen-before the completion */
    if (atomic_fetch_sub_explicit(&r->pending, 1, memory_order_acq_rel) == 1) {
      sched_future_complete(r->future, DT_OK, NULL);
      sched_future_release(r->future);
    }
    break;
  }
}

/* ---- the timeline (sched/trace_recorder.h, docs/trace.md) */
static const char *rec_name(const exec_record *r) {
  switch (r->kind) {
  case REC_OP: return core_op_name(r->call.op);
  case REC_FREE: return "free";
  case REC_TO_HOST: return "to_host";
  case REC_BARRIER: return "barrier";
  case REC_CALL: return r->call_fn.name ? r->call_fn.name : "call";
  }
  return "record";
}

static const char *rec_cat(const exec_record *r) {
  static const char *const cats[] = {"op", "free", "host", "barrier", "dtensor"};
  return cats[r->kind];
}

/* a single-device op's output shape (before the record drops it) */
static void op_args(const exec_record *r, char *buf, size_t len) {
  buf[0] = '\0';
  if (r->kind != REC_OP || r->call.nout < 1) return;
  const dt_tensor *o = r->call.out[0];
  size_t n = (size_t)snprintf(buf, len, "\"api\":\"%s\",\"shape\":\"[", r->call.api);
  for (int d = 0; d < o->local.ndim && n < len; d++)
    n += (size_t)snprintf(buf + n, len - n, "%s%lld", d ? ", " : "",
                          (long long)o->local.sizes[d]);
  if (n < len) n += (size_t)snprintf(buf + n, len - n, "]\",\"dtype\":\"%s\"",
                                     core_dtype_name(o->dtype));
  if (n >= len) snprintf(buf, len, "\"truncated\":true");
}

/* the record as a slice on the rank's track, and the end of its flow */
static void traced_exec(dt_runtime *rt, exec_record *r, int rank) {
  sched_trace_event e = {.name = rec_name(r), .cat = rec_cat(r), .ph = 'X'};
  uint64_t flow = r->flow;
  int li = rank - rt->first_rank; /* flows are numbered by local index */
  if (flow && r->flow_all) flow = li < RUNTIME_TRACE_FLOWS ? flow + (uint64_t)li : 0;
  op_args(r, e.args, sizeof e.args);
  sched_trace_record_enter();
  int64_t cpu0 = sched_trace_cpu();
  e.ts = sched_trace_now();
  exec_any(rt, r, rank); /* r may be reused once this returns: read before */
  e.dur = sched_trace_now() - e.ts;
  sched_trace_set_cpu(&e, cpu0);
  char inner[SCHED_TRACE_ARGS];
  sched_trace_record_leave(inner);
  if (inner[0]) memcpy(e.args, inner, sizeof e.args);
  e.id = flow; /* the flow's end, written out with the slice */
  e.flows = -1;
  sched_trace_emit(rt->pool, &e);
}

static void exec_global(dt_runtime *rt, void *record, int rank);

void runtime_exec_record(void *ctx, void *record, int rank) {
  dt_runtime *rt = ctx;
  /* the pool numbers this process's ranks from 0 */
  exec_global(rt, record, rank + rt->first_rank);
}

/* a record on global rank `rank` (this process's) */
static void exec_global(dt_runtime *rt, void *record, int rank) {
  /* the trace switch: one relaxed load and a compare (sched/trace_recorder.h) */
  if (__builtin_expect(sched_trace_on(rt->pool), 0)) {
    traced_exec(rt, record, rank);
    return;
  }
  exec_any(rt, record, rank);
}

/* a publish as a slice on the issuing thread's track, with a flow start
 * to each rank it addresses (up to RUNTIME_TRACE_FLOWS of them) */
static void traced_commit(dt_runtime *rt, const sched_claim *q, exec_record *r) {
  bool all = q->rank == SCHED_ALL;
  int n = all ? (rt->nlocal < RUNTIME_TRACE_FLOWS ? rt->nlocal : RUNTIME_TRACE_FLOWS) : 1;
  uint64_t base = sched_trace_flow_ids(n);
  r->flow = base;
  r->flow_all = all;
  sched_trace_event e;
  e.name = rec_name(r);
  e.cat = "publish";
  e.ph = 'X';
  e.pub_rank = q->rank; /* formatted when the file is written */
  e.pub_kind = rec_cat(r);
  e.has_cpu = false;
  e.args[0] = '\0';
  e.ts = sched_trace_now();
  sched_pool_commit(rt->pool, q); /* r may run and be reused from here */
  e.dur = sched_trace_now() - e.ts;
  e.id = base; /* n flow starts, written out with the slice */
  e.flows = n;
  sched_trace_emit(rt->pool, &e);
}

static void commit_inside(dt_runtime *rt, const sched_claim *q, exec_record *r) {
  /* the trace switch: one relaxed load and a compare (sched/trace_recorder.h) */
  if (__builtin_expect(sched_trace_on(rt->pool), 0)) {
    traced_commit(rt, q, r);
    return;
  }
  sched_pool_commit(rt->pool, q);
}

/* the record goes to the ranks; the call leaves the gate claim entered */
static void commit(dt_runtime *rt, const sched_claim *q, exec_record *r) {
  commit_inside(rt, q, r);
  runtime_gate_leave(rt);
}

/* ---- the issuing side */
/* A slot for a record, inside the runtime's gate (runtime.h) until
 * commit: NULL + error naming fn when the runtime is being destroyed
 * (DT_ERR_DEVICE) or an all-rank record cannot be allocated. */
static exec_record *claim(dt_runtime *rt, int rank, sched_claim *k,
                          const char *fn) {
  if (rank != SCHED_ALL && !runtime_rank_is_local(rt, rank)) {
    runtime_not_local(rt, rank, fn);
    return NULL;
  }
  if (!runtime_gate_enter(rt, fn)) return NULL;
  exec_record *r = sched_pool_claim(rt->pool, rank == SCHED_ALL ? rank
                                    : rank - rt->first_rank, k);
  if (!r) {
    runtime_gate_leave(rt);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory for a "
                   "record to every rank", fn);
    return NULL;
  }
  r->future = NULL;
  r->staging = NULL;
  r->flow = 0;
  for (int i = 0; i < CORE_CALL_MAX_ARGS; i++) r->lists[i] = NULL;
  return r;
}

/* Copies what the caller may free after returning (tensor lists, host
 * data) before anything is claimed, so a failure leaves no slot behind. */
typedef struct arg_copies { dt_tensor **lists[CORE_CALL_MAX_ARGS]; void *staging; } arg_copies;

/* inlined into both publish paths: the op path's budget is tight */
static inline __attribute__((always_inline)) dt_status
copy_args(arg_copies *k, const dt_op_call *c) {
  const char *s = core_op_schema(c->op);
  memset(k, 0, sizeof *k);
  for (int i = 0; s[i]; i++) {
    if (s[i] == 'L') {
      size_t n = (size_t)c->args[i].list.n;
      k->lists[i] = malloc(sizeof(dt_tensor *) * (n ? n : 1));
      if (!k->lists[i]) goto oom;
      memcpy(k->lists[i], c->args[i].list.v, sizeof(dt_tensor *) * n);
    } else if (s[i] == 'P') {
      size_t n = (size_t)core_numel(c->out[0]) * core_dtype_size(c->out[0]->dtype);
      k->staging = malloc(n ? n : 1);
      if (!k->staging) goto oom;
      if (n) memcpy(k->staging, c->args[i].p, n);
    }
  }
  return DT_OK;
oom:
  for (int i = 0; i < CORE_CALL_MAX_ARGS; i++) free(k->lists[i]);
  free(k->staging);
  return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory for "
                      "the op record", c->api);
}

/* copies what a rank needs of a call: only the used args and metas (the
 * full struct is ~1.3 KB, a tiny op uses a few hundred bytes) */
static inline __attribute__((always_inline)) void
call_copy(dt_op_call *d, const dt_op_call *c) {
  d->op = c->op;
  d->nargs = c->nargs;
  memcpy(d->args, c->args, sizeof(core_value) * (size_t)c->nargs);
  d->nout = c->nout;
  memcpy(d->out, c->out, sizeof(dt_tensor *) * (size_t)c->nout);
  d->nmeta = c->nmeta;
  memcpy(d->meta, c->meta, sizeof(core_meta) * (size_t)c->nmeta);
  d->keys = c->keys;
  d->hook_depth = c->hook_depth;
  d->api = c->api;
  d->requires_grad = c->requires_grad;
  d->rt = c->rt;
  d->rank = c->rank;
  d->kernel = c->kernel;
  d->shard = c->shard;
}

/* ---- SPMD: a rank thread's own work runs inline (runtime/spmd_run.h) */
static dt_status not_mine(int me, int rank, const char *api) {
  return core_error_set(DT_ERR_DEVICE, "%s: rank %d's SPMD function used "
                        "rank %d's device (cpu:%d); an SPMD rank computes on "
                        "its own device only (move data with collectives or "
                        "dt_send/dt_recv)", api, me, rank, rank);
}

static dt_status inline_op(dt_op_call *c, dt_runtime *rt, int rank, int me) {
  if (rank != me) return not_mine(me, rank, c->api);
  arg_copies k;
  dt_status st = copy_args(&k, c);
  if (st != DT_OK) return st;
  exec_record r;
  r.kind = REC_OP;
  r.future = NULL;
  r.flow = 0;
  call_copy(&r.call, c);
  r.staging = k.staging;
  const char *s = core_op_schema(c->op);
  for (int i = 0; i < CORE_CALL_MAX_ARGS; i++) r.lists[i] = NULL;
  for (int i = 0; s[i]; i++) {
    r.lists[i] = k.lists[i];
    if (s[i] == 'L') r.call.args[i].list.v = k.lists[i];
    else if (s[i] == 'P') r.call.args[i].p = k.staging;
  }
  for_each_tensor(&r.call, &r, true);
  exec_global(rt, &r, me);
  /* synchronous: the op's error is the call's (no poisoned handle) */
  for (int i = 0; i < c->nout; i++) {
    const core_poison *p = c->meta[i].alias < 0
        ? core_storage_poison(c->out[i]->local.storage) : NULL;
    if (p) return core_error_set(p->status, "%s", p->message);
  }
  return DT_OK;
}

/* a dry run's op: nothing runs; the fullest rank (this one) writes its
 * outputs and reads its inputs once */
static dt_status dry_op(const dt_op_call *c, dt_runtime *rt) {
  runtime_dry_call(rt, c, NULL, -1);
  return DT_OK;
}

dt_status runtime_publish_op(dt_op_call *c, dt_runtime *rt, int rank) {
  if (__builtin_expect(rt->dry_run, 0)) return dry_op(c, rt);
  int me = runtime_spmd_rank(rt);
  if (__builtin_expect(me >= 0, 0)) return inline_op(c, rt, rank, me);
  arg_copies k;
  dt_status st = copy_args(&k, c);
  if (st != DT_OK) return st;
  sched_claim q;
  exec_record *r = claim(rt, rank, &q, c->api);
  if (!r) {
    for (int i = 0; i < CORE_CALL_MAX_ARGS; i++) free(k.lists[i]);
    free(k.staging);
    return core_last_status();
  }
  r->kind = REC_OP;
  call_copy(&r->call, c);
  r->staging = k.staging;
  const char *s = core_op_schema(c->op);
  for (int i = 0; s[i]; i++) {
    r->lists[i] = k.lists[i];
    if (s[i] == 'L') r->call.args[i].list.v = k.lists[i];
    else if (s[i] == 'P') r->call.args[i].p = k.staging;
  }
  for_each_tensor(&r->call, r, true);
  commit(rt, &q, r);
  return DT_OK;
}

bool runtime_publish_free(core_storage *s) {
  dt_runtime *rt = s->rt;
  if (rt->dry_run) { /* it never had data */
    runtime_storage_destroy_dead(s);
    return true;
  }
  sched_claim q;
  /* one rank: fails only when the runtime is being destroyed */
  exec_record *r = claim(rt, s->rank, &q, "dt_tensor_release");
  if (!r) return false;
  r->kind = REC_FREE;
  r->storage = s;
  commit(rt, &q, r);
  return true;
}

dt_future *runtime_publish_to_host(dt_tensor *t, void *dst, size_t bytes) {
  core_storage *s = t->local.storage;
  if (s->rt->dry_run) {
    core_error_set(DT_ERR_UNSUPPORTED, "dt_to_host: a dry-run runtime holds no "
                   "values (shapes, placements and counts only)");
    return NULL;
  }
  int me = runtime_spmd_rank(s->rt);
  if (me >= 0 && me != s->rank) {
    not_mine(me, s->rank, "dt_to_host");
    return NULL;
  }
  dt_future *f = sched_future_new();
  if (!f) return NULL;
  if (me >= 0) {
    exec_record r = {.kind = REC_TO_HOST, .future = sched_future_retain(f)};
    r.host.t = core_tensor_retain(t);
    r.host.dst = dst;
    r.host.bytes = bytes;
    exec_global(s->rt, &r, me);
    return f;
  }
  sched_claim q;
  /* one rank: fails only when the runtime is being destroyed */
  exec_record *r = claim(s->rt, s->rank, &q, "dt_to_host");
  if (!r) {
    sched_future_release(f);
    return NULL;
  }
  r->kind = REC_TO_HOST;
  r->future = sched_future_retain(f);
  r->host.t = core_tensor_retain(t);
  r->host.dst = dst;
  r->host.bytes = bytes;
  commit(s->rt, &q, r);
  return f;
}

dt_status runtime_host_buffer(const dt_tensor *t, const void *dst,
                              size_t dst_bytes, const char *fn, size_t *need) {
  if (!core_bytes_of(core_numel(t), t->dtype, need))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: a %s tensor of %lld "
                          "elements is larger than any host buffer", fn,
                          core_dtype_name(t->dtype), (long long)core_numel(t));
  if (!dst && *need)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
  if (dst_bytes < *need)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                          "%s: dst_bytes %zu is less than the %zu bytes of a "
                          "%s tensor of %lld elements", fn, dst_bytes, *need,
                          core_dtype_name(t->dtype), (long long)core_numel(t));
  return DT_OK;
}

dt_status runtime_to_host(dt_tensor *t, void *dst, size_t bytes,
                          bool wait, dt_future **out, const char *fn) {
  const core_storage *s = t->local.storage;
  if (atomic_load_explicit(&s->rt->dead, memory_order_acquire))
    return core_error_set(DT_ERR_DEVICE, "%s: the tensor's runtime was "
                          "destroyed", fn);
  const core_poison *p = core_storage_poison(s);
  if (p && !wait) { /* the async form reports it through its future */
    if (!(*out = sched_future_new()))
      return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    sched_future_complete(*out, p->status, p->message);
    return DT_OK;
  }
  if (p) return core_error_set(p->status, "%s", p->message);
  dt_future *f = runtime_publish_to_host(t, dst, bytes);
  if (!f) return core_last_status();
  if (!wait) {
    *out = f;
    return DT_OK;
  }
  dt_status st = sched_future_wait(f, -1);
  sched_future_release(f);
  return st;
}

static dt_future *publish_barrier(dt_runtime *rt, int rank, bool event) {
  dt_future *f = sched_future_new();
  if (!f) return NULL;
  if (rt->dry_run || runtime_spmd_rank(rt) >= 0) { /* nothing to wait for */
    sched_future_complete(f, DT_OK, NULL);
    return f;
  }
  int n = rank >= 0 ? 1 : rt->nlocal;
  device_barrier *b = NULL;
  if (rt->backend->when_done) { /* made before the slot: nothing to undo */
    if (!(b = malloc(sizeof *b))) {
      sched_future_release(f);
      core_error_set(DT_ERR_OUT_OF_MEMORY, "barrier: out of host memory");
      return NULL;
    }
    atomic_init(&b->pending, n);
    b->future = sched_future_retain(f);
  }
  sched_claim q;
  exec_record *r = claim(rt, rank, &q, event ? "dt_event_record" : "barrier");
  if (!r) {
    if (b) {
      sched_future_release(b->future);
      free(b);
    }
    sched_future_release(f);
    return NULL;
  }
  r->kind = REC_BARRIER;
  atomic_store_explicit(&r->pending, n, memory_order_relaxed);
  r->future = b ? NULL : sched_future_retain(f);
  r->dbar = b;
  r->event = event;
  /* the queues' release/acquire publishes `pending` to the ranks */
  commit(rt, &q, r);
  return f;
}

dt_future *runtime_publish_barrier(dt_runtime *rt, int rank) {
  return publish_barrier(rt, rank, false);
}
dt_future *runtime_publish_event(dt_runtime *rt, int rank) {
  return publish_barrier(rt, rank, true);
}

static dt_status publish_call(dt_runtime *rt, int rank, const char *name,
                              runtime_call_fn fn, runtime_done_fn done,
                              void *arg, sched_help_kind help);

dt_status runtime_publish_failed(const char *fn) {
  if (core_last_status() == DT_ERR_DEVICE)
    return core_error_set(DT_ERR_DEVICE, "%s: the runtime was destroyed", fn);
  return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory for a "
                        "record to every rank", fn);
}

dt_status runtime_publish_call(dt_runtime *rt, int rank, runtime_call_fn fn,
                               runtime_done_fn done, void *arg) {
  return runtime_publish_named_call(rt, rank, NULL, fn, done, arg);
}

dt_status runtime_publish_named_call(dt_runtime *rt, int rank, const char *name,
                                     runtime_call_fn fn, runtime_done_fn done,
                                     void *arg) {
  return publish_call(rt, rank, name, fn, done, arg, SCHED_HELP_NONE);
}

dt_status runtime_publish_helped_call(dt_runtime *rt, const char *name,
                                      runtime_call_fn fn, runtime_done_fn done,
                                      void *arg, sched_help_kind help) {
  /* a device backend's records order work on its streams: its ranks
   * run their own */
  if (rt->backend->key != CORE_KEY_CPU) help = SCHED_HELP_NONE;
  return publish_call(rt, -1, name, fn, done, arg, help);
}

int runtime_exec_helpable(void *ctx, const void *record, int rank) {
  (void)ctx;
  (void)rank;
  const exec_record *r = record;
  return r->kind == REC_CALL ? (int)r->call_fn.help : SCHED_HELP_NONE;
}

static dt_status publish_call(dt_runtime *rt, int rank, const char *name,
                              runtime_call_fn fn, runtime_done_fn done,
                              void *arg, sched_help_kind help) {
  if (rt->dry_run) { /* nothing runs; the job is freed as after its run */
    if (done) done(arg);
    return DT_OK;
  }
  int me = runtime_spmd_rank(rt);
  if (__builtin_expect(me >= 0, 0)) {
    if (rank >= 0 && rank != me) return not_mine(me, rank, name ? name : "call");
    exec_record r = {.kind = REC_CALL, .call_fn = {fn, done, arg, name}};
    atomic_init(&r.pending, 1); /* this rank alone: done runs after it */
    exec_global(rt, &r, me);
    return DT_OK;
  }
  sched_claim q;
  exec_record *r = claim(rt, rank, &q, name ? name : "call");
  if (!r) return core_last_status();
  r->kind = REC_CALL;
  r->call_fn.fn = fn;
  r->call_fn.done = done;
  r->call_fn.arg = arg;
  r->call_fn.name = name;
  r->call_fn.help = help;
  atomic_store_explicit(&r->pending, rank >= 0 ? 1 : rt->nlocal,
                        memory_order_relaxed);
  if (help == SCHED_HELP_NONE) {
    commit(rt, &q, r);
    return DT_OK;
  }
  /* the ranks asleep for it stay asleep; this thread runs their part or
   * wakes them before it returns (sched/help.h, invariant H) */
  sched_help_begin(rt->pool, help);
  commit_inside(rt, &q, r);
  sched_help_settle(rt->pool);
  runtime_gate_leave(rt); /* the settle still uses the pool */
  return DT_OK;
}
