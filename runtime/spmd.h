/* SPMD mode (docs/spmd.md): dt_spmd_run runs the user's function on every
 * rank thread; while it runs, the ops that thread issues to its own rank
 * run inline, at once, on the thread itself (its stream is busy running
 * the function, so a published record would wait for itself), and its
 * collectives rendezvous with the other ranks' calls. */
#ifndef RUNTIME_SPMD_H
#define RUNTIME_SPMD_H

#include "dtorch/dtorch.h"

/* The rank this thread runs an SPMD function for on rt, or -1 (also for
 * another runtime's rank threads and every issuing thread). One
 * thread-local load and a compare. */
int runtime_spmd_rank(const dt_runtime *rt);
/* the same for whatever runtime: -1 outside an SPMD function */
int runtime_spmd_any_rank(void);
dt_runtime *runtime_spmd_runtime(void);

/* dt_spmd_run (dtorch.h) */
dt_status runtime_spmd_run(dt_runtime *rt, dt_spmd_fn fn, void *arg);

#endif
