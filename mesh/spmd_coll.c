/* SPMD mode's mesh half (mesh/spmd_coll.h, docs/spmd.md).
 *
 * Everything here runs on the calling rank's own thread, inside its SPMD
 * function, where that rank's tensors are already computed (its ops run
 * inline): data pointers are valid, device memory is allocated directly on
 * the rank's simulated device (so an SPMD rank runs out of memory as a
 * rank does), and the collectives rendezvous with the other ranks' calls.
 * The collectives are functional, as torch.distributed's functional
 * collectives are: each returns a new tensor and leaves its input alone
 * (dtorch tensors are values). */
#include "mesh/spmd_coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cpu/cpu.h"
#include "mesh/handle.h"
#include "mesh/mesh.h"
#include "mesh/rank_work.h"
#include "mesh/shard.h"
#include "runtime/backend.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"
#include "runtime/spmd_run.h"
#include "sim/collectives.h"

/* ---- the calling rank */
typedef struct here {
  dt_runtime *rt;
  int rank;
  const char *fn;
} here;

static dt_status where_am_i(here *h, const char *fn) {
  h->fn = fn;
  h->rt = runtime_spmd_runtime();
  h->rank = runtime_spmd_any_rank();
  if (!h->rt || h->rank < 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: called outside an "
                          "SPMD function (collectives on local tensors run "
                          "inside dt_spmd_run; on DTensors use "
                          "dt_redistribute)", fn);
  return DT_OK;
}

/* t is this rank's computed local tensor */
static dt_status check_local(const here *h, const dt_tensor *t, const char *arg) {
  if (!t) /* keeps the error of the call that made the NULL (dtorch.h) */
    return core_error_chained() ? core_last_status()
        : core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", h->fn, arg);
  if (t->spec)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s is a DTensor (take "
                          "this rank's shard with dt_dtensor_to_local, or use "
                          "dt_redistribute)", h->fn, arg);
  const core_storage *s = t->local.storage;
  if (s && (s->rt != h->rt || s->rank != h->rank))
    return core_error_set(DT_ERR_DEVICE, "%s: %s lives on rank %d%s, not on "
                          "the calling rank %d", h->fn, arg, s->rank,
                          s->rt != h->rt ? " of another runtime" : "", h->rank);
  const core_poison *p = s ? core_storage_poison(s) : NULL;
  if (p) return core_error_set(p->status, "%s", p->message);
  return DT_OK;
}

static cpu_view view_of(const dt_tensor *t) {
  cpu_view v = {0};
  v.data = core_tensor_data(t);
  v.dtype = t->dtype;
  v.ndim = t->local.ndim;
  memcpy(v.sizes, t->local.sizes, sizeof v.sizes);
  memcpy(v.strides, t->local.strides, sizeof v.strides);
  return v;
}

/* a contiguous view of `sizes` over data */
static cpu_view flat_view(void *data, dt_dtype d, int ndim, const int64_t *sizes) {
  cpu_view v = {0};
  v.data = data;
  v.dtype = d;
  v.ndim = ndim;
  memcpy(v.sizes, sizes, sizeof(int64_t) * (size_t)ndim);
  core_contiguous_strides(v.sizes, ndim, v.strides);
  return v;
}

/* dst = src in the calling rank's stream order (its backend: a CUDA
 * rank's data is device memory) */
static dt_status copy(const here *h, const cpu_view *dst, const cpu_view *src) {
  return h->rt->backend->copy_view(h->rt, h->rank, dst, src);
}

/* v narrowed to [start, start + len) along dim */
static cpu_view narrow(cpu_view v, int dim, int64_t start, int64_t len) {
  v.data += start * v.strides[dim] * (int64_t)cpu_dtype_size(v.dtype);
  v.sizes[dim] = len;
  return v;
}

/* device memory of the calling rank (NULL + DT_ERR_OUT_OF_MEMORY) */
static void *dev_alloc(const here *h, size_t bytes) {
  const char *err;
  void *p = h->rt->backend->alloc(h->rt, h->rank, bytes, &err);
  if (!p) core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: %s", h->fn, err);
  else runtime_note_memory(h->rt, h->rank);
  return p;
}

