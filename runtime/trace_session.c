/* Tracing a runtime (dt_trace_begin / dt_trace_end, DTORCH_TRACE): the
 * checks and the drain around the recorder (sched/trace_recorder.c). The hooks
 * that record are in runtime/exec.c (records, publishes), sched/pool.c
 * (parking, stealing), sim/collectives.c and dispatch/rank_op.c. */
#include "runtime/trace_session.h"

#include <stdio.h>
#include <stdlib.h>

#include <errno.h>
#include <string.h>

#include "core/error.h"
#include "sched/trace_recorder.h"
#include "sim/collectives.h"
#include "sim/mpi_env.h"

dt_status runtime_trace_begin(dt_runtime *rt, const char *path, const char *fn) {
  if (!rt) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rt is NULL", fn);
  if (!path || !*path)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: path is %s", fn,
                          path ? "empty" : "NULL");
  /* the recorder lives in the pool: inside the gate (runtime.h) */
  if (!runtime_gate_enter(rt, fn)) return DT_ERR_DEVICE;
  /* a multi-process job: each process records its ranks, process 0
   * writes them all at the end (trace_end_inside) */
  dt_status st = rt->mpi ? sched_trace_start_part(rt->pool, rt->nlocal,
                                                  rt->first_rank, rt->proc,
                                                  path, fn)
                         : sched_trace_start(rt->pool, rt->nranks, path, fn);
  runtime_gate_leave(rt);
  return st;
}

dt_status runtime_trace_begin_visit(dt_runtime *rt, const char *fn) {
  if (!rt) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rt is NULL", fn);
  if (rt->mpi)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: an in-process trace "
                          "covers one process (this runtime spans %d)", fn,
                          rt->nprocs);
  if (!runtime_gate_enter(rt, fn)) return DT_ERR_DEVICE;
  dt_status st = sched_trace_start_visit(rt->pool, rt->nranks, fn);
  runtime_gate_leave(rt);
  return st;
}

/* process 0 writes every process's events as one trace */
static dt_status write_merged(const char *path, const char *all, size_t len,
                              int64_t dropped, const char *fn) {
  FILE *f = fopen(path, "w");
  if (!f)
    return core_error_set(DT_ERR_IO, "%s: cannot open \"%s\" for writing: %s",
                          fn, path, strerror(errno));
  /* each part leads with a comma: drop the first */
  size_t skip = len >= 2 && all[0] == ',' ? 2 : 0;
  fprintf(f, "{\"traceEvents\":[\n");
  fwrite(all + skip, 1, len - skip, f);
  fprintf(f, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"dropped_events\":"
          "%lld}}\n", (long long)dropped);
  int werr = ferror(f) ? errno : 0;
  if (fclose(f) != 0 && !werr) werr = errno ? errno : EIO;
  if (werr)
    return core_error_set(DT_ERR_IO, "%s: cannot write the trace to \"%s\": %s",
                          fn, path, strerror(werr));
  return DT_OK;
}

/* the end of a multi-process trace: collective over the job's processes */
static dt_status end_part(dt_runtime *rt, const char *path, const char *fn) {
  char *mem, *all;
  size_t len, all_len;
  int64_t dropped;
  dt_status st = sched_trace_stop_part(rt->pool, fn, &mem, &len, &dropped);
  /* a failed stop still takes part in the gather, with nothing */
  int64_t t = sim_coll_world_timeout(rt->coll);
  int64_t deadline = t > 0 ? sim_mpi_now_ns() + t : -1;
  dt_status g = sim_mpi_gather_bytes(rt->mpi, st == DT_OK ? mem : "",
                                     st == DT_OK ? len : 0, deadline, &all,
                                     &all_len, fn);
  free(mem);
  if (st == DT_OK) st = g;
  /* the dropped counts are process 0's own (each part says its own) */
  if (st == DT_OK && rt->proc == 0)
    st = write_merged(path, all, all_len, dropped, fn);
  free(all);
  return st;
}

static dt_status trace_end_inside(dt_runtime *rt, const char *fn,
                                  sched_trace_visit_fn visit, void *ctx,
                                  int64_t *dropped);

dt_status runtime_trace_end_visit(dt_runtime *rt, sched_trace_visit_fn visit,
                                  void *ctx, int64_t *dropped, const char *fn) {
  *dropped = 0;
  if (!rt) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rt is NULL", fn);
  if (!runtime_gate_enter(rt, NULL))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: this runtime is not "
                          "being traced (it was destroyed)", fn);
  dt_status st = trace_end_inside(rt, fn, visit, ctx, dropped);
  runtime_gate_leave(rt);
  return st;
}

dt_status runtime_trace_end(dt_runtime *rt, const char *fn) {
  if (!rt) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rt is NULL", fn);
  /* a destroyed runtime wrote its trace at the destroy */
  if (!runtime_gate_enter(rt, NULL))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: this runtime is not "
                          "being traced (it was destroyed)", fn);
  dt_status st = trace_end_inside(rt, fn, NULL, NULL, NULL);
  runtime_gate_leave(rt);
  return st;
}

/* dropped NULL: a file session (dt_trace_end), else an in-process one */
static dt_status trace_end_inside(dt_runtime *rt, const char *fn,
                                  sched_trace_visit_fn visit, void *ctx,
                                  int64_t *dropped) {
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
  if (dropped) return sched_trace_stop_visit(rt->pool, fn, visit, ctx, dropped);
  if (!rt->mpi) return sched_trace_stop(rt->pool, fn);
  char *path = strdup(sched_trace_path());
  if (!path) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host "
                                   "memory", fn);
  dt_status st = end_part(rt, path, fn);
  free(path);
  return st;
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
  int64_t dropped;
  /* an in-process trace nobody ended: its events go */
  dt_status st = sched_trace_in_process()
      ? runtime_trace_end_visit(rt, NULL, NULL, &dropped, "dt_runtime_destroy")
      : runtime_trace_end(rt, "dt_runtime_destroy");
  if (st != DT_OK) {
    fprintf(stderr, "dtorch: %s\n", core_last_error());
    core_error_succeeded();
  }
}
