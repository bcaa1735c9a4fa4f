/* In-place writes (docs/inplace.md): dt_copy_, the version counters
 * autograd checks, dt_detach and dt_set_grad.
 *
 * dt_copy_ validates on the caller's thread, turns src into a value of
 * dst's dtype, shape (and, on a mesh, placements) with ordinary ops, then
 * publishes one record to the rank that holds dst (every rank of the
 * mesh for a DTensor) which writes that value through dst's view. Every
 * op that reads or writes a storage runs on the rank that owns it, in
 * issue order, so the record runs after every op issued before it that
 * touches dst and before every op issued after it: ordering costs no
 * wait. The prepared value is itself made by records on the same stream,
 * so it is ready when the write runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "dispatch/autograd.h"
#include "dispatch/propagate.h"
#include "kernels/cpu/cpu.h"
#include "mesh/handle.h"
#include "mesh/mesh.h"
#include "runtime/backend.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"

#define FN "dt_copy_"

typedef struct copy_job {
  dt_tensor *dst;   /* retained: the record writes through its view */
  dt_tensor *src;   /* retained: dst's dtype and shape (and placements) */
} copy_job;

static void job_done(void *arg) {
  copy_job *j = arg;
  core_tensor_release(j->src);
  core_tensor_release(j->dst);
  free(j);
}

static cpu_view view_of(const dt_tensor *t) {
  cpu_view v = {.data = core_tensor_data(t), .dtype = t->dtype,
                .ndim = t->local.ndim};
  memcpy(v.sizes, t->local.sizes, sizeof v.sizes);
  memcpy(v.strides, t->local.strides, sizeof v.strides);
  return v;
}

/* a failed value or write leaves dst without one: its storage is poisoned
 * (the first error stays), so later reads report the original message */
static void write_failed(core_storage *s, const core_poison *p, dt_status st) {
  if (p) core_storage_set_poison(s, p->status, p->message);
  else core_storage_set_poison(s, st, core_last_error());
}

/* single device: on dst's rank */
static void exec_local(void *arg, dt_runtime *rt, int rank) {
  copy_job *j = arg;
  core_storage *ds = j->dst->local.storage;
  const core_poison *p = core_storage_poison(j->src->local.storage);
  if (!p) p = core_storage_poison(ds);
  if (p) {
    write_failed(ds, p, DT_OK);
    return;
  }
  cpu_view d = view_of(j->dst), s = view_of(j->src);
  dt_status st = rt->backend->copy_view(rt, rank, &d, &s);
  if (st != DT_OK) write_failed(ds, NULL, st);
}

/* a DTensor: each mesh rank copies its shard; src has dst's placements,
 * so both shards are contiguous boxes of the same size */
static void exec_shards(void *arg, dt_runtime *rt, int rank) {
  copy_job *j = arg;
  const dt_mesh *m = j->dst->spec->mesh;
  int idx = rank < m->rt_ranks ? m->pos[rank] : -1;
  if (idx < 0) return;
  /* made by this rank's earlier records: plain reads (core_spec) */
  core_storage *ds = j->dst->spec->storages[idx];
  core_storage *ss = j->src->spec->storages[idx];
  if (!ds || !ss) return; /* the producing record failed to allocate */
  const core_poison *p = core_storage_poison(ss);
  if (!p) p = core_storage_poison(ds);
  if (p) {
    write_failed(ds, p, DT_OK);
    return;
  }
  if (!ds->nbytes) return;
  dt_status st = rt->backend->copy(rt, rank, ds->data, ss->data, ds->nbytes,
                                   RUNTIME_COPY_D2D);
  if (st != DT_OK) write_failed(ds, NULL, st);
}

