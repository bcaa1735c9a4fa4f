/* Helping: an issuing thread runs a sleeping rank's part of the record it
 * just published, instead of waking the rank's thread (sched/help.c).
 *
 * A call like dt_redistribute of 8 bytes costs far more in hand-offs than
 * in work: the issuing thread wakes the parked ranks (a futex call each,
 * then a wake-up latency of several µs, tens on a VM), and when ranks and
 * the issuer outnumber the CPUs every hand-off is a context switch. With
 * helping, the issuer keeps the parked ranks asleep, takes each one's
 * token and runs its record itself, as that rank (sched_current_rank
 * names it, its device allocates); a collective's rendezvous, waiting for
 * other sleeping members, helps them in turn. Only records their publisher
 * marks helpable are run so (small collectives, frees), and only the one
 * ticket published; everything else wakes the rank as before.
 *
 * Invariant H: a thread never returns from the call that deferred wakes
 * while it owes any: sched_help_settle helps or wakes every deferred rank
 * before the publishing function returns. So no rank sleeps with work
 * addressed to it beyond that call. */
#ifndef SCHED_HELP_H
#define SCHED_HELP_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/pool.h"

typedef enum sched_help_kind {
  SCHED_HELP_NONE = 0,  /* wake the rank */
  SCHED_HELP_ALONE = 1, /* the record waits for nothing (a free) */
  SCHED_HELP_ROUND = 2, /* one collective round and local work: helped only
                           when every rank not asleep has reached it */
} sched_help_kind;

/* Arms this thread's next broadcast commit on p: ranks parked for it stay
 * asleep and are owed (no-op while p traces, injects faults or chaos, or
 * from a rank). kind: what the record is. */
void sched_help_begin(sched_pool *p, sched_help_kind kind);
/* Disarms; runs or wakes every rank this thread owes (invariant H). */
void sched_help_settle(sched_pool *p);

/* pool.c: the commit of ticket t found the ranks in due parked for it;
 * true if this thread keeps them asleep (it then owes them) */
bool sched_help_defer(sched_pool *p, uint64_t t, const uint64_t *due);

/* For waits inside a helped record (a collective's rendezvous): ranks this
 * thread owes, and one step of paying them (help one, nested, or wake it).
 * A wait that would sleep calls sched_help_flush first (wakes them all). */
extern _Thread_local int sched_help_owed;
void sched_help_next(void);
void sched_help_flush(void);

#endif
