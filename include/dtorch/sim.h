/* What only a simulator can do (docs/spmd.md): dry runs (shapes only,
 * with a cost model) and fault injection. Part of the public API:
 * <dtorch/dtorch.h> includes it (and so does <dtorch/spmd.h>, which held
 * these before); it may also be included on its own. The conventions are
 * dtorch.h's (its top). */
#ifndef DTORCH_SIM_H
#define DTORCH_SIM_H

#include "dtorch/dtorch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a dry run (dt_runtime_options.dry_run) saw since the runtime was
 * made or the last reset: ops issued, collectives and their bytes (as
 * dt_comm_count counts them), per-rank memory peaks (the ops' outputs and
 * inputs; not the collectives' scratch), and the predicted time: each
 * collective step by the alpha-beta model over its group (ring
 * all-reduce 2(n-1)·α + 2(n-1)/n·s/β; all-gather, reduce-scatter and
 * all-to-all (n-1)·α + (n-1)/n·s'/β with s' the gathered or scattered
 * size), each op by the bytes its fullest rank writes and reads at the
 * memory bandwidth plus matmul FLOPs at the FLOP rate; no overlap. */
typedef struct dt_dry_run_stats {
  int64_t ops, collectives, comm_bytes;
  int64_t peak_max, peak_min;  /* per-rank memory peaks: largest, smallest */
  int peak_rank;               /* a rank with the largest */
  double comm_s, compute_s, step_s;
  uint64_t reserved[8];        /* zeroed by the library; later figures */
} dt_dry_run_stats;
/* Errors: rt NULL, not a dry run (DT_ERR_INVALID_ARGUMENT). */
DT_API dt_status dt_dry_run_report(dt_runtime *rt, dt_dry_run_stats *out);
/* zeroes the counts and times; peaks restart from what is live */
DT_API dt_status dt_dry_run_reset(dt_runtime *rt);

/* Fault injection (docs/spmd.md "Faults"): the `after`-th event (1 = the
 * next; counted from this call, on the rank's own thread) of each kind
 * in `kind` on `rank` (-1: on every rank) fails, once:
 *   DT_FAULT_OOM              a device allocation: DT_ERR_OUT_OF_MEMORY
 *   DT_FAULT_STALL            a record: the rank sleeps stall_ms first
 *                             (0: 1000); peers' collectives may time out
 *   DT_FAULT_RANK_FAIL        an op (its part on that rank): DT_ERR_FAULT
 *   DT_FAULT_COLLECTIVE_FAIL  a collective call: DT_ERR_FAULT for the rank,
 *                             every member fails naming it
 *   DT_FAULT_IO               a checkpoint read/write: DT_ERR_IO
 * The error reaches whatever depends on the failed work (outputs are
 * poisoned, futures fail) with "injected fault (dt_fault_inject): ... on
 * rank r" in the message; other work completes; the runtime stays
 * usable. Re-arming a (rank, kind) replaces its fault. Errors: rt NULL or
 * destroyed, kind not a set of the bits, rank out of range, negative
 * after or stall_ms. Thread safety: any thread. */
typedef enum dt_fault_kind { DT_FAULT_OOM = 1, DT_FAULT_STALL = 2,
  DT_FAULT_RANK_FAIL = 4, DT_FAULT_COLLECTIVE_FAIL = 8, DT_FAULT_IO = 16 }
  dt_fault_kind;
typedef struct dt_fault { unsigned kind; int rank; int64_t after;
  int64_t stall_ms;
  uint64_t reserved[4]; /* zero; later fields are carved from here */
} dt_fault;
DT_API dt_status dt_fault_inject(dt_runtime *rt, const dt_fault *f);
/* disarms every fault not yet fired */
DT_API dt_status dt_fault_clear(dt_runtime *rt);
/* faults fired so far on rt */
DT_API int64_t   dt_fault_count(const dt_runtime *rt);

#ifdef __cplusplus
}
#endif
#endif /* DTORCH_SIM_H */
