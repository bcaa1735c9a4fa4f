/* What each collective moves between processes (sim/coll_proc_internal.h),
 * done by the process's leader for all its members. Per kind:
 *
 * all_reduce      each process reduces its maximal subtrees of the fixed
 *                 tree (sim/coll_reduce.h) over its members into partials
 *                 in the compute type. Small (every process's partials fit
 *                 a header): every process sends all its partials to
 *                 every other, and each evaluates the tree's root itself.
 *                 Otherwise reduce-scatter then all-gather: the elements
 *                 are cut in one segment per process, each process
 *                 receives every other's partials of its segment, reduces
 *                 the segment's root, and sends the result to all.
 * reduce_scatter  the same partials; each process receives the other
 *                 processes' partials of its own members' blocks.
 * all_gather      each process sends its members' inputs (in member
 *                 order) to every other.
 * all_to_all      each process sends every other the blocks its members
 *                 address to that process's members.
 * broadcast       the root's process sends the buffer to every other.
 * scatter/gather  the root's process sends each process its members'
 *                 blocks / receives them from each.
 * barrier         the header exchange alone.
 * Partials travel in the compute type, and the tree is evaluated the same
 * way whether a subtree was reduced here or elsewhere, so the result has
 * the same bits as in one process. */
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "sim/coll_proc_internal.h"
#include "sim/coll_reduce.h"

struct sim_xp_plan;
static dt_status run_kind(struct sim_xp_plan *pl, int64_t deadline);

struct sim_xp_plan {
  sim_coll_group *g;
  sim_coll_xp *x;
  uint64_t k;
  const sim_coll_entry *E;
  sim_coll_kind kind;
  dt_dtype dt;
  dt_reduce_op op;
  int n, np, me, root;    /* root: the root member (rooted kinds) */
  size_t ds, as;          /* element bytes: dtype, compute type */
  int64_t count;          /* all_reduce / broadcast; the total otherwise */
  const int64_t *counts;  /* blocks (the leader's array: equal everywhere) */
  bool full;              /* all_reduce: everyone evaluates the whole root */
  bool oom;               /* a scratch array could not be had: the round
                             fails in this process (its partials or
                             results are incomplete) */
  int nmine;              /* my subtrees */
  char *area;
  int64_t *sb, *rb, *so, *ro; /* per process: bytes and area offsets */
  int64_t part, fin;      /* offsets: my partials, the final result */
  int64_t *seg_lo, *seg_n;    /* all_reduce segments, per process */
  int64_t *boff;          /* counts' prefix sums (n + 1) */
  size_t bytes;
};

static int64_t proc_elems(const sim_xp_plan *pl, int p) {
  int64_t e = 0;
  for (int j = 0; j < pl->n; j++)
    if (pl->x->pidx[j] == p) e += pl->counts[j];
  return e;
}

static int subs_of(const sim_xp_plan *pl, int p) {
  int c = 0;
  for (int i = 0; i < pl->x->nsub; i++) c += pl->x->sub_proc[i] == p;
  return c;
}

/* the index of subtree i among its process's subtrees */
static int sub_rank(const sim_xp_plan *pl, int i) {
  int c = 0;
  for (int t = 0; t < i; t++) c += pl->x->sub_proc[t] == pl->x->sub_proc[i];
  return c;
}

/* elements process p's members address to process q's (all_to_all):
 * members of q (ascending) × members of p (ascending) */
static int64_t a2a_bytes(const sim_xp_plan *pl, int from, int to, bool recv_side) {
  int64_t e = 0;
  for (int i = 0; i < pl->n; i++) {
    if (pl->x->pidx[i] != to) continue;
    for (int j = 0; j < pl->n; j++) {
      if (pl->x->pidx[j] != from) continue;
      /* the side that knows: a sender its send counts, a receiver its recv */
      e += recv_side ? sim_coll_a2a_counts(&pl->E[i], pl->n, true)[j]
                     : sim_coll_a2a_counts(&pl->E[j], pl->n, false)[i];
    }
  }
  return e * (int64_t)pl->ds;
}

