/* Dry runs (dt_runtime_options.dry_run; docs/spmd.md "Dry runs"): a
 * runtime whose ops are validated, propagated and planned on the issuing
 * thread as always, but whose records are never run: no device memory is
 * allocated, nothing is computed. What would have happened is counted
 * here: ops, collectives with an alpha-beta time, per-rank memory with
 * peaks, and a memory/FLOP-bound compute time. */
#ifndef RUNTIME_DRY_H
#define RUNTIME_DRY_H

#include "runtime/runtime.h"

typedef struct runtime_dry runtime_dry;

/* the model from the options (0s: defaults); NULL without memory */
runtime_dry *runtime_dry_new(const dt_runtime_options *o, int ranks);
void runtime_dry_free(runtime_dry *d);
/* rank's live bytes change by delta (its peak follows) */
void runtime_dry_memory(dt_runtime *rt, int rank, int64_t delta);
typedef enum runtime_dry_kind { RUNTIME_DRY_ALL_GATHER, RUNTIME_DRY_ALL_REDUCE,
  RUNTIME_DRY_REDUCE_SCATTER, RUNTIME_DRY_ALL_TO_ALL } runtime_dry_kind;
/* one collective step over groups of n ranks of a mesh of `ranks`:
 * `bytes` is what all participating ranks feed in, summed */
void runtime_dry_collective(dt_runtime *rt, runtime_dry_kind kind, int n, int ranks,
                            int64_t bytes);
/* one op: the fullest rank moves `bytes` and does `flops` */
void runtime_dry_op(dt_runtime *rt, int64_t bytes, double flops);
/* One op call's cost, the one model of the single-device path
 * (runtime/exec.c) and the DTensor one (dispatch/propagate.c): the fullest
 * rank writes each output (elems[o] elements; elems NULL: the outputs'
 * own numel) and reads as much again; an op flagged CORE_OP_CONTRACTS in
 * the op list does 2 * elems[0] * k FLOPs, k its contraction length (k <
 * 0: the last dim of args[0]). */
void runtime_dry_call(dt_runtime *rt, const dt_op_call *c,
                      const int64_t *elems, int64_t k);

/* dt_dry_run_report, dt_dry_run_reset (dtorch.h) */
dt_status runtime_dry_report(dt_runtime *rt, dt_dry_run_stats *out);
dt_status runtime_dry_reset(dt_runtime *rt);

#endif
