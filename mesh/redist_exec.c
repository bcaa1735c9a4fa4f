/* A mesh rank's part of dt_redistribute: run the plan's steps on its local
 * shard, each step one collective along one mesh dim's group (or a local
 * chunk / partial), and the cross-mesh pull. Buffers are contiguous local
 * tensors with the sizes of the rank's mesh_box before / after each step. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/cpu/cpu.h"
#include "mesh/dtensor_exec.h"
#include "mesh/shard.h"
#include "sim/collectives.h"

typedef struct ctx {
  mesh_rank_mem mem;      /* this rank's buffers and first error */
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
static mesh_buf balloc(ctx *c, int64_t n) {
  return mesh_rank_alloc(&c->mem, (size_t)n * c->es);
}

/* the group along the step's mesh dim: the collective group, the caller's
 * member index and each member's mesh index (midx: malloc'd, n entries) */
typedef struct grp {
  sim_coll_group *g;
  int member, n;
  int *midx;
  int64_t *counts;        /* scratch: n element counts */
} grp;

static grp group(ctx *c, int mesh_dim) {
  size_t size = (size_t)c->m->shape[mesh_dim];
  grp r = {NULL, -1, 0, malloc(sizeof(int) * size),
           malloc(sizeof(int64_t) * size)};
  int *ranks = malloc(sizeof(int) * size);
  CORE_ASSERT(ranks && r.midx && r.counts); /* a few words per member */
  r.n = mesh_dim_group(c->m, mesh_dim, c->idx, ranks, &r.member);
  for (int k = 0; k < r.n; k++) r.midx[k] = c->m->pos[ranks[k]];
  r.g = sim_coll_group_get(c->mem.rt->coll, ranks, r.n);
  if (!r.g) mesh_rank_note(&c->mem, core_last_status(), core_last_error());
  free(ranks);
  return r;
}

static void check(ctx *c, dt_status st) {
  if (st != DT_OK) mesh_rank_note(&c->mem, st, core_last_error());
}

static mesh_buf step_all_gather(ctx *c, const mesh_plan_step *s, const grp *G,
                               const mesh_box *before, mesh_buf cur) {
  sim_coll_group *g = G->g;
  int member = G->member, n = G->n;
  const int *midx = G->midx;
  mesh_box after = box_at(c, s->after, c->idx);
  int64_t *counts = G->counts, total = 0;
  mesh_box *bk = malloc(sizeof(mesh_box) * (size_t)n);
  for (int k = 0; k < n; k++) {
    bk[k] = box_at(c, s->before, midx[k]);
    counts[k] = mesh_box_numel(&bk[k]);
    total += counts[k];
  }
  mesh_buf tmp = balloc(c, total);
  if (g) check(c, sim_coll_all_gather(g, member, cur.p, tmp.p, counts, c->d));
  int d = s->from_dim;
  if (prefix(&after, d) == 1) { /* member blocks are already in place */
    free(bk);
    return tmp;
  }
  mesh_buf out = balloc(c, mesh_box_numel(&after));
  char *at = tmp.p;
  for (int k = 0; k < n; k++) {
    cpu_view src = mesh_box_view(at, c->d, &bk[k], -1, 0, 0);
    cpu_view dst = mesh_box_view(out.p, c->d, &after, d, bk[k].off[d] - after.off[d],
                         bk[k].len[d]);
    if (counts[k]) mesh_copy_view(&dst, &src);
    at += counts[k] * (int64_t)c->es;
  }
  (void)before;
  free(bk);
  mesh_rank_free(&c->mem, tmp);
  return out;
}

static mesh_buf step_all_reduce(ctx *c, const mesh_plan_step *s, const grp *G,
                               const mesh_box *before, mesh_buf cur) {
  mesh_buf out = balloc(c, mesh_box_numel(before));
  if (G->g)
    check(c, sim_coll_all_reduce(G->g, G->member, cur.p, out.p,
                                 mesh_box_numel(before), c->d, s->op));
  return out;
}

