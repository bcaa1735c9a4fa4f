/* Dry runs (runtime/dry.h). Counts are atomics (any number of issuing
 * threads); times are kept in picoseconds so they add atomically too. */
#include "runtime/dry.h"

#include <stdlib.h>

#include "core/call.h"
#include "core/error.h"
#include "core/tensor.h"

struct runtime_dry {
  double link_bps, latency_s, mem_bps, flops; /* the model */
  _Atomic int64_t ops, collectives, comm_bytes;
  _Atomic int64_t comm_ps, compute_ps;
};

runtime_dry *runtime_dry_new(const dt_runtime_options *o, int ranks) {
  (void)ranks;
  runtime_dry *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->link_bps = (o && o->dry_link_gbps > 0 ? o->dry_link_gbps : 100) * 1e9;
  d->latency_s = (o && o->dry_link_latency_us > 0 ? o->dry_link_latency_us : 5) * 1e-6;
  d->mem_bps = (o && o->dry_mem_gbps > 0 ? o->dry_mem_gbps : 2000) * 1e9;
  d->flops = (o && o->dry_tflops > 0 ? o->dry_tflops : 400) * 1e12;
  return d;
}

void runtime_dry_free(runtime_dry *d) { free(d); }

void runtime_dry_memory(dt_runtime *rt, int rank, int64_t delta) {
  runtime_rank_slot *s = &rt->ranks[rank];
  /* relaxed: counters, read by reports after the issuing calls returned */
  int64_t now = atomic_fetch_add_explicit(&s->used, delta, memory_order_relaxed) + delta;
  int64_t peak = atomic_load_explicit(&s->peak, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak_explicit(
                           &s->peak, &peak, now, memory_order_relaxed,
                           memory_order_relaxed)) {
  }
}

static void add_ps(_Atomic int64_t *c, double seconds) {
  atomic_fetch_add_explicit(c, (int64_t)(seconds * 1e12), memory_order_relaxed);
}

void runtime_dry_collective(dt_runtime *rt, runtime_dry_kind kind, int n, int ranks,
                            int64_t bytes) {
  runtime_dry *d = rt->dry;
  double s = (double)bytes / (ranks > 0 ? ranks : 1); /* one rank's input */
  double steps = n - 1, part = (double)(n - 1) / n, t;
  switch (kind) {
  case RUNTIME_DRY_ALL_REDUCE: /* ring: reduce-scatter, then all-gather */
    t = 2 * steps * d->latency_s + 2 * part * s / d->link_bps;
    break;
  case RUNTIME_DRY_ALL_GATHER: /* s' = n s gathered */
    t = steps * d->latency_s + part * s * n / d->link_bps;
    break;
  default: /* reduce-scatter, all-to-all: s' = s scattered */
    t = steps * d->latency_s + part * s / d->link_bps;
    break;
  }
  atomic_fetch_add_explicit(&d->collectives, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&d->comm_bytes, bytes, memory_order_relaxed);
  add_ps(&d->comm_ps, t);
}

void runtime_dry_op(dt_runtime *rt, int64_t bytes, double flops) {
  runtime_dry *d = rt->dry;
  atomic_fetch_add_explicit(&d->ops, 1, memory_order_relaxed);
  add_ps(&d->compute_ps, (double)bytes / d->mem_bps + flops / d->flops);
}

void runtime_dry_call(dt_runtime *rt, const dt_op_call *c,
                      const int64_t *elems, int64_t k) {
  int64_t bytes = 0;
  for (int o = 0; o < c->nout; o++) {
    int64_t n = elems ? elems[o] : core_numel(c->out[o]);
    bytes += 2 * n * (int64_t)core_dtype_size(c->out[o]->dtype);
  }
  double flops = 0;
  const dt_tensor *a = c->args[0].t;
  if ((core_op_flags(c->op) & CORE_OP_CONTRACTS) && c->nout && a &&
      a->local.ndim > 0) {
    if (k < 0) k = a->local.sizes[a->local.ndim - 1];
    flops = 2.0 * (double)(elems ? elems[0] : core_numel(c->out[0])) *
            (double)k;
  }
  runtime_dry_op(rt, bytes, flops);
}

static dt_status check(dt_runtime *rt, const char *fn) {
  if (!rt) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rt is NULL", fn);
  if (!rt->dry)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: the runtime is not a dry "
                          "run (dt_runtime_options.dry_run)", fn);
  return DT_OK;
}

dt_status runtime_dry_report(dt_runtime *rt, dt_dry_run_stats *out) {
  dt_status st = check(rt, "dt_dry_run_report");
  if (st == DT_OK && !out)
    st = core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_dry_run_report: out is NULL");
  if (st != DT_OK) return st;
  runtime_dry *d = rt->dry;
  *out = (dt_dry_run_stats){
      .ops = atomic_load_explicit(&d->ops, memory_order_relaxed),
      .collectives = atomic_load_explicit(&d->collectives, memory_order_relaxed),
      .comm_bytes = atomic_load_explicit(&d->comm_bytes, memory_order_relaxed),
      .comm_s = (double)atomic_load_explicit(&d->comm_ps, memory_order_relaxed) * 1e-12,
      .compute_s = (double)atomic_load_explicit(&d->compute_ps, memory_order_relaxed) * 1e-12,
      .peak_min = INT64_MAX};
  out->step_s = out->comm_s + out->compute_s;
  for (int r = 0; r < rt->nranks; r++) {
    int64_t p = atomic_load_explicit(&rt->ranks[r].peak, memory_order_relaxed);
    if (p > out->peak_max) out->peak_max = p, out->peak_rank = r;
    if (p < out->peak_min) out->peak_min = p;
  }
  return DT_OK;
}

dt_status runtime_dry_reset(dt_runtime *rt) {
  dt_status st = check(rt, "dt_dry_run_reset");
  if (st != DT_OK) return st;
  runtime_dry *d = rt->dry;
  atomic_store_explicit(&d->ops, 0, memory_order_relaxed);
  atomic_store_explicit(&d->collectives, 0, memory_order_relaxed);
  atomic_store_explicit(&d->comm_bytes, 0, memory_order_relaxed);
  atomic_store_explicit(&d->comm_ps, 0, memory_order_relaxed);
  atomic_store_explicit(&d->compute_ps, 0, memory_order_relaxed);
  for (int r = 0; r < rt->nranks; r++)
    atomic_store_explicit(&rt->ranks[r].peak,
                          atomic_load_explicit(&rt->ranks[r].used, memory_order_relaxed),
                          memory_order_relaxed);
  return DT_OK;
}
