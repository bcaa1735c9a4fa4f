/* The redistribute planner: from a source spec's placements to target
 * placements on the same mesh, the list of steps, one per mesh dim that
 * changes (PyTorch's _redistribute.py semantics; docs/mesh.md):
 *   S(d) -> R     all_gather along the mesh dim's groups
 *   P    -> R     all_reduce
 *   P    -> S(d)  reduce_scatter
 *   S(i) -> S(j)  all_to_all
 *   R    -> S(d)  local chunk (no communication)
 *   R    -> P     local: sum/prod keep the value on coordinate 0 and the
 *                 identity (0 / 1) elsewhere; avg/max/min keep it everywhere
 *   P -> P (same op), R -> R, S(d) -> S(d): nothing
 *   S    -> P     error
 *   P(a) -> P(b)  (a != b): all_reduce then local
 * Order matters when several mesh dims shard one tensor dim (left-to-right
 * nesting): unsharding goes innermost mesh dim first, resharding outermost
 * first; a mesh dim whose shard sits inside one that changes is unsharded
 * and resharded around it. Each step says the placements before and after
 * it, so the executor can compute every rank's local box at each step.
 * Costs follow the alpha-beta model of docs/mesh.md. A step on a mesh dim
 * of size 1 moves no data (PyTorch skips it); it is still listed, so the
 * before/after lists chain from src to dst, with cost 0, and
 * mesh_plan_step_communicates says false for it. */
#ifndef MESH_PLAN_H
#define MESH_PLAN_H

#include "dtorch/dtorch.h"
#include "mesh/mesh.h"

typedef enum mesh_plan_kind {
  MESH_PLAN_ALL_GATHER,      /* Shard(from_dim) -> Replicate on mesh_dim */
  MESH_PLAN_ALL_REDUCE,      /* Partial(op) -> Replicate */
  MESH_PLAN_REDUCE_SCATTER,  /* Partial(op) -> Shard(to_dim) */
  MESH_PLAN_ALL_TO_ALL,      /* Shard(from_dim) -> Shard(to_dim) */
  MESH_PLAN_LOCAL_CHUNK,     /* Replicate -> Shard(to_dim) */
  MESH_PLAN_LOCAL_PARTIAL,   /* Replicate -> Partial(op) */
  MESH_PLAN_KIND_COUNT
} mesh_plan_kind;

typedef struct mesh_plan_step {
  mesh_plan_kind kind;
  int mesh_dim;
  int from_dim, to_dim;          /* tensor dims (-1 when not a shard) */
  dt_reduce_op op;               /* partial kind involved */
  dt_placement before[DT_MAX_DIMS], after[DT_MAX_DIMS]; /* whole mesh */
  double cost_us;                /* alpha-beta estimate */
} mesh_plan_step;

#define MESH_PLAN_MAX_STEPS (4 * DT_MAX_DIMS)

/* Plans src -> dst placements for a tensor of `global` shape and element
 * size `esize` on mesh m. Returns the number of steps (0: nothing to do)
 * or -1 with the error set (naming fn, both placement lists and why). */
int mesh_plan(const dt_mesh *m, const dt_shape *global, size_t esize,
              const dt_placement *src, const dt_placement *dst,
              mesh_plan_step *steps, const char *fn);
/* The alpha-beta cost of one step of `kind` on mesh dim mesh_dim from
 * placements cur (what mesh_plan gives that step), for callers that know
 * the step without planning (the DTensor layer's strategy costs). */
double mesh_plan_cost_us(const dt_mesh *m, const dt_shape *global,
                         size_t esize, const dt_placement *cur,
                         mesh_plan_kind kind, int mesh_dim);
/* true if the step runs a collective (counted by dt_comm_count) */
bool mesh_plan_is_collective(mesh_plan_kind k);
const char *mesh_plan_kind_name(mesh_plan_kind k);
/* true if the step is a collective over more than one rank (what the
 * executor runs and counts; a group of one is a no-op) */
bool mesh_plan_step_communicates(const dt_mesh *m, const mesh_plan_step *s);
/* "all_gather on mesh dim 1: [S(0), S(0)] -> [S(0), R] (7.2 us)";
 * returns what snprintf returns */
int mesh_plan_step_format(const mesh_plan_step *s, int mesh_ndim, char *buf,
                          size_t len);

#endif
