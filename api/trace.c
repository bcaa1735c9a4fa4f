/* Public entry points: timelines (runtime/trace_session.c, sched/trace_recorder.c).
 * The messages those raise name the public function. */
#include "runtime/trace_session.h"

dt_status dt_trace_begin(dt_runtime *rt, const char *path) {
  return runtime_trace_begin(rt, path, "dt_trace_begin");
}

dt_status dt_trace_end(dt_runtime *rt) {
  return runtime_trace_end(rt, "dt_trace_end");
}