/* phase-one sizes per process */
static void size_kind(sim_xp_plan *pl) {
  int me = pl->me;
  int64_t c = pl->count;
  for (int p = 0; p < pl->np; p++) {
    if (p == me) continue;
    switch (pl->kind) {
    case KIND_ALL_REDUCE:
      pl->sb[p] = pl->nmine * (pl->full ? c : pl->seg_n[p]) * (int64_t)pl->as;
      pl->rb[p] = subs_of(pl, p) * (pl->full ? c : pl->seg_n[me]) * (int64_t)pl->as;
      break;
    case KIND_REDUCE_SCATTER:
      pl->sb[p] = pl->nmine * proc_elems(pl, p) * (int64_t)pl->as;
      pl->rb[p] = subs_of(pl, p) * proc_elems(pl, me) * (int64_t)pl->as;
      break;
    case KIND_ALL_GATHER:
      pl->sb[p] = proc_elems(pl, me) * (int64_t)pl->ds;
      pl->rb[p] = proc_elems(pl, p) * (int64_t)pl->ds;
      break;
    case KIND_ALL_TO_ALL:
      pl->sb[p] = a2a_bytes(pl, me, p, false);
      pl->rb[p] = a2a_bytes(pl, p, me, true);
      break;
    case KIND_BROADCAST:
      pl->sb[p] = me == pl->x->pidx[pl->root] ? c * (int64_t)pl->ds : 0;
      pl->rb[p] = p == pl->x->pidx[pl->root] ? c * (int64_t)pl->ds : 0;
      break;
    case KIND_SCATTER:
      pl->sb[p] = me == pl->x->pidx[pl->root] ? proc_elems(pl, p) * (int64_t)pl->ds : 0;
      pl->rb[p] = p == pl->x->pidx[pl->root] ? proc_elems(pl, me) * (int64_t)pl->ds : 0;
      break;
    case KIND_GATHER:
      pl->sb[p] = p == pl->x->pidx[pl->root] ? proc_elems(pl, me) * (int64_t)pl->ds : 0;
      pl->rb[p] = me == pl->x->pidx[pl->root] ? proc_elems(pl, p) * (int64_t)pl->ds : 0;
      break;
    default: break;
    }
  }
}

/* area layout: partials, sends, receives, the final result (64-byte
 * aligned pieces) */
static void layout(sim_xp_plan *pl) {
  int64_t at = 0;
#define TAKE(b) (at = (at + 63) / 64 * 64, at += (b), at - (b))
  bool red = sim_coll_is_reducing(pl->kind);
  pl->part = TAKE(red ? pl->nmine * pl->count * (int64_t)pl->as : 0);
  for (int p = 0; p < pl->np; p++) pl->so[p] = TAKE(p == pl->me ? 0 : pl->sb[p]);
  for (int p = 0; p < pl->np; p++) pl->ro[p] = TAKE(p == pl->me ? 0 : pl->rb[p]);
  pl->fin = TAKE(pl->kind == KIND_ALL_REDUCE ? pl->count * (int64_t)pl->ds : 0);
#undef TAKE
  pl->bytes = (size_t)at + 64;
}

void sim_xp_plan_free(sim_xp_plan *pl) {
  if (!pl) return;
  free(pl->sb);
  free(pl->boff);
  free(pl);
}

