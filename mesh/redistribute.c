/* mesh_redistribute and friends on the issuing thread: validate, plan (one
 * step per mesh dim that changes, mesh/plan.c), count the collectives for
 * dt_comm_count, make the output handle and publish one record that every
 * mesh rank runs (rank_work.c). Another mesh (PyTorch refuses this):
 * replicate on the source mesh, then each target rank pulls its box. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "mesh/rank_work.h"
#include "mesh/shard.h"
#include "runtime/dry.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"
#include "sim/collectives.h"

/* ---- communication counting (CommDebugMode), per thread */
static _Thread_local bool comm_on, comm_paused;
static _Thread_local dt_comm_counts comm;

static _Thread_local mesh_comm_observer observer;
static _Thread_local void *observer_ctx;

void mesh_comm_observe(mesh_comm_observer fn, void *ctx) {
  observer = fn;
  observer_ctx = ctx;
}

bool mesh_comm_count_pause(bool paused) {
  bool was = comm_paused;
  comm_paused = paused;
  return was;
}

void mesh_comm_count_begin(void) {
  memset(&comm, 0, sizeof comm);
  comm_on = true;
}

dt_comm_counts mesh_comm_count_end(void) {
  comm_on = false;
  return comm;
}

/* bytes: what the participating ranks feed into the collective, summed */
static int64_t step_bytes(const dt_mesh *m, const dt_shape *shape, size_t es,
                          const dt_placement *before) {
  int64_t total = 0, off[DT_MAX_DIMS], len[DT_MAX_DIMS];
  for (int i = 0; i < m->size; i++) {
    mesh_local_box(m, before, shape, i, off, len);
    total += core_numel_of(len, shape->ndim) * (int64_t)es;
  }
  return total;
}

/* a dry run's alpha-beta time of each communicating step */
static void dry_steps(const dt_mesh *m, const dt_shape *shape, size_t es,
                      const mesh_plan_step *steps, int n) {
  static const runtime_dry_kind kinds[] = {
    [MESH_PLAN_ALL_GATHER] = RUNTIME_DRY_ALL_GATHER,
    [MESH_PLAN_ALL_REDUCE] = RUNTIME_DRY_ALL_REDUCE,
    [MESH_PLAN_REDUCE_SCATTER] = RUNTIME_DRY_REDUCE_SCATTER,
    [MESH_PLAN_ALL_TO_ALL] = RUNTIME_DRY_ALL_TO_ALL};
  for (int i = 0; i < n; i++) {
    if (!mesh_plan_step_communicates(m, &steps[i]) ||
        steps[i].kind > MESH_PLAN_ALL_TO_ALL)
      continue;
    runtime_dry_collective(m->rt, kinds[steps[i].kind],
                           (int)m->shape[steps[i].mesh_dim], m->size,
                           step_bytes(m, shape, es, steps[i].before));
  }
}

static void count_steps(const dt_mesh *m, const dt_shape *shape, size_t es,
                        const mesh_plan_step *steps, int n, const char *fn) {
  if (m->rt->dry_run && !comm_paused) dry_steps(m, shape, es, steps, n);
  if ((!comm_on && !observer) || comm_paused) return;
  for (int i = 0; i < n; i++) {
    if (!mesh_plan_step_communicates(m, &steps[i])) continue; /* 1-rank dims */
    int64_t *k;
    switch (steps[i].kind) {
    case MESH_PLAN_ALL_GATHER: k = &comm.all_gather; break;
    case MESH_PLAN_ALL_REDUCE: k = &comm.all_reduce; break;
    case MESH_PLAN_REDUCE_SCATTER: k = &comm.reduce_scatter; break;
    case MESH_PLAN_ALL_TO_ALL: k = &comm.all_to_all; break;
    default: continue; /* local steps move nothing */
    }
    int64_t bytes = step_bytes(m, shape, es, steps[i].before);
    if (comm_on) {
      (*k)++;
      comm.bytes += bytes;
    }
    if (observer)
      observer(observer_ctx, m, steps[i].mesh_dim, (int)steps[i].kind, bytes, fn);
  }
}