static mesh_buf step_reduce_scatter(ctx *c, const mesh_plan_step *s, const grp *G,
                                   const mesh_box *before, mesh_buf cur) {
  sim_coll_group *g = G->g;
  int member = G->member, n = G->n;
  const int *midx = G->midx;
  int d = s->to_dim;
  int64_t *counts = G->counts;
  mesh_buf send = cur, packed = {NULL, false};
  bool pack = prefix(before, d) != 1;
  if (pack) packed = balloc(c, mesh_box_numel(before));
  char *at = pack ? packed.p : NULL;
  for (int k = 0; k < n; k++) {
    mesh_box bk = box_at(c, s->after, midx[k]);
    counts[k] = mesh_box_numel(&bk);
    if (pack && counts[k]) {
      cpu_view src = mesh_box_view(cur.p, c->d, before, d, bk.off[d] - before->off[d],
                           bk.len[d]);
      cpu_view dst = mesh_box_view(at, c->d, &bk, -1, 0, 0);
      mesh_copy_view(&dst, &src);
    }
    if (pack) at += counts[k] * (int64_t)c->es;
  }
  if (pack) send = packed;
  mesh_buf out = balloc(c, counts[member]);
  if (g) check(c, sim_coll_reduce_scatter(g, member, send.p, out.p, counts, c->d, s->op));
  if (pack) mesh_rank_free(&c->mem, packed);
  return out;
}

static mesh_buf step_all_to_all(ctx *c, const mesh_plan_step *s, const grp *G,
                               const mesh_box *before, mesh_buf cur) {
  sim_coll_group *g = G->g;
  int member = G->member, n = G->n;
  const int *midx = G->midx;
  int i = s->from_dim, j = s->to_dim;
  mesh_box after = box_at(c, s->after, c->idx);
  int64_t *send = malloc(sizeof(int64_t) * 2 * (size_t)n), *recv = send + n;
  mesh_box *bk = malloc(sizeof(mesh_box) * 2 * (size_t)n), *ak = bk + n;
  int64_t stotal = 0, rtotal = 0;
  for (int k = 0; k < n; k++) {
    bk[k] = box_at(c, s->before, midx[k]);
    ak[k] = box_at(c, s->after, midx[k]);
    mesh_box sb = *before, rb = bk[k];
    sb.len[j] = ak[k].len[j];
    rb.len[j] = after.len[j];
    send[k] = mesh_box_numel(&sb);
    recv[k] = mesh_box_numel(&rb);
    stotal += send[k];
    rtotal += recv[k];
  }
  mesh_buf sbuf = balloc(c, stotal), rbuf = balloc(c, rtotal), out = balloc(c, mesh_box_numel(&after));
  char *at = sbuf.p;
  for (int k = 0; k < n; k++) { /* my rows for member k's j-range */
    mesh_box sb = *before;
    sb.len[j] = ak[k].len[j];
    cpu_view src = mesh_box_view(cur.p, c->d, before, j, ak[k].off[j] - before->off[j],
                         ak[k].len[j]);
    cpu_view dst = mesh_box_view(at, c->d, &sb, -1, 0, 0);
    if (send[k]) mesh_copy_view(&dst, &src);
    at += send[k] * (int64_t)c->es;
  }
  if (g) check(c, sim_coll_all_to_all(g, member, sbuf.p, send, rbuf.p, recv, c->d));
  at = rbuf.p;
  for (int k = 0; k < n; k++) { /* member k's i-range of my j-range */
    mesh_box rb = bk[k];
    rb.len[j] = after.len[j];
    cpu_view src = mesh_box_view(at, c->d, &rb, -1, 0, 0);
    cpu_view dst = mesh_box_view(out.p, c->d, &after, i, bk[k].off[i] - after.off[i],
                         bk[k].len[i]);
    if (recv[k]) mesh_copy_view(&dst, &src);
    at += recv[k] * (int64_t)c->es;
  }
  mesh_rank_free(&c->mem, sbuf);
  mesh_rank_free(&c->mem, rbuf);
  free(send);
  free(bk);
  return out;
}

