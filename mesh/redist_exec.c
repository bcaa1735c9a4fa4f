/* A mesh rank's part of dt_redistribute: run the plan's steps on its local
 * shard, each step one collective along one mesh dim's group (or a local
 * chunk / partial), and the cross-mesh pull. Buffers are contiguous local
 * tensors with the sizes of the rank's mesh_box before / after each step. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/host_alloc.h"
#include "kernels/cpu/cpu.h"
#include "mesh/rank_work.h"
#include "mesh/shard.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"
#include "sim/collectives.h"

typedef struct ctx {
  mesh_rank_mem mem;      /* this rank's buffers and first error */
  mesh_probe *probe;      /* NULL unless probing (mesh_probe_enable) */
  int idx;                /* the rank's mesh index */
  const dt_mesh *m;
  const dt_shape *shape;  /* global */
  dt_dtype d;
  size_t es;
} ctx;

static mesh_box box_at(const ctx *c, const dt_placement *pl, int idx) {
  return mesh_box_of(c->m, pl, c->shape, idx);
}
static int64_t prefix(const mesh_box *b, int d) { return core_numel_of(b->len, d); }
/* ---- the phase probe */
#define PROBE_RANKS 64
static _Atomic bool probe_on;
static mesh_probe probe_slots[PROBE_RANKS];

static int64_t probe_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void mesh_probe_enable(bool on) {
  sim_coll_probe(on);
  atomic_store_explicit(&probe_on, on, memory_order_relaxed);
}

bool mesh_probe_read(int rank, mesh_probe *out) {
  if (rank < 0 || rank >= PROBE_RANKS) return false;
  *out = probe_slots[rank];
  return true;
}

/* the collective's call and return (the first call, the last return) */
static void probe_call(ctx *c) {
  if (c->probe && !c->probe->call) c->probe->call = probe_now();
}
static void probe_ret(ctx *c) {
  if (!c->probe) return;
  c->probe->ret = probe_now();
  if (!c->probe->rendezvous) c->probe->rendezvous = sim_coll_probe_rendezvous_ns();
}

static mesh_buf balloc(ctx *c, int64_t n) {
  if (!c->probe) return mesh_rank_alloc(&c->mem, (size_t)n * c->es);
  int64_t t = probe_now();
  mesh_buf b = mesh_rank_alloc(&c->mem, (size_t)n * c->es);
  c->probe->alloc_ns += probe_now() - t;
  return b;
}
static bool failed(const ctx *c) { return c->mem.st != DT_OK; }

/* The group along the step's mesh dim, resolved by the issuing thread
 * (mesh_dim_groups): the caller's member index, and member k's mesh index
 * base + k * stride. */
typedef struct grp {
  sim_coll_group *g;
  int member, n, base, stride;
} grp;

static grp group(const ctx *c, int mesh_dim) {
  grp r = {mesh_group_at(c->m, mesh_dim, c->idx), 0,
           (int)c->m->shape[mesh_dim], 0, 1};
  for (int d = mesh_dim + 1; d < c->m->ndim; d++) r.stride *= (int)c->m->shape[d];
  int64_t coords[DT_MAX_DIMS];
  mesh_index_coords(c->m, c->idx, coords);
  r.member = (int)coords[mesh_dim];
  r.base = c->idx - r.member * r.stride;
  return r;
}
static int midx(const grp *G, int k) { return G->base + k * G->stride; }

/* Per-member element counts: on the stack for small groups, else from the
 * host heap (a failure is this rank's error). */
#define SMALL_GROUP 64
typedef struct counts { int64_t *v, local[2 * SMALL_GROUP]; } counts;
static int64_t *counts_get(ctx *c, counts *k, int n) {
  k->v = n <= SMALL_GROUP ? k->local
                          : core_host_malloc(sizeof(int64_t) * 2 * (size_t)n);
  if (!k->v && !failed(c)) {
    char m[256];
    snprintf(m, sizeof m, "%s: rank %d: out of host memory for the counts "
             "of a %d-member collective", c->mem.api, c->mem.rank, n);
    mesh_rank_note(&c->mem, DT_ERR_OUT_OF_MEMORY, m);
  }
  return k->v;
}
static void counts_put(counts *k) {
  if (k->v != k->local) free(k->v);
}

