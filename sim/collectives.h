/* Collectives emulated between rank threads in one address space.
 *
 * A group is an ordered list of runtime ranks (a mesh dim's group). Every
 * member calls the same collective, in the same order, from its own rank
 * thread; `member` is the caller's index in the group. A call returns when
 * the collective is complete for this member (its output written, its input
 * no longer read by anyone).
 *
 * Rendezvous is lock-free per (group, sequence number): each member counts
 * its own collectives on the group; arrivals are counted with an atomic;
 * members publish buffer pointers in per-round slots and wait (spin, then
 * futex) for the others. The data movement is split across the members:
 * for an all_reduce of S bytes over n members, member i reduces segment i
 * (S/n bytes) of every input over a fixed pairwise tree of the members
 * (bitwise reproducible, for any split of the range or of the members
 * into processes) and writes it to every member's output, so each member reads and writes
 * about S bytes and no member copies everything.
 *
 * Watchdog: a member that waits longer than the world's timeout fails with
 * DT_ERR_TIMEOUT naming the collective, the group, the sequence number and
 * which members arrived; the group is then broken and every later
 * collective on it (including the late member's) fails at once with the
 * same message.
 *
 * Buffers are contiguous; counts are in elements of `dtype`. */
#ifndef SIM_COLLECTIVES_H
#define SIM_COLLECTIVES_H

#include <stdint.h>

#include "dtorch/dtorch.h"

/* A round whose every member's input is at most this many bytes has one
 * phase: the inputs travel in the members' entries, each member computes
 * its own output after the arrivals, and nobody waits again. */
#define SIM_COLL_ONE_PHASE_BYTES 1024

typedef struct sim_coll_world sim_coll_world;
typedef struct sim_coll_group sim_coll_group;

/* nranks: the runtime's ranks; timeout_ns <= 0: wait forever */
sim_coll_world *sim_coll_world_create(int nranks, int64_t timeout_ns);
void sim_coll_world_destroy(sim_coll_world *w);
/* Makes w one process's part of a multi-process job (docs/multiprocess.md):
 * this process hosts ranks [proc * per, (proc + 1) * per) of the job's
 * nranks, per = nranks / the job's processes; a group with members in
 * other processes is hierarchical (sim/coll_proc.h). Once, before any
 * group is made; mpi outlives w. */
struct sim_mpi;
void sim_coll_world_set_procs(sim_coll_world *w, struct sim_mpi *mpi);
void sim_coll_world_set_timeout(sim_coll_world *w, int64_t timeout_ns);
int64_t sim_coll_world_timeout(const sim_coll_world *w);

/* The group of these ranks, in this order (made on first use; the same
 * list gives the same group). Thread-safe. NULL + error on bad ranks. */
sim_coll_group *sim_coll_group_get(sim_coll_world *w, const int *ranks, int n);
int sim_coll_group_size(const sim_coll_group *g);
/* "[0, 2, 4, 6]" */
const char *sim_coll_group_name(const sim_coll_group *g);

/* out = reduce(in over members); out may equal in. AVG divides the sum
 * (integers: truncating toward zero; bool: DT_ERR_DTYPE). Every element is
 * reduced over the fixed pairwise tree of the member indices,
 * float16/bfloat16 in float32 and rounded once, so results are bitwise
 * reproducible (sim/coll_reduce.h).
 * A member whose arguments are invalid, or members whose calls disagree
 * (kind, dtype, op, root, counts), fail every member of that round
 * (DT_ERR_DESYNC for a disagreement) without moving data; the group stays
 * usable. */
dt_status sim_coll_all_reduce(sim_coll_group *g, int member, const void *in,
                          void *out, int64_t count, dt_dtype dtype,
                          dt_reduce_op op);
/* out = concat(in of member 0, 1, ...): counts[j] elements from member j */
dt_status sim_coll_all_gather(sim_coll_group *g, int member, const void *in,
                          void *out, const int64_t *counts, dt_dtype dtype);
/* in: the full concat layout (sum of counts); member j gets segment j,
 * reduced over members, in out (counts[member] elements) */
