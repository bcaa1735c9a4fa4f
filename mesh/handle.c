/* DTensors on the issuing thread: handles, factories, host transfer,
 * queries, redistribute (planning and publishing) and communication
 * counting. What each rank runs is in rank_work.c. */
#include "mesh/handle.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "mesh/rank_work.h"
#include "mesh/plan.h"
#include "mesh/shard.h"
#include "mesh/spmd_coll.h"
#include "runtime/exec.h"
#include "runtime/dry.h"
#include "runtime/runtime.h"
#include "runtime/spmd_run.h"
#include "sched/pool.h"
#include "sched/future.h"
#include "sim/collectives.h"

/* ---- handles */
/* the spec's cache-key words and hash (core_spec.key) */
static void spec_key(core_spec *s, dt_dtype dtype) {
  const dt_mesh *m = s->mesh;
  int n = 0;
  s->key[n++] = (int64_t)dtype << 16 | (int64_t)s->shape.ndim << 8 | m->ndim;
  s->key[n++] = (int64_t)m->id;
  for (int i = 0; i < s->shape.ndim; i++) s->key[n++] = s->shape.dims[i];
  for (int i = 0; i < m->ndim; i++) {
    const dt_placement *p = &s->placements[i];
    s->key[n++] = (int64_t)p->kind << 32 |
                  (int64_t)(p->kind == DT_PLACEMENT_SHARD ? p->dim : 0) << 8 |
                  (p->kind == DT_PLACEMENT_PARTIAL ? p->reduce : 0);
  }
  uint64_t h = 0x9ae16a3b2f90404full;
  for (int i = 0; i < n; i++) {
    h ^= (uint64_t)s->key[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  }
  s->key_n = n;
  s->key_hash = h;
}

static void dry_account(const core_spec *s, int sign);

dt_tensor *mesh_dtensor_make(dt_mesh *m, const dt_placement *pl, dt_shape shape,
                        dt_dtype dtype, const char *fn) {
  int64_t strides[DT_MAX_DIMS];
  core_contiguous_strides(shape.dims, shape.ndim, strides);
  dt_tensor *t = core_tensor_make(dtype, shape.ndim, shape.dims, strides, 0, NULL);
  /* the spec and its storage pointers in one allocation */
  core_spec *s = calloc(1, sizeof *s + sizeof(core_storage *) * (size_t)m->size);
  core_storage **st = s ? (core_storage **)(s + 1) : NULL;
  if (!t || !s) {
    free(s);
    core_tensor_release(t);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return NULL;
  }
  s->free = mesh_dtensor_free_spec;
  s->mesh = mesh_retain(m);
  memcpy(s->placements, pl, sizeof(dt_placement) * (size_t)m->ndim);
  s->shape = shape;
  s->storages = st;
  spec_key(s, dtype);
  t->spec = s;
  t->keys |= CORE_KEYSET(CORE_KEY_DTENSOR);
  int64_t n;
  size_t bytes;
  if (!core_numel_checked(shape.dims, shape.ndim, &n) ||
      !core_bytes_of(n, dtype, &bytes)) { /* every shard fits, then */
    char b[CORE_SHAPE_STR_LEN];
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: a %s tensor of shape %s does "
                   "not fit in memory (its byte size overflows)", fn,
                   core_dtype_name(dtype),
                   core_shape_str(shape.dims, shape.ndim, b, sizeof b));
    core_tensor_release(t);
    return NULL;
  }
  /* the storages: each rank makes its own (mesh_rank_storage) */
  if (m->rt->dry_run) { /* none will: count what they would hold */
    s->dry_es = (int)core_dtype_size(dtype);
    dry_account(s, +1);
  }
  return t;
}

