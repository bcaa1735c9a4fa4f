/* `dtorch bench collectives`' end-to-end figures through the public API
 * (bench_e2e.c). */
#ifndef BENCH_BENCH_E2E_H
#define BENCH_BENCH_E2E_H

#include <stdbool.h>
#include <stdint.h>


/* dt_redistribute P(sum) -> R of 8 B and 64 MiB (if max_bytes allows) of
 * float32 on 2 and 8 ranks, with the same run's plain all-core
 * all_reduce of the same size as the baseline (bench_collectives.c).
 * False if a result was wrong. */
bool bench_redistribute_e2e(int reps, int64_t max_bytes);
/* `--api`: P(sum)->R, S(0)->R, P(sum)->S(0), S(0)->S(1) through
 * dt_redistribute on 2 and 8 ranks (only_ranks: one of them, 0: both),
 * 8 B to max_bytes, each against the plain loop; breakdown: the phases.
 * False if a result was wrong. */
bool bench_api(int reps, int64_t max_bytes, bool breakdown, int only_ranks);

#endif