static mesh_buf step_local(ctx *c, const mesh_plan_step *s, const mesh_box *before, mesh_buf cur) {
  mesh_box after = box_at(c, s->after, c->idx);
  mesh_buf out = balloc(c, mesh_box_numel(&after));
  if (s->kind == MESH_PLAN_LOCAL_CHUNK) {
    int d = s->to_dim;
    cpu_view src = mesh_box_view(cur.p, c->d, before, d, after.off[d] - before->off[d],
                         after.len[d]);
    cpu_view dst = mesh_box_view(out.p, c->d, &after, -1, 0, 0);
    if (mesh_box_numel(&after)) mesh_copy_view(&dst, &src);
    return out;
  }
  int64_t coords[DT_MAX_DIMS]; /* Replicate -> Partial */
  mesh_index_coords(c->m, c->idx, coords);
  bool identity = coords[s->mesh_dim] != 0 &&
                  (s->op == DT_REDUCE_SUM || s->op == DT_REDUCE_PROD);
  if (identity)
    cpu_fill(out.p, c->d, mesh_box_numel(&after), s->op == DT_REDUCE_SUM ? 0 : 1);
  else if (mesh_box_numel(&after))
    memcpy(out.p, cur.p, (size_t)mesh_box_numel(&after) * c->es);
  return out;
}

static mesh_buf run_step(ctx *c, const mesh_plan_step *s, const mesh_box *before, mesh_buf cur) {
  if (!mesh_plan_is_collective(s->kind)) return step_local(c, s, before, cur);
  grp G = group(c, s->mesh_dim);
  mesh_buf out;
  switch (s->kind) {
  case MESH_PLAN_ALL_GATHER: out = step_all_gather(c, s, &G, before, cur); break;
  case MESH_PLAN_ALL_REDUCE: out = step_all_reduce(c, s, &G, before, cur); break;
  case MESH_PLAN_REDUCE_SCATTER: out = step_reduce_scatter(c, s, &G, before, cur); break;
  default: out = step_all_to_all(c, s, &G, before, cur); break;
  }
  free(G.midx);
  free(G.counts);
  return out;
}

void mesh_exec_redistribute(void *arg, dt_runtime *rt, int rank) {
  mesh_redist_job *j = arg;
  core_spec *ss = j->src->spec;
  const dt_mesh *m = ss->mesh;
  int idx = rank < m->rt_ranks ? m->pos[rank] : -1;
  if (idx < 0) return;
  ctx c = {.idx = idx, .m = m, .shape = &ss->shape, .d = j->src->dtype,
           .es = core_dtype_size(j->src->dtype)};
  mesh_rank_mem_init(&c.mem, rt, rank, j->api);
  core_storage *in = ss->storages[idx];
  const core_poison *p = core_storage_poison(in);
  mesh_box b = box_at(&c, ss->placements, idx);
  mesh_buf cur = {in->data, false};
  bool owned = false;
  if (p || !in->data) { /* take part with zeros; the output is poisoned */
    mesh_rank_note(&c.mem, p ? p->status : DT_ERR_INTERNAL, p ? p->message : "no data");
    cur.p = calloc(1, (size_t)mesh_box_numel(&b) * c.es + 1);
    owned = true;
  }
  for (int k = 0; k < j->nsteps; k++) {
    mesh_buf next = run_step(&c, &j->steps[k], &b, cur);
    if (owned) mesh_rank_free(&c.mem, cur);
    cur = next;
    owned = true;
    b = box_at(&c, j->steps[k].after, idx);
  }
  mesh_rank_finish(&c.mem, j->dst->spec->storages[idx], cur);
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
  if (idx < 0 || !t->spec->storages[idx]->data) return NULL;
  mesh_box all = mesh_box_all(&t->spec->shape);
  *v = mesh_box_view(t->spec->storages[idx]->data, t->dtype, &all, -1, 0, 0);
  return v->data;
}