/* FNV-1a over 64-bit words */
static uint64_t mix(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t mesh_spec_hash(const core_spec *s, dt_dtype dtype) {
  const dt_mesh *m = s->mesh;
  uint64_t h = mix(0xcbf29ce484222325ull, (uint64_t)m->ndim);
  for (int i = 0; i < m->ndim; i++) h = mix(h, (uint64_t)m->shape[i]);
  for (int i = 0; i < m->size; i++) h = mix(h, (uint64_t)m->ranks[i]);
  for (int i = 0; i < m->ndim; i++) {
    const dt_placement *p = &s->placements[i];
    h = mix(h, (uint64_t)p->kind << 40 |
                   (uint64_t)(p->kind == DT_PLACEMENT_SHARD ? p->dim : 0) << 8 |
                   (uint64_t)(p->kind == DT_PLACEMENT_PARTIAL ? p->reduce : 0));
  }
  h = mix(h, (uint64_t)s->shape.ndim);
  for (int i = 0; i < s->shape.ndim; i++) h = mix(h, (uint64_t)s->shape.dims[i]);
  return mix(h, (uint64_t)dtype);
}

bool mesh_spec_equal(const core_spec *a, dt_dtype da, const core_spec *b,
                        dt_dtype db) {
  const dt_mesh *x = a->mesh, *y = b->mesh;
  if (da != db || x->ndim != y->ndim || x->size != y->size ||
      a->shape.ndim != b->shape.ndim)
    return false;
  for (int i = 0; i < x->ndim; i++)
    if (x->shape[i] != y->shape[i] ||
        !mesh_placement_equal(a->placements[i], b->placements[i]))
      return false;
  for (int i = 0; i < a->shape.ndim; i++)
    if (a->shape.dims[i] != b->shape.dims[i]) return false;
  return memcmp(x->ranks, y->ranks, sizeof(int) * (size_t)x->size) == 0;
}

/* Freeing a spec's shards. Off the rank threads: ONE record to every
 * rank, each releasing its own storage on its own thread (in stream order,
 * after every record that used it: those held the handle). On a rank
 * thread (a record's done dropped the last handle; every rank has run
 * the records that made the shards) or once the runtime is gone: each
 * storage is released here (a rank hands it to its owner's remote-free
 * stack; a dead runtime's storage has no data left). */
static void release_shards(core_spec *s) {
  for (int i = 0; i < s->mesh->size; i++) {
    core_storage *st = mesh_spec_storage(s, i);
    if (st) core_storage_release(st);
  }
}

/* a dry run's per-rank memory: each mesh rank's box, sign +1 or -1 */
static void dry_account(const core_spec *s, int sign) {
  const dt_mesh *m = s->mesh;
  for (int i = 0; i < m->size; i++) {
    mesh_box b = mesh_box_of(m, s->placements, &s->shape, i);
    runtime_dry_memory(m->rt, m->ranks[i], sign * mesh_box_numel(&b) * s->dry_es);
  }
}

int64_t mesh_dry_max_box(const dt_tensor *t) {
  const core_spec *s = t->spec;
  int64_t most = 0;
  for (int i = 0; s && i < s->mesh->size; i++) {
    mesh_box b = mesh_box_of(s->mesh, s->placements, &s->shape, i);
    if (mesh_box_numel(&b) > most) most = mesh_box_numel(&b);
  }
  return s ? most : core_numel(t);
}

void mesh_dry_forget(dt_tensor *t) {
  if (!t->spec->dry_es) return;
  dry_account(t->spec, -1);
  t->spec->dry_es = 0;
}

static void spec_dealloc(core_spec *s) {
  if (s->dry_es) dry_account(s, -1);
  mesh_release(s->mesh); /* the storage pointers live in s's allocation */
  free(s);
}

static void free_on_rank(void *arg, dt_runtime *rt, int rank) {
  (void)rt;
  core_spec *s = arg;
  const dt_mesh *m = s->mesh;
  int idx = rank < m->rt_ranks ? m->pos[rank] : -1;
  if (idx < 0) return;
  core_storage *st = s->storages[idx]; /* made by this thread, or NULL */
  if (st) core_storage_release(st);
}

static void free_done(void *arg) { spec_dealloc(arg); }

void mesh_dtensor_free_spec(core_spec *s) {
  dt_runtime *rt = s->mesh->rt;
  /* a runtime being destroyed refuses quietly (a release reports nothing):
   * the shards' data goes with its devices */
  if (!sched_current_pool() && runtime_gate_enter(rt, NULL)) {
    dt_status st = runtime_publish_helped_call(rt, "free_dtensor", free_on_rank,
                                               free_done, s, SCHED_HELP_ALONE);
    runtime_gate_leave(rt);
    if (st == DT_OK) return;
  }
  release_shards(s);
  spec_dealloc(s);
}

dt_status mesh_dtensor_check_placements(const dt_mesh *m, const dt_placement *in,
                                   const dt_shape *shape, dt_placement *out,
                                   const char *fn) {
  if (!in) { /* NULL = all Replicate */
    for (int i = 0; i < m->ndim; i++) out[i] = DT_REPLICATE;
    return DT_OK;
  }
  for (int i = 0; i < m->ndim; i++) {
    out[i] = in[i];
    if (in[i].kind == DT_PLACEMENT_SHARD && in[i].dim < 0 &&
        in[i].dim >= -shape->ndim)
      out[i].dim = in[i].dim + shape->ndim;
  }
  return mesh_check_placements(m, out, shape, fn);
}

static dt_status check_live(const dt_tensor *t, const char *fn) {
  if (atomic_load_explicit(&t->spec->mesh->rt->dead, memory_order_acquire))
    return core_error_set(DT_ERR_DEVICE, "%s: the tensor's runtime was "
                        "destroyed", fn);
  const core_poison *p = mesh_tensor_poison(t);
  if (p) return core_error_set(p->status, "%s", p->message);
  return DT_OK;
}

/* ---- factories */
dt_tensor *mesh_dtensor_factory(core_op_id op, dt_shape shape, dt_dtype dtype,
                           dt_mesh *mesh, const dt_placement *pl,
                           double value, const void *host, const char *fn) {
  if (shape.ndim < 0 || shape.ndim > DT_MAX_DIMS) {
    core_error_set(DT_ERR_SHAPE, "%s: shape has %d dims (expected 0..%d)", fn,
                 shape.ndim, DT_MAX_DIMS);
    return NULL;
  }
  int64_t n;
  for (int i = 0; i < shape.ndim; i++)
    if (shape.dims[i] < 0) {
      core_error_set(DT_ERR_SHAPE, "%s: negative size %lld at dim %d", fn,
                   (long long)shape.dims[i], i);
      return NULL;
    }
  if (!core_numel_checked(shape.dims, shape.ndim, &n)) {
    core_error_set(DT_ERR_SHAPE, "%s: the shape has more than 2^63 elements", fn);
    return NULL;
  }
  if ((op == CORE_OP_RAND || op == CORE_OP_RANDN) && !core_dtype_is_float(dtype)) {
    core_error_set(DT_ERR_DTYPE, "%s: random values need a floating dtype, got "
                 "%s", fn, core_dtype_name(dtype));
    return NULL;
  }
  if (atomic_load_explicit(&mesh->rt->dead, memory_order_acquire)) {
    core_error_set(DT_ERR_DEVICE, "%s: the mesh's runtime was destroyed", fn);
    return NULL;
  }
  dt_placement norm[DT_MAX_DIMS];
  if (mesh_dtensor_check_placements(mesh, pl, &shape, norm, fn) != DT_OK) return NULL;
  dt_tensor *t = mesh_dtensor_make(mesh, norm, shape, dtype, fn);
  if (!t) return NULL;
  mesh_fill_job *j = calloc(1, sizeof *j);
  if (!j) {
    core_tensor_release(t);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return NULL;
  }
  j->t = core_tensor_retain(t);
  j->op = op;
  j->value = value;
  j->api = fn;
  if (op == CORE_OP_RAND || op == CORE_OP_RANDN)
    j->first = core_rng_reserve((uint64_t)n, &j->seed);
  if (op == CORE_OP_FROM_HOST && n) {
    size_t bytes = (size_t)n * core_dtype_size(dtype);
    j->staging = malloc(bytes);
    if (!j->staging) {
      core_tensor_release(j->t);
      free(j);
      core_tensor_release(t);
      core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
      return NULL;
    }
    memcpy(j->staging, host, bytes);
  }
  if (runtime_publish_named_call(mesh->rt, -1, core_op_name(j->op),
                                 mesh_exec_fill, mesh_exec_fill_done, j) != DT_OK) {
    mesh_exec_fill_done(j);
    core_tensor_release(t);
    runtime_publish_failed(fn);
    return NULL;
  }
  core_error_succeeded();
  return t;
}

/* ---- queries */
dt_placement mesh_tensor_placement(const dt_tensor *t, int mesh_dim) {
  /* a failed placement query (dtorch.h) */
  const dt_placement invalid = {DT_PLACEMENT_INVALID, -1, DT_REDUCE_SUM};
  if (!t) {
    if (!core_error_chained())
      core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_tensor_placement: t is NULL");
    return invalid;
  }
  if (!t->spec) return DT_REPLICATE; /* single device: one rank */
  if (mesh_dim < 0 || mesh_dim >= t->spec->mesh->ndim) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_tensor_placement: mesh_dim %d "
                 "is outside [0, %d)", mesh_dim, t->spec->mesh->ndim);
    return invalid;
  }
  return t->spec->placements[mesh_dim];
}