/* This rank's part in the step's collective once it made its buffers:
 * false after it abstained (it failed: the other members then fail with
 * its message at once instead of waiting for it). */
static bool take_part(ctx *c, const grp *G) {
  probe_call(c);
  if (!failed(c)) return true;
  sim_coll_abstain(G->g, G->member, c->mem.st, c->mem.msg);
  return false;
}
static void check(ctx *c, dt_status st) {
  probe_ret(c);
  if (st != DT_OK) mesh_rank_note(&c->mem, st, core_last_error());
}

static mesh_buf step_all_gather(ctx *c, const mesh_plan_step *s, const grp *G,
                                mesh_buf cur) {
  mesh_box after = box_at(c, s->after, c->idx);
  counts k;
  int64_t *cnt = counts_get(c, &k, G->n), total = 0;
  for (int m = 0; cnt && m < G->n; m++) {
    mesh_box bm = box_at(c, s->before, midx(G, m));
    total += cnt[m] = mesh_box_numel(&bm);
  }
  int d = s->from_dim;
  bool in_place = prefix(&after, d) == 1; /* member blocks land in order */
  mesh_buf tmp = balloc(c, total), out = in_place ? tmp : balloc(c, mesh_box_numel(&after));
  if (take_part(c, G))
    check(c, sim_coll_all_gather(G->g, G->member, cur.p, tmp.p, cnt, c->d));
  char *at = tmp.p;
  for (int m = 0; !in_place && !failed(c) && m < G->n; m++) {
    mesh_box bm = box_at(c, s->before, midx(G, m));
    cpu_view src = mesh_box_view(at, c->d, &bm, -1, 0, 0);
    cpu_view dst = mesh_box_view(out.p, c->d, &after, d,
                                 bm.off[d] - after.off[d], bm.len[d]);
    if (cnt[m]) mesh_copy_view(&c->mem, &dst, &src);
    at += cnt[m] * (int64_t)c->es;
  }
  if (!in_place) mesh_rank_free(&c->mem, tmp);
  counts_put(&k);
  return out;
}

static mesh_buf step_all_reduce(ctx *c, const mesh_plan_step *s, const grp *G,
                                const mesh_box *before, mesh_buf cur) {
  mesh_buf out = balloc(c, mesh_box_numel(before));
  if (take_part(c, G))
    check(c, sim_coll_all_reduce(G->g, G->member, cur.p, out.p,
                                 mesh_box_numel(before), c->d, s->op));
  return out;
}

static mesh_buf step_reduce_scatter(ctx *c, const mesh_plan_step *s, const grp *G,
                                    const mesh_box *before, mesh_buf cur) {
  int d = s->to_dim;
  counts k;
  int64_t *cnt = counts_get(c, &k, G->n);
  for (int m = 0; cnt && m < G->n; m++) {
    mesh_box bm = box_at(c, s->after, midx(G, m));
    cnt[m] = mesh_box_numel(&bm);
  }
  bool pack = prefix(before, d) != 1;
  mesh_buf packed = pack ? balloc(c, mesh_box_numel(before)) : cur;
  mesh_buf out = balloc(c, cnt ? cnt[G->member] : 0);
  char *at = packed.p;
  for (int m = 0; pack && !failed(c) && m < G->n; m++) {
    mesh_box bm = box_at(c, s->after, midx(G, m));
    if (cnt[m]) {
      cpu_view src = mesh_box_view(cur.p, c->d, before, d,
                                   bm.off[d] - before->off[d], bm.len[d]);
      cpu_view dst = mesh_box_view(at, c->d, &bm, -1, 0, 0);
      mesh_copy_view(&c->mem, &dst, &src);
    }
    at += cnt[m] * (int64_t)c->es;
  }
  if (take_part(c, G))
    check(c, sim_coll_reduce_scatter(G->g, G->member, packed.p, out.p, cnt,
                                     c->d, s->op));
  if (pack) mesh_rank_free(&c->mem, packed);
  counts_put(&k);
  return out;
}

