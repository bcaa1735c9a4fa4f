/* A mesh rank's shard buffers (mesh/shard.h). */
#include "mesh/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host_alloc.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"
#include "sched/fault_table.h"

mesh_box mesh_box_of(const dt_mesh *m, const dt_placement *pl,
                     const dt_shape *shape, int idx) {
  mesh_box b = {.n = shape->ndim};
  mesh_local_box(m, pl, shape, idx, b.off, b.len);
  return b;
}

mesh_box mesh_box_all(const dt_shape *shape) {
  mesh_box b = {.n = shape->ndim};
  memcpy(b.len, shape->dims, sizeof(int64_t) * (size_t)shape->ndim);
  return b;
}

cpu_view mesh_box_view(void *data, dt_dtype d, const mesh_box *b, int dim,
                       int64_t start, int64_t count) {
  cpu_view v = {0}; /* dims past ndim zeroed: the struct is copied around */
  v.data = data;
  v.dtype = d;
  v.ndim = b->n;
  int64_t s = 1;
  for (int i = b->n - 1; i >= 0; i--) {
    v.sizes[i] = b->len[i];
    v.strides[i] = s;
    s *= b->len[i];
  }
  if (dim >= 0) {
    v.data += start * v.strides[dim] * (int64_t)cpu_dtype_size(d);
    v.sizes[dim] = count;
  }
  return v;
}

void mesh_view_narrow(cpu_view *v, const mesh_box *b) {
  int64_t es = (int64_t)cpu_dtype_size(v->dtype);
  for (int i = 0; i < b->n; i++) {
    v->data += b->off[i] * v->strides[i] * es;
    v->sizes[i] = b->len[i];
  }
}


bool mesh_partial_identity(const dt_mesh *m, const dt_placement *pl, int idx,
                           double *value) {
  int64_t coords[DT_MAX_DIMS];
  mesh_index_coords(m, idx, coords);
  for (int d = 0; d < m->ndim; d++)
    if (pl[d].kind == DT_PLACEMENT_PARTIAL && coords[d] != 0 &&
        (pl[d].reduce == DT_REDUCE_SUM || pl[d].reduce == DT_REDUCE_PROD)) {
      *value = pl[d].reduce == DT_REDUCE_SUM ? 0 : 1;
      return true;
    }
  return false;
}

bool mesh_box_owner(const dt_mesh *m, const dt_placement *pl, int idx) {
  int64_t coords[DT_MAX_DIMS];
  mesh_index_coords(m, idx, coords);
  for (int d = 0; d < m->ndim; d++)
    if (pl[d].kind != DT_PLACEMENT_SHARD && coords[d] != 0) return false;
  return true;
}

const core_poison *mesh_tensor_poison(const dt_tensor *t) {
  if (!t->spec) return core_storage_poison(t->local.storage);
  for (int i = 0; i < t->spec->mesh->size; i++) {
    const core_storage *s = mesh_spec_storage(t->spec, i);
    const core_poison *p = s ? core_storage_poison(s) : NULL;
    if (p) return p;
  }
  return NULL;
}

/* the stand-in for a storage a rank had no host memory to make: poisoned
 * from the start, never freed (its count never reaches 0) */
static core_storage no_memory_storage = {
    .refcount = INT64_MAX / 2, .poison = &core_poison_no_memory};

core_storage *mesh_rank_storage(mesh_rank_mem *rm, const dt_tensor *t, int idx) {
  mesh_box b;
  return mesh_rank_storage_box(rm, t, idx, &b);
}

core_storage *mesh_rank_storage_box(mesh_rank_mem *rm, const dt_tensor *t, int idx,
                                    mesh_box *box) {
  const core_spec *s = t->spec;
  *box = mesh_box_of(s->mesh, s->placements, &s->shape, idx);
  size_t bytes = (size_t)mesh_box_numel(box) * core_dtype_size(t->dtype);
  core_storage *st = runtime_storage_new(rm->rt, rm->rank, bytes, rm->api);
  rm->made = t;
  rm->made_idx = idx;
  if (!st) {
    mesh_rank_note(rm, DT_ERR_OUT_OF_MEMORY, "out of host memory for a "
                   "shard's storage");
    st = &no_memory_storage;
    core_storage_retain(st);
  }
  /* release: the struct's fields before the pointer, for other threads'
   * acquire loads (mesh_spec_storage) */
  __atomic_store_n(&s->storages[idx], st, __ATOMIC_RELEASE);
  return st;
}

void mesh_rank_mem_init(mesh_rank_mem *rm, dt_runtime *rt, int rank,
                        const char *api) {
  rm->rt = rt;
  rm->rank = rank;
  rm->api = api;
  rm->made = NULL;
  rm->st = DT_OK;
  rm->msg[0] = '\0';
  char why[128];
  if (__builtin_expect(sched_faults_armed(rt->faults), 0) &&
      sched_fault_take_at(rt->faults, rank, SCHED_FAULT_RANK_FAIL, why, sizeof why)) {
    char m[512];
    snprintf(m, sizeof m, "%s: %s", api, why);
    mesh_rank_note(rm, DT_ERR_FAULT, m);
  }
}

