/* The mesh ranks' side of DTensor records: fill (factories), distribute
 * (from_host), gather (to_host), one rank's shard, redistribute steps and
 * cross-mesh pulls. Every function runs on each rank of the runtime; ranks
 * outside the tensor's mesh return at once. Local tensors are contiguous
 * with the sizes of the rank's box. A rank whose memory runs out poisons
 * its output; in a redistribute it abstains from the remaining
 * collectives (mesh/shard.h), so no member waits for it. */
#include "mesh/dtensor_exec.h"
#include "mesh/shard.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
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
    cpu_fill(data, d, n, v);
  } else if (j->op == CORE_OP_FULL) {
    cpu_fill(data, d, n, j->value);
  } else if (j->op == CORE_OP_RAND || j->op == CORE_OP_RANDN) {
    fill_random(data, d, &b, &s->shape, j->seed, j->first, j->op == CORE_OP_RANDN);
  } else if (j->op == CORE_OP_FROM_HOST && n) {
    mesh_box all = mesh_box_all(&s->shape);
    cpu_view src = mesh_box_view(j->staging, d, &all, -1, 0, 0);
    mesh_view_narrow(&src, &b);
    cpu_view dst = mesh_box_view(data, d, &b, -1, 0, 0);
    mesh_copy_view(&dst, &src);
  }
}

void mesh_exec_fill_done(void *arg) {
  mesh_fill_job *j = arg;
  free(j->staging);
  core_tensor_release(j->t);
  free(j);
}

/* ---- gather the global value into host memory */

void mesh_exec_gather(void *arg, dt_runtime *rt, int rank) {
  (void)rt;
  mesh_host_job *j = arg;
  core_spec *s = j->t->spec;
  int idx = rank < s->mesh->rt_ranks ? s->mesh->pos[rank] : -1;
  if (idx < 0 || !mesh_box_owner(s->mesh, s->placements, idx)) return;
  core_storage *st = s->storages[idx];
  if (core_storage_poison(st) || !st->data) return;
  mesh_box b = mesh_box_of(s->mesh, s->placements, &s->shape, idx);
  if (!mesh_box_numel(&b)) return;
  dt_dtype d = j->t->dtype;
  mesh_box all = mesh_box_all(&s->shape);
  cpu_view dst = mesh_box_view(j->dst, d, &all, -1, 0, 0);
  mesh_view_narrow(&dst, &b);
  cpu_view src = mesh_box_view(st->data, d, &b, -1, 0, 0);
  mesh_copy_view(&dst, &src); /* disjoint boxes: no two ranks write one byte */
}

void mesh_exec_gather_done(void *arg) {
  mesh_host_job *j = arg;
  const core_poison *p = mesh_tensor_poison(j->t);
  sched_future_complete(j->future, p ? p->status : DT_OK, p ? p->message : NULL);
  sched_future_release(j->future);
  core_tensor_release(j->t);
  free(j);
}

/* ---- one rank's shard */
void mesh_exec_local(void *arg, dt_runtime *rt, int rank) {
  (void)rt;
  mesh_host_job *j = arg;
  core_spec *s = j->t->spec;
  core_storage *st = s->storages[s->mesh->pos[rank]];
  const core_poison *p = core_storage_poison(st);
  if (!p && j->bytes) memcpy(j->dst, st->data, j->bytes);
  sched_future_complete(j->future, p ? p->status : DT_OK, p ? p->message : NULL);
}

void mesh_exec_local_done(void *arg) {
  mesh_host_job *j = arg;
  sched_future_release(j->future);
  core_tensor_release(j->t);
  free(j);
}