dt_status sim_coll_reduce_scatter(sim_coll_group *g, int member, const void *in,
                              void *out, const int64_t *counts,
                              dt_dtype dtype, dt_reduce_op op);
/* send[j] elements of in (blocks in member order) go to member j; out gets
 * the blocks from every member in member order (recv[j] from member j).
 * send/recv: n entries each, as seen by the caller. */
dt_status sim_coll_all_to_all(sim_coll_group *g, int member, const void *in,
                          const int64_t *send, void *out,
                          const int64_t *recv, dt_dtype dtype);
/* buf of root copied to every member's buf */
dt_status sim_coll_broadcast(sim_coll_group *g, int member, void *buf, int64_t count,
                         dt_dtype dtype, int root);
/* root's in (concat layout) split: member j gets counts[j] in out */
dt_status sim_coll_scatter(sim_coll_group *g, int member, const void *in, void *out,
                       const int64_t *counts, dt_dtype dtype, int root);
/* members' in concatenated into root's out (counts[j] from member j) */
dt_status sim_coll_gather(sim_coll_group *g, int member, const void *in, void *out,
                      const int64_t *counts, dt_dtype dtype, int root);
dt_status sim_coll_barrier(sim_coll_group *g, int member);
/* Takes part in this member's next round without making a call: nothing
 * moves, and every member's call of that round fails with status st and a
 * message naming this member and msg ("... member 1 (rank 3) could not
 * take part: <msg>"); the group stays usable. For a member that cannot
 * make its call (its input failed, it ran out of memory): the others fail
 * at once instead of waiting for the watchdog. Returns st (this thread's
 * error: msg). */
/* Phase probe for benchmarks: while on, each collective call notes on its
 * thread when its rendezvous completed (CLOCK_MONOTONIC ns), read back by
 * sim_coll_probe_rendezvous_ns on the same thread. Off: one relaxed load
 * per call. */
void sim_coll_probe(bool on);
int64_t sim_coll_probe_rendezvous_ns(void);
dt_status sim_coll_abstain(sim_coll_group *g, int member, dt_status st,
                           const char *msg);
/* ---- SPMD support (coll_spmd.c; docs/spmd.md)
 * Call sites: the next collective this thread calls carries `site` (a
 * "file:line" or a label; NULL clears it) in its entry, so a disagreement
 * names where each rank called from. The pointer must stay valid until
 * that call returns; it is consumed (cleared) by the call. */
void sim_coll_set_site(const char *site);
/* The call site of every collective this thread makes that has no site
 * of its own (sim_coll_set_site), until set again (NULL: none): a public
 * call's while it runs (a DTensor redistribute, fetch or backward inside
 * an SPMD function makes several). The pointer must stay valid until it
 * is set again. */
void sim_coll_set_scope_site(const char *site);
/* Rank `rank` left its SPMD function (st: how; msg: the error, or NULL):
 * every collective another member waits in, or calls later, on a group
 * with this rank fails at once (DT_ERR_DESYNC) naming it, instead of
 * waiting for the watchdog. */
void sim_coll_depart(sim_coll_world *w, int rank, dt_status st, const char *msg);
/* Only while no collective is in flight on any group (every rank thread
 * is at the SPMD exit barrier): forgets the departures and brings every
 * group whose members' round counts differ, or whose slots are broken,
 * back to a fresh state, so the runtime stays usable after a failed SPMD
 * run. Returns how many groups were reset. */
int sim_coll_world_resync(sim_coll_world *w);
/* How the watchdog's report learns what a member that did not arrive is
 * doing: fn(ctx, rank) returns a static string (its op, "its SPMD
 * function") or NULL. Set once, before any collective. */
typedef const char *(*sim_coll_where_fn)(void *ctx, int rank);
void sim_coll_world_set_where(sim_coll_world *w, sim_coll_where_fn fn, void *ctx);
/* injected collective failures (sched/fault_table.h): a member whose call is
 * the armed one abstains with DT_ERR_FAULT (the others fail naming it) */
