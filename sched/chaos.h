/* Chaos scheduling (docs/spmd.md, "Chaos"): seeded perturbations at the
 * engine's scheduling points, to shake out ordering bugs that a lucky
 * schedule hides. With a pool's chaos seed set, every thread that reaches
 * a point draws its next decision from its own stream: a rank thread's
 * stream is keyed by (seed, rank), an issuing thread's by (seed, the order
 * in which issuing threads first reached a point), so decision i of a
 * thread is a pure function of the seed, the thread and i (replayable);
 * the schedule that results still depends on timing, which is the point.
 * Results never depend on it: the engine's reductions have a fixed order.
 * Off (seed 0): each point is one load and a predictable branch. */
#ifndef SCHED_CHAOS_H
#define SCHED_CHAOS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum sched_chaos_site {
  SCHED_CHAOS_RECORD,     /* a rank is about to run a record */
  SCHED_CHAOS_PUBLISH,    /* an issuing thread is about to commit one */
  SCHED_CHAOS_STEAL,      /* a rank is about to try to steal (may fail it) */
  SCHED_CHAOS_COLLECTIVE, /* a rank is about to arrive at a collective */
  SCHED_CHAOS_SITE_COUNT
} sched_chaos_site;

/* what a point does */
typedef enum sched_chaos_action {
  SCHED_CHAOS_NONE, SCHED_CHAOS_YIELD, SCHED_CHAOS_SPIN, SCHED_CHAOS_SLEEP,
  SCHED_CHAOS_FAIL /* steals: this attempt fails */
} sched_chaos_action;

/* The i-th decision of thread `who` (a rank id, or -1 - the issuing
 * thread's number) at a site, and its length in ns (spin, sleep): pure. */
sched_chaos_action sched_chaos_decide(uint64_t seed, int who, uint64_t i,
                                      sched_chaos_site site, int64_t *ns);

/* The perturbation at a point: seed 0 does nothing. rank: the calling rank
 * thread's id, or -1 on an issuing thread. Returns true when a steal
 * should fail. */
bool sched_chaos_point_slow(uint64_t seed, int rank, sched_chaos_site site);
static inline bool sched_chaos_point(uint64_t seed, int rank,
                                     sched_chaos_site site) {
  if (__builtin_expect(seed == 0, 1)) return false;
  return sched_chaos_point_slow(seed, rank, site);
}
/* decisions this process's threads have taken (tests) */
uint64_t sched_chaos_count(void);

#endif
