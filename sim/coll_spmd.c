/* SPMD support of the emulated collectives (sim/collectives.h): call
 * sites, departures and what each rank is doing.
 *
 * Departure. In SPMD mode every rank runs the user's function and calls
 * collectives itself; a rank that returns (or fails) while its peers wait
 * for it in a collective would leave them waiting for the watchdog. So a
 * rank that leaves marks itself gone: it writes why (and its departure
 * order) into its entry, sets `gone` (release), increments the world's
 * `ngone` (seq_cst) and wakes the waiters of every group it belongs to. A
 * waiter checks `ngone` while it spins and each time it wakes; when it
 * changed (an acquire load: the flags set before are then visible) it
 * looks for a gone member among those that have not arrived and breaks
 * the round with a report naming the one that left first (the cause;
 * later ones may have left because of it). A wake-up that races with a waiter
 * going to sleep is caught by the next slice (SIM_COLL_SLICE_NS): no lost
 * wake-up can outlast that. A call made after a member left fails before
 * it touches the group (collectives.c). */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "sim/coll_internal.h"

void sim_coll_depart(sim_coll_world *w, int rank, dt_status st, const char *msg) {
  if (!w || rank < 0 || rank >= w->nranks) return;
  sim_coll_gone *g = &w->gone[rank];
  g->st = st;
  snprintf(g->msg, sizeof g->msg, "%s", msg && msg[0] ? msg : "");
  /* relaxed: ordered for readers by the flag's release store below */
  g->order = atomic_fetch_add_explicit(&w->norder, 1, memory_order_relaxed);
  /* release: st, msg and order before the flag (sim_coll_is_gone) */
  atomic_store_explicit(&g->gone, true, memory_order_release);
  /* seq_cst (a release): after the flag, so a waiter whose acquire load
   * sees the new count sees the flag; the slice bounds a missed wake-up */
  atomic_fetch_add_explicit(&w->ngone, 1, memory_order_seq_cst);
  sim_coll_wake_groups_of(w, rank);
}

void sim_coll_gone_str(const sim_coll_world *w, int rank, char *buf, size_t len) {
  const sim_coll_gone *g = &w->gone[rank];
  if (g->st == DT_OK)
    snprintf(buf, len, "rank %d left its SPMD function (it returned DT_OK)",
             rank);
  else
    snprintf(buf, len, "rank %d left its SPMD function (it failed: %s: %.200s)",
             rank, core_status_name(g->st), g->msg);
}

void sim_coll_note_where(sim_coll_world *w, int rank, const char *what) {
  /* relaxed: read only for the watchdog's report */
  if (w && rank >= 0 && rank < w->nranks)
    atomic_store_explicit(&w->where[rank], what, memory_order_relaxed);
}

const char *sim_coll_where(const sim_coll_world *w, int rank) {
  /* relaxed: as above */
  return w && rank >= 0 && rank < w->nranks
             ? atomic_load_explicit(&w->where[rank], memory_order_relaxed) : NULL;
}
