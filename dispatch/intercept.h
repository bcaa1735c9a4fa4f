/* The Intercept dispatch layer: a per-thread stack of user hooks (the C
 * form of TorchDispatchMode), and the op printer / op counter built on it. */
#ifndef DT_RUNTIME_INTERCEPT_H
#define DT_RUNTIME_INTERCEPT_H

#include "dispatch/dispatch.h"

/* the layer handler registered for DT_KEY_INTERCEPT */
dt_status dt_intercept_layer(dt_op_call *c);
/* DT_KEYSET(DT_KEY_INTERCEPT) when a hook is active on this thread */
dt_keyset dt_intercept_keys(void);

#endif