static void dev_free(const here *h, void *p) {
  if (!p) return;
  h->rt->backend->free(h->rt, h->rank, p);
  runtime_note_memory(h->rt, h->rank);
}

/* a new contiguous local tensor of the calling rank, its data allocated */
static dt_tensor *new_local(const here *h, dt_dtype d, int ndim,
                            const int64_t *sizes) {
  dt_tensor *t = runtime_tensor_alloc(d, ndim, sizes, h->rt, h->rank, h->fn);
  if (!t) return NULL;
  core_storage *s = t->local.storage;
  s->data = dev_alloc(h, s->nbytes);
  if (!s->data) {
    core_tensor_release(t);
    return NULL;
  }
  if (h->rt->backend->tag) h->rt->backend->tag(s->data, h->fn, d, ndim, sizes);
  return t;
}

/* t's elements, contiguous: its own data, or a copy in *tmp (free it) */
static const void *contiguous_data(const here *h, const dt_tensor *t, void **tmp) {
  *tmp = NULL;
  if (core_layout_is_contiguous(t->local.sizes, t->local.strides, t->local.ndim))
    return core_tensor_data(t);
  size_t bytes = (size_t)core_numel(t) * core_dtype_size(t->dtype);
  if (!(*tmp = dev_alloc(h, bytes ? bytes : 1))) return NULL;
  cpu_view dst = flat_view(*tmp, t->dtype, t->local.ndim, t->local.sizes);
  cpu_view src = view_of(t);
  if (copy(h, &dst, &src) != DT_OK) return NULL; /* *tmp: the caller frees */
  return *tmp;
}

/* ---- groups */
typedef struct grp {
  sim_coll_group *g;
  int member, n;
} grp;

static dt_status group_error(const here *h, const char *what) {
  return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rank %d is not in %s",
                        h->fn, h->rank, what);
}

static dt_status mesh_group(const here *h, const dt_group *g, grp *out) {
  dt_mesh *m = g->mesh;
  if (m->rt != h->rt)
    return core_error_set(DT_ERR_MESH, "%s: group.mesh belongs to another "
                          "runtime", h->fn);
  int idx = h->rank < m->rt_ranks ? m->pos[h->rank] : -1;
  if (idx < 0) return group_error(h, "group.mesh");
  if (g->mesh_dim < 0) { /* the whole mesh, in its row-major order */
    out->g = sim_coll_group_get(h->rt->coll, m->ranks, m->size);
    out->member = idx;
    out->n = m->size;
    return out->g ? DT_OK : core_last_status();
  }
  if (g->mesh_dim >= m->ndim)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: group.mesh_dim %d out "
                          "of range for a %d-D mesh", h->fn, g->mesh_dim, m->ndim);
  if (!mesh_dim_groups(m, g->mesh_dim, h->fn)) return core_last_status();
  int64_t coords[DT_MAX_DIMS];
  mesh_index_coords(m, idx, coords);
  out->g = mesh_group_at(m, g->mesh_dim, idx);
  out->member = (int)coords[g->mesh_dim];
  out->n = (int)m->shape[g->mesh_dim];
  return DT_OK;
}

static dt_status rank_group(const here *h, const int *ranks, int n, grp *out) {
  out->member = -1;
  for (int i = 0; i < n; i++)
    if (ranks[i] == h->rank) out->member = i;
  if (out->member < 0) return group_error(h, "group.ranks");
  out->g = sim_coll_group_get(h->rt->coll, ranks, n);
  out->n = n;
  return out->g ? DT_OK : core_last_status();
}

/* NULL: every rank of the runtime */
static dt_status resolve(const here *h, const dt_group *g, grp *out) {
  if (g && g->mesh) return mesh_group(h, g, out);
  if (g && g->ranks) {
    if (g->nranks < 1)
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: group.nranks %d",
                            h->fn, g->nranks);
    return rank_group(h, g->ranks, g->nranks, out);
  }
  int n = h->rt->nranks;
  int *all = malloc(sizeof(int) * (size_t)n);
  if (!all) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", h->fn);
  for (int i = 0; i < n; i++) all[i] = i;
  dt_status st = rank_group(h, all, n, out);
  free(all);
  return st;
}

