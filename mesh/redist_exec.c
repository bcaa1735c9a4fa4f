/* A mesh rank's part of dt_redistribute: run the plan's steps on its local
 * shard, each step one collective along one mesh dim's group (or a local
 * chunk / partial), and the cross-mesh pull. Buffers are contiguous local
 * tensors with the sizes of the rank's box before / after each step. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/cpu/cpu.h"
#include "mesh/dtensor_exec.h"
#include "sim/collectives.h"

typedef struct box { int n; int64_t off[DT_MAX_DIMS], len[DT_MAX_DIMS]; } box;

typedef struct ctx {
  dt_runtime *rt;
  int rank, idx;
  const dt_mesh *m;
  const dt_shape *shape;
  dt_dtype d;
  size_t es;
  dt_status st;
  char msg[512];
  const char *api;
} ctx;

static box box_at(const ctx *c, const dt_placement *pl, int idx) {
  box b = {.n = c->shape->ndim};
  mesh_local_box(c->m, pl, c->shape, idx, b.off, b.len);
  return b;
}
static int64_t numel(const box *b) { return core_numel_of(b->len, b->n); }
static int64_t prefix(const box *b, int d) { return core_numel_of(b->len, d); }

static void note_error(ctx *c, dt_status st, const char *msg) {
  if (c->st != DT_OK) return;
  c->st = st;
  snprintf(c->msg, sizeof c->msg, "%s", msg);
}

/* device memory, or zeroed host scratch after a failure (the rank keeps
 * taking part in the collectives; its output is poisoned) */
typedef struct buf { void *p; bool dev; } buf;
static buf balloc(ctx *c, int64_t n) {
  size_t bytes = (size_t)n * c->es;
  const char *err;
  buf b = {sim_device_alloc(&c->rt->ranks[c->rank].dev, bytes, &err), true};
  if (b.p) return b;
  char m[512];
  snprintf(m, sizeof m, "%s: %s", c->api, err);
  note_error(c, DT_ERR_OUT_OF_MEMORY, m);
  b.p = calloc(1, bytes ? bytes : 1);
  b.dev = false;
  return b;
}
static void bfree(ctx *c, buf b) {
  if (b.dev) sim_device_free(&c->rt->ranks[c->rank].dev, b.p);
  else free(b.p);
}

/* view of a contiguous tensor of sizes `len`, restricted on dim d to
 * [start, start+count) */
static cpu_view slice(void *data, dt_dtype dt, const box *shape, int d,
                      int64_t start, int64_t count) {
  cpu_view v = {0};
  v.data = data;
  v.dtype = dt;
  v.ndim = shape->n;
  int64_t s = 1;
  for (int i = shape->n - 1; i >= 0; i--) {
    v.sizes[i] = shape->len[i];
    v.strides[i] = s;
    s *= shape->len[i];
  }
  if (d >= 0) {
    v.data += start * v.strides[d] * (int64_t)cpu_dtype_size(dt);
    v.sizes[d] = count;
  }
  return v;
}
static void copy(const cpu_view *dst, const cpu_view *src) {
  cpu_unary(CPU_COPY, cpu_compute_type(src->dtype), dst, src);
}

/* the group along the step's mesh dim, and each member's mesh index */
static sim_coll_group *group(ctx *c, int mesh_dim, int *member, int *midx, int *n) {
  int ranks[4096];
  *n = mesh_dim_group(c->m, mesh_dim, c->idx, ranks, member);
  for (int k = 0; k < *n; k++) midx[k] = c->m->pos[ranks[k]];
  sim_coll_group *g = sim_coll_group_get(c->rt->coll, ranks, *n);
  if (!g) note_error(c, core_last_status(), core_last_error());
  return g;
}

static void check(ctx *c, dt_status st) {
  if (st != DT_OK) note_error(c, st, core_last_error());
}