sim_xp_plan *sim_xp_plan_new(sim_coll_group *g, uint64_t k,
                             const sim_coll_entry *E) {
  sim_coll_xp *x = g->xp;
  sim_xp_plan *pl = calloc(1, sizeof *pl);
  int np = x->np;
  if (pl) pl->sb = calloc((size_t)np * 6, sizeof *pl->sb);
  if (pl && pl->sb) pl->boff = calloc((size_t)g->n + 1, sizeof *pl->boff);
  if (!pl || !pl->sb || !pl->boff) {
    sim_xp_plan_free(pl);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "collective on group %s: out of host "
                   "memory", g->name);
    return NULL;
  }
  pl->rb = pl->sb + np;
  pl->so = pl->rb + np;
  pl->ro = pl->so + np;
  pl->seg_lo = pl->ro + np;
  pl->seg_n = pl->seg_lo + np;
  const sim_coll_desc *d = &E[x->leader].d;
  *pl = (sim_xp_plan){.g = g, .x = x, .k = k, .E = E, .kind = d->kind,
                      .dt = d->dtype, .op = d->op, .n = g->n, .np = np,
                      .me = x->me, .root = d->root, .count = d->count,
                      .counts = d->counts, .sb = pl->sb, .rb = pl->rb,
                      .so = pl->so, .ro = pl->ro, .seg_lo = pl->seg_lo,
                      .seg_n = pl->seg_n, .boff = pl->boff};
  if (pl->kind == KIND_BARRIER || pl->kind == KIND_ABSTAIN) {
    layout(pl);
    return pl;
  }
  pl->ds = core_dtype_size(pl->dt);
  pl->as = sim_coll_acc_size(pl->dt);
  if (pl->counts)
    for (int j = 0; j < g->n; j++) pl->boff[j + 1] = pl->boff[j] + pl->counts[j];
  pl->nmine = subs_of(pl, pl->me);
  if (pl->kind == KIND_ALL_REDUCE) {
    int kmax = 0;
    for (int p = 0; p < np; p++) kmax = subs_of(pl, p) > kmax ? subs_of(pl, p) : kmax;
    pl->full = pl->count * (int64_t)pl->as * kmax <= SIM_XP_INLINE;
    for (int p = 0; p < np; p++) {
      pl->seg_lo[p] = pl->count * p / np;
      pl->seg_n[p] = pl->count * (p + 1) / np - pl->seg_lo[p];
    }
  }
  size_kind(pl);
  layout(pl);
  return pl;
}

size_t sim_xp_plan_bytes(const sim_xp_plan *pl) { return pl->bytes; }
int64_t sim_xp_plan_sbytes(const sim_xp_plan *pl, int pi) { return pl->sb[pi]; }
int64_t sim_xp_plan_rbytes(const sim_xp_plan *pl, int pi) { return pl->rb[pi]; }
const void *sim_xp_plan_sbuf(const sim_xp_plan *pl, int pi) {
  return pl->area + pl->so[pi];
}
void *sim_xp_plan_rbuf(sim_xp_plan *pl, int pi) { return pl->area + pl->ro[pi]; }

static const char *in_of(const sim_xp_plan *pl, int j) {
  return (const char *)pl->E[j].d.in;
}

/* my subtrees' partials over every element, in the compute type */
static void partials(sim_xp_plan *pl) {
  sim_coll_node leaf[64] = {{0}};
  sim_coll_node *nodes = pl->n <= 64 ? leaf : malloc((size_t)pl->n * sizeof *nodes);
  if (!nodes) { /* the exchange then fails: the plan notes it */
    pl->oom = true;
    return;
  }
  int64_t one = pl->count * (int64_t)pl->as;
  for (int i = 0, t = 0; i < pl->x->nsub; i++) {
    if (pl->x->sub_proc[i] != pl->me) continue;
    int lo = pl->x->sub_lo[i], hi = pl->x->sub_hi[i];
    for (int m = lo; m < hi; m++)
      nodes[m - lo] = (sim_coll_node){.lo = m, .hi = m + 1, .p = in_of(pl, m),
                                      .acc = false};
    sim_coll_tree_reduce(nodes, hi - lo, pl->n, pl->count, pl->dt, pl->op,
                         pl->area + pl->part + one * t++, true);
  }
  if (nodes != leaf) free(nodes);
}

/* packs elements [lo, lo+len) of every partial of mine into dst */
static void pack_partials(sim_xp_plan *pl, char *dst, int64_t lo, int64_t len) {
  int64_t one = pl->count * (int64_t)pl->as;
  for (int t = 0; t < pl->nmine; t++) {
    memcpy(dst, pl->area + pl->part + one * t + lo * (int64_t)pl->as,
           (size_t)(len * (int64_t)pl->as));
    dst += len * (int64_t)pl->as;
  }
}

/* copies the members of process p's blocks from src (an elements array
 * in the concat layout, element size es) to dst, packed in member order */
static char *pack_blocks(const sim_xp_plan *pl, int p, char *dst, const char *src,
                         size_t es) {
  for (int j = 0; j < pl->n; j++) {
    if (pl->x->pidx[j] != p) continue;
    memcpy(dst, src + pl->boff[j] * (int64_t)es, (size_t)(pl->counts[j] * (int64_t)es));
    dst += pl->counts[j] * (int64_t)es;
  }
  return dst;
}