/* rows of mine for member m's j-range (send) / member m's i-range of my
 * j-range (recv), as boxes */
static mesh_box a2a_send_box(const ctx *c, const mesh_plan_step *s,
                             const mesh_box *before, const grp *G, int m) {
  mesh_box am = box_at(c, s->after, midx(G, m)), sb = *before;
  sb.off[s->to_dim] = am.off[s->to_dim];
  sb.len[s->to_dim] = am.len[s->to_dim];
  return sb;
}
static mesh_box a2a_recv_box(const ctx *c, const mesh_plan_step *s,
                             const mesh_box *after, const grp *G, int m) {
  mesh_box rb = box_at(c, s->before, midx(G, m));
  rb.off[s->to_dim] = after->off[s->to_dim];
  rb.len[s->to_dim] = after->len[s->to_dim];
  return rb;
}

static mesh_buf step_all_to_all(ctx *c, const mesh_plan_step *s, const grp *G,
                                const mesh_box *before, mesh_buf cur) {
  int i = s->from_dim, j = s->to_dim, n = G->n;
  mesh_box after = box_at(c, s->after, c->idx);
  counts k;
  int64_t *send = counts_get(c, &k, n), stotal = 0, rtotal = 0;
  int64_t *recv = send ? send + n : NULL;
  for (int m = 0; send && m < n; m++) {
    mesh_box sb = a2a_send_box(c, s, before, G, m);
    mesh_box rb = a2a_recv_box(c, s, &after, G, m);
    stotal += send[m] = mesh_box_numel(&sb);
    rtotal += recv[m] = mesh_box_numel(&rb);
  }
  /* the blocks are already contiguous and in member order when the dims
   * in front of j (send) / i (receive) have extent 1: no packing (a
   * [n, m] tensor S(0) -> S(1) moves straight between the shards) */
  bool pack = prefix(before, j) != 1, unpack = prefix(&after, i) != 1;
  mesh_buf out = balloc(c, mesh_box_numel(&after));
  mesh_buf sbuf = pack ? balloc(c, stotal) : cur;
  mesh_buf rbuf = unpack ? balloc(c, rtotal) : out;
  char *at = sbuf.p;
  for (int m = 0; pack && !failed(c) && m < n; m++) {
    mesh_box sb = a2a_send_box(c, s, before, G, m);
    cpu_view src = mesh_box_view(cur.p, c->d, before, j,
                                 sb.off[j] - before->off[j], sb.len[j]);
    cpu_view dst = mesh_box_view(at, c->d, &sb, -1, 0, 0);
    if (send[m]) mesh_copy_view(&c->mem, &dst, &src);
    at += send[m] * (int64_t)c->es;
  }
  if (take_part(c, G))
    check(c, sim_coll_all_to_all(G->g, G->member, sbuf.p, send, rbuf.p, recv,
                                 c->d));
  at = rbuf.p;
  for (int m = 0; unpack && !failed(c) && m < n; m++) {
    mesh_box rb = a2a_recv_box(c, s, &after, G, m);
    cpu_view src = mesh_box_view(at, c->d, &rb, -1, 0, 0);
    cpu_view dst = mesh_box_view(out.p, c->d, &after, i,
                                 rb.off[i] - after.off[i], rb.len[i]);
    if (recv[m]) mesh_copy_view(&c->mem, &dst, &src);
    at += recv[m] * (int64_t)c->es;
  }
  if (pack) mesh_rank_free(&c->mem, sbuf);
  if (unpack) mesh_rank_free(&c->mem, rbuf);
  counts_put(&k);
  return out;
}