/* src broadcastable to dst's shape, as torch's expand */
static dt_status check_broadcast(const dt_tensor *dst, const dt_tensor *src) {
  int nd = dst->local.ndim, ns = src->local.ndim;
  bool ok = ns <= nd;
  for (int i = 0; ok && i < ns; i++) {
    int64_t s = src->local.sizes[ns - 1 - i], d = dst->local.sizes[nd - 1 - i];
    ok = s == d || s == 1;
  }
  if (ok) return DT_OK;
  char a[CORE_SHAPE_STR_LEN], b[CORE_SHAPE_STR_LEN];
  return core_error_set(DT_ERR_SHAPE, "%s: src of shape %s cannot be broadcast "
                        "to dst's shape %s", FN,
                        core_shape_str(src->local.sizes, ns, a, sizeof a),
                        core_shape_str(dst->local.sizes, nd, b, sizeof b));
}

/* PyTorch's internal-overlap check: with its size-1 dims dropped and the
 * rest sorted by stride, a view writes each element once when every
 * stride passes the span of the smaller ones */
static dt_status check_writable(const dt_tensor *dst) {
  int n = 0;
  int64_t sz[DT_MAX_DIMS], st[DT_MAX_DIMS];
  for (int i = 0; i < dst->local.ndim; i++)
    if (dst->local.sizes[i] > 1) {
      sz[n] = dst->local.sizes[i];
      st[n++] = dst->local.strides[i];
    }
  for (int i = 1; i < n; i++) /* insertion sort by stride */
    for (int k = i; k > 0 && st[k] < st[k - 1]; k--) {
      int64_t a = st[k], b = sz[k];
      st[k] = st[k - 1], sz[k] = sz[k - 1];
      st[k - 1] = a, sz[k - 1] = b;
    }
  int64_t span = 0; /* the largest offset the smaller dims reach */
  for (int i = 0; i < n; i++) {
    if (st[i] <= span) {
      char b[CORE_SHAPE_STR_LEN], c[CORE_SHAPE_STR_LEN];
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: unsupported "
                            "operation: more than one element of the "
                            "written-to tensor refers to a single memory "
                            "location (dst of shape %s has strides %s); "
                            "clone it before writing", FN,
                            core_shape_str(dst->local.sizes, dst->local.ndim,
                                           b, sizeof b),
                            core_shape_str(dst->local.strides, dst->local.ndim,
                                           c, sizeof c));
    }
    span += (sz[i] - 1) * st[i];
  }
  return DT_OK;
}

/* autograd: what PyTorch refuses, and what dtorch does not record */
static dt_status check_grad(const dt_tensor *dst, const dt_tensor *src) {
  if (!dispatch_grad_enabled()) return DT_OK;
  if (dst->requires_grad && !dispatch_grad_fn_name(dst))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: a leaf tensor that "
                          "requires grad is being used in an in-place "
                          "operation (dst); write it with grad mode off "
                          "(dt_set_grad_enabled(false)), as optimisers and "
                          "initialisers do", FN);
  if (dst->requires_grad)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: dst was made by %s and "
                          "requires grad: in-place writes are not recorded "
                          "by autograd; compute the new value out of place, "
                          "or write with grad mode off", FN,
                          dispatch_grad_fn_name(dst));
  if (src->requires_grad)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: src requires grad and grad "
                          "mode is on: the copy would not be recorded by "
                          "autograd; copy src's detached value "
                          "(dt_detach) or turn grad mode off", FN);
  return DT_OK;
}

static bool same_view(const dt_tensor *a, const dt_tensor *b) {
  if (a->local.storage != b->local.storage || a->local.offset != b->local.offset ||
      a->local.ndim != b->local.ndim || a->dtype != b->dtype)
    return false;
  for (int i = 0; i < a->local.ndim; i++)
    if (a->local.sizes[i] != b->local.sizes[i] ||
        a->local.strides[i] != b->local.strides[i])
      return false;
  return true;
}

static bool same_shape(const dt_tensor *a, const dt_tensor *b) {
  if (a->local.ndim != b->local.ndim) return false;
  for (int i = 0; i < a->local.ndim; i++)
    if (a->local.sizes[i] != b->local.sizes[i]) return false;
  return true;
}

/* where dst and src are: the same device, or both DTensors of one mesh
 * with dst writable there */