static buf step_all_gather(ctx *c, const plan_step *s, const box *before,
                           buf cur) {
  int member, n, midx[4096];
  sim_coll_group *g = group(c, s->mesh_dim, &member, midx, &n);
  box after = box_at(c, s->after, c->idx);
  int64_t counts[4096], total = 0;
  box *bk = malloc(sizeof(box) * (size_t)n);
  for (int k = 0; k < n; k++) {
    bk[k] = box_at(c, s->before, midx[k]);
    counts[k] = numel(&bk[k]);
    total += counts[k];
  }
  buf tmp = balloc(c, total);
  if (g) check(c, sim_coll_all_gather(g, member, cur.p, tmp.p, counts, c->d));
  int d = s->from_dim;
  if (prefix(&after, d) == 1) { /* member blocks are already in place */
    free(bk);
    return tmp;
  }
  buf out = balloc(c, numel(&after));
  char *at = tmp.p;
  for (int k = 0; k < n; k++) {
    cpu_view src = slice(at, c->d, &bk[k], -1, 0, 0);
    cpu_view dst = slice(out.p, c->d, &after, d, bk[k].off[d] - after.off[d],
                         bk[k].len[d]);
    if (counts[k]) copy(&dst, &src);
    at += counts[k] * (int64_t)c->es;
  }
  (void)before;
  free(bk);
  bfree(c, tmp);
  return out;
}

static buf step_all_reduce(ctx *c, const plan_step *s, const box *before,
                           buf cur) {
  int member, n, midx[4096];
  sim_coll_group *g = group(c, s->mesh_dim, &member, midx, &n);
  buf out = balloc(c, numel(before));
  if (g) check(c, sim_coll_all_reduce(g, member, cur.p, out.p, numel(before), c->d, s->op));
  return out;
}

static buf step_reduce_scatter(ctx *c, const plan_step *s, const box *before,
                               buf cur) {
  int member, n, midx[4096];
  sim_coll_group *g = group(c, s->mesh_dim, &member, midx, &n);
  int d = s->to_dim;
  int64_t counts[4096];
  buf send = cur, packed = {NULL, false};
  bool pack = prefix(before, d) != 1;
  if (pack) packed = balloc(c, numel(before));
  char *at = pack ? packed.p : NULL;
  for (int k = 0; k < n; k++) {
    box bk = box_at(c, s->after, midx[k]);
    counts[k] = numel(&bk);
    if (pack && counts[k]) {
      cpu_view src = slice(cur.p, c->d, before, d, bk.off[d] - before->off[d],
                           bk.len[d]);
      cpu_view dst = slice(at, c->d, &bk, -1, 0, 0);
      copy(&dst, &src);
    }
    if (pack) at += counts[k] * (int64_t)c->es;
  }
  if (pack) send = packed;
  buf out = balloc(c, counts[member]);
  if (g) check(c, sim_coll_reduce_scatter(g, member, send.p, out.p, counts, c->d, s->op));
  if (pack) bfree(c, packed);
  return out;
}

