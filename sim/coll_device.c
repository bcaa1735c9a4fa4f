/* Collectives over device memory (sim/collectives.h, sim_coll_device):
 * the host rendezvous of collectives.c with the data movement issued to
 * the members' streams and ordered by events, so that no rank thread
 * waits for its device.
 *
 * A round of member i (group of n, round k):
 *   begin  records ready_i on its stream: after the work that made its
 *          input and after everything that still reads or writes its
 *          output (the others write into it); ready_refs = n. Published
 *          in its entry before arriving (the arrival's release).
 *   settle after the rendezvous (acquire): when the round moves data (a
 *          split round whose checks passed) or is a barrier, its stream
 *          waits for every other ready_j; then it drops one reference of
 *          every ready_j (acq_rel), and the member that brings a count to
 *          0 releases that event, after every wait on it was issued.
 *   move   (moving rounds) the member issues its share of the data
 *          movement (coll_move.c: the same shares as on the host) and
 *          records done_i with done_refs = n, published by its arrival at
 *          the completion barrier (release).
 *   end    after the completion barrier (acquire): its stream waits for
 *          every other done_j, so nothing it issues later overwrites its
 *          input while another member still reads it, or reads its output
 *          before every member wrote its share; then it drops its
 *          reference of every done_j as above.
 * A barrier in a device world is thus a stream barrier too: what any
 * member issued before it runs before what every member issues after it
 * (a cross-mesh pull reads another rank's buffer between two of them).
 * A wait issued on an event stays valid when the event is released (CUDA:
 * cudaStreamWaitEvent, then cudaEventDestroy).
 *
 * A round whose rendezvous fails (broken: no member passed it, the round
 * completed for all or for none) moves nothing; each member releases its
 * own ready event, which nobody waits on. Rounds that fail their checks
 * settle without waiting and move nothing. Entry fields are written by
 * their member only, in begin (before the arrival) and move (before the
 * completion arrival), and rewritten at its next round on the slot
 * (k + 2), which starts after every member arrived at round k + 1, i.e.
 * finished round k. */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "sim/coll_internal.h"

void sim_coll_world_set_device(sim_coll_world *w, const sim_coll_device *dev) {
  w->dev = dev;
}

_Static_assert((int)SIM_COLL_KIND_ALL_REDUCE == (int)KIND_ALL_REDUCE &&
               (int)SIM_COLL_KIND_ALL_GATHER == (int)KIND_ALL_GATHER &&
               (int)SIM_COLL_KIND_REDUCE_SCATTER == (int)KIND_REDUCE_SCATTER &&
               (int)SIM_COLL_KIND_ALL_TO_ALL == (int)KIND_ALL_TO_ALL &&
               (int)SIM_COLL_KIND_BROADCAST == (int)KIND_BROADCAST &&
               (int)SIM_COLL_KIND_SCATTER == (int)KIND_SCATTER &&
               (int)SIM_COLL_KIND_GATHER == (int)KIND_GATHER, "public kinds");

dt_status sim_coll_dev_begin(sim_coll_group *g, int member, uint64_t k,
                             sim_coll_entry *e, dt_status bad) {
  (void)k;
  const sim_coll_device *dev = g->world->dev;
  e->ev_ready = e->ev_done = NULL;
  e->moved = DT_OK;
  if (bad != DT_OK || e->d.kind == KIND_ABSTAIN) return bad;
  if (dev->check && e->d.kind != KIND_BARRIER &&
      (bad = dev->check(dev->ctx, g->ranks[member], (int)e->d.kind,
                        e->d.dtype, e->d.op, g->n)) != DT_OK)
    return bad;
  /* a device that runs whole collectives orders its members itself */
  if (dev->call && e->d.kind != KIND_BARRIER) return DT_OK;
  /* relaxed: published by the arrival's release */
  atomic_store_explicit(&e->ready_refs, g->n, memory_order_relaxed);
  e->ev_ready = dev->record(dev->ctx, g->ranks[member]);
  return e->ev_ready ? DT_OK : core_last_status();
}

