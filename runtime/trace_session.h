/* Tracing a runtime: the implementations behind dt_trace_begin /
 * dt_trace_end and DTORCH_TRACE (docs/trace.md). */
#ifndef RUNTIME_TRACE_SESSION_H
#define RUNTIME_TRACE_SESSION_H

#include "runtime/runtime.h"

/* dt_trace_begin (dtorch.h); errors name fn */
dt_status runtime_trace_begin(dt_runtime *rt, const char *path, const char *fn);
/* dt_trace_end (dtorch.h): drains the ranks, stops, writes the file */
dt_status runtime_trace_end(dt_runtime *rt, const char *fn);
/* at creation: DTORCH_TRACE=path starts tracing rt (a failure is printed
 * on stderr and leaves rt untraced) */
void runtime_trace_from_env(dt_runtime *rt);
/* at destruction (before the ranks stop): ends rt's trace, if any,
 * writing the file (a failure is printed on stderr) */
void runtime_trace_at_destroy(dt_runtime *rt);

#endif
