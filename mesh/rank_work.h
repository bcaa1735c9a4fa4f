/* What each mesh rank runs for a DTensor record (rank_work.c), and the
 * jobs the issuing thread hands over (one malloc'd job per record; the
 * last rank to run it frees it in the done callback). */
#ifndef MESH_RANK_WORK_H
#define MESH_RANK_WORK_H

#include "mesh/handle.h"
#include "mesh/plan.h"
#include "runtime/runtime.h"

typedef struct mesh_fill_job {
  dt_tensor *t;
  core_op_id op;            /* EMPTY, FULL, RAND, RANDN, FROM_HOST */
  double value;
  uint64_t seed, first;   /* random stream */
  void *staging;          /* FROM_HOST: the global value, contiguous */
  const char *api;
} mesh_fill_job;
void mesh_exec_fill(void *arg, dt_runtime *rt, int rank);
void mesh_exec_fill_done(void *arg);

/* a copy into host memory: mesh_exec_gather, the global value (t has no Partial
 * placements; dst is contiguous), or mesh_exec_local, one rank's shard */
typedef struct mesh_host_job {
  dt_tensor *t;
  void *dst;
  size_t bytes;           /* mesh_exec_local: the shard's bytes */
  struct sim_coll_group *agree; /* a mesh across processes: the group of
                             its ranks, over which every rank first
                             agrees whether a shard failed (mesh/agree.c) */
  pthread_mutex_t agree_lock; /* the agreement's verdict, made with agree */
  dt_status agreed;
  char agreed_msg[1024];
  int owner;              /* mesh_exec_gather of a replicated tensor: the
                             mesh index that copies (a rank of this
                             process), or -1: each box's first holder */
  dt_future *future;
  const char *api;        /* the public function, for messages */
  /* a device rank's copy that failed (mesh_exec_gather): the first one's
   * status and message, read by the done callback after every rank ran */
  _Atomic bool failed;
  dt_status err;
  char msg[512];
} mesh_host_job;
void mesh_exec_gather(void *arg, dt_runtime *rt, int rank);
void mesh_exec_gather_done(void *arg);
void mesh_exec_local(void *arg, dt_runtime *rt, int rank);
void mesh_exec_local_done(void *arg);

/* the groups of every collective step's mesh dim are made (mesh_dim_groups)
 * before the record is published */
typedef struct mesh_redist_job {
  dt_tensor *src, *dst;   /* same mesh */
  const char *api;
  int nsteps;
  mesh_plan_step steps[];  /* nsteps */
} mesh_redist_job;
void mesh_exec_redistribute(void *arg, dt_runtime *rt, int rank);

/* Phase probe for `dtorch bench collectives --breakdown`: while enabled,
 * each rank (< 64) notes CLOCK_MONOTONIC ns of its last redistribute:
 * when it started the record, called its (first) collective, that
 * collective's rendezvous completed, its (last) collective returned and
 * the record ended, and the ns spent allocating. Read after
 * dt_runtime_synchronize. Off: one relaxed load per record. */
typedef struct mesh_probe {
  int64_t start, call, rendezvous, ret, end, alloc_ns;
} mesh_probe;
void mesh_probe_enable(bool on);
bool mesh_probe_read(int rank, mesh_probe *out);
void mesh_exec_redist_done(void *arg);

/* cross-mesh: dst's ranks pull their boxes from src's replicated copy */
typedef struct mesh_xmesh_job {
  dt_tensor *src;         /* all Replicate on its mesh */
  dt_tensor *dst;
  const char *api;
  /* the ranks of either tensor, ascending, and their collective group:
   * resolved by the issuing thread */
  int n, *members;
  struct sim_coll_group *group;
} mesh_xmesh_job;
void mesh_exec_cross_mesh(void *arg, dt_runtime *rt, int rank);
void mesh_exec_xmesh_done(void *arg);

/* caller side (redistribute.c) */
dt_tensor *mesh_redistribute_to(dt_tensor *t, dt_mesh *mesh,
                                const dt_placement *pl, bool count,
                                const char *fn);

#endif
