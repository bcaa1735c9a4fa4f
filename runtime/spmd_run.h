/* SPMD mode (docs/spmd.md): dt_spmd_run runs the user's function on every
 * rank thread; while it runs, the ops that thread issues to its own rank
 * run inline, at once, on the thread itself (its stream is busy running
 * the function, so a published record would wait for itself), and its
 * collectives rendezvous with the other ranks' calls. */
#ifndef RUNTIME_SPMD_RUN_H
#define RUNTIME_SPMD_RUN_H

#include <stdatomic.h>

#include "dtorch/dtorch.h"
#include "runtime/runtime.h"

/* the thread-local half of runtime_spmd_rank */
int runtime_spmd_rank_tls(const dt_runtime *rt);
/* The rank this thread runs an SPMD function for on rt, or -1 (also for
 * another runtime's rank threads and every issuing thread). Off the SPMD
 * runs, one relaxed load and a predictable branch (the publish paths ask
 * on every op): the count is raised before the run's record is published
 * and dropped after every rank left, so a rank inside the run sees it. */
static inline int runtime_spmd_rank(const dt_runtime *rt) {
  if (__builtin_expect(!atomic_load_explicit(&((dt_runtime *)rt)->spmd_active,
                                             memory_order_relaxed), 1))
    return -1;
  return runtime_spmd_rank_tls(rt);
}
/* the same for whatever runtime: -1 outside an SPMD function */
int runtime_spmd_any_rank(void);
dt_runtime *runtime_spmd_runtime(void);

/* dt_spmd_run (dtorch.h); site: where it was called ("file:line", or a
 * symbolized return address), for the report of a run that waits its
 * turn behind this one */
dt_status runtime_spmd_run(dt_runtime *rt, dt_spmd_fn fn, void *arg,
                           const char *site);

/* The runtime's turn (one SPMD run, or its destroy, at a time). take:
 * waits for it up to the collective timeout (none: for ever); fails with
 * DT_ERR_TIMEOUT naming the holder and where it was started, or with
 * DT_ERR_DEVICE once the runtime is being destroyed; holder describes the
 * caller for such a report (NULL: the destroy itself, which waits on a
 * closed runtime too). give: hands it on. wake_waiters: after the gate
 * closed, the waiters fail with DT_ERR_DEVICE. */
dt_status runtime_spmd_take_turn(dt_runtime *rt, const char *fn,
                                 const char *holder);
void runtime_spmd_give_turn(dt_runtime *rt);
void runtime_spmd_wake_waiters(dt_runtime *rt);

#endif