void mesh_rank_note(mesh_rank_mem *rm, dt_status st, const char *msg) {
  if (rm->st != DT_OK) return;
  rm->st = st;
  snprintf(rm->msg, sizeof rm->msg, "%s", msg ? msg : "execution failed");
}

mesh_buf mesh_rank_alloc(mesh_rank_mem *rm, size_t bytes) {
  mesh_buf b = {NULL};
  if (rm->st != DT_OK) return b; /* a failed rank only abstains */
  const char *err;
  b.p = rm->rt->backend->alloc(rm->rt, rm->rank, bytes, &err);
  if (b.p) return b;
  char m[512];
  snprintf(m, sizeof m, "%s: %s", rm->api, err);
  mesh_rank_note(rm, DT_ERR_OUT_OF_MEMORY, m);
  return b;
}

void mesh_rank_free(mesh_rank_mem *rm, mesh_buf b) {
  if (b.p) rm->rt->backend->free(rm->rt, rm->rank, b.p);
}

void mesh_rank_finish(mesh_rank_mem *rm, core_storage *out, mesh_buf b) {
  if (rm->st == DT_OK && b.p) {
    out->data = b.p;
    const dt_tensor *t = rm->made;
    if (t && t->spec->storages[rm->made_idx] == out) { /* its block's tag */
      mesh_box box = mesh_box_of(t->spec->mesh, t->spec->placements, &t->spec->shape,
                                 rm->made_idx);
      if (rm->rt->backend->key == CORE_KEY_CPU) /* a simulated block */
        sim_device_tag(b.p, rm->api, t->dtype, box.n, box.len,
                       t->spec->placements, t->spec->mesh->ndim);
    }
    runtime_note_memory(rm->rt, rm->rank);
    return;
  }
  core_storage_set_poison(out, rm->st, rm->msg);
  mesh_rank_free(rm, b);
}

/* ---- data movement on the rank's device */

static dt_status noted(mesh_rank_mem *rm, dt_status st) {
  if (st != DT_OK) mesh_rank_note(rm, st, core_last_error());
  return st;
}

dt_status mesh_copy_view(mesh_rank_mem *rm, const cpu_view *dst,
                         const cpu_view *src) {
  if (rm->st != DT_OK) return rm->st;
  return noted(rm, rm->rt->backend->copy_view(rm->rt, rm->rank, dst, src));
}

dt_status mesh_fill(mesh_rank_mem *rm, void *data, dt_dtype d, int64_t n,
                    double value) {
  if (rm->st != DT_OK) return rm->st;
  return noted(rm, rm->rt->backend->fill(rm->rt, rm->rank, data, d, n, value));
}

/* a contiguous view of v's sizes over data */
static cpu_view dense_like(void *data, const cpu_view *v) {
  cpu_view d = *v;
  d.data = data;
  core_contiguous_strides(d.sizes, d.ndim, d.strides);
  return d;
}

/* host staging for one view: NULL + the error noted */
static void *staging(mesh_rank_mem *rm, const cpu_view *v, size_t *bytes) {
  *bytes = (size_t)core_numel_of(v->sizes, v->ndim) * cpu_dtype_size(v->dtype);
  void *h = core_host_malloc(*bytes ? *bytes : 1);
  if (!h) {
    char m[256];
    snprintf(m, sizeof m, "%s: rank %d: out of host memory for %zu bytes of "
             "staging", rm->api, rm->rank, *bytes);
    mesh_rank_note(rm, DT_ERR_OUT_OF_MEMORY, m);
  }
  return h;
}

dt_status mesh_upload(mesh_rank_mem *rm, void *dev, const cpu_view *host) {
  if (rm->st != DT_OK) return rm->st;
  const runtime_backend *be = rm->rt->backend;
  cpu_view to = dense_like(dev, host);
  if (be->key == CORE_KEY_CPU) return mesh_copy_view(rm, &to, host);
  size_t bytes;
  void *h = staging(rm, host, &bytes);
  if (!h) return rm->st;
  cpu_view packed = dense_like(h, host);
  if (bytes) cpu_unary(CPU_COPY, cpu_compute_type(host->dtype), &packed, host);
  dt_status st = be->copy(rm->rt, rm->rank, dev, h, bytes, RUNTIME_COPY_H2D);
  if (st == DT_OK) st = be->stream_sync(rm->rt, rm->rank); /* h is read */
  free(h);
  return noted(rm, st);
}

dt_status mesh_download(mesh_rank_mem *rm, const cpu_view *host,
                        const void *dev) {
  if (rm->st != DT_OK) return rm->st;
  const runtime_backend *be = rm->rt->backend;
  cpu_view from = dense_like((void *)dev, host);
  if (be->key == CORE_KEY_CPU) return mesh_copy_view(rm, host, &from);
  size_t bytes;
  void *h = staging(rm, host, &bytes);
  if (!h) return rm->st;
  dt_status st = be->copy(rm->rt, rm->rank, h, dev, bytes, RUNTIME_COPY_D2H);
  if (st == DT_OK) st = be->stream_sync(rm->rt, rm->rank);
  cpu_view packed = dense_like(h, host);
  if (st == DT_OK && bytes)
    cpu_unary(CPU_COPY, cpu_compute_type(host->dtype), host, &packed);
  free(h);
  return noted(rm, st);
}
