/* What each mesh rank runs for a DTensor record (dtensor_exec.c), and the
 * jobs the issuing thread hands over (one malloc'd job per record; the
 * last rank to run it frees it in the done callback). */
#ifndef DT_MESH_DTENSOR_EXEC_H
#define DT_MESH_DTENSOR_EXEC_H

#include "mesh/dtensor.h"
#include "mesh/plan.h"
#include "runtime/runtime.h"

typedef struct dtx_fill_job {
  dt_tensor *t;
  dt_op_id op;            /* EMPTY, FULL, RAND, RANDN, FROM_HOST */
  double value;
  uint64_t seed, first;   /* random stream */
  void *staging;          /* FROM_HOST: the global value, contiguous */
  const char *api;
} dtx_fill_job;
void dtx_fill(void *arg, dt_runtime *rt, int rank);
void dtx_fill_done(void *arg);

/* a copy into host memory: dtx_gather, the global value (t has no Partial
 * placements; dst is contiguous), or dtx_local, one rank's shard */
typedef struct dtx_host_job {
  dt_tensor *t;
  void *dst;
  size_t bytes;           /* dtx_local: the shard's bytes */
  dt_future *future;
} dtx_host_job;
void dtx_gather(void *arg, dt_runtime *rt, int rank);
void dtx_gather_done(void *arg);
void dtx_local(void *arg, dt_runtime *rt, int rank);
void dtx_local_done(void *arg);

typedef struct dtx_redist_job {
  dt_tensor *src, *dst;   /* same mesh */
  int nsteps;
  plan_step steps[PLAN_MAX_STEPS];
  const char *api;
} dtx_redist_job;
void dtx_redistribute(void *arg, dt_runtime *rt, int rank);
void dtx_redist_done(void *arg);

/* cross-mesh: dst's ranks pull their boxes from src's replicated copy */
typedef struct dtx_xmesh_job {
  dt_tensor *src;         /* all Replicate on its mesh */
  dt_tensor *dst;
  const char *api;
} dtx_xmesh_job;
void dtx_cross_mesh(void *arg, dt_runtime *rt, int rank);
void dtx_xmesh_done(void *arg);

/* caller side (redistribute.c) */
dt_tensor *dtensor_redistribute(dt_tensor *t, dt_mesh *mesh,
                                const dt_placement *pl, bool count,
                                const char *fn);

#endif