/* Whether the issuing thread may run sleeping ranks' part itself
 * (sched/help.h): one step of a small tensor, where waking the ranks costs
 * more than the work. A collective only when it has one phase (every
 * member's input at most SIM_COLL_ONE_PHASE_BYTES, with an all_to_all's
 * counts): a helped member then never waits after
 * its arrival, so members helped on one stack never wait for each other.
 * Several steps could wait in a second round for a member suspended in
 * the first. A group with members in other processes qualifies too: its
 * round's exchange is done by the local member whose arrival completes
 * the local rendezvous — on a helping thread the last helped, on top of
 * the stack — which waits for none of the others (sim/coll_proc.c). */
#define HELP_MAX_BYTES ((size_t)64 << 10)

static sched_help_kind help_kind(const dt_mesh *mesh, const mesh_redist_job *j,
                                 const dt_shape *shape, size_t es) {
  size_t bytes = (size_t)core_numel_of(shape->dims, shape->ndim) * es;
  if (j->nsteps != 1) return SCHED_HELP_NONE;
  mesh_plan_kind k = j->steps[0].kind;
  if (!mesh_plan_is_collective(k)) return bytes <= HELP_MAX_BYTES ? SCHED_HELP_ALONE
                                                                   : SCHED_HELP_NONE;
  /* all_to_all's entries carry both counts arrays (8 bytes per member) */
  int64_t n = mesh->shape[j->steps[0].mesh_dim];
  size_t need = k == MESH_PLAN_ALL_TO_ALL ? (bytes + 7) / 8 * 8 + 16 * (size_t)n : bytes;
  return need <= SIM_COLL_ONE_PHASE_BYTES ? SCHED_HELP_ROUND : SCHED_HELP_NONE;
}

static dt_tensor *same_mesh_redistribute(dt_tensor *t, dt_mesh *mesh,
                                         const dt_placement *pl, bool count,
                                         const char *fn) {
  const dt_shape *shape = &t->spec->shape;
  size_t es = core_dtype_size(t->dtype);
  mesh_plan_step steps[MESH_PLAN_MAX_STEPS];
  int nsteps = mesh_plan(mesh, shape, es, t->spec->placements, pl, steps, fn);
  if (nsteps <= 0) return nsteps == 0 ? core_tensor_retain(t) : NULL;
  /* the job holds just the steps it runs (the plan's array is ~7 KB) */
  size_t bytes = sizeof(mesh_redist_job) + sizeof(mesh_plan_step) * (size_t)nsteps;
  mesh_redist_job *j = malloc(bytes);
  if (!j) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return NULL;
  }
  j->nsteps = nsteps;
  memcpy(j->steps, steps, sizeof(mesh_plan_step) * (size_t)nsteps);
  for (int k = 0; k < j->nsteps; k++)
    if (mesh_plan_is_collective(j->steps[k].kind) &&
        !mesh_dim_groups(mesh, j->steps[k].mesh_dim, fn)) {
      free(j);
      return NULL;
    }
  dt_tensor *out = mesh_dtensor_make(mesh, pl, *shape, t->dtype, fn);
  if (!out) {
    free(j);
    return NULL;
  }
  if (count) count_steps(mesh, shape, es, j->steps, j->nsteps, fn);
  j->src = core_tensor_retain(t);
  j->dst = core_tensor_retain(out);
  j->api = fn;
  if (runtime_publish_helped_call(mesh->rt, "redistribute",
                                  mesh_exec_redistribute, mesh_exec_redist_done,
                                  j, help_kind(mesh, j, shape, es)) != DT_OK) {
    mesh_exec_redist_done(j);
    core_tensor_release(out);
    runtime_publish_failed(fn);
    return NULL;
  }
  return out;
}

static bool holds(const dt_tensor *t, int rank) {
  if (!t->spec) return t->local.storage->rank == rank;
  return rank < t->spec->mesh->rt_ranks && t->spec->mesh->pos[rank] >= 0;
}

/* the union of the ranks of src and of mesh in this process, ascending,
 * and its group: its barriers order local reads of local shards (another
 * process's targets get the value by point to point, redist_exec.c) */