static mesh_buf step_local(ctx *c, const mesh_plan_step *s, const mesh_box *before, mesh_buf cur) {
  mesh_box after = box_at(c, s->after, c->idx);
  mesh_buf out = balloc(c, mesh_box_numel(&after));
  if (failed(c)) return out;
  if (s->kind == MESH_PLAN_LOCAL_CHUNK) {
    int d = s->to_dim;
    cpu_view src = mesh_box_view(cur.p, c->d, before, d, after.off[d] - before->off[d],
                         after.len[d]);
    cpu_view dst = mesh_box_view(out.p, c->d, &after, -1, 0, 0);
    if (mesh_box_numel(&after)) mesh_copy_view(&c->mem, &dst, &src);
    return out;
  }
  int64_t coords[DT_MAX_DIMS]; /* Replicate -> Partial */
  mesh_index_coords(c->m, c->idx, coords);
  bool identity = coords[s->mesh_dim] != 0 &&
                  (s->op == DT_REDUCE_SUM || s->op == DT_REDUCE_PROD);
  if (identity)
    mesh_fill(&c->mem, out.p, c->d, mesh_box_numel(&after),
              s->op == DT_REDUCE_SUM ? 0 : 1);
  else if (mesh_box_numel(&after)) {
    dt_status st = c->mem.rt->backend->copy(
        c->mem.rt, c->mem.rank, out.p, cur.p,
        (size_t)mesh_box_numel(&after) * c->es, RUNTIME_COPY_D2D);
    if (st != DT_OK) mesh_rank_note(&c->mem, st, core_last_error());
  }
  return out;
}

static mesh_buf run_step(ctx *c, const mesh_plan_step *s, const mesh_box *before, mesh_buf cur) {
  if (!mesh_plan_is_collective(s->kind)) return step_local(c, s, before, cur);
  grp G = group(c, s->mesh_dim);
  switch (s->kind) {
  case MESH_PLAN_ALL_GATHER: return step_all_gather(c, s, &G, cur);
  case MESH_PLAN_ALL_REDUCE: return step_all_reduce(c, s, &G, before, cur);
  case MESH_PLAN_REDUCE_SCATTER: return step_reduce_scatter(c, s, &G, before, cur);
  default: return step_all_to_all(c, s, &G, before, cur);
  }
}

void mesh_exec_redistribute(void *arg, dt_runtime *rt, int rank) {
  mesh_redist_job *j = arg;
  core_spec *ss = j->src->spec;
  const dt_mesh *m = ss->mesh;
  int idx = rank < m->rt_ranks ? m->pos[rank] : -1;
  if (idx < 0) return;
  ctx c = {.idx = idx, .m = m, .shape = &ss->shape, .d = j->src->dtype,
           .es = core_dtype_size(j->src->dtype)};
  /* relaxed: a benchmark switch; the slot is read after a synchronize */
  if (atomic_load_explicit(&probe_on, memory_order_relaxed) && rank < PROBE_RANKS) {
    c.probe = &probe_slots[rank];
    *c.probe = (mesh_probe){.start = probe_now()};
  }
  mesh_rank_mem_init(&c.mem, rt, rank, j->api);
  core_storage *in = ss->storages[idx];
  const core_poison *p = core_storage_poison(in);
  if (p || !in->data) /* every step abstains: the others fail with this */
    mesh_rank_note(&c.mem, p ? p->status : DT_ERR_INTERNAL, p ? p->message : "no data");
  mesh_box b = box_at(&c, ss->placements, idx);
  mesh_buf cur = {failed(&c) ? NULL : in->data};
  for (int k = 0; k < j->nsteps; k++) {
    mesh_buf next = run_step(&c, &j->steps[k], &b, cur);
    if (k > 0) mesh_rank_free(&c.mem, cur); /* step 0 read the input */
    cur = next;
    b = box_at(&c, j->steps[k].after, idx);
  }
  mesh_rank_finish(&c.mem, mesh_rank_storage(&c.mem, j->dst, idx), cur);
  if (c.probe) c.probe->end = probe_now();
}

void mesh_exec_redist_done(void *arg) {
  mesh_redist_job *j = arg;
  core_tensor_release(j->src);
  core_tensor_release(j->dst);
  free(j);
}

/* ---- another mesh: every target rank pulls its mesh_box from a source copy */
typedef struct xsrc { int rank; const char *data; cpu_view view; } xsrc;