static dt_status check_place(const dt_tensor *dst, const dt_tensor *src) {
  if (!dst->spec != !src->spec)
    return core_error_set(DT_ERR_MESH, "%s: dst is %s and src is %s; both "
                          "must be DTensors of one mesh or both single-device "
                          "tensors (redistribute or distribute src first)", FN,
                          dst->spec ? "a DTensor" : "a single-device tensor",
                          src->spec ? "a DTensor" : "a single-device tensor");
  if (!dst->spec) {
    const core_storage *a = dst->local.storage, *b = src->local.storage;
    if (a && b && (a->rt != b->rt || a->rank != b->rank))
      return core_error_set(DT_ERR_DEVICE, "%s: dst is on cpu:%d and src on "
                            "cpu:%d%s; copy src to dst's device first", FN,
                            a->rank, b->rank,
                            a->rt != b->rt ? " of another runtime" : "");
    return DT_OK;
  }
  const core_spec *d = dst->spec;
  if (!mesh_same(d->mesh, src->spec->mesh)) {
    char a[256], b[256];
    mesh_format(d->mesh, a, sizeof a);
    mesh_format(src->spec->mesh, b, sizeof b);
    return core_error_set(DT_ERR_MESH, "%s: dst is on %s and src on %s; both "
                          "must be on one mesh", FN, a, b);
  }
  char pl[128];
  for (int i = 0; i < d->mesh->ndim; i++)
    if (d->placements[i].kind == DT_PLACEMENT_PARTIAL)
      return core_error_set(DT_ERR_PLACEMENT, "%s: dst has placements %s: a "
                            "Partial tensor holds no value per rank to write "
                            "into; redistribute it to Replicate or Shard first",
                            FN, mesh_placements_str(d->placements,
                                                    d->mesh->ndim, pl,
                                                    sizeof pl));
  if (d->view_of)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: dst is a %s view of a "
                          "DTensor, which holds its own shards (DTensor views "
                          "are copies in dtorch): the write would not reach "
                          "its base; write the whole DTensor instead", FN,
                          d->view_of);
  return DT_OK;
}

/* r replaces *v (consumed); false after an error */
static bool step(dt_tensor **v, dt_tensor *r) {
  core_tensor_release(*v);
  *v = r;
  return r != NULL;
}

/* src as a value of dst's dtype, shape and placements, made by ops issued
 * now (grad mode off; on a mesh, redistribution allowed) */
static dt_tensor *prepare(dt_tensor *dst, dt_tensor *src) {
  dt_tensor *v = core_tensor_retain(src);
  bool ok = true;
  if (v->dtype != dst->dtype) ok = step(&v, dt_cast(v, dst->dtype));
  if (ok && !same_shape(v, dst)) {
    dt_shape s = core_tensor_shape(dst);
    ok = step(&v, dt_expand(v, s));
  }
  if (ok && dst->spec) {
    const core_spec *d = dst->spec;
    bool same = true;
    for (int i = 0; i < d->mesh->ndim; i++)
      same = same && mesh_placement_equal(d->placements[i],
                                          v->spec->placements[i]);
    if (!same) ok = step(&v, mesh_redistribute(v, d->mesh, d->placements));
    /* an expanded or cast DTensor is fresh; one still dst's own needs a
     * copy only if it is dst itself (an identity write) */
  } else if (ok && v->local.storage && v->local.storage == dst->local.storage &&
             !same_view(v, dst)) {
    ok = step(&v, dt_clone(v)); /* overlapping views: read before writing */
  }
  return ok ? v : NULL;
}