static bool xmesh_group(mesh_xmesh_job *j, const dt_mesh *mesh,
                        const char *fn) {
  dt_runtime *rt = mesh->rt;
  j->members = malloc(sizeof(int) * (size_t)rt->nranks);
  for (int r = 0; j->members && r < rt->nranks; r++)
    if (((r < mesh->rt_ranks && mesh->pos[r] >= 0) || holds(j->src, r)) &&
        runtime_rank_is_local(rt, r))
      j->members[j->n++] = r;
  if (j->members && !j->n) return true; /* nothing runs here */
  /* the registry is the runtime's collectives: inside its gate */
  if (!runtime_gate_enter(rt, fn)) return false;
  j->group = j->members ? sim_coll_group_get(rt->coll, j->members, j->n) : NULL;
  runtime_gate_leave(rt);
  if (j->group) return true;
  core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory for the "
                 "collective group of a cross-mesh redistribute", fn);
  return false;
}

static dt_tensor *cross_mesh_redistribute(dt_tensor *t, dt_mesh *mesh,
                                          const dt_placement *pl, bool count,
                                          const char *fn) {
  dt_runtime *rt = t->spec ? t->spec->mesh->rt : t->local.storage->rt;
  if (mesh->rt != rt) {
    core_error_set(DT_ERR_MESH, "%s: the target mesh belongs to another "
                 "runtime than the tensor", fn);
    return NULL;
  }
  dt_tensor *rep = NULL;
  if (t->spec) { /* replicate on the source mesh first */
    dt_placement all_r[DT_MAX_DIMS];
    for (int i = 0; i < t->spec->mesh->ndim; i++) all_r[i] = DT_REPLICATE;
    rep = mesh_redistribute_to(t, t->spec->mesh, all_r, count, fn);
    if (!rep) return NULL;
  } else {
    rep = core_tensor_retain(t);
  }
  dt_shape shape = core_tensor_shape(t);
  dt_tensor *out = mesh_dtensor_make(mesh, pl, shape, t->dtype, fn);
  mesh_xmesh_job *j = out ? calloc(1, sizeof *j) : NULL;
  if (!j) {
    if (out && core_last_status() == DT_OK)
      core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    core_tensor_release(out);
    core_tensor_release(rep);
    return NULL;
  }
  j->src = rep; /* the job owns this reference */
  j->dst = core_tensor_retain(out);
  j->api = fn;
  if (!xmesh_group(j, mesh, fn)) {
    mesh_exec_xmesh_done(j);
    core_tensor_release(out);
    return NULL;
  }
  if (count && comm_on && !comm_paused) {
    comm.other++;
    comm.bytes += core_numel(out) * (int64_t)core_dtype_size(t->dtype);
  }
  if (runtime_publish_named_call(rt, -1, "redistribute_cross_mesh",
                                 mesh_exec_cross_mesh, mesh_exec_xmesh_done, j) != DT_OK) {
    mesh_exec_xmesh_done(j);
    core_tensor_release(out);
    runtime_publish_failed(fn);
    return NULL;
  }
  return out;
}

dt_tensor *mesh_redistribute_to(dt_tensor *t, dt_mesh *mesh,
                                const dt_placement *pl, bool count,
                                const char *fn) {
  if (t->spec && mesh_same(t->spec->mesh, mesh))
    return same_mesh_redistribute(t, mesh, pl, count, fn);
  return cross_mesh_redistribute(t, mesh, pl, count, fn);
}