dt_shape mesh_tensor_local_shape(const dt_tensor *t, int rank) {
  dt_shape s = {.ndim = -1};
  if (!t) {
    if (!core_error_chained())
      core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_tensor_local_shape: t is NULL");
    return s;
  }
  if (!t->spec) {
    if (rank != t->local.storage->rank) {
      core_error_set(DT_ERR_MESH, "dt_tensor_local_shape: rank %d does not hold "
                   "this tensor (it lives on cpu:%d)", rank,
                   t->local.storage->rank);
      return s;
    }
    return core_tensor_shape(t);
  }
  const dt_mesh *m = t->spec->mesh;
  int idx = rank >= 0 && rank < m->rt_ranks ? m->pos[rank] : -1;
  if (idx < 0) {
    core_error_set(DT_ERR_MESH, "dt_tensor_local_shape: rank %d is not in the "
                 "tensor's mesh", rank);
    return s;
  }
  int64_t off[DT_MAX_DIMS];
  s.ndim = t->spec->shape.ndim;
  mesh_local_box(m, t->spec->placements, &t->spec->shape, idx, off, s.dims);
  return s;
}

/* ---- host transfer */
/* publishes a host copy of t into dst (run/done on `rank`, -1: every rank
 * of t's mesh); without `wait`, *out receives the future of its outcome */