/* one holder of an event is finished with it: the last releases it */
static void unref(const sim_coll_device *dev, _Atomic int *refs, void *ev) {
  /* acq_rel: our wait on the event is issued before the count drops
   * (release); the member that releases it sees every other wait
   * (acquire) */
  if (atomic_fetch_sub_explicit(refs, 1, memory_order_acq_rel) == 1)
    dev->release(dev->ctx, ev);
}

/* rank's stream waits for every other member's ready (done) event when
 * `wait`; then this member's reference of each is dropped */
static dt_status settle(sim_coll_group *g, int member, sim_coll_entry *E,
                        bool done, bool wait) {
  const sim_coll_device *dev = g->world->dev;
  int rank = g->ranks[member];
  dt_status st = DT_OK;
  for (int j = 0; j < g->n; j++) {
    void *ev = done ? E[j].ev_done : E[j].ev_ready;
    if (!ev) continue;
    if (wait && j != member && st == DT_OK) st = dev->wait(dev->ctx, rank, ev);
    unref(dev, done ? &E[j].done_refs : &E[j].ready_refs, ev);
  }
  return st;
}

dt_status sim_coll_dev_settle(sim_coll_group *g, int member, uint64_t k,
                              bool wait) {
  return settle(g, member, g->entries[k & 1], false, wait);
}

void sim_coll_dev_abandon(sim_coll_group *g, int member, uint64_t k) {
  sim_coll_entry *e = &g->entries[k & 1][member];
  if (e->ev_ready) g->world->dev->release(g->world->dev->ctx, e->ev_ready);
}

dt_status sim_coll_dev_move(sim_coll_group *g, int member, uint64_t k,
                            dt_status before) {
  bool share = before == DT_OK;
  const sim_coll_device *dev = g->world->dev;
  sim_coll_entry *E = g->entries[k & 1];
  sim_coll_member *me = &g->members[member];
  sim_coll_mover mv = {.dev = dev, .rank = g->ranks[member], .st = before};
  if (share) sim_coll_move_split(E, g->n, member, me->ins, me->outs, &mv);
  /* recorded even after a failed launch: the others wait on it */
  void *done = dev->record(dev->ctx, mv.rank);
  if (!done && mv.st == DT_OK) mv.st = core_last_status();
  /* relaxed: published by the completion arrival's release */
  atomic_store_explicit(&E[member].done_refs, g->n, memory_order_relaxed);
  E[member].ev_done = done;
  E[member].moved = mv.st; /* the others fail too (sim_coll_dev_end) */
  if (mv.st != DT_OK)
    snprintf(E[member].moved_msg, sizeof E[member].moved_msg, "%s",
             core_last_error());
  return mv.st;
}

/* after the completion barrier: every member learns whether every share
 * was issued (a member whose launch failed left its part of everyone's
 * output unwritten) */
dt_status sim_coll_dev_end(sim_coll_group *g, int member, uint64_t k) {
  sim_coll_entry *E = g->entries[k & 1];
  dt_status st = settle(g, member, E, true, true);
  for (int j = 0; j < g->n && st == DT_OK; j++)
    if (j != member && E[j].moved != DT_OK)
      st = core_error_set(E[j].moved, "%s on group %s: member %d (rank %d) "
                          "could not issue its share, so the result is "
                          "incomplete: %s",
                          sim_coll_kind_names[E[member].d.kind], g->name, j,
                          g->ranks[j], E[j].moved_msg);
  return st;
}

dt_status sim_coll_dev_call(sim_coll_group *g, int member, uint64_t k) {
  const sim_coll_device *dev = g->world->dev;
  const sim_coll_desc *d = &g->entries[k & 1][member].d;
  sim_coll_call c = {.kind = (int)d->kind, .g = g, .n = g->n,
                     .member = member, .ranks = g->ranks, .seq = k,
                     .dtype = d->dtype, .op = d->op, .root = d->root,
                     .count = d->count, .in = d->in, .out = d->out,
                     .counts = d->counts, .send = d->send, .recv = d->recv};
  return dev->call(dev->ctx, g->ranks[member], &c);
}
