/* The Intercept dispatch layer: a per-thread stack of user hooks (the C
 * form of TorchDispatchMode), and the op printer / op counter built on it. */
#ifndef DISPATCH_INTERCEPT_H
#define DISPATCH_INTERCEPT_H

#include "dispatch/dispatch.h"

/* the layer handler registered for CORE_KEY_INTERCEPT */
dt_status dispatch_intercept_layer(dt_op_call *c);
/* CORE_KEYSET(CORE_KEY_INTERCEPT) when a hook is active on this thread */
core_keyset dispatch_intercept_keys(void);

/* ---- the implementations behind public entry points (api/) */
/* dt_intercept_push (dtorch.h) */
dt_status dispatch_intercept_push(dt_intercept_fn fn, void *user);
/* dt_intercept_pop (dtorch.h) */
dt_status dispatch_intercept_pop(void);
/* dt_op_call_run (dtorch.h) */
dt_status dispatch_op_call_run(dt_op_call *call);
/* dt_op_call_name (dtorch.h) */
const char *dispatch_op_call_name(const dt_op_call *call);
/* dt_op_call_num_inputs (dtorch.h) */
int dispatch_op_call_num_inputs(const dt_op_call *call);
/* dt_op_call_input (dtorch.h) */
dt_tensor *dispatch_op_call_input(const dt_op_call *call, int i);
/* dt_op_call_num_outputs (dtorch.h) */
int dispatch_op_call_num_outputs(const dt_op_call *call);
/* dt_op_call_output (dtorch.h) */
dt_tensor *dispatch_op_call_output(const dt_op_call *call, int i);
/* dt_op_call_format (dtorch.h) */
int dispatch_op_call_format(const dt_op_call *call, char *buf, size_t len);
/* dt_op_printer_push (dtorch.h) */
dt_status dispatch_op_printer_push(FILE *out);
/* dt_op_counter_push (dtorch.h) */
dt_op_counter *dispatch_op_counter_push(void);
/* dt_op_counter_pop (dtorch.h) */
dt_status dispatch_op_counter_pop(dt_op_counter *c);
/* dt_op_counter_get (dtorch.h) */
int64_t dispatch_op_counter_get(const dt_op_counter *c, const char *op);
/* dt_op_counter_total (dtorch.h) */
int64_t dispatch_op_counter_total(const dt_op_counter *c);
/* dt_op_counter_format (dtorch.h) */
int dispatch_op_counter_format(const dt_op_counter *c, char *buf, size_t len);
/* dt_op_counter_free (dtorch.h) */
void dispatch_op_counter_free(dt_op_counter *c);

#endif
