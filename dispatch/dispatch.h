/* The dispatcher (docs/architecture.md, "The path of one op"): routes a
 * boxed call (core/call.h) through the dispatch layers, highest key first.
 *
 * The key set of a call is the union of its tensor inputs' keys plus this
 * thread's include set, minus its exclude set; the highest key's handler
 * runs and may redispatch to the keys below it. Every op is declared once in
 * core/op_list.h; its infer and kernel come from ops/ (ops_defs). */
#ifndef DISPATCH_DISPATCH_H
#define DISPATCH_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/call.h"

/* Dispatches a boxed call from the top; on success c->out[0..nout) hold new
 * references. On failure nothing is left allocated. */
dt_status dispatch_run(dt_op_call *c);
/* Runs the call, returns out[0] (a new reference) or NULL. */
dt_tensor *dispatch_run1(dt_op_call *c);
/* Continues a call below the key currently running (layers call this). */
dt_status dispatch_next(dt_op_call *c);

/* The backend layer run by the CPU key: infer and make the outputs on the
 * caller's thread, then publish one record to the inputs' rank, which
 * allocates and runs the kernel. Exposed for later layers (DTensor). */
dt_status dispatch_backend(dt_op_call *c);

/* What the layers share after publishing a call: waits for everything
 * published so far to rank (-1: every rank of rt) and returns the first
 * error recorded on c's outputs (an op with CORE_OP_CHECKS_DATA reports a
 * bad index through it); releases c's outputs after a failure. */
dt_status dispatch_wait_outputs(dt_op_call *c, struct dt_runtime *rt, int rank);
void dispatch_release_outs(dt_op_call *c);

/* Thread-local include/exclude key sets (as PyTorch's
 * LocalDispatchKeySet; docs/dispatch.md). */
core_keyset dispatch_tls_include(void);
core_keyset dispatch_tls_exclude(void);
void dispatch_tls_set_include(core_keyset ks);
void dispatch_tls_set_exclude(core_keyset ks);

#endif