static dt_status host_job(dt_tensor *t, void *dst, size_t bytes, int rank,
                          runtime_call_fn run, runtime_done_fn done, int owner,
                          bool wait, dt_future **out, const char *fn) {
  /* a replicated fetch across processes agrees on its verdict first */
  sim_coll_group *agree = owner >= 0 ? sim_coll_group_get(
      t->spec->mesh->rt->coll, t->spec->mesh->ranks, t->spec->mesh->size) : NULL;
  if (owner >= 0 && !agree) return core_last_status();
  dt_future *f = sched_future_new();
  mesh_host_job *j = calloc(1, sizeof *j);
  if (!f || !j) {
    free(j);
    sched_future_release(f);
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  j->t = core_tensor_retain(t);
  j->dst = dst;
  j->bytes = bytes;
  j->owner = owner;
  j->agree = agree;
  pthread_mutex_init(&j->agree_lock, NULL);
  j->api = fn;
  j->future = sched_future_retain(f);
  if (runtime_publish_named_call(t->spec->mesh->rt, rank, "to_host", run,
                                 done, j) != DT_OK) {
    core_tensor_release(j->t);
    sched_future_release(j->future);
    sched_future_release(f);
    free(j);
    return runtime_publish_failed(fn);
  }
  if (!wait) {
    *out = f;
    return DT_OK;
  }
  dt_status st = sched_future_wait(f, -1);
  sched_future_release(f);
  return st;
}

static dt_status gather_to_host(dt_tensor *t, void *dst, bool wait,
                                dt_future **out, const char *fn) {
  return host_job(t, dst, 0, -1, mesh_exec_gather, mesh_exec_gather_done, -1,
                  wait, out, fn);
}

dt_tensor *mesh_replicated(dt_tensor *t, const char *fn) {
  dt_placement pl[DT_MAX_DIMS];
  bool replicated = true;
  for (int i = 0; i < t->spec->mesh->ndim; i++) {
    replicated = replicated && t->spec->placements[i].kind == DT_PLACEMENT_REPLICATE;
    pl[i] = DT_REPLICATE;
  }
  return replicated ? core_tensor_retain(t)
                    : mesh_redistribute_to(t, t->spec->mesh, pl, false, fn);
}

/* the first mesh index whose rank runs in this process, or -1 */
static int first_local(const dt_mesh *m) {
  for (int i = 0; i < m->size; i++)
    if (runtime_rank_is_local(m->rt, m->ranks[i])) return i;
  return -1;
}

/* "ranks 4, 5, 6, 7 run in process 1" (or "processes 2, 3"): m's ranks in
 * mesh order (the first 16), then the processes hosting them, ascending */
static void where_ranks(const dt_mesh *m, char *buf, size_t len) {
  const dt_runtime *rt = m->rt;
  int per = rt->nranks / rt->nprocs, nproc = 0;
  size_t at = (size_t)snprintf(buf, len, "ranks ");
  for (int i = 0; i < m->size && i <= 16 && at < len; i++)
    at += i == 16 ? (size_t)snprintf(buf + at, len - at, ", ...")
                  : (size_t)snprintf(buf + at, len - at, "%s%d", i ? ", " : "",
                                     m->ranks[i]);
  for (int p = 0; p < rt->nprocs; p++)
    for (int i = 0; i < m->size; i++)
      if (m->ranks[i] / per == p) {
        nproc++;
        break;
      }
  if (at < len)
    at += (size_t)snprintf(buf + at, len - at, " run in process%s",
                           nproc > 1 ? "es" : "");
  for (int p = 0, k = 0; p < rt->nprocs && at < len; p++)
    for (int i = 0; i < m->size; i++)
      if (m->ranks[i] / per == p) {
        at += (size_t)snprintf(buf + at, len - at, "%s %d", k++ ? "," : "", p);
        break;
      }
}

/* A mesh spanning processes: the value is replicated on every rank first
 * (collective over the mesh's processes: each of them makes this call),
 * then this process's first mesh rank copies it. */
static dt_status to_host_across(dt_tensor *t, void *dst, bool wait,
                                dt_future **out, const char *fn) {
  const dt_mesh *m = t->spec->mesh;
  int own = first_local(m);
  if (own < 0) {
    const dt_runtime *rt = m->rt;
    char where[256];
    where_ranks(m, where, sizeof where);
    return core_error_set(DT_ERR_DEVICE, "%s: the tensor's mesh has no rank in "
                          "this process (process %d, ranks %d..%d): its %s, "
                          "which must fetch it", fn, rt->proc, rt->first_rank,
                          rt->first_rank + rt->nlocal - 1, where);
  }
  dt_tensor *r = mesh_replicated(t, fn);
  if (!r) return core_last_status();
  dt_status st = host_job(r, dst, 0, -1, mesh_exec_gather, mesh_exec_gather_done,
                          own, wait, out, fn);
  core_tensor_release(r);
  return st;
}

dt_status mesh_dtensor_to_host(dt_tensor *t, void *dst, size_t bytes, bool wait,
                          dt_future **out, const char *fn) {
  if (t->spec->mesh->rt->dry_run)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: a dry-run runtime holds no "
                          "values (shapes, placements and counts only)", fn);
  /* an SPMD rank's thread runs its own part only (spmd_coll.c) */
  if (runtime_spmd_rank(t->spec->mesh->rt) >= 0)
    return mesh_spmd_to_host(t, dst, bytes, wait, out, fn);
  /* across processes: every process takes part in the replication, which
   * carries a failed shard's error to all of them */
  if (mesh_is_split(t->spec->mesh)) {
    if (atomic_load_explicit(&t->spec->mesh->rt->dead, memory_order_acquire))
      return core_error_set(DT_ERR_DEVICE, "%s: the tensor's runtime was "
                            "destroyed", fn);
    return to_host_across(t, dst, wait, out, fn);
  }
  const core_poison *p = mesh_tensor_poison(t);
  if (p && !wait && !atomic_load_explicit(&t->spec->mesh->rt->dead, memory_order_acquire)) {
    /* the async form reports an execution error through its future */
    if (!(*out = sched_future_new()))
      return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    sched_future_complete(*out, p->status, p->message);
    return DT_OK;
  }
  dt_status st = check_live(t, fn);
  if (st != DT_OK) return st;
  bool partial = false;
  dt_placement pl[DT_MAX_DIMS];
  for (int i = 0; i < t->spec->mesh->ndim; i++) {
    pl[i] = t->spec->placements[i];
    if (pl[i].kind == DT_PLACEMENT_PARTIAL) {
      partial = true;
      pl[i] = DT_REPLICATE;
    }
  }
  if (!partial) return gather_to_host(t, dst, wait, out, fn);
  /* reduce the partials first (all_reduce per partial mesh dim) */
  dt_tensor *r = mesh_redistribute_to(t, t->spec->mesh, pl, false, fn);
  if (!r) return core_last_status();
  st = gather_to_host(r, dst, wait, out, fn);
  core_tensor_release(r);
  return st;
}