static const char barrier_fn[] = "dt_barrier";

/* the common start: rank, input (none for a barrier), group, dim (NULL:
 * no dim) */
static dt_status begin(here *h, const char *fn, const dt_tensor *t,
                       const dt_group *g, grp *gr, int *dim) {
  dt_status st = where_am_i(h, fn);
  if (st == DT_OK && fn != barrier_fn) st = check_local(h, t, "t");
  if (st == DT_OK) st = resolve(h, g, gr);
  if (st != DT_OK || !dim) return st;
  int d = core_wrap_dim(*dim, t->local.ndim);
  if (d < 0 || t->local.ndim == 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: dim %d out of range "
                          "for a %d-D tensor", fn, *dim, t->local.ndim);
  *dim = d;
  return DT_OK;
}

static dt_status divisible(const here *h, const dt_tensor *t, int dim, int n) {
  if (t->local.sizes[dim] % n == 0) return DT_OK;
  return core_error_set(DT_ERR_SHAPE, "%s: dim %d has size %lld, not a "
                        "multiple of the group's %d ranks", h->fn, dim,
                        (long long)t->local.sizes[dim], n);
}

static dt_tensor *fail(dt_tensor *out, void *tmp, const here *h) {
  dev_free(h, tmp);
  core_tensor_release(out);
  return NULL;
}

/* ---- the collectives */
dt_tensor *mesh_spmd_all_reduce(dt_tensor *t, dt_reduce_op op,
                                const dt_group *g, const char *site) {
  here h;
  grp gr;
  if (begin(&h, "dt_all_reduce", t, g, &gr, NULL) != DT_OK) return NULL;
  dt_tensor *out = new_local(&h, t->dtype, t->local.ndim, t->local.sizes);
  if (!out) return NULL;
  cpu_view dst = view_of(out), src = view_of(t);
  /* reduced in place: the input stays as it was */
  if (copy(&h, &dst, &src) != DT_OK) return fail(out, NULL, &h);
  sim_coll_set_site(site);
  if (sim_coll_all_reduce(gr.g, gr.member, dst.data, dst.data, core_numel(t),
                          t->dtype, op) != DT_OK)
    return fail(out, NULL, &h);
  return out;
}

/* n equal counts (every member sends as many elements) */
static int64_t *equal_counts(const here *h, int n, int64_t each) {
  int64_t *c = malloc(sizeof(int64_t) * (size_t)n);
  if (!c) core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", h->fn);
  for (int i = 0; c && i < n; i++) c[i] = each;
  return c;
}

dt_tensor *mesh_spmd_all_gather(dt_tensor *t, int dim, const dt_group *g,
                                const char *site) {
  here h;
  grp gr;
  if (begin(&h, "dt_all_gather", t, g, &gr, &dim) != DT_OK) return NULL;
  int nd = t->local.ndim;
  int64_t sizes[DT_MAX_DIMS], each = core_numel(t);
  memcpy(sizes, t->local.sizes, sizeof sizes);
  sizes[dim] *= gr.n;
  dt_tensor *out = new_local(&h, t->dtype, nd, sizes);
  int64_t *counts = out ? equal_counts(&h, gr.n, each) : NULL;
  void *in_tmp = NULL, *blocks = NULL;
  const void *in = counts ? contiguous_data(&h, t, &in_tmp) : NULL;
  /* dim 0: the blocks are the output; else gather, then place each block */
  bool direct = dim == 0;
  size_t bytes = (size_t)core_numel(out ? out : t) * core_dtype_size(t->dtype);
  if (in && !direct) blocks = dev_alloc(&h, bytes ? bytes : 1);
  dt_status st = in && (direct || blocks) ? DT_OK : core_last_status();
  if (st == DT_OK) {
    sim_coll_set_site(site);
    st = sim_coll_all_gather(gr.g, gr.member, in,
                             direct ? core_tensor_data(out) : blocks, counts,
                             t->dtype);
  }
  for (int j = 0; st == DT_OK && !direct && j < gr.n; j++) {
    cpu_view src = flat_view((char *)blocks + (size_t)j * (size_t)each *
                             core_dtype_size(t->dtype), t->dtype, nd, t->local.sizes);
    cpu_view dst = narrow(view_of(out), dim, j * t->local.sizes[dim],
                          t->local.sizes[dim]);
    st = copy(&h, &dst, &src);
  }
  free(counts);
  dev_free(&h, in_tmp);
  dev_free(&h, blocks);
  return st == DT_OK ? out : fail(out, NULL, &h);
}

