/* The CUDA backend's kernel table (runtime/backend.h; docs/cuda.md),
 * generated from the op list's cuda column: each op's binding lives in its
 * family file (ops/<family>.c, under DTORCH_HAVE_CUDA), turning a boxed
 * call into a launch on the rank's stream (kernels/cuda). An op whose
 * column says ops_cuda_host_fallback has no entry: it runs through the
 * host fallback when DTORCH_CUDA_FALLBACK=1, else fails with
 * DT_ERR_UNSUPPORTED naming it; views run no kernel (ops_alias_cpu, as in
 * the CPU table). Registered when the library loads, as the CPU table is
 * (ops/registry.c calls ops_cuda_register, so that a static link keeps
 * this file). Also the bindings' shared errors (ops/cuda_ops.h). Empty
 * without DTORCH_CUDA. */
#include "ops/cuda_ops.h"
#include "ops/ops.h"
#include "runtime/backend.h"

#if DTORCH_HAVE_CUDA

dt_status ops_cu_launch_failed(const dt_op_call *c) {
  return core_error_set(DT_ERR_DEVICE, "%s: launching the CUDA kernel of %s "
                        "failed", c->api, core_op_name(c->op));
}

/* a case the kernel does not take: the host fallback when the runtime
 * allows it (DTORCH_CUDA_FALLBACK=1), else DT_ERR_UNSUPPORTED naming it */
dt_status ops_cu_unsupported(dt_op_call *c, const char *what) {
  if (ops_cu_rt(c->out[0])->host_fallback) return ops_host_fallback(c);
  return core_error_set(DT_ERR_UNSUPPORTED, "%s: the CUDA kernel of %s does "
                        "not take %s yet (DTORCH_CUDA_FALLBACK=1 runs it on "
                        "the host)", c->api, core_op_name(c->op), what);
}

/* After a kernel that marked the first bad index in the device word `bad`
 * (all ones: none): *pos = its position (-1 if none) and *val the index
 * there (idx's element pos * istride), read back while the rank waits for
 * its stream (these ops' callers wait for their outputs anyway, to report
 * a bad index as the CPU does). */
dt_status ops_cu_read_bad_index(dt_op_call *c, const void *bad,
                                const dt_tensor *idx, int64_t istride,
                                int64_t *pos, int64_t *val) {
  dt_tensor *o = c->out[0];
  dt_runtime *rt = ops_cu_rt(o);
  int rank = ops_cu_rank(o);
  const runtime_backend *be = rt->backend;
  uint64_t flag = UINT64_MAX;
  *pos = -1;
  dt_status st = be->copy(rt, rank, &flag, bad, sizeof flag, RUNTIME_COPY_D2H);
  if (st == DT_OK) st = be->stream_sync(rt, rank);
  if (st != DT_OK || flag == UINT64_MAX) return st;
  bool i64 = idx->dtype == DT_INT64;
  int64_t v64 = 0;
  int32_t v32 = 0;
  *pos = (int64_t)flag;
  const char *at = (const char *)core_tensor_data(idx) +
                   (size_t)(*pos * istride) * core_dtype_size(idx->dtype);
  st = be->copy(rt, rank, i64 ? (void *)&v64 : (void *)&v32, at, i64 ? 8 : 4,
                RUNTIME_COPY_D2H);
  if (st == DT_OK) st = be->stream_sync(rt, rank);
  *val = i64 ? v64 : v32;
  return st;
}

/* index_select's and its backward's bad index, in the CPU's words */
dt_status ops_cu_index_error(const dt_op_call *c, int64_t val, int64_t pos,
                             int d, int64_t size) {
  return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: index %lld (position "
                        "%lld of index) is out of range for dim %d of size "
                        "%lld (expected [0, %lld))", c->api, (long long)val,
                        (long long)pos, d, (long long)size, (long long)size);
}

/* cross_entropy's and its backward's bad target, in the CPU's words */
dt_status ops_cu_target_error(const dt_op_call *c, int64_t val, int64_t pos,
                              int64_t nc, int64_t ignore) {
  return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: target %lld (position "
                        "%lld) is out of range for %lld classes (expected "
                        "[0, %lld) or ignore_index %lld)", c->api,
                        (long long)val, (long long)pos, (long long)nc,
                        (long long)nc, (long long)ignore);
}

/* device scratch of the rank whose first 8 bytes hold all ones (a bad
 * index word); NULL + the error when it does not fit */
void *ops_cu_bad_scratch(dt_op_call *c, size_t bytes, size_t bad_at) {
  dt_tensor *o = c->out[0];
  dt_runtime *rt = ops_cu_rt(o);
  const char *err;
  char *p = rt->backend->alloc(rt, ops_cu_rank(o), bytes, &err);
  if (!p) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: %s", c->api, err);
    return NULL;
  }
  if (cuda_fill(ops_cu_stream(o), (int)DT_INT64, 1, p + bad_at, -1)) {
    rt->backend->free(rt, ops_cu_rank(o), p);
    ops_cu_launch_failed(c);
    return NULL;
  }
  return p;
}

/* the column's "no CUDA kernel" marker: never registered, so never run */
dt_status ops_cuda_host_fallback(dt_op_call *c) {
  return core_error_set(DT_ERR_INTERNAL, "%s: %s has no CUDA kernel",
                        c->api, core_op_name(c->op));
}

static const core_kernel_fn cuda_column[CORE_OP_COUNT] = {
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags) \
  [CORE_OP_##id] = cuda,
#include "core/op_list.h"
#undef CORE_OP
};
static core_kernel_fn cuda_kernels[CORE_OP_COUNT];

void ops_cuda_register(void) {
  for (int op = 0; op < CORE_OP_COUNT; op++)
    cuda_kernels[op] =
        cuda_column[op] == ops_cuda_host_fallback ? NULL : cuda_column[op];
  runtime_backend_set_kernels(CORE_KEY_CUDA, cuda_kernels);
}

#else
void ops_cuda_register(void) {}
#endif
