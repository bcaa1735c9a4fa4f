/* TEMPORARY placeholder: replaced by ops/join.c. */
#include "ops/ops.h"
#define PENDING(fn) dt_status fn(dt_op_call *c) { return dt_error_set(DT_ERR_UNSUPPORTED, "%s: pending", c->api); }
PENDING(ops_cat_infer) PENDING(ops_cat_cpu) PENDING(ops_stack_infer) PENDING(ops_stack_cpu)
