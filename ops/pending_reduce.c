/* TEMPORARY placeholder: replaced by ops/reduce.c and ops/norm.c. */
#include "ops/ops.h"
#define PENDING(fn) dt_status fn(dt_op_call *c) { return dt_error_set(DT_ERR_UNSUPPORTED, "%s: pending", c->api); }
PENDING(ops_reduce_infer) PENDING(ops_reduce_cpu) PENDING(ops_var_infer) PENDING(ops_var_cpu)
PENDING(ops_softmax_infer) PENDING(ops_softmax_cpu) PENDING(ops_layer_norm_infer) PENDING(ops_layer_norm_cpu)
PENDING(ops_rms_norm_infer) PENDING(ops_rms_norm_cpu)