dt_status dt_copy_(dt_tensor *dst, dt_tensor *src) {
  if (!dst || !src) {
    if (core_error_chained()) return core_last_status();
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", FN,
                          !dst ? "dst" : "src");
  }
  dt_status st = check_place(dst, src);
  if (st == DT_OK) st = check_broadcast(dst, src);
  if (st == DT_OK && !dst->spec) st = check_writable(dst);
  if (st == DT_OK) st = check_grad(dst, src);
  if (st != DT_OK) return st;
  dt_runtime *rt = dst->spec ? dst->spec->mesh->rt
                   : dst->local.storage ? dst->local.storage->rt : NULL;
  if (!rt || core_numel(dst) == 0) { /* nothing to write */
    core_error_succeeded();
    return DT_OK;
  }
  if (atomic_load_explicit(&rt->dead, memory_order_acquire))
    return core_error_set(DT_ERR_DEVICE, "%s: dst's runtime was destroyed", FN);
  bool was_grad = dispatch_set_grad_enabled(false);
  bool was_auto = dispatch_dtensor_force_auto(true);
  dt_tensor *v = prepare(dst, src);
  dispatch_dtensor_force_auto(was_auto);
  dispatch_set_grad_enabled(was_grad);
  if (!v) {
    char msg[512];
    st = core_last_status();
    snprintf(msg, sizeof msg, "%s", core_last_error());
    return core_error_set(st == DT_OK ? DT_ERR_INTERNAL : st,
                          "%s: preparing src: %s", FN, msg);
  }
  copy_job *j = malloc(sizeof *j);
  if (!j) {
    core_tensor_release(v);
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", FN);
  }
  j->dst = core_tensor_retain(dst);
  j->src = v;
  /* bumped at the call, as PyTorch's: a node that saved dst before it
   * sees the change whatever the ranks have run */
  atomic_fetch_add_explicit(core_version_of(dst), 1, memory_order_relaxed);
  st = dst->spec
           ? runtime_publish_named_call(rt, -1, "copy_", exec_shards, job_done, j)
           : runtime_publish_named_call(rt, dst->local.storage->rank, "copy_",
                                        exec_local, job_done, j);
  if (st != DT_OK) {
    job_done(j);
    return runtime_publish_failed(FN);
  }
  core_error_succeeded();
  return DT_OK;
}

int64_t dt_tensor_version(const dt_tensor *t) {
  if (!t) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_tensor_version: t is NULL");
    return -1;
  }
  return core_tensor_version(t);
}

dt_tensor *dt_detach(dt_tensor *t) {
  API_CHECK_TENSOR(t, "dt_detach", "t");
  dt_tensor *d = core_tensor_make(t->dtype, t->local.ndim, t->local.sizes,
                                  t->local.strides, t->local.offset,
                                  t->local.storage);
  if (!d) return NULL;
  d->keys = t->keys & ~CORE_KEYSET(CORE_KEY_AUTOGRAD);
  if (t->spec) { /* the alias shares the shards and their version */
    /* relaxed: the caller holds t, which keeps the spec alive */
    atomic_fetch_add_explicit(&t->spec->aliases, 1, memory_order_relaxed);
    d->spec = t->spec;
  }
  core_error_succeeded();
  return d;
}

dt_status dt_set_grad(dt_tensor *leaf, dt_tensor *grad) {
  const char *fn = "dt_set_grad";
  if (!leaf)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: leaf is NULL", fn);
  if (dispatch_grad_fn_name(leaf))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: leaf was made by %s; "
                          "only a leaf keeps a gradient", fn,
                          dispatch_grad_fn_name(leaf));
  if (grad) {
    char a[CORE_SHAPE_STR_LEN], b[CORE_SHAPE_STR_LEN];
    if (!same_shape(leaf, grad))
      return core_error_set(DT_ERR_SHAPE, "%s: grad of shape %s for a leaf of "
                            "shape %s", fn,
                            core_shape_str(grad->local.sizes, grad->local.ndim,
                                           a, sizeof a),
                            core_shape_str(leaf->local.sizes, leaf->local.ndim,
                                           b, sizeof b));
    if (grad->dtype != leaf->dtype)
      return core_error_set(DT_ERR_DTYPE, "%s: grad is %s, the leaf %s", fn,
                            core_dtype_name(grad->dtype),
                            core_dtype_name(leaf->dtype));
    if (!grad->spec != !leaf->spec ||
        (grad->spec && !mesh_same(grad->spec->mesh, leaf->spec->mesh)))
      return core_error_set(DT_ERR_MESH, "%s: grad and the leaf must be on "
                            "one mesh, or both single-device", fn);
  }
  dt_status st = dispatch_set_grad(leaf, grad, fn);
  if (st == DT_OK) core_error_succeeded();
  return st;
}
