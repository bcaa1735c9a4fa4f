/* TEMPORARY placeholder: replaced by ops/linalg.c and ops/nn.c. */
#include "ops/ops.h"
#define PENDING(fn) dt_status fn(dt_op_call *c) { return dt_error_set(DT_ERR_UNSUPPORTED, "%s: pending", c->api); }
PENDING(ops_matmul_infer) PENDING(ops_matmul_cpu) PENDING(ops_linear_infer) PENDING(ops_linear_cpu)
PENDING(ops_embedding_infer) PENDING(ops_embedding_cpu) PENDING(ops_index_select_infer) PENDING(ops_index_select_cpu)
PENDING(ops_cross_entropy_infer) PENDING(ops_cross_entropy_cpu) PENDING(ops_dropout_infer) PENDING(ops_dropout_cpu)