static void prepare_a2a(sim_xp_plan *pl) {
  for (int p = 0; p < pl->np; p++) {
    if (p == pl->me) continue;
    char *dst = pl->area + pl->so[p];
    for (int i = 0; i < pl->n; i++) {
      if (pl->x->pidx[i] != p) continue;
      for (int j = 0; j < pl->n; j++) {
        if (pl->x->pidx[j] != pl->me) continue;
        const int64_t *send = sim_coll_a2a_counts(&pl->E[j], pl->n, false);
        int64_t off = 0;
        for (int t = 0; t < i; t++) off += send[t];
        size_t b = (size_t)(send[i] * (int64_t)pl->ds);
        memcpy(dst, in_of(pl, j) + off * (int64_t)pl->ds, b);
        dst += b;
      }
    }
  }
}

dt_status sim_xp_plan_prepare(sim_xp_plan *pl, void *area) {
  pl->area = area;
  int root_p = sim_coll_is_rooted(pl->kind) ? pl->x->pidx[pl->root] : -1;
  switch (pl->kind) {
  case KIND_ALL_REDUCE:
    partials(pl);
    for (int p = 0; p < pl->np; p++)
      if (p != pl->me)
        pack_partials(pl, pl->area + pl->so[p], pl->full ? 0 : pl->seg_lo[p],
                      pl->full ? pl->count : pl->seg_n[p]);
    break;
  case KIND_REDUCE_SCATTER:
    partials(pl);
    for (int p = 0; p < pl->np; p++) {
      if (p == pl->me) continue;
      char *dst = pl->area + pl->so[p];
      for (int t = 0; t < pl->nmine; t++)
        dst = pack_blocks(pl, p, dst, pl->area + pl->part +
                          pl->count * (int64_t)pl->as * t, pl->as);
    }
    break;
  case KIND_ALL_GATHER:
  case KIND_GATHER:
    for (int p = 0; p < pl->np; p++) {
      if (p == pl->me || !pl->sb[p]) continue;
      char *dst = pl->area + pl->so[p];
      for (int j = 0; j < pl->n; j++) {
        if (pl->x->pidx[j] != pl->me) continue;
        memcpy(dst, in_of(pl, j), (size_t)(pl->counts[j] * (int64_t)pl->ds));
        dst += pl->counts[j] * (int64_t)pl->ds;
      }
    }
    break;
  case KIND_ALL_TO_ALL: prepare_a2a(pl); break;
  case KIND_BROADCAST:
    for (int p = 0; p < pl->np; p++)
      if (p != pl->me && pl->me == root_p)
        memcpy(pl->area + pl->so[p], in_of(pl, pl->root),
               (size_t)(pl->count * (int64_t)pl->ds));
    break;
  case KIND_SCATTER:
    for (int p = 0; p < pl->np; p++)
      if (p != pl->me && pl->me == root_p)
        pack_blocks(pl, p, pl->area + pl->so[p], in_of(pl, pl->root), pl->ds);
    break;
  default: break;
  }
  return pl->oom ? core_error_set(DT_ERR_OUT_OF_MEMORY, "%s on group %s: process "
                                  "%d is out of host memory for its partials",
                                  sim_coll_kind_names[pl->kind], pl->g->name,
                                  pl->g->world->proc)
                 : DT_OK;
}

/* the first phase's payloads that did not travel inline */
static dt_status exchange_big(sim_xp_plan *pl, int64_t deadline) {
  bool any = false;
  for (int p = 0; p < pl->np; p++)
    any = any || (p != pl->me && (pl->sb[p] > SIM_XP_INLINE || pl->rb[p] > SIM_XP_INLINE));
  if (!any) return DT_OK;
  sim_xp_msgs *m = sim_xp_msgs_new(pl->g, pl->k, deadline, 2 * pl->np);
  if (!m) return core_last_status();
  for (int p = 0; p < pl->np; p++) {
    if (p == pl->me) continue;
    if (pl->rb[p] > SIM_XP_INLINE)
      sim_xp_msgs_recv(m, p, pl->area + pl->ro[p], pl->rb[p]);
    if (pl->sb[p] > SIM_XP_INLINE)
      sim_xp_msgs_send(m, p, pl->area + pl->so[p], pl->sb[p]);
  }
  return sim_xp_msgs_wait(m, "the data");
}

