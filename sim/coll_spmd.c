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
#include <stdlib.h>
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

void sim_coll_world_set_where(sim_coll_world *w, sim_coll_where_fn fn, void *ctx) {
  w->where = fn;
  w->where_ctx = ctx;
}

void sim_coll_world_set_faults(sim_coll_world *w, struct sched_faults *f) {
  w->faults = f;
}

void sim_coll_gone_str(const sim_coll_world *w, int rank, char *buf, size_t len) {
  const sim_coll_gone *g = &w->gone[rank];
  if (g->st == DT_OK)
    snprintf(buf, len, "rank %d left its SPMD function (it returned DT_OK)",
             rank);
  else
    snprintf(buf, len, "rank %d left its SPMD function (it failed: %s: %.1100s)",
             rank, core_status_name(g->st), g->msg);
}



/* ---- SPMD: departures and resync (coll_spmd.c, collectives.h) */

static bool has_member(const sim_coll_group *g, int rank) {
  for (int j = 0; j < g->n; j++)
    if (g->ranks[j] == rank) return true;
  return false;
}

void sim_coll_wake_groups_of(sim_coll_world *w, int rank) {
  pthread_mutex_lock(&w->lock);
  for (sim_coll_group *g = w->groups; g; g = g->next)
    if (has_member(g, rank)) {
      sim_coll_futex_wake(&g->arrive[0].v);
      sim_coll_futex_wake(&g->arrive[1].v);
    }
  pthread_mutex_unlock(&w->lock);
}

/* the group's members made different numbers of calls, or a slot is
 * broken (quiescent: plain reads of the owners' fields are ordered by the
 * barrier every rank passed before sim_coll_world_resync) */
static bool out_of_step(const sim_coll_group *g) {
  for (int j = 1; j < g->n; j++)
    if (g->members[j].seq != g->members[0].seq ||
        g->members[j].ndepart != g->members[0].ndepart)
      return true;
  for (int s = 0; s < 2; s++)
    if (atomic_load_explicit(&g->arrive[s].v, memory_order_relaxed) & WORD_BROKEN)
      return true;
  return false;
}

static void group_reset(sim_coll_group *g) {
  for (int j = 0; j < g->n; j++) {
    g->members[j].seq = 0;
    g->members[j].ndepart = 0;
    atomic_store_explicit(&g->members[j].arrived, 0, memory_order_relaxed);
  }
  for (int s = 0; s < 2; s++) {
    atomic_store_explicit(&g->arrive[s].v, g->base << 1, memory_order_relaxed);
    if (g->report[s] != sim_coll_oom_report) free(g->report[s]);
    g->report[s] = NULL;
  }
  atomic_store_explicit(&g->depart.v, g->base << 1, memory_order_relaxed);
}

int sim_coll_world_resync(sim_coll_world *w) {
  if (!w) return 0;
  int reset = 0;
  pthread_mutex_lock(&w->lock);
  for (sim_coll_group *g = w->groups; g; g = g->next)
    if (out_of_step(g)) {
      group_reset(g);
      reset++;
    }
  pthread_mutex_unlock(&w->lock);
  for (int r = 0; r < w->nranks; r++) { /* point-to-point channels too */
    sim_coll_mailbox *row = atomic_load_explicit(&w->mail[r], memory_order_acquire);
    for (int to = 0; row && to < w->nranks; to++) {
      sim_coll_mailbox *mb = &row[to];
      if (mb->nsent == mb->nrecv &&
          atomic_load_explicit(&mb->state, memory_order_relaxed) == 0)
        continue;
      mb->nsent = mb->nrecv = 0;
      atomic_store_explicit(&mb->state, 0, memory_order_relaxed);
      reset++;
    }
  }
  for (int r = 0; r < w->nranks; r++) {
    atomic_store_explicit(&w->gone[r].gone, false, memory_order_relaxed);
    w->gone[r].st = DT_OK;
  }
  /* release: the resets before the count a caller may read (the SPMD exit
   * barrier that follows orders them for the ranks) */
  atomic_store_explicit(&w->norder, 0, memory_order_relaxed);
  atomic_store_explicit(&w->ngone, 0, memory_order_release);
  return reset;
}

/* ---- deadlocks: waiters that wait for each other in different rounds
 *
 * Ranks that call collectives on different groups (or in a different
 * order) can wait for each other in a cycle: rank 0 waits in round k of
 * group G for rank 3, which waits in round k' of G' for rank 2, which
 * waits in G for rank 0 ... Nobody ever arrives: NCCL would hang until its
 * timeout. Every waiter publishes the round it waits in (sim_coll_wait_mark:
 * seq and member, then the group with a release store; cleared when it
 * stops). At each sleep slice a waiter walks "waits for" edges from itself
 * (x waits for y when y is a member of x's round that has not arrived);
 * a path back to itself is a cycle. The states read are other threads'
 * and may be stale, so a cycle counts only when a second walk, a slice
 * later, finds the same ranks in the same rounds: a rank seen waiting in
 * the same (group, round) twice waited in between (its round numbers only
 * grow), and a member that had not arrived at a round it was waiting for
 * cannot have arrived since (it was waiting elsewhere), so no round of the
 * cycle can complete. */