/* t cut into n equal blocks along dim, contiguous one after the other */
static void *blocks_of(const here *h, const dt_tensor *t, int dim, int n) {
  size_t bytes = (size_t)core_numel(t) * core_dtype_size(t->dtype);
  char *b = dev_alloc(h, bytes ? bytes : 1);
  if (!b) return NULL;
  int64_t len = t->local.sizes[dim] / n, bs[DT_MAX_DIMS];
  memcpy(bs, t->local.sizes, sizeof bs);
  bs[dim] = len;
  size_t block = bytes / (size_t)n;
  for (int j = 0; j < n; j++) {
    cpu_view dst = flat_view(b + (size_t)j * block, t->dtype, t->local.ndim, bs);
    cpu_view src = narrow(view_of(t), dim, j * len, len);
    if (copy(h, &dst, &src) != DT_OK) {
      dev_free(h, b);
      return NULL;
    }
  }
  return b;
}

dt_tensor *mesh_spmd_reduce_scatter(dt_tensor *t, dt_reduce_op op, int dim,
                                    const dt_group *g, const char *site) {
  here h;
  grp gr;
  if (begin(&h, "dt_reduce_scatter", t, g, &gr, &dim) != DT_OK ||
      divisible(&h, t, dim, gr.n) != DT_OK)
    return NULL;
  int64_t sizes[DT_MAX_DIMS];
  memcpy(sizes, t->local.sizes, sizeof sizes);
  sizes[dim] /= gr.n;
  dt_tensor *out = new_local(&h, t->dtype, t->local.ndim, sizes);
  int64_t *counts = out ? equal_counts(&h, gr.n, core_numel(out)) : NULL;
  void *tmp = counts ? blocks_of(&h, t, dim, gr.n) : NULL;
  dt_status st = tmp ? DT_OK : core_last_status();
  if (st == DT_OK) {
    sim_coll_set_site(site);
    st = sim_coll_reduce_scatter(gr.g, gr.member, tmp, core_tensor_data(out),
                                 counts, t->dtype, op);
  }
  free(counts);
  dev_free(&h, tmp);
  return st == DT_OK ? out : fail(out, NULL, &h);
}

dt_tensor *mesh_spmd_all_to_all(dt_tensor *t, int split_dim, int concat_dim,
                                const dt_group *g, const char *site) {
  here h;
  grp gr;
  if (begin(&h, "dt_all_to_all", t, g, &gr, &split_dim) != DT_OK) return NULL;
  int cd = core_wrap_dim(concat_dim, t->local.ndim);
  if (cd < 0) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_all_to_all: concat_dim %d out "
                   "of range for a %d-D tensor", concat_dim, t->local.ndim);
    return NULL;
  }
  if (divisible(&h, t, split_dim, gr.n) != DT_OK) return NULL;
  int nd = t->local.ndim;
  int64_t bs[DT_MAX_DIMS], os[DT_MAX_DIMS];
  memcpy(bs, t->local.sizes, sizeof bs);
  bs[split_dim] /= gr.n; /* one block */
  memcpy(os, bs, sizeof os);
  os[cd] *= gr.n;
  int64_t each = core_numel_of(bs, nd);
  dt_tensor *out = new_local(&h, t->dtype, nd, os);
  int64_t *counts = out ? equal_counts(&h, gr.n, each) : NULL;
  void *send = counts ? blocks_of(&h, t, split_dim, gr.n) : NULL;
  size_t bytes = (size_t)core_numel(t) * core_dtype_size(t->dtype);
  void *recv = send ? dev_alloc(&h, bytes ? bytes : 1) : NULL;
  dt_status st = recv ? DT_OK : core_last_status();
  if (st == DT_OK) {
    sim_coll_set_site(site);
    st = sim_coll_all_to_all(gr.g, gr.member, send, counts, recv, counts, t->dtype);
  }
  for (int j = 0; st == DT_OK && j < gr.n; j++) { /* block j: member j's */
    cpu_view src = flat_view((char *)recv + (size_t)j * (size_t)each *
                             core_dtype_size(t->dtype), t->dtype, nd, bs);
    cpu_view dst = narrow(view_of(out), cd, j * bs[cd], bs[cd]);
    st = copy(&h, &dst, &src);
  }
  free(counts);
  dev_free(&h, send);
  dev_free(&h, recv);
  return st == DT_OK ? out : fail(out, NULL, &h);
}

