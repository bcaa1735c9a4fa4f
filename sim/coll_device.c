/* Collectives over device memory (sim/collectives.h, sim_coll_device):
 * the host rendezvous of collectives.c with the data movement issued to
 * the members' streams and ordered by events, so that no rank thread
 * waits for its device.
 *
 * A round of member i (group of n, round k):
 *   begin  records ready_i on its stream: after the work that made its
 *          input and after everything that still reads or writes its
 *          output (the others write into it). Published in its entry
 *          before arriving (the arrival's release).
 *   move   (split rounds, after the rendezvous) its stream waits for every
 *          other ready_j, then the member issues its share of the data
 *          movement (coll_move.c: the same shares as on the host) and
 *          records done_i into its entry with done_refs = n, published by
 *          its arrival at the completion barrier (release).
 *   end    after the completion barrier (acquire): its stream waits for
 *          every other done_j, so nothing it issues later overwrites its
 *          input while another member still reads it, or reads its output
 *          before every member wrote its share. Each member, the owner
 *          included, then decrements done_refs of each done_j (acq_rel);
 *          the one that brings it to 0 releases the event, after every
 *          wait on it was issued. ready_i is released by its owner: every
 *          member issued its wait on it before arriving at the completion
 *          barrier, which the owner has passed.
 * A wait issued on an event stays valid when the event is released (CUDA:
 * cudaStreamWaitEvent, then cudaEventDestroy).
 *
 * A round that fails its checks, or breaks, moves nothing and records no
 * done event (nobody waits on ready events then: the rendezvous either
 * completed for every member or for none); pull rounds (no member has
 * input) move nothing either. Entry fields are written by their member
 * only, in begin (before the arrival) and move (before the completion
 * arrival), and rewritten at its next round on the slot (k + 2), which
 * starts after every member arrived at round k + 1, i.e. finished round
 * k. */
#include <stdlib.h>

#include "core/error.h"
#include "sim/coll_internal.h"

void sim_coll_world_set_device(sim_coll_world *w, const sim_coll_device *dev) {
  w->dev = dev;
}

dt_status sim_coll_dev_begin(sim_coll_group *g, int member, uint64_t k,
                             sim_coll_entry *e, dt_status bad) {
  (void)k;
  const sim_coll_device *dev = g->world->dev;
  e->ev_ready = e->ev_done = NULL;
  if (bad != DT_OK || e->d.kind == KIND_BARRIER || e->d.kind == KIND_ABSTAIN)
    return bad;
  e->ev_ready = dev->record(dev->ctx, g->ranks[member]);
  return e->ev_ready ? DT_OK : core_last_status();
}

dt_status sim_coll_dev_move(sim_coll_group *g, int member, uint64_t k) {
  const sim_coll_device *dev = g->world->dev;
  sim_coll_entry *E = g->entries[k & 1];
  sim_coll_member *me = &g->members[member];
  sim_coll_mover mv = {.dev = dev, .rank = g->ranks[member], .st = DT_OK};
  for (int j = 0; j < g->n && mv.st == DT_OK; j++)
    if (j != member && E[j].ev_ready)
      mv.st = dev->wait(dev->ctx, mv.rank, E[j].ev_ready);
  if (mv.st == DT_OK)
    sim_coll_move_split(E, g->n, member, me->ins, me->outs, &mv);
  /* recorded even after a failed launch: the others wait on it */
  void *done = dev->record(dev->ctx, mv.rank);
  if (!done && mv.st == DT_OK) mv.st = core_last_status();
  /* relaxed: published by the completion arrival's release */
  atomic_store_explicit(&E[member].done_refs, g->n, memory_order_relaxed);
  E[member].ev_done = done;
  return mv.st;
}

/* one holder of done_j is finished with it: the last releases it */
static void unref_done(const sim_coll_device *dev, sim_coll_entry *e) {
  /* acq_rel: our wait on the event is issued before the count drops
   * (release); the member that releases it sees every other wait
   * (acquire) */
  if (atomic_fetch_sub_explicit(&e->done_refs, 1, memory_order_acq_rel) == 1)
    dev->release(dev->ctx, e->ev_done);
}

dt_status sim_coll_dev_end(sim_coll_group *g, int member, uint64_t k,
                           bool moved) {
  const sim_coll_device *dev = g->world->dev;
  sim_coll_entry *E = g->entries[k & 1];
  int rank = g->ranks[member];
  dt_status st = DT_OK;
  for (int j = 0; moved && j < g->n; j++) {
    if (!E[j].ev_done) continue;
    if (j != member && st == DT_OK) st = dev->wait(dev->ctx, rank, E[j].ev_done);
    unref_done(dev, &E[j]);
  }
  if (E[member].ev_ready) dev->release(dev->ctx, E[member].ev_ready);
  return st;
}