/* the full value as held by rank (NULL if it holds none) */
static const char *source_data(const dt_tensor *t, int rank, cpu_view *v) {
  if (!t->spec) {
    const core_storage *s = t->local.storage;
    if (s->rank != rank || !s->data) return NULL;
    *v = (cpu_view){0};
    v->data = (char *)s->data + t->local.offset * (int64_t)core_dtype_size(t->dtype);
    v->dtype = t->dtype;
    v->ndim = t->local.ndim;
    memcpy(v->sizes, t->local.sizes, sizeof v->sizes);
    memcpy(v->strides, t->local.strides, sizeof v->strides);
    return v->data;
  }
  const dt_mesh *m = t->spec->mesh;
  int idx = rank < m->rt_ranks ? m->pos[rank] : -1;
  /* another process's rank has no storage here */
  if (idx < 0 || !t->spec->storages[idx] || !t->spec->storages[idx]->data)
    return NULL;
  mesh_box all = mesh_box_all(&t->spec->shape);
  *v = mesh_box_view(t->spec->storages[idx]->data, t->dtype, &all, -1, 0, 0);
  return v->data;
}

/* the member index of rank in the job's union (sorted): -1 if outside */
static int union_member(const mesh_xmesh_job *j, int rank) {
  int lo = 0, hi = j->n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (j->members[mid] == rank) return mid;
    if (j->members[mid] < rank) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/* a rank that holds a copy of the source, chosen by target index (spread
 * the reads); -1 when none does (the source failed) */
static int pick_source(const mesh_xmesh_job *j, int idx) {
  cpu_view v;
  int nsrc = 0;
  for (int k = 0; k < j->n; k++) nsrc += source_data(j->src, j->members[k], &v) != NULL;
  for (int k = 0, seen = 0; k < j->n && nsrc; k++)
    if (source_data(j->src, j->members[k], &v) && seen++ == idx % nsrc)
      return j->members[k];
  return -1;
}

/* ---- across processes (a multi-process job). A rank reads only its own
 * process's memory, and the job's union group holds this process's ranks
 * only (redistribute.c). A process with target ranks but no source rank
 * gets the value by point to point (sim_coll_send / recv, over MPI): each
 * such target rank r receives the whole value from source rank
 * ranks[r % size] of the source mesh, the same choice in every process.
 * A single-device source is every process's own (each makes it). */
static int proc_of(const dt_runtime *rt, int r) {
  return r / (rt->nranks / rt->nprocs);
}

static bool proc_has_source(const mesh_xmesh_job *j, const dt_runtime *rt,
                            int q) {
  const dt_mesh *m = j->src->spec ? j->src->spec->mesh : NULL;
  for (int i = 0; m && i < m->size; i++)
    if (proc_of(rt, m->ranks[i]) == q) return true;
  return !m || rt->nprocs == 1;
}

static int sender_of(const mesh_xmesh_job *j, int r) {
  const dt_mesh *m = j->src->spec->mesh;
  return m->ranks[r % m->size];
}

/* a source rank sends the value to each target rank it serves (a source
 * without data sends nothing: that receive fails at its deadline) */
static void serve_remote(ctx *c, const mesh_xmesh_job *j, int rank) {
  const dt_runtime *rt = c->mem.rt;
  const dt_mesh *bm = j->dst->spec->mesh;
  cpu_view v;
  if (rt->nprocs == 1 || !j->src->spec || !source_data(j->src, rank, &v)) return;
  int64_t bytes = core_numel(j->src) * (int64_t)c->es;
  for (int i = 0; i < bm->size; i++) {
    int r = bm->ranks[i];
    if (sender_of(j, r) != rank || proc_has_source(j, rt, proc_of(rt, r)))
      continue;
    if (sim_coll_send(rt->coll, rank, r, v.data, bytes) != DT_OK)
      mesh_rank_note(&c->mem, core_last_status(), core_last_error());
  }
}

/* a target rank of a process without a source: the value from its sender
 * into a host buffer (malloc'd; NULL with the failure noted) */
static char *receive_remote(ctx *c, const mesh_xmesh_job *j, cpu_view *sv) {
  const dt_runtime *rt = c->mem.rt;
  int rank = c->mem.rank;
  int64_t n = core_numel(j->src);
  char *buf = malloc(n ? (size_t)n * c->es : 1);
  if (!buf) {
    mesh_rank_note(&c->mem, DT_ERR_OUT_OF_MEMORY, "out of host memory for "
                   "the value of another process's ranks");
    return NULL;
  }
  if (sim_coll_recv(rt->coll, rank, sender_of(j, rank), buf,
                    n * (int64_t)c->es) != DT_OK) {
    mesh_rank_note(&c->mem, core_last_status(), core_last_error());
    free(buf);
    return NULL;
  }
  mesh_box all = mesh_box_all(&j->src->spec->shape);
  *sv = mesh_box_view(buf, c->d, &all, -1, 0, 0);
  return buf;
}

static void pull(ctx *c, const mesh_xmesh_job *j) {
  const dt_mesh *bm = j->dst->spec->mesh;
  const dt_runtime *rt = c->mem.rt;
  bool remote = !proc_has_source(j, rt, rt->proc);
  int pick = failed(c) || remote ? -1 : pick_source(j, c->idx);
  mesh_box b = box_at(c, j->dst->spec->placements, c->idx);
  mesh_buf out = balloc(c, mesh_box_numel(&b));
  cpu_view sv;
  char *got = remote && !failed(c) ? receive_remote(c, j, &sv) : NULL;
  if (pick >= 0 && rt->ranks[pick].gpu != rt->ranks[c->mem.rank].gpu)
    mesh_rank_note(&c->mem, DT_ERR_UNSUPPORTED, "a redistribute to another "
                   "mesh between ranks on different GPUs is not built yet "
                   "(docs/cuda.md)");
  if (pick < 0 && !remote && !failed(c)) { /* no copy: the source failed */
    const core_poison *p = mesh_tensor_poison(j->src);
    mesh_rank_note(&c->mem, p ? p->status : DT_ERR_INTERNAL,
                   p ? p->message : "cross-mesh redistribute: no rank "
                   "holds a copy of the source");
  }
  if (!failed(c) && (got || source_data(j->src, pick, &sv)) &&
      mesh_box_numel(&b)) {
    mesh_view_narrow(&sv, &b);
    cpu_view dv = mesh_box_view(out.p, c->d, &b, -1, 0, 0);
    mesh_copy_view(&c->mem, &dv, &sv);
  }
  free(got);
  /* Partial targets: the value on coordinate 0, the identity elsewhere */
  double id;
  if (!failed(c) && mesh_partial_identity(bm, j->dst->spec->placements, c->idx, &id))
    mesh_fill(&c->mem, out.p, c->d, mesh_box_numel(&b), id);
  mesh_rank_finish(&c->mem, mesh_rank_storage(&c->mem, j->dst, c->idx), out);
}

void mesh_exec_cross_mesh(void *arg, dt_runtime *rt, int rank) {
  mesh_xmesh_job *j = arg;
  int member = union_member(j, rank);
  if (member < 0) return;
  const dt_mesh *bm = j->dst->spec->mesh;
  bool in_dst = rank < bm->rt_ranks && bm->pos[rank] >= 0;
  ctx c = {.idx = in_dst ? bm->pos[rank] : -1, .m = bm,
           .shape = &j->dst->spec->shape, .d = j->dst->dtype,
           .es = core_dtype_size(j->dst->dtype)};
  mesh_rank_mem_init(&c.mem, rt, rank, j->api);
  /* the sources' shards were written by their ranks before they arrived:
   * the barrier orders those writes before our reads (its arrivals
   * release, its waits acquire; on CUDA ranks it orders the streams:
   * sim/coll_device.c) */
  check(&c, sim_coll_barrier(j->group, member));
  serve_remote(&c, j, rank);
  if (in_dst) pull(&c, j);
  /* sources stay readable until every puller is done */
  sim_coll_barrier(j->group, member);
}

void mesh_exec_xmesh_done(void *arg) {
  mesh_xmesh_job *j = arg;
  core_tensor_release(j->src);
  core_tensor_release(j->dst);
  free(j->members);
  free(j);
}