static bool in_tensor(const dt_tensor *t, int rank) {
  if (!t->spec) return t->local.storage->rank == rank;
  return rank < t->spec->mesh->rt_ranks && t->spec->mesh->pos[rank] >= 0;
}

void mesh_exec_cross_mesh(void *arg, dt_runtime *rt, int rank) {
  mesh_xmesh_job *j = arg;
  const dt_mesh *bm = j->dst->spec->mesh;
  bool in_dst = rank < bm->rt_ranks && bm->pos[rank] >= 0;
  if (!in_dst && !in_tensor(j->src, rank)) return;
  int *u = malloc(sizeof(int) * (size_t)rt->nranks), n = 0, member = -1;
  for (int r = 0; r < rt->nranks; r++) /* the union, in rank order */
    if ((r < bm->rt_ranks && bm->pos[r] >= 0) || in_tensor(j->src, r)) {
      if (r == rank) member = n;
      u[n++] = r;
    }
  ctx c = {.idx = in_dst ? bm->pos[rank] : -1, .m = bm,
           .shape = &j->dst->spec->shape, .d = j->dst->dtype,
           .es = core_dtype_size(j->dst->dtype)};
  mesh_rank_mem_init(&c.mem, rt, rank, j->api);
  sim_coll_group *g = sim_coll_group_get(rt->coll, u, n);
  cpu_view mine_v;
  const char *mine = source_data(j->src, rank, &mine_v);
  int64_t *ptrs = calloc((size_t)n, sizeof *ptrs), *ones = malloc(sizeof(int64_t) * (size_t)n);
  for (int k = 0; k < n; k++) ones[k] = 1;
  int64_t me = (int64_t)(intptr_t)mine;
  /* the exchange also orders the sources' earlier writes before our reads */
  if (!g) mesh_rank_note(&c.mem, core_last_status(), core_last_error());
  else check(&c, sim_coll_all_gather(g, member, &me, ptrs, ones, DT_INT64));
  if (in_dst) {
    int nsrc = 0, pick = -1;
    for (int k = 0; k < n; k++) if (ptrs[k]) nsrc++;
    for (int k = 0, seen = 0; k < n && nsrc; k++)
      if (ptrs[k] && seen++ == c.idx % nsrc) pick = u[k];
    mesh_box b = box_at(&c, j->dst->spec->placements, c.idx);
    mesh_buf out = balloc(&c, mesh_box_numel(&b));
    if (pick < 0) { /* no copy because the source failed: its error */
      const core_poison *p = mesh_tensor_poison(j->src);
      mesh_rank_note(&c.mem, p ? p->status : DT_ERR_INTERNAL,
                     p ? p->message : "cross-mesh redistribute: no rank "
                     "holds a copy of the source");
    }
    cpu_view sv;
    if (pick >= 0 && source_data(j->src, pick, &sv) && mesh_box_numel(&b)) {
      mesh_view_narrow(&sv, &b);
      cpu_view dv = mesh_box_view(out.p, c.d, &b, -1, 0, 0);
      mesh_copy_view(&dv, &sv);
    }
    /* Partial targets: the value on coordinate 0, the identity elsewhere */
    double id;
    if (mesh_partial_identity(bm, j->dst->spec->placements, c.idx, &id))
      cpu_fill(out.p, c.d, mesh_box_numel(&b), id);
    mesh_rank_finish(&c.mem, j->dst->spec->storages[c.idx], out);
  }
  /* sources stay readable until every puller is done */
  if (g) check(&c, sim_coll_barrier(g, member));
  free(u);
  free(ptrs);
  free(ones);
}

void mesh_exec_xmesh_done(void *arg) {
  mesh_xmesh_job *j = arg;
  core_tensor_release(j->src);
  core_tensor_release(j->dst);
  free(j);
}