void sim_coll_wait_mark(sim_coll_group *g, int member, uint64_t k) {
  sim_coll_waiting *wt = &g->world->waiting[g->ranks[member]];
  atomic_store_explicit(&wt->seq, k, memory_order_relaxed);
  atomic_store_explicit(&wt->member, member, memory_order_relaxed);
  /* release: seq and member (and our entry) before the group */
  atomic_store_explicit(&wt->g, g, memory_order_release);
}

void sim_coll_wait_clear(sim_coll_group *g, int member) {
  /* relaxed: a reader that still sees the group re-reads it (waiting_of) */
  atomic_store_explicit(&g->world->waiting[g->ranks[member]].g, NULL,
                        memory_order_relaxed);
}

typedef struct node {
  int rank, member, waits_for;
  sim_coll_group *g;
  uint64_t k;
} node;

/* the round rank r waits in, if any */
static bool waiting_of(const sim_coll_world *w, int r, node *nd) {
  const sim_coll_waiting *wt = &w->waiting[r];
  /* acquire: pairs with sim_coll_wait_mark's release (seq, member, entry) */
  sim_coll_group *g = atomic_load_explicit(&wt->g, memory_order_acquire);
  if (!g) return false;
  nd->k = atomic_load_explicit(&wt->seq, memory_order_relaxed);
  nd->member = atomic_load_explicit(&wt->member, memory_order_relaxed);
  nd->g = g;
  return atomic_load_explicit(&wt->g, memory_order_acquire) == g;
}

/* depth-first from `at`: true when a path of waiters leads back to start */
static bool find_cycle(const sim_coll_world *w, int at, int start, bool *visited,
                       node *path, int depth, int *len) {
  node *nd = &path[depth];
  nd->rank = at;
  if (!waiting_of(w, at, nd)) return false;
  visited[at] = true;
  for (int j = 0; j < nd->g->n; j++) {
    int y = nd->g->ranks[j];
    /* acquire: a member's count above k means it arrived */
    if (atomic_load_explicit(&nd->g->members[j].arrived, memory_order_acquire) > nd->k)
      continue;
    nd->waits_for = y;
    if (y == start) {
      *len = depth + 1;
      return true;
    }
    if (!visited[y] && find_cycle(w, y, start, visited, path, depth + 1, len))
      return true;
  }
  return false;
}

static char *cycle_report(const node *path, int len) {
  size_t cap = 160 + (size_t)len * 400;
  char *msg = malloc(cap);
  if (!msg) return NULL;
  size_t n = (size_t)snprintf(msg, cap, "collectives deadlocked (the ranks "
                              "called different collectives): ");
  for (int i = 0; i < len && n < cap; i++) {
    const node *nd = &path[i];
    char d[256];
    sim_coll_describe(d, sizeof d, &nd->g->entries[nd->k & 1][nd->member]);
    n += (size_t)snprintf(msg + n, cap - n, "%srank %d waits in %s on group %s "
                          "(seq %llu) for rank %d", i ? "; " : "", nd->rank, d,
                          nd->g->name, (unsigned long long)nd->k, nd->waits_for);
  }
  return msg;
}

char *sim_coll_deadlock(sim_coll_group *g, int member, uint64_t k,
                        sim_coll_probe_state *probe) {
  (void)k;
  sim_coll_world *w = g->world;
  bool *visited = calloc((size_t)w->nranks, sizeof *visited);
  node *path = malloc(sizeof *path * (size_t)w->nranks);
  int len = 0;
  int me = g->ranks[member];
  bool found = visited && path && find_cycle(w, me, me, visited, path, 0, &len);
  char *report = NULL;
  if (found) {
    uint64_t sig = 1469598103934665603ull; /* FNV-1a of the cycle's rounds */
    for (int i = 0; i < len; i++) {
      uint64_t v[3] = {(uint64_t)path[i].rank, (uint64_t)(uintptr_t)path[i].g, path[i].k};
      for (int j = 0; j < 3; j++) sig = (sig ^ v[j]) * 1099511628211ull;
    }
    if (probe->n == len && probe->sig == sig) report = cycle_report(path, len);
    probe->n = len;
    probe->sig = sig;
  } else {
    probe->n = 0;
  }
  free(visited);
  free(path);
  return report;
}