struct sched_faults;
void sim_coll_world_set_faults(sim_coll_world *w, struct sched_faults *f);
/* ---- collectives over device memory (sim/coll_device.c)
 * A world whose ranks' buffers live on an asynchronous device (a GPU's
 * streams) moves data with these operations instead of memcpy and the
 * host reductions: the rendezvous and its checks stay the host's, and
 * every member's stream is ordered by events (docs/collectives.md):
 * each member records `ready` after the work that made its input,
 * waits on every other member's `ready` before moving its share, records
 * `done` after it, and after the completion barrier waits on every
 * other member's `done` before anything later on its stream. No call
 * makes a rank thread wait for the device. Every function runs on the
 * calling rank's thread and returns DT_OK or an error it set. */
/* One member's whole collective, for devices that run collectives
 * themselves (NCCL): kinds in the order of the sim_coll_* calls. */
enum { SIM_COLL_KIND_ALL_REDUCE, SIM_COLL_KIND_ALL_GATHER,
       SIM_COLL_KIND_REDUCE_SCATTER, SIM_COLL_KIND_ALL_TO_ALL,
       SIM_COLL_KIND_BROADCAST, SIM_COLL_KIND_SCATTER, SIM_COLL_KIND_GATHER };
typedef struct sim_coll_call {
  int kind;                  /* SIM_COLL_KIND_* */
  const sim_coll_group *g;   /* the same pointer for every call on a group */
  int n, member;             /* the group's size, the caller's index */
  const int *ranks;          /* the group's runtime ranks, member order
                                (the group's own: valid as long as the world) */
  uint64_t seq;              /* the round: equal on every member */
  dt_dtype dtype;
  dt_reduce_op op;           /* reducing kinds */
  int root;                  /* rooted kinds: a member index */
  int64_t count;             /* all_reduce / broadcast */
  const void *in;            /* broadcast: in == out */
  void *out;
  const int64_t *counts, *send, *recv; /* as the sim_coll_* calls take */
} sim_coll_call;

typedef struct sim_coll_device {
  void *ctx;
  /* an event after everything issued to rank's stream so far; NULL + error */
  void *(*record)(void *ctx, int rank);
  /* rank's stream waits for ev (recorded by any rank) */
  dt_status (*wait)(void *ctx, int rank, void *ev);
  /* the event is not used again (waits issued on it stay valid) */
  void (*release)(void *ctx, void *ev);
  /* on rank's stream: out[o][0..count) = in[0..nin) reduced over the
   * pairwise tree of the inputs' indices as sim/coll_reduce.h says (the
   * bits of sim_coll_reduce), for o < nout */
  dt_status (*reduce)(void *ctx, int rank, const void *const *in, int nin,
                      void *const *out, int nout, int64_t count, dt_dtype d,
                      dt_reduce_op op);
  /* on rank's stream: bytes from src to dst (device memory of any rank) */
  dt_status (*copy)(void *ctx, int rank, void *dst, const void *src,
                    int64_t bytes);
  /* (optional) whether the device can run this member's call: checked
   * before the member arrives, so a refusal fails every member's call of
   * the round (its message names the member) instead of one member's */
  dt_status (*check)(void *ctx, int rank, int kind, dt_dtype dtype,
                     dt_reduce_op op, int nmembers);
  /* (optional) the whole collective issued to rank's stream by a device
   * that synchronises its members itself (NCCL): then every round that
   * moves data calls it after the rendezvous and its checks, instead of
   * the shares, the events and the completion barrier (reduce and copy
   * are unused); barriers still order the streams with events */
  dt_status (*call)(void *ctx, int rank, const sim_coll_call *k);
} sim_coll_device;
/* Makes w a device world (dev outlives it); once, before any collective.
 * send/recv are refused there (DT_ERR_UNSUPPORTED). */
void sim_coll_world_set_device(sim_coll_world *w, const sim_coll_device *dev);

/* point to point, blocking until the peer took / gave the bytes */
dt_status sim_coll_send(sim_coll_world *w, int from, int to, const void *buf,
                    int64_t bytes);
dt_status sim_coll_recv(sim_coll_world *w, int to, int from, void *buf, int64_t bytes);

#endif