dt_tensor *mesh_spmd_broadcast(dt_tensor *t, int root, const dt_group *g,
                               const char *site) {
  here h;
  grp gr;
  if (begin(&h, "dt_broadcast", t, g, &gr, NULL) != DT_OK) return NULL;
  /* root is a runtime rank; the collective takes its member index */
  int ranks_root = -1;
  if (!g || (!g->mesh && !g->ranks)) {
    ranks_root = root >= 0 && root < h.rt->nranks ? root : -1;
  } else if (g->ranks) {
    for (int i = 0; i < g->nranks; i++)
      if (g->ranks[i] == root) ranks_root = i;
  } else {
    dt_mesh *m = g->mesh;
    int idx = root >= 0 && root < m->rt_ranks ? m->pos[root] : -1;
    int me = m->pos[h.rank];
    int64_t a[DT_MAX_DIMS], b[DT_MAX_DIMS];
    if (idx >= 0) {
      mesh_index_coords(m, idx, a);
      mesh_index_coords(m, me, b);
      bool same = true; /* the root shares every other coordinate */
      for (int d = 0; d < m->ndim && g->mesh_dim >= 0; d++)
        same = same && (d == g->mesh_dim || a[d] == b[d]);
      ranks_root = !same ? -1 : g->mesh_dim < 0 ? idx : (int)a[g->mesh_dim];
    }
  }
  if (ranks_root < 0) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_broadcast: root %d is not in "
                   "rank %d's group", root, h.rank);
    return NULL;
  }
  dt_tensor *out = new_local(&h, t->dtype, t->local.ndim, t->local.sizes);
  if (!out) return NULL;
  if (h.rank == root) {
    cpu_view dst = view_of(out), src = view_of(t);
    if (copy(&h, &dst, &src) != DT_OK) return fail(out, NULL, &h);
  }
  sim_coll_set_site(site);
  if (sim_coll_broadcast(gr.g, gr.member, core_tensor_data(out), core_numel(t),
                         t->dtype, ranks_root) != DT_OK)
    return fail(out, NULL, &h);
  return out;
}

dt_status mesh_spmd_barrier(const dt_group *g, const char *site) {
  here h;
  grp gr;
  dt_status st = begin(&h, barrier_fn, NULL, g, &gr, NULL);
  if (st != DT_OK) return st;
  sim_coll_set_site(site);
  return sim_coll_barrier(gr.g, gr.member);
}

dt_status mesh_spmd_send(dt_tensor *t, int dst, const char *site) {
  (void)site;
  here h;
  dt_status st = where_am_i(&h, "dt_send");
  if (st == DT_OK) st = check_local(&h, t, "t");
  if (st != DT_OK) return st;
  void *tmp;
  const void *p = contiguous_data(&h, t, &tmp);
  if (!p && core_numel(t)) return core_last_status();
  st = sim_coll_send(h.rt->coll, h.rank, dst, p,
                     core_numel(t) * (int64_t)core_dtype_size(t->dtype));
  dev_free(&h, tmp);
  return st;
}

