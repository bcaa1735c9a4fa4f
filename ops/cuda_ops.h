/* What the CUDA bindings of the op families share (ops/<family>.c, the
 * op list's cuda column; docs/cuda.md): the rank, stream and operands of a
 * boxed call's tensors, and the errors in the CPU's words. Empty without
 * DTORCH_CUDA, so a family file includes it unconditionally. */
#ifndef OPS_CUDA_OPS_H
#define OPS_CUDA_OPS_H

#if DTORCH_HAVE_CUDA
#include <string.h>

#include "kernels/cuda/cuda.h"
#include "ops/cuda_geom.h"
#include "ops/ops.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"

static inline dt_runtime *ops_cu_rt(const dt_tensor *t) {
  return t->local.storage->rt;
}

static inline int ops_cu_rank(const dt_tensor *t) {
  return t->local.storage->rank;
}

static inline cuda_rank *ops_cu_cr(const dt_tensor *t) {
  return ops_cu_rt(t)->ranks[ops_cu_rank(t)].dev_ctx;
}

static inline void *ops_cu_stream(const dt_tensor *t) {
  return cuda_rank_stream(ops_cu_cr(t));
}

/* t's view as an operand broadcast to out's dims */
static inline cuda_operand ops_cu_operand(const dt_tensor *t,
                                          const dt_tensor *out) {
  cuda_operand o;
  o.data = core_tensor_data(t);
  ops_cuda_broadcast(out->local.ndim, t->local.ndim, t->local.sizes,
                     t->local.strides, o.strides);
  return o;
}

static inline cuda_rows ops_cu_rows(const dt_tensor *x, uint32_t mask,
                                    bool y_full) {
  return ops_cuda_rows(x->local.ndim, x->local.sizes, x->local.strides, mask,
                       y_full);
}

static inline bool ops_cu_is_float(dt_dtype d) {
  return d == DT_FLOAT32 || d == DT_FLOAT64 || d == DT_FLOAT16 ||
         d == DT_BFLOAT16;
}

static inline bool ops_cu_dense(const dt_tensor *t) {
  return core_layout_is_contiguous(t->local.sizes, t->local.strides,
                                   t->local.ndim);
}

/* ---- the shared errors and device scratch (ops/cuda_ops.c) */
dt_status ops_cu_launch_failed(const dt_op_call *c);
/* a case the kernel does not take: the host fallback when the runtime
 * allows it (DTORCH_CUDA_FALLBACK=1), else DT_ERR_UNSUPPORTED naming it */
dt_status ops_cu_unsupported(dt_op_call *c, const char *what);
/* After a kernel that marked the first bad index in the device word `bad`
 * (all ones: none): *pos = its position (-1 if none) and *val the index
 * there (idx's element pos * istride), read back while the rank waits for
 * its stream (these ops' callers wait for their outputs anyway, to report
 * a bad index as the CPU does). */
dt_status ops_cu_read_bad_index(dt_op_call *c, const void *bad,
                                const dt_tensor *idx, int64_t istride,
                                int64_t *pos, int64_t *val);
/* index_select's and its backward's bad index, in the CPU's words */
dt_status ops_cu_index_error(const dt_op_call *c, int64_t val, int64_t pos,
                             int d, int64_t size);
/* cross_entropy's and its backward's bad target, in the CPU's words */
dt_status ops_cu_target_error(const dt_op_call *c, int64_t val, int64_t pos,
                              int64_t nc, int64_t ignore);
/* device scratch of the rank whose first 8 bytes hold all ones (a bad
 * index word); NULL + the error when it does not fit */
void *ops_cu_bad_scratch(dt_op_call *c, size_t bytes, size_t bad_at);
#endif

#endif
