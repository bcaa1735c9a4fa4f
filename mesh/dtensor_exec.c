/* The mesh ranks' side of DTensor records: fill (factories), distribute
 * (from_host), gather (to_host), one rank's shard, redistribute steps and
 * cross-mesh pulls. Every function runs on each rank of the runtime; ranks
 * outside the tensor's mesh return at once. Local tensors are contiguous
 * with the sizes of the rank's box. A rank whose memory runs out keeps
 * taking part in the collectives with host scratch memory (the others
 * would wait for it otherwise) and poisons its output. */
#include "mesh/dtensor_exec.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/cpu/cpu.h"
#include "sched/future.h"
#include "sim/collectives.h"

typedef struct box { int n; int64_t off[DT_MAX_DIMS], len[DT_MAX_DIMS]; } box;

static box box_of(const dt_mesh *m, const dt_placement *pl,
                  const dt_shape *shape, int idx) {
  box b = {.n = shape->ndim};
  mesh_local_box(m, pl, shape, idx, b.off, b.len);
  return b;
}
static int64_t box_numel(const box *b) { return core_numel_of(b->len, b->n); }

/* contiguous view of `sizes` at data */
static cpu_view contig_view(void *data, dt_dtype d, int n, const int64_t *sizes) {
  cpu_view v = {0};
  v.data = data;
  v.dtype = d;
  v.ndim = n;
  memcpy(v.sizes, sizes, sizeof(int64_t) * (size_t)n);
  int64_t s = 1;
  for (int i = n - 1; i >= 0; i--) {
    v.strides[i] = s;
    s *= sizes[i];
  }
  return v;
}

static void copy_view(const cpu_view *dst, const cpu_view *src) {
  cpu_unary(CPU_COPY, cpu_compute_type(src->dtype), dst, src);
}

/* ---- device memory for a rank's buffers (host scratch after OOM) */
typedef struct rank_mem {
  dt_runtime *rt;
  int rank;
  const char *api;
  dt_status st;           /* first failure on this rank */
  char msg[512];
} rank_mem;

static void *mem_alloc(rank_mem *rm, size_t bytes, bool *device) {
  const char *err;
  void *p = sim_device_alloc(&rm->rt->ranks[rm->rank].dev, bytes, &err);
  *device = p != NULL;
  if (p) return p;
  if (rm->st == DT_OK) {
    rm->st = DT_ERR_OUT_OF_MEMORY;
    snprintf(rm->msg, sizeof rm->msg, "%s: %s", rm->api, err);
  }
  return calloc(1, bytes ? bytes : 1); /* keep the collectives going */
}

/* the rank's storage of t gets data (device memory or poison) */
static void *materialise(rank_mem *rm, core_storage *s) {
  bool dev;
  void *p = mem_alloc(rm, s->nbytes, &dev);
  if (!dev) {
    free(p);
    core_storage_set_poison(s, rm->st, rm->msg);
    return NULL;
  }
  s->data = p;
  runtime_note_memory(rm->rt, rm->rank);
  return p;
}

/* ---- fill: factories and from_host */
static double partial_identity(const dt_mesh *m, const dt_placement *pl,
                               int idx, double value, bool *replace) {
  int64_t coords[DT_MAX_DIMS];
  mesh_index_coords(m, idx, coords);
  *replace = false;
  for (int d = 0; d < m->ndim; d++)
    if (pl[d].kind == DT_PLACEMENT_PARTIAL && coords[d] != 0 &&
        (pl[d].reduce == DT_REDUCE_SUM || pl[d].reduce == DT_REDUCE_PROD)) {
      *replace = true;
      return pl[d].reduce == DT_REDUCE_SUM ? 0 : 1;
    }
  return value;
}

static void fill_random(void *data, dt_dtype d, const box *b,
                        const dt_shape *g, uint64_t seed, uint64_t first,
                        bool normal) {
  int64_t gstride[DT_MAX_DIMS], idx[DT_MAX_DIMS] = {0}, n = box_numel(b);
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
  rank_mem rm = {rt, rank, j->api, DT_OK, ""};
  void *data = materialise(&rm, s->storages[idx]);
  if (!data) return;
  box b = box_of(s->mesh, s->placements, &s->shape, idx);
  dt_dtype d = j->t->dtype;
  int64_t n = box_numel(&b);
  bool replace;
  double v = partial_identity(s->mesh, s->placements, idx, j->value, &replace);
  if (replace) {
    cpu_fill(data, d, n, v);
  } else if (j->op == CORE_OP_FULL) {
    cpu_fill(data, d, n, j->value);
  } else if (j->op == CORE_OP_RAND || j->op == CORE_OP_RANDN) {
    fill_random(data, d, &b, &s->shape, j->seed, j->first, j->op == CORE_OP_RANDN);
  } else if (j->op == CORE_OP_FROM_HOST && n) {
    cpu_view g = contig_view(j->staging, d, s->shape.ndim, s->shape.dims);
    cpu_view src = g;
    for (int i = 0; i < b.n; i++) {
      src.data += b.off[i] * g.strides[i] * (int64_t)core_dtype_size(d);
      src.sizes[i] = b.len[i];
    }
    cpu_view dst = contig_view(data, d, b.n, b.len);
    copy_view(&dst, &src);
  }
}

void mesh_exec_fill_done(void *arg) {
  mesh_fill_job *j = arg;
  free(j->staging);
  core_tensor_release(j->t);
  free(j);
}

/* ---- gather the global value into host memory */
/* the rank that writes a box: coordinate 0 on every non-Shard mesh dim */
static bool box_owner(const dt_mesh *m, const dt_placement *pl, int idx) {
  int64_t coords[DT_MAX_DIMS];
  mesh_index_coords(m, idx, coords);
  for (int d = 0; d < m->ndim; d++)
    if (pl[d].kind != DT_PLACEMENT_SHARD && coords[d] != 0) return false;
  return true;
}

void mesh_exec_gather(void *arg, dt_runtime *rt, int rank) {
  (void)rt;
  mesh_host_job *j = arg;
  core_spec *s = j->t->spec;
  int idx = rank < s->mesh->rt_ranks ? s->mesh->pos[rank] : -1;
  if (idx < 0 || !box_owner(s->mesh, s->placements, idx)) return;
  core_storage *st = s->storages[idx];
  if (core_storage_poison(st) || !st->data) return;
  box b = box_of(s->mesh, s->placements, &s->shape, idx);
  if (!box_numel(&b)) return;
  dt_dtype d = j->t->dtype;
  cpu_view g = contig_view(j->dst, d, s->shape.ndim, s->shape.dims);
  cpu_view dst = g;
  for (int i = 0; i < b.n; i++) {
    dst.data += b.off[i] * g.strides[i] * (int64_t)core_dtype_size(d);
    dst.sizes[i] = b.len[i];
  }
  cpu_view src = contig_view(st->data, d, b.n, b.len);
  copy_view(&dst, &src); /* disjoint boxes: no two ranks write one byte */
}

static const core_poison *spec_poison(const core_spec *s) {
  for (int i = 0; i < s->mesh->size; i++) {
    const core_poison *p = core_storage_poison(s->storages[i]);
    if (p) return p;
  }
  return NULL;
}

void mesh_exec_gather_done(void *arg) {
  mesh_host_job *j = arg;
  const core_poison *p = spec_poison(j->t->spec);
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