dt_tensor *mesh_spmd_recv(int src, dt_shape shape, dt_dtype dtype,
                          const char *site) {
  (void)site;
  here h;
  if (where_am_i(&h, "dt_recv") != DT_OK) return NULL;
  if ((unsigned)dtype >= (unsigned)DT_DTYPE_COUNT || shape.ndim < 0 ||
      shape.ndim > DT_MAX_DIMS) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_recv: bad %s (dtype %d, %d dims)",
                   (unsigned)dtype >= (unsigned)DT_DTYPE_COUNT ? "dtype" : "shape",
                   (int)dtype, shape.ndim);
    return NULL;
  }
  for (int i = 0; i < shape.ndim; i++)
    if (shape.dims[i] < 0) {
      core_error_set(DT_ERR_SHAPE, "dt_recv: shape dim %d is %lld", i,
                     (long long)shape.dims[i]);
      return NULL;
    }
  dt_tensor *out = new_local(&h, dtype, shape.ndim, shape.dims);
  if (!out) return NULL;
  if (sim_coll_recv(h.rt->coll, h.rank, src, core_tensor_data(out),
                    core_numel(out) * (int64_t)core_dtype_size(dtype)) != DT_OK)
    return fail(out, NULL, &h);
  return out;
}

/* ---- DTensors from / to this rank's local tensor */
/* the global shape when every shard is as large as this one (PyTorch's
 * from_local without shape=): each Shard(d) multiplies dim d */
static dt_shape infer_global(const dt_mesh *m, const dt_placement *pl,
                             const dt_tensor *local) {
  dt_shape s = {.ndim = local->local.ndim};
  memcpy(s.dims, local->local.sizes, sizeof(int64_t) * (size_t)s.ndim);
  for (int d = 0; d < m->ndim; d++)
    if (pl[d].kind == DT_PLACEMENT_SHARD && pl[d].dim >= 0 && pl[d].dim < s.ndim)
      s.dims[pl[d].dim] *= m->shape[d];
  return s;
}

static dt_status check_box(const here *h, const dt_mesh *m, const dt_placement *pl,
                           const dt_shape *global, const dt_tensor *local, int idx) {
  int64_t off[DT_MAX_DIMS], len[DT_MAX_DIMS];
  mesh_local_box(m, pl, global, idx, off, len);
  bool ok = local->local.ndim == global->ndim;
  for (int i = 0; ok && i < global->ndim; i++) ok = len[i] == local->local.sizes[i];
  if (ok) return DT_OK;
  char a[CORE_SHAPE_STR_LEN], b[CORE_SHAPE_STR_LEN], c[CORE_SHAPE_STR_LEN];
  return core_error_set(DT_ERR_SHAPE, "%s: rank %d's local tensor is %s, but "
                        "its shard of a %s tensor is %s", h->fn, h->rank,
                        core_shape_str(local->local.sizes, local->local.ndim, a, sizeof a),
                        core_shape_str(global->dims, global->ndim, b, sizeof b),
                        core_shape_str(len, global->ndim, c, sizeof c));
}

/* this rank's storage for the DTensor: the local's own when it is
 * contiguous from the start of its storage (no copy, as PyTorch's
 * from_local), else a contiguous copy */
static core_storage *shard_storage(const here *h, dt_tensor *local) {
  core_storage *s = local->local.storage;
  if (local->local.offset == 0 &&
      core_layout_is_contiguous(local->local.sizes, local->local.strides,
                                local->local.ndim)) {
    core_storage_retain(s);
    return s;
  }
  dt_tensor *c = new_local(h, local->dtype, local->local.ndim, local->local.sizes);
  if (!c) return NULL;
  cpu_view dst = view_of(c), src = view_of(local);
  if (copy(h, &dst, &src) != DT_OK) {
    core_tensor_release(c);
    return NULL;
  }
  s = c->local.storage;
  core_storage_retain(s);
  core_tensor_release(c);
  return s;
}