/* ---- the public entry points */
static dt_tensor *redistribute_checked(dt_tensor *t, dt_mesh *mesh,
                                       const dt_placement *pl,
                                       const char *fn) {
  if (!t) {
    if (!core_error_chained())
      core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: t is NULL", fn);
    return NULL;
  }
  if (!mesh && !t->spec) {
    core_error_set(DT_ERR_MESH, "%s: t is a single-device tensor: give the "
                 "target mesh", fn);
    return NULL;
  }
  dt_mesh *target = mesh ? mesh : t->spec->mesh;
  dt_shape shape = core_tensor_shape(t);
  dt_placement norm[DT_MAX_DIMS];
  if (mesh_dtensor_check_placements(target, pl, &shape, norm, fn) != DT_OK)
    return NULL;
  /* a mesh across processes: a failed shard fails the redistribution's
   * collectives in every process alike, rather than this process's call
   * alone (mesh/agree.c) */
  if (t->spec && mesh_is_split(t->spec->mesh)) {
  } else if (t->spec) {
    const core_poison *p = mesh_tensor_poison(t);
    if (p) {
      core_error_set(p->status, "%s", p->message);
      return NULL;
    }
  } else if (core_storage_poison(t->local.storage)) {
    const core_poison *p = core_storage_poison(t->local.storage);
    core_error_set(p->status, "%s", p->message);
    return NULL;
  }
  dt_runtime *rt = t->spec ? t->spec->mesh->rt : t->local.storage->rt;
  if (atomic_load_explicit(&rt->dead, memory_order_acquire)) {
    core_error_set(DT_ERR_DEVICE, "%s: the tensor's runtime was destroyed", fn);
    return NULL;
  }
  dt_tensor *r = mesh_redistribute_to(t, target, norm, true, fn);
  if (r) core_error_succeeded();
  return r;
}

dt_tensor *mesh_redistribute(dt_tensor *t, dt_mesh *mesh,
                           const dt_placement *placements) {
  return redistribute_checked(t, mesh, placements, "dt_redistribute");
}

dt_tensor *mesh_redistribute_like(dt_tensor *t, const dt_tensor *like) {
  static const char *fn = "dt_redistribute_like";
  if (!like || !like->spec) {
    if (like || !core_error_chained())
      core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: like is %s", fn,
                   like ? "not a distributed tensor" : "NULL");
    return NULL;
  }
  return redistribute_checked(t, like->spec->mesh, like->spec->placements, fn);
}

dt_tensor *mesh_redistribute_by_dict(dt_tensor *t, dt_mesh *mesh,
                                   const char *const *dim_names,
                                   const dt_placement *placements, int n,
                                   dt_default_placement mode) {
  static const char *fn = "dt_redistribute_by_dict";
  if (!t) return redistribute_checked(t, mesh, NULL, fn);
  dt_mesh *target = mesh ? mesh : t->spec ? t->spec->mesh : NULL;
  if (!target) return redistribute_checked(t, NULL, NULL, fn);
  if (n < 0 || (n > 0 && (!dim_names || !placements))) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: n %d with %s dim_names / "
                 "placements", fn, n, n > 0 ? "NULL" : "given");
    return NULL;
  }
  dt_placement pl[DT_MAX_DIMS];
  bool set[DT_MAX_DIMS] = {0};
  for (int i = 0; i < n; i++) {
    int d = dim_names[i] ? mesh_dim_index(target, dim_names[i]) : -1;
    if (d < 0) {
      core_error_set(DT_ERR_MESH, "%s: dim_names[%d] \"%s\" is not a dim of the "
                   "target mesh", fn, i, dim_names[i] ? dim_names[i] : "(null)");
      return NULL;
    }
    if (set[d]) {
      core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: mesh dim \"%s\" given twice",
                   fn, dim_names[i]);
      return NULL;
    }
    pl[d] = placements[i];
    set[d] = true;
  }
  for (int d = 0; d < target->ndim; d++) {
    if (set[d]) continue;
    const char *name = target->names[d] ? target->names[d] : "(unnamed)";
    if (mode == DT_DEFAULT_REPLICATE) {
      pl[d] = DT_REPLICATE;
    } else if (mode == DT_DEFAULT_KEEP && t->spec) {
      int sd = t->spec->mesh == target ? d
               : target->names[d] ? mesh_dim_index(t->spec->mesh, target->names[d])
                                  : -1;
      if (sd < 0) {
        core_clear_error();
        core_error_set(DT_ERR_MESH, "%s: keep: mesh dim \"%s\" has no "
                     "counterpart in the tensor's mesh", fn, name);
        return NULL;
      }
      pl[d] = t->spec->placements[sd];
    } else if (mode == DT_DEFAULT_KEEP) {
      pl[d] = DT_REPLICATE; /* a single-device tensor is replicated */
    } else {
      core_error_set(DT_ERR_PLACEMENT, "%s: no placement for mesh dim \"%s\" "
                   "(default_placement_mode raise_error)", fn, name);
      return NULL;
    }
  }
  return redistribute_checked(t, target, pl, fn);
}
