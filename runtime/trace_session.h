/* Tracing a runtime: the implementations behind dt_trace_begin /
 * dt_trace_end and DTORCH_TRACE (docs/trace.md). */
#ifndef RUNTIME_TRACE_SESSION_H
#define RUNTIME_TRACE_SESSION_H

#include "runtime/runtime.h"
#include "sched/trace_recorder.h"

/* dt_trace_begin (dtorch.h); errors name fn */
dt_status runtime_trace_begin(dt_runtime *rt, const char *path, const char *fn);
/* dt_trace_end (dtorch.h): drains the ranks, stops, writes the file */
dt_status runtime_trace_end(dt_runtime *rt, const char *fn);
/* An in-process trace of rt (`dtorch bench demo --breakdown`): the same
 * recording as dt_trace_begin with no file; the end drains the ranks as
 * dt_trace_end does and hands every event to visit (NULL: drops them;
 * sched/trace_recorder.h for the event's tid and clock), *dropped the
 * events not recorded. One process only (DT_ERR_INVALID_ARGUMENT on a
 * multi-process runtime); otherwise the errors of dt_trace_begin /
 * dt_trace_end, naming fn. */
dt_status runtime_trace_begin_visit(dt_runtime *rt, const char *fn);
dt_status runtime_trace_end_visit(dt_runtime *rt, sched_trace_visit_fn visit,
                                  void *ctx, int64_t *dropped, const char *fn);
/* at creation: DTORCH_TRACE=path starts tracing rt (a failure is printed
 * on stderr and leaves rt untraced) */
void runtime_trace_from_env(dt_runtime *rt);
/* at destruction (before the ranks stop): ends rt's trace, if any,
 * writing the file (a failure is printed on stderr) */
void runtime_trace_at_destroy(dt_runtime *rt);

#endif
