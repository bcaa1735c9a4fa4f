/* Tracing a runtime (dt_trace_begin / dt_trace_end, DTORCH_TRACE): the
 * checks and the drain around the recorder (sched/trace_recorder.c). The hooks
 * that record are in runtime/exec.c (records, publishes), sched/pool.c
 * (parking, stealing), sim/collectives.c and dispatch/rank_op.c. */
#include "runtime/trace_session.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "sched/trace_recorder.h"

dt_status runtime_trace_begin(dt_runtime *rt, const char *path, const char *fn) {
  if (!rt) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rt is NULL", fn);
  if (!path || !*path)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: path is %s", fn,
                          path ? "empty" : "NULL");
  /* the recorder lives in the pool: inside the gate (runtime.h) */
  if (!runtime_gate_enter(rt, fn)) return DT_ERR_DEVICE;
  dt_status st = sched_trace_start(rt->pool, rt->nranks, path, fn);
  runtime_gate_leave(rt);
  return st;
}

static dt_status trace_end_inside(dt_runtime *rt, const char *fn);

dt_status runtime_trace_end(dt_runtime *rt, const char *fn) {
  if (!rt) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rt is NULL", fn);
  /* a destroyed runtime wrote its trace at the destroy */
  if (!runtime_gate_enter(rt, NULL))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: this runtime is not "
                          "being traced (it was destroyed)", fn);
  dt_status st = trace_end_inside(rt, fn);
  runtime_gate_leave(rt);
  return st;
}

static dt_status trace_end_inside(dt_runtime *rt, const char *fn) {
  if (!sched_trace_is_traced(rt->pool))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: this runtime is not "
                          "being traced (call dt_trace_begin first)", fn);
  /* everything issued before the end runs (and is recorded) first */
  if (!atomic_load_explicit(&rt->dead, memory_order_acquire)) {
    dt_status st = runtime_drain(rt); /* a faulty rank's trace still ends */
    if (st != DT_OK) return st;
    /* a barrier's future completes inside its record, before the rank
     * records the slice: wait until the ranks popped it too (up to 1 s;
     * the pool answers false at once beyond 64 ranks, whose last slices
     * may then be missing) */
    sched_pool_try_drain(rt->pool, 1000000000);
  }
  return sched_trace_stop(rt->pool, fn);
}

void runtime_trace_from_env(dt_runtime *rt) {
  const char *path = getenv("DTORCH_TRACE");
  if (!path || !*path) return;
  if (runtime_trace_begin(rt, path, "DTORCH_TRACE") != DT_OK) {
    fprintf(stderr, "dtorch: %s (this runtime is not traced)\n", core_last_error());
    core_error_succeeded();
  }
}

void runtime_trace_at_destroy(dt_runtime *rt) {
  if (!sched_trace_is_traced(rt->pool)) return;
  if (runtime_trace_end(rt, "dt_runtime_destroy") != DT_OK) {
    fprintf(stderr, "dtorch: %s\n", core_last_error());
    core_error_succeeded();
  }
}
