/* Collectives whose group spans processes (a multi-process job,
 * docs/multiprocess.md): the group's members in this process meet in the
 * in-process rendezvous (sim/collectives.c), then the lowest of them, the
 * process's *leader*, exchanges what the other processes need through MPI
 * and writes every local member's output, and the local members pass the
 * completion barrier together. Internal to sim/. */
#ifndef SIM_COLL_PROC_H
#define SIM_COLL_PROC_H

#include <stdbool.h>
#include <stdint.h>

#include "dtorch/dtorch.h"

struct sim_coll_group;
struct sim_coll_desc;
struct sim_coll_world;
struct sim_mpi;
typedef struct sim_xp_shm sim_xp_shm;

/* a call site and a failure message as a round's verdict carries them */
#define SIM_XP_MSG 1536

/* A cross-process group's state: made with the group, read-only after
 * except the per-round verdicts (written by the leader before its
 * completion arrival, read by the local members after the barrier) and
 * `broken` / the staging (the leader's own). */
typedef struct sim_coll_xp {
  int np;              /* processes with members in the group */
  int *procs;          /* their indices (MPI ranks), ascending */
  int me;              /* this process's index in procs */
  int *pidx;           /* per member: its process's index in procs */
  int nl;              /* members in this process */
  int leader;          /* the lowest of them (a member index), or -1 */
  int tag;             /* the group's MPI tag (from its rank list) */
  uint64_t hash;       /* the rank list's hash (checked in every header) */
  /* the fixed reduction tree's maximal subtrees, per process, all of
   * them sorted by lo (they tile the members [0, n)) */
  int nsub;
  int *sub_lo, *sub_hi, *sub_proc;
  dt_status st[2];     /* the verdict of rounds with k & 1 == slot */
  char msg[2][SIM_XP_MSG];
  char *broken;        /* a timed-out exchange, or a round that broke in
                          one process's rendezvous (sim_coll_xp_abandon):
                          every later round fails */
  uint64_t abandoned;  /* 1 + the last round abandoned (under the group's
                          report_lock) */
  void *stage;         /* the leader's scratch, kept between rounds */
  size_t stage_cap;
  bool shm_go[2];      /* round k & 1 goes through the shared window
                          (written with st[], read after the barrier) */
  struct sim_xp_shm *shm; /* the node-shared window, or NULL */
  void *hbuf;          /* header messages: two per process */
  struct sim_xp_header *harr; /* every process's header of the round */
} sim_coll_xp;

/* The cross-process state of group g (ranks[0..n)) of world w, or NULL
 * when every member is in this process; *err set (false) when it cannot
 * be made (no memory: error set). */
sim_coll_xp *sim_coll_xp_new(struct sim_coll_world *w, const int *ranks, int n,
                             bool *err);
void sim_coll_xp_free(sim_coll_xp *x);
/* frees x's node-shared window: with `collective`, through MPI
 * (collective over the group's processes: every process must release its
 * groups' windows in one order, sim_coll_world_destroy goes by hash;
 * nothing for a broken group's, left to the process's exit); without,
 * only this process's record of it (sim_coll_xp_free) */
void sim_xp_shm_release(sim_coll_xp *x, bool collective);
/* every group's window of world w, in one order in every process (by
 * the rank lists' hashes); sim_coll_world_destroy calls it first */
void sim_xp_shm_release_all(struct sim_coll_world *w);
/* how many rounds this process's leaders took through a node-shared
 * window (a count for tests and benchmarks) */
int64_t sim_xp_shm_rounds(void);
/* whether member j of g runs in this process */
bool sim_coll_xp_local(const struct sim_coll_group *g, int j);
/* Round k of g after its local rendezvous: the exchange (by the member
 * whose arrival completed the rendezvous, `exchanger`), the completion,
 * the verdict (set as this thread's error). */
dt_status sim_coll_xp_round(struct sim_coll_group *g, int member, uint64_t k,
                            int64_t deadline, bool exchanger);

/* Round k of g failed here before the leader's exchange: in this
 * process's rendezvous (a member left its SPMD function, a deadlock, the
 * local watchdog), or before it (a member had left: the call never
 * touched the group). The other processes would wait for this process's
 * header until their timeout, so the first local member to fail round k
 * sends every other process of the group a failure header for it (its
 * call d made at site, st and why; once per round), and their members
 * fail at once with why, naming this process. The group then stays
 * broken, here and in each process that reads the header (the round's
 * other headers stay unread). Sets the thread's error back to st, why. */
void sim_coll_xp_abandon(struct sim_coll_group *g, uint64_t k,
                         const struct sim_coll_desc *d, const char *site,
                         dt_status st, const char *why);

/* point to point with a rank of another process (coll_proc_mpi.c): an
 * 8-byte size then the bytes, on the world's point-to-point communicator
 * with the tag of the ordered pair, and the receiver's answer (the size
 * it expected); waits have the world's timeout. A size that disagrees
 * fails both sides with DT_ERR_INVALID_ARGUMENT (the payload is still
 * received, into scratch, so the pair's next messages stay paired). */
dt_status sim_xp_send(struct sim_coll_world *w, int from, int to,
                      const void *buf, int64_t bytes);
dt_status sim_xp_recv(struct sim_coll_world *w, int to, int from, void *buf,
                      int64_t bytes);

#endif
