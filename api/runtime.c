/* Public entry points: runtimes, streams and events (runtime/runtime.c).
 * Each forwards to the layer that implements it; the messages those
 * raise name the public function. */
#include "core/error.h"
#include "runtime/runtime.h"

#include "core/error.h"

dt_runtime *dt_runtime_create(const dt_runtime_options *opts) {
  if (opts && CORE_RESERVED_ZERO("dt_runtime_create", "dt_runtime_options",
                                 opts) != DT_OK)
    return NULL;
  return runtime_create(opts);
}

void dt_runtime_destroy(dt_runtime *rt) {
  runtime_destroy(rt);
}

int dt_runtime_num_ranks(const dt_runtime *rt) {
  if (!rt) {  /* -1 with the error set (dtorch.h's conventions) */
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_num_ranks: rt is NULL");
    return -1;
  }
  return runtime_num_ranks(rt);
}

int dt_runtime_num_processes(const dt_runtime *rt) {
  if (!rt) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_num_processes: rt is "
                   "NULL");
    return -1;
  }
  return runtime_num_processes(rt);
}

int dt_runtime_process_index(const dt_runtime *rt) {
  if (!rt) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_process_index: rt is "
                   "NULL");
    return -1;
  }
  return runtime_process_index(rt);
}

bool dt_runtime_rank_is_local(const dt_runtime *rt, int rank) {
  if (!rt) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_rank_is_local: rt is "
                   "NULL");
    return false;
  }
  if (rank < 0 || rank >= runtime_num_ranks(rt)) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_rank_is_local: rank %d "
                   "is not a rank of this runtime (0..%d)", rank,
                   runtime_num_ranks(rt) - 1);
    return false;
  }
  return runtime_rank_is_local(rt, rank);
}

dt_status dt_runtime_synchronize(dt_runtime *rt) {
  return runtime_synchronize(rt);
}

dt_runtime *dt_runtime_default(void) {
  return runtime_default();
}

dt_status dt_runtime_set_current(dt_runtime *rt) {
  return runtime_set_current(rt);
}

dt_runtime *dt_runtime_current(void) {
  return runtime_current();
}

dt_future *dt_event_record(dt_runtime *rt, int rank) {
  return runtime_event_record(rt, rank);
}

dt_status dt_stream_wait_event(dt_runtime *rt, int rank, dt_future *ev) {
  return runtime_stream_wait_event(rt, rank, ev);
}

dt_status dt_runtime_memory(const dt_runtime *rt, int rank,
                            dt_memory_stats *out) {
  if (out) *out = (dt_memory_stats){0};  /* the reserved words too */
  return runtime_memory(rt, rank, out);
}

int64_t dt_runtime_queue_depth(const dt_runtime *rt, int rank) {
  return runtime_queue_depth(rt, rank);
}

dt_status dt_runtime_cancel(dt_runtime *rt) {
  if (!rt) return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_cancel: rt is NULL");
  /* inside the gate: a destroy racing the cancel waits for it to leave
   * before it frees the pool (runtime/gate.c) */
  if (!runtime_gate_enter(rt, "dt_runtime_cancel")) return DT_ERR_DEVICE;
  if (rt->pool) sched_pool_cancel(rt->pool);
  runtime_gate_leave(rt);
  return DT_OK;
}

dt_status dt_runtime_empty_cache(dt_runtime *rt) {
  return runtime_empty_cache(rt);
}
