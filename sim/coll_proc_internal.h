/* Internals of the cross-process collectives (coll_proc.c: the round and
 * its verdict; coll_proc_move.c: what each kind moves; coll_proc_mpi.c:
 * the MPI messages). */
#ifndef SIM_COLL_PROC_INTERNAL_H
#define SIM_COLL_PROC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sim/coll_internal.h"
#include "sim/coll_proc.h"

/* a payload of at most this many bytes travels in its header message */
#define SIM_XP_INLINE 4096

/* what one process says about round `seq` of a group (sent to every
 * other process of the group before anything moves) */
typedef struct sim_xp_header {
  uint64_t hash;          /* the group's rank list */
  uint64_t seq;
  int32_t kind, dtype, op, root;
  int64_t count;
  uint64_t sig;           /* the counts' hash */
  int32_t status;         /* its local verdict: DT_OK, or why it failed */
  int32_t broken;         /* its group broke here (sim_coll_xp_abandon):
                             the receiver's stays broken too */
  int32_t shm;            /* it would take the round through the shared
                             window (sim_xp_shm_capable) */
  int64_t inline_bytes;   /* the payload after the header */
  char site[SIM_COLL_SITE];
  char msg[1024];         /* the failure's message */
} sim_xp_header;

/* "process 1 (ranks 4..7)" for the group's process index pi */
void sim_xp_proc_name(const sim_coll_group *g, int pi, char *buf, size_t len);
/* the leader's scratch of at least `bytes` (kept between rounds), or NULL */
void *sim_xp_stage(sim_coll_xp *x, size_t bytes);

/* ---- messages (coll_proc_mpi.c): a batch of sends and receives with the
 * group's tag to and from its processes (pi: an index in procs), waited
 * for together with the round's deadline. Sizes of any length (split in
 * pieces MPI's int counts hold). A wait that times out names the
 * processes whose messages did not arrive, breaks the group for good and
 * abandons the leader's buffers (MPI may still write them). */
typedef struct sim_xp_msgs sim_xp_msgs;
sim_xp_msgs *sim_xp_msgs_new(sim_coll_group *g, uint64_t k, int64_t deadline,
                             int cap);
void sim_xp_msgs_send(sim_xp_msgs *m, int pi, const void *buf, int64_t bytes);
void sim_xp_msgs_recv(sim_xp_msgs *m, int pi, void *buf, int64_t bytes);
/* waits for all, frees m; `what` names the phase in a timeout's report */
dt_status sim_xp_msgs_wait(sim_xp_msgs *m, const char *what);

/* ---- the data of one round (coll_proc_move.c) */
typedef struct sim_xp_plan sim_xp_plan;
/* the plan of round k (entries E agree locally); NULL + error without
 * memory */
sim_xp_plan *sim_xp_plan_new(sim_coll_group *g, uint64_t k,
                             const sim_coll_entry *E);
/* the scratch it needs */
size_t sim_xp_plan_bytes(const sim_xp_plan *pl);
/* computes what is sent (partials, packed blocks) into area */
dt_status sim_xp_plan_prepare(sim_xp_plan *pl, void *area);
/* the first phase's bytes to / from process pi, and where */
int64_t sim_xp_plan_sbytes(const sim_xp_plan *pl, int pi);
const void *sim_xp_plan_sbuf(const sim_xp_plan *pl, int pi);
int64_t sim_xp_plan_rbytes(const sim_xp_plan *pl, int pi);
void *sim_xp_plan_rbuf(sim_xp_plan *pl, int pi);
/* after a verdict that every process agrees on: the rest of the
 * exchange (first-phase payloads too large to travel inline, a second
 * phase) and every local member's output */
dt_status sim_xp_plan_run(sim_xp_plan *pl, int64_t deadline);
void sim_xp_plan_free(sim_xp_plan *pl);

/* ---- the node-shared window (coll_proc_shm.c) */
/* whether this process would take call d through the group's shared
 * window (a large all_reduce, every process of the group on this node,
 * DTORCH_MPI_SHM); said in the round's header: the window is used only
 * when every process says so */
bool sim_xp_shm_capable(const sim_coll_group *g, const sim_coll_desc *d);
/* the leader, after a verdict every process shares: the group's window
 * holds call d (made or grown: collective over the group's processes) */
dt_status sim_xp_shm_ensure(sim_coll_group *g, const sim_coll_desc *d);
/* every local member, after the verdict's barrier: its part of round k */
dt_status sim_xp_shm_all_reduce(sim_coll_group *g, int member, uint64_t k,
                                int64_t deadline);

#endif
