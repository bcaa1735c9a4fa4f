/* Decisions every process of a multi-process job must take alike
 * (docs/multiprocess.md): each process issues the same ops, so nothing it
 * issues may depend on what its own ranks happened to compute. A failed
 * shard (its poison) is such a thing: only its process sees it. Where
 * the issuing thread must know whether an op's outputs failed (ops that
 * check their data), the processes agree through one round over the
 * mesh's ranks: a rank whose shard failed abstains with the failure, the
 * others pass a barrier, and every rank of every process ends the round
 * with the same verdict (sim/coll_proc.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "mesh/handle.h"
#include "mesh/shard.h"
#include "runtime/exec.h"
#include "sched/future.h"
#include "sim/collectives.h"

bool mesh_is_split(const dt_mesh *m) {
  if (m->rt->nprocs == 1) return false;
  for (int i = 0; i < m->size; i++)
    if (!runtime_rank_is_local(m->rt, m->ranks[i])) return true;
  return false;
}

typedef struct agree_job {
  const dt_mesh *m;
  dt_tensor *const *outs;
  int n;
  sim_coll_group *g;
  dt_future *future;
  pthread_mutex_t lock;
  dt_status st;
  char msg[1024];
} agree_job;

static void agree_rank(void *arg, dt_runtime *rt, int rank) {
  (void)rt;
  agree_job *j = arg;
  int idx = rank < j->m->rt_ranks ? j->m->pos[rank] : -1;
  if (idx < 0) return;
  const core_poison *p = NULL;
  for (int i = 0; !p && i < j->n; i++) {
    const core_storage *s = mesh_spec_storage(j->outs[i]->spec, idx);
    p = s ? core_storage_poison(s) : NULL;
  }
  dt_status st = p ? sim_coll_abstain(j->g, idx, p->status, p->message)
                   : sim_coll_barrier(j->g, idx);
  if (st == DT_OK) return;
  pthread_mutex_lock(&j->lock);
  if (j->st == DT_OK) {
    j->st = st;
    snprintf(j->msg, sizeof j->msg, "%s", core_last_error());
  }
  pthread_mutex_unlock(&j->lock);
}

static void agree_done(void *arg) {
  agree_job *j = arg;
  sched_future_complete(j->future, j->st, j->st != DT_OK ? j->msg : NULL);
  sched_future_release(j->future);
  pthread_mutex_destroy(&j->lock);
  free(j);
}

dt_status mesh_agree_outputs(dt_mesh *m, dt_tensor *const *outs, int n,
                             const char *fn) {
  sim_coll_group *g = sim_coll_group_get(m->rt->coll, m->ranks, m->size);
  agree_job *j = g ? calloc(1, sizeof *j) : NULL;
  dt_future *f = j ? sched_future_new() : NULL;
  if (!f) {
    free(j);
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  *j = (agree_job){.m = m, .outs = outs, .n = n, .g = g,
                   .future = sched_future_retain(f)};
  pthread_mutex_init(&j->lock, NULL);
  if (runtime_publish_named_call(m->rt, -1, "agree", agree_rank, agree_done,
                                 j) != DT_OK) {
    sched_future_release(j->future);
    sched_future_release(f);
    pthread_mutex_destroy(&j->lock);
    free(j);
    return runtime_publish_failed(fn);
  }
  dt_status st = sched_future_wait(f, -1);
  sched_future_release(f);
  return st;
}