static buf step_all_to_all(ctx *c, const plan_step *s, const box *before,
                           buf cur) {
  int member, n, midx[4096];
  sim_coll_group *g = group(c, s->mesh_dim, &member, midx, &n);
  int i = s->from_dim, j = s->to_dim;
  box after = box_at(c, s->after, c->idx);
  int64_t *send = malloc(sizeof(int64_t) * 2 * (size_t)n), *recv = send + n;
  box *bk = malloc(sizeof(box) * 2 * (size_t)n), *ak = bk + n;
  int64_t stotal = 0, rtotal = 0;
  for (int k = 0; k < n; k++) {
    bk[k] = box_at(c, s->before, midx[k]);
    ak[k] = box_at(c, s->after, midx[k]);
    box sb = *before, rb = bk[k];
    sb.len[j] = ak[k].len[j];
    rb.len[j] = after.len[j];
    send[k] = numel(&sb);
    recv[k] = numel(&rb);
    stotal += send[k];
    rtotal += recv[k];
  }
  buf sbuf = balloc(c, stotal), rbuf = balloc(c, rtotal), out = balloc(c, numel(&after));
  char *at = sbuf.p;
  for (int k = 0; k < n; k++) { /* my rows for member k's j-range */
    box sb = *before;
    sb.len[j] = ak[k].len[j];
    cpu_view src = slice(cur.p, c->d, before, j, ak[k].off[j] - before->off[j],
                         ak[k].len[j]);
    cpu_view dst = slice(at, c->d, &sb, -1, 0, 0);
    if (send[k]) copy(&dst, &src);
    at += send[k] * (int64_t)c->es;
  }
  if (g) check(c, sim_coll_all_to_all(g, member, sbuf.p, send, rbuf.p, recv, c->d));
  at = rbuf.p;
  for (int k = 0; k < n; k++) { /* member k's i-range of my j-range */
    box rb = bk[k];
    rb.len[j] = after.len[j];
    cpu_view src = slice(at, c->d, &rb, -1, 0, 0);
    cpu_view dst = slice(out.p, c->d, &after, i, bk[k].off[i] - after.off[i],
                         bk[k].len[i]);
    if (recv[k]) copy(&dst, &src);
    at += recv[k] * (int64_t)c->es;
  }
  bfree(c, sbuf);
  bfree(c, rbuf);
  free(send);
  free(bk);
  return out;
}

static buf step_local(ctx *c, const plan_step *s, const box *before, buf cur) {
  box after = box_at(c, s->after, c->idx);
  buf out = balloc(c, numel(&after));
  if (s->kind == PLAN_LOCAL_CHUNK) {
    int d = s->to_dim;
    cpu_view src = slice(cur.p, c->d, before, d, after.off[d] - before->off[d],
                         after.len[d]);
    cpu_view dst = slice(out.p, c->d, &after, -1, 0, 0);
    if (numel(&after)) copy(&dst, &src);
    return out;
  }
  int64_t coords[DT_MAX_DIMS]; /* Replicate -> Partial */
  mesh_index_coords(c->m, c->idx, coords);
  bool identity = coords[s->mesh_dim] != 0 &&
                  (s->op == DT_REDUCE_SUM || s->op == DT_REDUCE_PROD);
  if (identity)
    cpu_fill(out.p, c->d, numel(&after), s->op == DT_REDUCE_SUM ? 0 : 1);
  else if (numel(&after))
    memcpy(out.p, cur.p, (size_t)numel(&after) * c->es);
  return out;
}

static buf run_step(ctx *c, const plan_step *s, const box *before, buf cur) {
  switch (s->kind) {
  case PLAN_ALL_GATHER: return step_all_gather(c, s, before, cur);
  case PLAN_ALL_REDUCE: return step_all_reduce(c, s, before, cur);
  case PLAN_REDUCE_SCATTER: return step_reduce_scatter(c, s, before, cur);
  case PLAN_ALL_TO_ALL: return step_all_to_all(c, s, before, cur);
  default: return step_local(c, s, before, cur);
  }
}

/* the output storage takes the final buffer, or the error */
static void finish(ctx *c, core_storage *out, buf cur) {
  if (c->st == DT_OK && cur.dev) {
    out->data = cur.p;
    runtime_note_memory(c->rt, c->rank);
    return;
  }
  core_storage_set_poison(out, c->st, c->msg);
  bfree(c, cur);
}