/* the tree's root (or the partials' combine) over elements [lo, lo+len)
 * whose partials are: mine in the partials area (element lo at offset
 * `mine_at` elements), process p's in its receive buffer at element
 * `recv_at` of a block of `recv_len` per subtree */
static void combine(sim_xp_plan *pl, int64_t mine_at, int64_t recv_at,
                    int64_t recv_len, int64_t len, void *out) {
  int ns = pl->x->nsub;
  sim_coll_node small[64] = {{0}};
  sim_coll_node *nodes = ns <= 64 ? small : malloc((size_t)ns * sizeof *nodes);
  if (!nodes) {
    pl->oom = true;
    return;
  }
  int64_t one = pl->count * (int64_t)pl->as;
  for (int i = 0; i < ns; i++) {
    int p = pl->x->sub_proc[i], t = sub_rank(pl, i);
    const char *src = p == pl->me
        ? pl->area + pl->part + one * t + mine_at * (int64_t)pl->as
        : pl->area + pl->ro[p] + (recv_len * t + recv_at) * (int64_t)pl->as;
    nodes[i] = (sim_coll_node){.lo = pl->x->sub_lo[i], .hi = pl->x->sub_hi[i],
                               .p = src, .acc = true};
  }
  sim_coll_tree_reduce(nodes, ns, pl->n, len, pl->dt, pl->op, out, false);
  if (nodes != small) free(nodes);
}

/* copies src (bytes) to every local member's output, except `skip` */
static void fan_out(sim_xp_plan *pl, const void *src, int64_t bytes, int skip) {
  bool stream = sim_coll_streams(bytes);
  for (int j = 0; j < pl->n; j++)
    if (j != skip && pl->x->pidx[j] == pl->me)
      sim_coll_copy(pl->E[j].d.out, src, bytes, stream);
  sim_coll_store_fence();
}

static dt_status run_all_reduce(sim_xp_plan *pl, int64_t deadline) {
  char *fin = pl->area + pl->fin;
  int64_t ds = (int64_t)pl->ds;
  if (pl->full) {
    combine(pl, 0, 0, pl->count, pl->count, fin);
  } else {
    int me = pl->me;
    combine(pl, pl->seg_lo[me], 0, pl->seg_n[me], pl->seg_n[me],
            fin + pl->seg_lo[me] * ds);
    sim_xp_msgs *m = sim_xp_msgs_new(pl->g, pl->k, deadline, 2 * pl->np);
    if (!m) return core_last_status();
    for (int p = 0; p < pl->np; p++) {
      if (p == me) continue;
      sim_xp_msgs_recv(m, p, fin + pl->seg_lo[p] * ds, pl->seg_n[p] * ds);
      sim_xp_msgs_send(m, p, fin + pl->seg_lo[me] * ds, pl->seg_n[me] * ds);
    }
    dt_status st = sim_xp_msgs_wait(m, "the reduced segments");
    if (st != DT_OK) return st;
  }
  fan_out(pl, fin, pl->count * ds, -1);
  return DT_OK;
}

static void run_reduce_scatter(sim_xp_plan *pl) {
  int64_t mine_elems = proc_elems(pl, pl->me), at = 0;
  for (int j = 0; j < pl->n; j++) {
    if (pl->x->pidx[j] != pl->me) continue;
    combine(pl, pl->boff[j], at, mine_elems, pl->counts[j], pl->E[j].d.out);
    at += pl->counts[j];
  }
}

/* member j's block: its own input, or where its process's message has it */
static const char *block_src(const sim_xp_plan *pl, int j) {
  int p = pl->x->pidx[j];
  if (p == pl->me) return in_of(pl, j);
  int64_t at = 0;
  for (int t = 0; t < j; t++) at += pl->x->pidx[t] == p ? pl->counts[t] : 0;
  return pl->area + pl->ro[p] + at * (int64_t)pl->ds;
}

