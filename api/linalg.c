/* Public entry points of the linear-algebra and nn ops (ops/linalg.c,
 * ops/nn.c), and the BLAS thread hook.
 *
 * BLAS threads. OpenBLAS keeps its own thread pool, sized from
 * OPENBLAS_NUM_THREADS or the core count. dtorch leaves that default alone:
 * a single-device program gets every core in a GEMM, as PyTorch's intra-op
 * pool does, and dt_matmul runs at the speed of a direct cblas_sgemm in the
 * same process whatever order the two are called in. Rank threads are a
 * different matter: with N ranks each running a GEMM, an OpenBLAS pool per
 * call oversubscribes the cores N-fold. So the runtime that starts rank
 * threads (runtime/runtime.c) calls cpu_blas_set_threads(1) before the
 * first rank runs an op, and may restore the old count (read it first with
 * cpu_blas_get_threads) when the last runtime is destroyed. The setting is
 * process-wide, as OpenBLAS's is.
 *
 * dt_dropout draws its mask from the process random stream: it reserves
 * numel indices with core_rng_reserve, exactly like dt_rand, but only when it
 * actually draws (train, 0 < p < 1) — the copy (eval, p = 0) and the zeros
 * (p = 1) take none, as in PyTorch, so a p = 0 dropout leaves later random
 * values unchanged. */
#include "api/api.h"
#include "kernels/cpu/gemm.h"
#include "ops/ops.h"

dt_tensor *dt_matmul(dt_tensor *a, dt_tensor *b) {
  return api_call_tt(CORE_OP_MATMUL, "dt_matmul", a, b);
}

dt_tensor *dt_linear(dt_tensor *x, dt_tensor *weight, dt_tensor *bias) {
  API_CHECK_TENSOR(x, "dt_linear", "x");
  API_CHECK_TENSOR(weight, "dt_linear", "weight");
  dt_op_call c;
  core_call_init(&c, CORE_OP_LINEAR, "dt_linear");
  core_call_tensor(&c, x);
  core_call_tensor(&c, weight);
  core_call_tensor(&c, bias); /* optional: NULL means no bias */
  return dispatch_run1(&c);
}

dt_tensor *dt_embedding(dt_tensor *indices, dt_tensor *weight) {
  API_CHECK_TENSOR(indices, "dt_embedding", "indices");
  API_CHECK_TENSOR(weight, "dt_embedding", "weight");
  dt_op_call c;
  core_call_init(&c, CORE_OP_EMBEDDING, "dt_embedding");
  core_call_tensor(&c, indices);
  core_call_tensor(&c, weight);
  return dispatch_run1(&c);
}

dt_tensor *dt_index_select(dt_tensor *a, int dim, dt_tensor *index) {
  API_CHECK_TENSOR(a, "dt_index_select", "a");
  API_CHECK_TENSOR(index, "dt_index_select", "index");
  dt_op_call c;
  core_call_init(&c, CORE_OP_INDEX_SELECT, "dt_index_select");
  core_call_tensor(&c, a);
  core_call_int(&c, dim);
  core_call_tensor(&c, index);
  return dispatch_run1(&c);
}

static dt_tensor *cross_entropy(const char *fn, dt_tensor *logits,
                                dt_tensor *target, dt_reduction reduction,
                                int64_t ignore_index, double label_smoothing) {
  API_CHECK_TENSOR(logits, fn, "logits");
  API_CHECK_TENSOR(target, fn, "target");
  dt_op_call c;
  core_call_init(&c, CORE_OP_CROSS_ENTROPY, fn);
  core_call_tensor(&c, logits);
  core_call_tensor(&c, target);
  core_call_int(&c, (int64_t)reduction);
  core_call_int(&c, ignore_index);
  core_call_double(&c, label_smoothing);
  return dispatch_run1(&c);
}

dt_tensor *dt_cross_entropy(dt_tensor *logits, dt_tensor *target,
                            dt_reduction reduction, int64_t ignore_index) {
  return cross_entropy("dt_cross_entropy", logits, target, reduction,
                       ignore_index, 0.0);
}

dt_tensor *dt_cross_entropy_smoothed(dt_tensor *logits, dt_tensor *target,
                                     dt_reduction reduction,
                                     int64_t ignore_index,
                                     double label_smoothing) {
  return cross_entropy("dt_cross_entropy_smoothed", logits, target, reduction,
                       ignore_index, label_smoothing);
}

dt_tensor *dt_dropout(dt_tensor *a, double p, bool train) {
  API_CHECK_TENSOR(a, "dt_dropout", "a");
  dt_op_call c;
  core_call_init(&c, CORE_OP_DROPOUT, "dt_dropout");
  core_call_tensor(&c, a);
  core_call_double(&c, p);
  core_call_bool(&c, train);
  core_call_int(&c, 0); /* seed and first index: set below when drawing */
  core_call_int(&c, 0);
  if (train && p > 0.0 && p < 1.0) {
    /* a call that fails must not advance the random stream: validate with
     * the op's own infer before reserving (dispatch runs it again) */
    if (ops_defs[CORE_OP_DROPOUT].infer(&c) != DT_OK) return NULL;
    uint64_t seed;
    c.args[4].i = (int64_t)core_rng_reserve((uint64_t)dt_tensor_numel(a), &seed);
    c.args[3].i = (int64_t)seed;
  }
  return dispatch_run1(&c);
}

/* n < 1 is a caller error: nothing changes and DT_ERR_INVALID_ARGUMENT is
 * set (the function returns void, so dt_last_status is where it shows). */
void dt_blas_set_threads(int n) {
  if (n < 1) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_blas_set_threads: n %d must be "
                 "at least 1", n);
    return;
  }
  cpu_blas_set_threads(n);
}