dt_status mesh_local_to_host(dt_tensor *t, int rank, void *dst, size_t bytes) {
  static const char *fn = "dt_local_to_host";
  if (!t) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: t is NULL", fn);
  if (t->spec && t->spec->mesh->rt->dry_run)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: a dry-run runtime holds no "
                          "values", fn);
  if (!t->spec) {
    if (rank != t->local.storage->rank)
      return core_error_set(DT_ERR_MESH, "%s: rank %d does not hold this tensor "
                          "(it lives on cpu:%d)", fn, rank,
                          t->local.storage->rank);
    size_t need;
    dt_status st = runtime_host_buffer(t, dst, bytes, fn, &need);
    if (st != DT_OK) return st;
    return runtime_to_host(t, dst, need, true, NULL, fn);
  }
  dt_shape ls = mesh_tensor_local_shape(t, rank);
  if (ls.ndim < 0) return core_last_status();
  size_t need = (size_t)core_numel_of(ls.dims, ls.ndim) * core_dtype_size(t->dtype);
  if (!dst && need)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
  if (bytes < need)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: dst_bytes %zu is less "
                        "than the %zu bytes of rank %d's shard", fn, bytes,
                        need, rank);
  dt_status st = check_live(t, fn);
  if (st != DT_OK) return st;
  if (!runtime_rank_is_local(t->spec->mesh->rt, rank))
    return runtime_not_local(t->spec->mesh->rt, rank, fn);
  return host_job(t, dst, need, rank, mesh_exec_local, mesh_exec_local_done, -1,
                  true, NULL, fn);
}