void mesh_exec_redistribute(void *arg, dt_runtime *rt, int rank) {
  mesh_redist_job *j = arg;
  core_spec *ss = j->src->spec;
  const dt_mesh *m = ss->mesh;
  int idx = rank < m->rt_ranks ? m->pos[rank] : -1;
  if (idx < 0) return;
  ctx c = {rt, rank, idx, m, &ss->shape, j->src->dtype,
           core_dtype_size(j->src->dtype), DT_OK, "", j->api};
  core_storage *in = ss->storages[idx];
  const core_poison *p = core_storage_poison(in);
  box b = box_at(&c, ss->placements, idx);
  buf cur = {in->data, false};
  bool owned = false;
  if (p || !in->data) { /* take part with zeros; the output is poisoned */
    note_error(&c, p ? p->status : DT_ERR_INTERNAL, p ? p->message : "no data");
    cur.p = calloc(1, (size_t)numel(&b) * c.es + 1);
    owned = true;
  }
  for (int k = 0; k < j->nsteps; k++) {
    buf next = run_step(&c, &j->steps[k], &b, cur);
    if (owned) bfree(&c, cur);
    cur = next;
    owned = true;
    b = box_at(&c, j->steps[k].after, idx);
  }
  finish(&c, j->dst->spec->storages[idx], cur);
}

void mesh_exec_redist_done(void *arg) {
  mesh_redist_job *j = arg;
  core_tensor_release(j->src);
  core_tensor_release(j->dst);
  free(j);
}

/* ---- another mesh: every target rank pulls its box from a source copy */
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
  box all = {.n = t->spec->shape.ndim};
  memcpy(all.len, t->spec->shape.dims, sizeof all.len);
  *v = slice(t->spec->storages[idx]->data, t->dtype, &all, -1, 0, 0);
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
  ctx c = {rt, rank, in_dst ? bm->pos[rank] : -1, bm, &j->dst->spec->shape,
           j->dst->dtype, core_dtype_size(j->dst->dtype), DT_OK, "", j->api};
  sim_coll_group *g = sim_coll_group_get(rt->coll, u, n);
  cpu_view mine_v;
  const char *mine = source_data(j->src, rank, &mine_v);
  int64_t *ptrs = calloc((size_t)n, sizeof *ptrs), *ones = malloc(sizeof(int64_t) * (size_t)n);
  for (int k = 0; k < n; k++) ones[k] = 1;
  int64_t me = (int64_t)(intptr_t)mine;
  /* the exchange also orders the sources' earlier writes before our reads */
  if (!g) note_error(&c, core_last_status(), core_last_error());
  else check(&c, sim_coll_all_gather(g, member, &me, ptrs, ones, DT_INT64));
  if (in_dst) {
    int nsrc = 0, pick = -1;
    for (int k = 0; k < n; k++) if (ptrs[k]) nsrc++;
    for (int k = 0, seen = 0; k < n && nsrc; k++)
      if (ptrs[k] && seen++ == c.idx % nsrc) pick = u[k];
    box b = box_at(&c, j->dst->spec->placements, c.idx);
    buf out = balloc(&c, numel(&b));
    if (pick < 0 && c.st == DT_OK) note_error(&c, DT_ERR_INTERNAL, "no source copy");
    cpu_view sv;
    if (pick >= 0 && source_data(j->src, pick, &sv) && numel(&b)) {
      for (int i = 0; i < b.n; i++) {
        sv.data += b.off[i] * sv.strides[i] * (int64_t)c.es;
        sv.sizes[i] = b.len[i];
      }
      cpu_view dv = slice(out.p, c.d, &b, -1, 0, 0);
      copy(&dv, &sv);
    }
    /* Partial targets: the value on coordinate 0, the identity elsewhere */
    int64_t coords[DT_MAX_DIMS];
    mesh_index_coords(bm, c.idx, coords);
    for (int d = 0; d < bm->ndim; d++) {
      dt_placement p = j->dst->spec->placements[d];
      if (p.kind == DT_PLACEMENT_PARTIAL && coords[d] != 0 &&
          (p.reduce == DT_REDUCE_SUM || p.reduce == DT_REDUCE_PROD)) {
        cpu_fill(out.p, c.d, numel(&b), p.reduce == DT_REDUCE_SUM ? 0 : 1);
        break;
      }
    }
    finish(&c, j->dst->spec->storages[c.idx], out);
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