dt_tensor *mesh_spmd_from_local(dt_tensor *local, dt_mesh *mesh,
                                const dt_placement *pl, const dt_shape *global) {
  here h;
  const char *fn = "dt_dtensor_from_local";
  if (where_am_i(&h, fn) != DT_OK || check_local(&h, local, "local") != DT_OK)
    return NULL;
  if (!mesh) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: mesh is NULL", fn);
    return NULL;
  }
  int idx = h.rank < mesh->rt_ranks ? mesh->pos[h.rank] : -1;
  if (mesh->rt != h.rt || idx < 0) {
    core_error_set(DT_ERR_MESH, "%s: rank %d is not in the mesh", fn, h.rank);
    return NULL;
  }
  dt_placement norm[DT_MAX_DIMS];
  dt_shape probe = {.ndim = local->local.ndim};
  memcpy(probe.dims, local->local.sizes, sizeof(int64_t) * (size_t)probe.ndim);
  if (mesh_dtensor_check_placements(mesh, pl, &probe, norm, fn) != DT_OK) return NULL;
  dt_shape g = global ? *global : infer_global(mesh, norm, local);
  if (global && mesh_check_placements(mesh, norm, &g, fn) != DT_OK) return NULL;
  if (check_box(&h, mesh, norm, &g, local, idx) != DT_OK) return NULL;
  dt_tensor *t = mesh_dtensor_make(mesh, norm, g, local->dtype, fn);
  if (!t) return NULL;
  core_storage *s = shard_storage(&h, local);
  if (!s) {
    core_tensor_release(t);
    return NULL;
  }
  /* release: as mesh_rank_storage (this rank's own entry) */
  __atomic_store_n(&t->spec->storages[idx], s, __ATOMIC_RELEASE);
  return t;
}

dt_tensor *mesh_spmd_to_local(dt_tensor *t) {
  here h;
  const char *fn = "dt_dtensor_to_local";
  if (where_am_i(&h, fn) != DT_OK) return NULL;
  if (!t || !t->spec) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s", fn,
                   !t ? "t is NULL" : "t is not a DTensor");
    return NULL;
  }
  const core_spec *sp = t->spec;
  const dt_mesh *m = sp->mesh;
  int idx = m->rt == h.rt && h.rank < m->rt_ranks ? m->pos[h.rank] : -1;
  core_storage *s = idx >= 0 ? mesh_spec_storage(sp, idx) : NULL;
  if (!s) {
    core_error_set(DT_ERR_MESH, "%s: rank %d holds no shard of t (not in its "
                   "mesh)", fn, h.rank);
    return NULL;
  }
  const core_poison *p = core_storage_poison(s);
  if (p) {
    core_error_set(p->status, "%s", p->message);
    return NULL;
  }
  int64_t off[DT_MAX_DIMS], len[DT_MAX_DIMS], strides[DT_MAX_DIMS];
  mesh_local_box(m, sp->placements, &sp->shape, idx, off, len);
  core_contiguous_strides(len, sp->shape.ndim, strides);
  return core_tensor_make(t->dtype, sp->shape.ndim, len, strides, 0, s);
}

dt_tensor *mesh_spmd_checked(dt_tensor *t) {
  if (!t || !t->spec || runtime_spmd_any_rank() < 0) return t;
  const dt_mesh *m = t->spec->mesh;
  int rank = runtime_spmd_any_rank();
  int idx = m->rt == runtime_spmd_runtime() && rank < m->rt_ranks ? m->pos[rank] : -1;
  core_storage *s = idx >= 0 ? mesh_spec_storage(t->spec, idx) : NULL;
  const core_poison *p = s ? core_storage_poison(s) : NULL;
  if (!p) return t;
  core_error_set(p->status, "%s", p->message);
  core_tensor_release(t);
  return NULL;
}

/* dt_to_host of a DTensor inside an SPMD function: only the calling
 * rank's thread runs here, so a gather of every shard by this thread
 * would see its own alone. As DTensor.full_tensor(), the value is made
 * whole by a redistribution to Replicate (its collectives meet the other
 * ranks' same calls), then this rank's replica is copied. */
dt_status mesh_spmd_to_host(dt_tensor *t, void *dst, size_t bytes, bool wait,
                            dt_future **out, const char *fn) {
  dt_tensor *r = mesh_replicated(t, fn);
  if (!r) return core_last_status();
  dt_tensor *local = mesh_spmd_to_local(r);
  core_tensor_release(r);
  if (!local) return core_last_status();
  size_t need;
  dt_status st = runtime_host_buffer(local, dst, bytes, fn, &need);
  if (st == DT_OK) st = runtime_to_host(local, dst, need, wait, out, fn);
  core_tensor_release(local);
  return st;
}
