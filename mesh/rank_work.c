/* The mesh ranks' side of DTensor records: fill (factories), distribute
 * (from_host), gather (to_host), one rank's shard, redistribute steps and
 * cross-mesh pulls. Every function runs on each rank of the runtime; ranks
 * outside the tensor's mesh return at once. Local tensors are contiguous
 * with the sizes of the rank's box. A rank whose memory runs out poisons
 * its output; in a redistribute it abstains from the remaining
 * collectives (mesh/shard.h), so no member waits for it. */
#include "mesh/rank_work.h"

#include "mesh/shard.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host_alloc.h"
#include "runtime/backend.h"
#include "kernels/cpu/cpu.h"
#include "sched/future.h"
#include "sim/collectives.h"

/* the rank's storage of t gets data (device memory, or poison) */
static void *materialise(mesh_rank_mem *rm, const dt_tensor *t, int idx) {
  core_storage *s = mesh_rank_storage(rm, t, idx);
  mesh_buf b = mesh_rank_alloc(rm, s->nbytes);
  mesh_rank_finish(rm, s, b);
  return rm->st == DT_OK ? b.p : NULL;
}

/* ---- fill: factories and from_host */
static void fill_random(void *data, dt_dtype d, const mesh_box *b,
                        const dt_shape *g, uint64_t seed, uint64_t first,
                        bool normal) {
  int64_t gstride[DT_MAX_DIMS], idx[DT_MAX_DIMS] = {0}, n = mesh_box_numel(b);
  int64_t s = 1;
  for (int i = g->ndim - 1; i >= 0; i--) {
    gstride[i] = s;
    s *= g->dims[i];
  }
  size_t es = core_dtype_size(d);
  for (int64_t k = 0; k < n; k++) {
    int64_t gi = 0;
    for (int i = 0; i < b->n; i++) gi += (b->off[i] + idx[i]) * gstride[i];
    /* element gi of the global tensor: the same value however it is split */
    cpu_rand_fill((char *)data + (size_t)k * es, d, 1, seed,
                  first + (uint64_t)gi, normal);
    for (int i = b->n - 1; i >= 0 && ++idx[i] == b->len[i]; i--) idx[i] = 0;
  }
}

void mesh_exec_fill(void *arg, dt_runtime *rt, int rank) {
  mesh_fill_job *j = arg;
  core_spec *s = j->t->spec;
  int idx = rank < s->mesh->rt_ranks ? s->mesh->pos[rank] : -1;
  if (idx < 0) return;
  mesh_rank_mem rm;
  mesh_rank_mem_init(&rm, rt, rank, j->api);
  void *data = materialise(&rm, j->t, idx);
  if (!data) return;
  mesh_box b = mesh_box_of(s->mesh, s->placements, &s->shape, idx);
  dt_dtype d = j->t->dtype;
  int64_t n = mesh_box_numel(&b);
  double v;
  if (mesh_partial_identity(s->mesh, s->placements, idx, &v)) {
    mesh_fill(&rm, data, d, n, v);
  } else if (j->op == CORE_OP_FULL) {
    mesh_fill(&rm, data, d, n, j->value);
  } else if ((j->op == CORE_OP_RAND || j->op == CORE_OP_RANDN) &&
             rt->backend->key == CORE_KEY_CPU) {
    fill_random(data, d, &b, &s->shape, j->seed, j->first, j->op == CORE_OP_RANDN);
  } else if (j->op == CORE_OP_RAND || j->op == CORE_OP_RANDN) {
    /* a device rank: the box drawn on the host (the same values), then
     * copied over */
    void *h = n ? core_host_malloc((size_t)n * core_dtype_size(d)) : NULL;
    if (n && !h) {
      mesh_rank_note(&rm, DT_ERR_OUT_OF_MEMORY, "out of host memory for a "
                     "random shard");
    } else if (n) {
      fill_random(h, d, &b, &s->shape, j->seed, j->first,
                  j->op == CORE_OP_RANDN);
      cpu_view hv = mesh_box_view(h, d, &b, -1, 0, 0);
      mesh_upload(&rm, data, &hv);
    }
    free(h);
  } else if (j->op == CORE_OP_FROM_HOST && n) {
    mesh_box all = mesh_box_all(&s->shape);
    cpu_view src = mesh_box_view(j->staging, d, &all, -1, 0, 0);
    mesh_view_narrow(&src, &b);
    mesh_upload(&rm, data, &src);
  }
  /* a failed copy poisons the shard (the storage keeps its buffer) */
  if (rm.st != DT_OK)
    core_storage_set_poison(s->storages[idx], rm.st, rm.msg);
}

void mesh_exec_fill_done(void *arg) {
  mesh_fill_job *j = arg;
  free(j->staging);
  core_tensor_release(j->t);
  free(j);
}

/* ---- gather the global value into host memory */

/* a rank's copy failed: the job keeps the first error, which the future
 * completes with once every rank has run */