static void run_all_gather(sim_xp_plan *pl) {
  int64_t ds = (int64_t)pl->ds;
  for (int i = 0; i < pl->n; i++) {
    if (pl->x->pidx[i] != pl->me) continue;
    bool stream = sim_coll_streams(pl->boff[pl->n] * ds);
    for (int j = 0; j < pl->n; j++)
      sim_coll_copy((char *)pl->E[i].d.out + pl->boff[j] * ds, block_src(pl, j),
                    pl->counts[j] * ds, stream);
  }
  sim_coll_store_fence();
}

static void run_gather(sim_xp_plan *pl) {
  if (pl->x->pidx[pl->root] != pl->me) return;
  int64_t ds = (int64_t)pl->ds;
  for (int j = 0; j < pl->n; j++)
    memcpy((char *)pl->E[pl->root].d.out + pl->boff[j] * ds, block_src(pl, j),
           (size_t)(pl->counts[j] * ds));
}

static void run_scatter(sim_xp_plan *pl) {
  int rp = pl->x->pidx[pl->root];
  int64_t ds = (int64_t)pl->ds, at = 0;
  for (int j = 0; j < pl->n; j++) {
    if (pl->x->pidx[j] != pl->me) continue;
    const char *src = rp == pl->me ? in_of(pl, pl->root) + pl->boff[j] * ds
                                   : pl->area + pl->ro[rp] + at * ds;
    memcpy(pl->E[j].d.out, src, (size_t)(pl->counts[j] * ds));
    at += pl->counts[j];
  }
}

static void run_a2a(sim_xp_plan *pl) {
  int64_t ds = (int64_t)pl->ds;
  const char **from = calloc((size_t)pl->np, sizeof *from);
  for (int p = 0; from && p < pl->np; p++) from[p] = pl->area + pl->ro[p];
  for (int i = 0; from && i < pl->n; i++) {
    if (pl->x->pidx[i] != pl->me) continue;
    const int64_t *recv = sim_coll_a2a_counts(&pl->E[i], pl->n, true);
    int64_t off = 0;
    for (int j = 0; j < pl->n; j++) {
      size_t b = (size_t)(recv[j] * ds);
      char *dst = (char *)pl->E[i].d.out + off * ds;
      int p = pl->x->pidx[j];
      if (p == pl->me) {
        const int64_t *send = sim_coll_a2a_counts(&pl->E[j], pl->n, false);
        int64_t so = 0;
        for (int t = 0; t < i; t++) so += send[t];
        memcpy(dst, in_of(pl, j) + so * ds, b);
      } else {
        /* messages from p hold, for my members i ascending, the blocks of
         * p's members j ascending: consumed in that order */
        memcpy(dst, from[p], b);
        from[p] += b;
      }
      off += recv[j];
    }
  }
  free(from);
}

dt_status sim_xp_plan_run(sim_xp_plan *pl, int64_t deadline) {
  dt_status st = exchange_big(pl, deadline);
  if (st != DT_OK) return st;
  st = run_kind(pl, deadline);
  if (st == DT_OK && pl->oom)
    st = core_error_set(DT_ERR_OUT_OF_MEMORY, "%s on group %s: out of host "
                        "memory in process %d", sim_coll_kind_names[pl->kind],
                        pl->g->name, pl->g->world->proc);
  return st;
}

static dt_status run_kind(sim_xp_plan *pl, int64_t deadline) {
  switch (pl->kind) {
  case KIND_ALL_REDUCE: return run_all_reduce(pl, deadline);
  case KIND_REDUCE_SCATTER: run_reduce_scatter(pl); break;
  case KIND_ALL_GATHER: run_all_gather(pl); break;
  case KIND_GATHER: run_gather(pl); break;
  case KIND_SCATTER: run_scatter(pl); break;
  case KIND_ALL_TO_ALL: run_a2a(pl); break;
  case KIND_BROADCAST: {
    int rp = pl->x->pidx[pl->root];
    const void *src = rp == pl->me ? in_of(pl, pl->root) : pl->area + pl->ro[rp];
    fan_out(pl, src, pl->count * (int64_t)pl->ds, pl->root);
    break;
  }
  default: break;
  }
  return DT_OK;
}