static void gather_failed(mesh_host_job *j, dt_status st, const char *msg) {
  /* acq_rel: one writer; the done callback reads after every rank ran */
  if (atomic_exchange_explicit(&j->failed, true, memory_order_acq_rel)) return;
  j->err = st;
  snprintf(j->msg, sizeof j->msg, "%s", msg);
}

/* the owner's copy of its box into the host buffer (failures noted) */
static void gather_copy(mesh_host_job *j, dt_runtime *rt, int rank, int idx) {
  core_spec *s = j->t->spec;
  if (j->owner >= 0 ? idx != j->owner
                    : !mesh_box_owner(s->mesh, s->placements, idx))
    return;
  core_storage *st = s->storages[idx];
  if (core_storage_poison(st) || !st->data) return;
  mesh_box b = mesh_box_of(s->mesh, s->placements, &s->shape, idx);
  if (!mesh_box_numel(&b)) return;
  dt_dtype d = j->t->dtype;
  mesh_box all = mesh_box_all(&s->shape);
  cpu_view dst = mesh_box_view(j->dst, d, &all, -1, 0, 0);
  mesh_view_narrow(&dst, &b);
  mesh_rank_mem rm;
  mesh_rank_mem_init(&rm, rt, rank, j->api);
  /* disjoint boxes: no two ranks write one byte */
  if (mesh_download(&rm, &dst, st->data) != DT_OK) gather_failed(j, rm.st, rm.msg);
}

/* the agreement's verdict (every local rank reaches the same one) */
static void gather_agreed(mesh_host_job *j, dt_status st, const char *msg) {
  pthread_mutex_lock(&j->agree_lock);
  if (j->agreed == DT_OK) {
    j->agreed = st;
    snprintf(j->agreed_msg, sizeof j->agreed_msg, "%s", msg);
  }
  pthread_mutex_unlock(&j->agree_lock);
}

void mesh_exec_gather(void *arg, dt_runtime *rt, int rank) {
  mesh_host_job *j = arg;
  core_spec *s = j->t->spec;
  int idx = rank < s->mesh->rt_ranks ? s->mesh->pos[rank] : -1;
  if (idx < 0) return;
  gather_copy(j, rt, rank, idx);
  if (!j->agree) return;
  /* then the same verdict in every process: a failed replica or copy
   * fails the fetch everywhere (the owner copied before it arrives) */
  const core_poison *p = core_storage_poison(s->storages[idx]);
  dt_status mine = p ? p->status : DT_OK;
  char why[512];
  snprintf(why, sizeof why, "%s", p ? p->message : "");
  if (!p && j->owner == idx && atomic_load_explicit(&j->failed, memory_order_acquire)) {
    mine = j->err; /* its own copy's failure (gather_failed: this thread) */
    snprintf(why, sizeof why, "%s", j->msg);
  }
  dt_status a = mine != DT_OK ? sim_coll_abstain(j->agree, idx, mine, why)
                              : sim_coll_barrier(j->agree, idx);
  if (a != DT_OK) gather_agreed(j, a, core_last_error());
}

void mesh_exec_gather_done(void *arg) {
  mesh_host_job *j = arg;
  const core_poison *p = mesh_tensor_poison(j->t);
  /* the record's acq_rel countdown ordered every rank's notes before us */
  if (j->agree) /* the agreed verdict alone: the same in every process */
    sched_future_complete(j->future, j->agreed, j->agreed ? j->agreed_msg : NULL);
  else if (p)
    sched_future_complete(j->future, p->status, p->message);
  else if (atomic_load_explicit(&j->failed, memory_order_acquire))
    sched_future_complete(j->future, j->err, j->msg); /* gather_failed's */
  else
    sched_future_complete(j->future, DT_OK, NULL);
  sched_future_release(j->future);
  core_tensor_release(j->t);
  pthread_mutex_destroy(&j->agree_lock);
  free(j);
}

/* ---- one rank's shard */
void mesh_exec_local(void *arg, dt_runtime *rt, int rank) {
  mesh_host_job *j = arg;
  core_spec *s = j->t->spec;
  core_storage *st = s->storages[s->mesh->pos[rank]];
  const core_poison *p = core_storage_poison(st);
  if (!p && j->bytes) {
    mesh_rank_mem rm;
    mesh_rank_mem_init(&rm, rt, rank, j->api);
    cpu_view host = {.data = j->dst, .dtype = j->t->dtype, .ndim = 1,
                     .sizes = {(int64_t)(j->bytes / core_dtype_size(j->t->dtype))},
                     .strides = {1}};
    if (mesh_download(&rm, &host, st->data) != DT_OK) {
      sched_future_complete(j->future, rm.st, rm.msg);
      return;
    }
  }
  sched_future_complete(j->future, p ? p->status : DT_OK, p ? p->message : NULL);
}

void mesh_exec_local_done(void *arg) {
  mesh_host_job *j = arg;
  sched_future_release(j->future);
  core_tensor_release(j->t);
  pthread_mutex_destroy(&j->agree_lock);
  free(j);
}
