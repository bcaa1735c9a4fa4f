/* Collectives across processes: the group, the verdict and the exchange
 * driver (sim/coll_proc.h; the data plans of each kind are in
 * sim/coll_proc_move.c; docs/multiprocess.md says which algorithm each
 * collective uses).
 *
 * One round of a cross-process group, on each process:
 *  1. the local members meet in the in-process rendezvous (collectives.c);
 *     the member whose arrival completes it — the round's *exchanger*,
 *     any of them — checks their entries as a one-process round would
 *     (as the leader, the lowest local member, whose entry names the call);
 *  2. the exchanger sends every other process of the group a header — the
 *     round's call as its members made it (kind, dtype, op, root, counts'
 *     hash, call site), the group's hash, the round number, and its local
 *     verdict — with the data the receiver needs inline when it is small,
 *     and receives theirs;
 *  3. every process reaches the same verdict from the same headers: a
 *     process that failed locally fails the round everywhere with its
 *     message; processes whose calls differ fail it with DT_ERR_DESYNC
 *     naming every side's ranks, call and call site; nothing moves;
 *  4. the data moves (coll_proc_move.c) and the exchanger writes every
 *     local member's output, then counts their completions at once
 *     (sim_coll_depart_all) and returns; the others wait for that count
 *     and return the verdict. The exchanger waits for no local member,
 *     so an issuing thread may help sleeping members of such a round
 *     (sched/help.h): the last of them, on top of its stack, does the
 *     exchange. A large all_reduce on one node then has every member work
 *     in a shared window (coll_proc_shm.c).
 * Every MPI wait has the call's deadline: a process that does not answer
 * fails the round with DT_ERR_TIMEOUT naming it and its ranks, and the
 * group stays broken (a late process's messages could otherwise be taken
 * for a later round's). A round that fails in one process before its
 * exchange (a member left its SPMD function, a local deadlock or
 * timeout) is reported to the others by a failure header of that round
 * (sim_coll_xp_abandon), so they fail at once; that group then stays
 * broken everywhere too. The messages of a group travel on the world's
 * collective communicator with the group's tag; a group's rounds are
 * issued in order, one exchanger at a time per process (a failure header
 * by the member that reports it, and nothing after it): a round's
 * exchanger posts its messages after the previous round's exchanger
 * finished (the local rendezvous orders them), so MPI's non-overtaking
 * rule keeps them in round order even when the two are different
 * threads. */
#include "sim/coll_proc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/host_alloc.h"
#include "sim/coll_internal.h"
#include "sim/coll_proc_internal.h"
#include "sim/coll_reduce.h"
#include "sim/mpi_env.h"

/* ---- the group */

static uint64_t hash_ranks(const int *ranks, int n) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
  for (int i = 0; i < n; i++) {
    h ^= (uint64_t)(uint32_t)ranks[i];
    h *= 1099511628211ull;
  }
  return h ^ (h >> 29);
}

bool sim_coll_xp_local(const sim_coll_group *g, int j) {
  return !g->xp || g->xp->pidx[j] == g->xp->me;
}

void sim_coll_xp_free(sim_coll_xp *x) {
  if (!x) return;
  sim_xp_shm_release(x, false);
  free(x->procs);
  free(x->pidx);
  free(x->sub_lo);
  free(x->sub_hi);
  free(x->sub_proc);
  free(x->broken);
  free(x->stage);
  free(x->hbuf);
  free(x->harr);
  free(x);
}

/* the maximal subtrees of every process, merged in member order */
static bool make_subtrees(sim_coll_xp *x, int n) {
  bool *mine = malloc((size_t)n * sizeof *mine);
  int *lo = malloc((size_t)n * sizeof *lo), *hi = malloc((size_t)n * sizeof *hi);
  x->sub_lo = malloc((size_t)n * sizeof *x->sub_lo);
  x->sub_hi = malloc((size_t)n * sizeof *x->sub_hi);
  x->sub_proc = malloc((size_t)n * sizeof *x->sub_proc);
  bool ok = mine && lo && hi && x->sub_lo && x->sub_hi && x->sub_proc;
  x->nsub = 0;
  for (int p = 0; ok && p < x->np; p++) {
    for (int j = 0; j < n; j++) mine[j] = x->pidx[j] == p;
    int c = sim_coll_tree_subtrees(n, mine, lo, hi);
    for (int i = 0; i < c; i++) {
      x->sub_lo[x->nsub] = lo[i];
      x->sub_hi[x->nsub] = hi[i];
      x->sub_proc[x->nsub++] = p;
    }
  }
  /* insertion sort by lo: a handful of subtrees */
  for (int i = 1; ok && i < x->nsub; i++)
    for (int j = i; j > 0 && x->sub_lo[j - 1] > x->sub_lo[j]; j--) {
      int t = x->sub_lo[j]; x->sub_lo[j] = x->sub_lo[j - 1]; x->sub_lo[j - 1] = t;
      t = x->sub_hi[j]; x->sub_hi[j] = x->sub_hi[j - 1]; x->sub_hi[j - 1] = t;
      t = x->sub_proc[j]; x->sub_proc[j] = x->sub_proc[j - 1]; x->sub_proc[j - 1] = t;
    }
  free(mine);
  free(lo);
  free(hi);
  return ok;
}

sim_coll_xp *sim_coll_xp_new(sim_coll_world *w, const int *ranks, int n,
                             bool *err) {
  *err = false;
  if (!w->mpi) return NULL;
  bool spans = false;
  for (int j = 0; j < n; j++) spans = spans || ranks[j] / w->per != w->proc;
  if (!spans) return NULL;
  sim_coll_xp *x = calloc(1, sizeof *x);
  if (!x || !(x->pidx = malloc((size_t)n * sizeof *x->pidx)) ||
      !(x->procs = malloc((size_t)n * sizeof *x->procs))) {
    sim_coll_xp_free(x);
    *err = true;
    core_error_set(DT_ERR_OUT_OF_MEMORY, "coll_group_get: out of memory");
    return NULL;
  }
  /* the group's processes, ascending (at most n of them) */
  for (int p = 0; p < w->nprocs; p++) {
    bool has = false;
    for (int j = 0; j < n && !has; j++) has = ranks[j] / w->per == p;
    if (has) x->procs[x->np++] = p;
  }
  x->me = -1;
  x->leader = -1;
  for (int i = 0; i < x->np; i++)
    if (x->procs[i] == w->proc) x->me = i;
  for (int j = 0; j < n; j++) {
    int p = ranks[j] / w->per;
    for (int i = 0; i < x->np; i++)
      if (x->procs[i] == p) x->pidx[j] = i;
    if (p == w->proc) {
      x->nl++;
      if (x->leader < 0) x->leader = j;
    }
  }
  x->hash = hash_ranks(ranks, n);
  int ub = sim_mpi_tag_ub(w->mpi);
  x->tag = (int)(1 + x->hash % (uint64_t)(ub > 1 ? ub - 1 : 1));
  if (!make_subtrees(x, n)) {
    sim_coll_xp_free(x);
    *err = true;
    core_error_set(DT_ERR_OUT_OF_MEMORY, "coll_group_get: out of memory");
    return NULL;
  }
  return x;
}

/* ---- the round */

/* a malloc'd formatted string (NULL without memory: the group then
 * breaks with the plain timeout message) */
static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

/* "process 1 (ranks 4..7)" */
void sim_xp_proc_name(const sim_coll_group *g, int pi, char *buf, size_t len) {
  const sim_coll_world *w = g->world;
  int p = g->xp->procs[pi];
  snprintf(buf, len, "process %d (ranks %d..%d)", p, p * w->per,
           p * w->per + w->per - 1);
}

/* the leader's scratch of at least `bytes`, kept for the next rounds */
void *sim_xp_stage(sim_coll_xp *x, size_t bytes) {
  if (bytes <= x->stage_cap) return x->stage;
  free(x->stage);
  x->stage_cap = 0;
  x->stage = core_host_malloc(bytes);
  if (x->stage) x->stage_cap = bytes;
  return x->stage;
}

/* the header of this process for round k: call d made at site (the
 * leader's; a failed round's: the member's that reports it) */
static void fill_header(const sim_coll_group *g, uint64_t k,
                        const sim_coll_desc *d, const char *site,
                        dt_status local, const char *why, bool shm,
                        sim_xp_header *h) {
  const sim_coll_xp *x = g->xp;
  memset(h, 0, sizeof *h);
  h->hash = x->hash;
  h->seq = k;
  h->kind = d->kind;
  h->dtype = d->dtype;
  h->op = d->op;
  h->root = d->root;
  h->count = d->count;
  h->sig = d->sig;
  h->status = local;
  h->shm = shm;
  snprintf(h->site, sizeof h->site, "%s", site ? site : "");
  if (local != DT_OK) snprintf(h->msg, sizeof h->msg, "%.1000s", why);
}

/* the ranks of the members of process pi, "4, 5" */
static void proc_ranks(const sim_coll_group *g, int pi, char *buf, size_t len,
                       int *count) {
  size_t n = 0;
  *count = 0;
  buf[0] = '\0';
  for (int j = 0; j < g->n && n + 16 < len; j++)
    if (g->xp->pidx[j] == pi)
      n += (size_t)snprintf(buf + n, len - n, "%s%d", (*count)++ ? ", " : "",
                            g->ranks[j]);
}

static bool same_header_call(const sim_xp_header *a, const sim_xp_header *b) {
  return a->kind == b->kind && a->dtype == b->dtype && a->op == b->op &&
         a->root == b->root && a->count == b->count && a->sig == b->sig;
}

/* "all_reduce on group [0, 4] (seq 3): processes disagree: rank 0 called
 * all_reduce(float32[8], sum) at t.c:9; rank 4 called ..." */
static dt_status desync(const sim_coll_group *g, uint64_t k,
                        const sim_xp_header *H) {
  char msg[SIM_XP_MSG];
  size_t n = (size_t)snprintf(msg, sizeof msg, "%s on group %s (seq %llu): "
                              "processes disagree: ",
                              sim_coll_kind_names[H[g->xp->me].kind], g->name,
                              (unsigned long long)k);
  if (n >= sizeof msg) n = sizeof msg - 1; /* a long group name was cut */
  for (int p = 0; p < g->xp->np && n + 200 < sizeof msg; p++) {
    sim_coll_entry e;
    memset(&e, 0, sizeof e);
    e.d.kind = (sim_coll_kind)H[p].kind;
    e.d.dtype = (dt_dtype)H[p].dtype;
    e.d.op = (dt_reduce_op)H[p].op;
    e.d.root = H[p].root;
    e.d.count = H[p].count;
    e.d.sig = H[p].sig;
    snprintf(e.site, sizeof e.site, "%s", H[p].site);
    char call[256], who[256];
    int c;
    sim_coll_describe(call, sizeof call, &e);
    proc_ranks(g, p, who, sizeof who, &c);
    n += (size_t)snprintf(msg + n, sizeof msg - n, "%s%s %s (process %d) "
                          "called %s", p ? "; " : "", c == 1 ? "rank" : "ranks",
                          who, g->xp->procs[p], call);
  }
  return core_error_set(DT_ERR_DESYNC, "%s", msg);
}

/* the same verdict in every process, from every process's header */
static dt_status verdict(const sim_coll_group *g, uint64_t k,
                         const sim_xp_header *H) {
  const sim_coll_xp *x = g->xp;
  if (H[x->me].status != DT_OK)
    return core_error_set((dt_status)H[x->me].status, "%s", H[x->me].msg);
  for (int p = 0; p < x->np; p++) {
    if (H[p].hash != x->hash || H[p].seq != k) {
      char who[96];
      sim_xp_proc_name(g, p, who, sizeof who);
      return core_error_set(DT_ERR_DESYNC, "%s on group %s (seq %llu): %s "
                            "sent round %llu of another group (its groups "
                            "were made or used in another order)",
                            sim_coll_kind_names[H[x->me].kind], g->name,
                            (unsigned long long)k, who,
                            (unsigned long long)H[p].seq);
    }
    if (H[p].status != DT_OK) {
      char who[96];
      sim_xp_proc_name(g, p, who, sizeof who);
      return core_error_set((dt_status)H[p].status, "%s (in %s)", H[p].msg, who);
    }
  }
  for (int p = 0; p < x->np; p++)
    if (!same_header_call(&H[p], &H[x->me])) return desync(g, k, H);
  return DT_OK;
}

/* the header exchange: ours (with the small payloads inline) to every
 * other process of the group, theirs into H (ours at H[me]) */
static dt_status headers(sim_coll_group *g, uint64_t k, const sim_coll_entry *E,
                         dt_status local, const char *why, bool shm,
                         sim_xp_plan *pl, int64_t deadline, sim_xp_header *H) {
  sim_coll_xp *x = g->xp;
  size_t one = sizeof(sim_xp_header) + SIM_XP_INLINE;
  char *buf = x->hbuf;
  fill_header(g, k, &E[x->leader].d, E[x->leader].site, local, why, shm,
              &H[x->me]);
  sim_xp_msgs *m = sim_xp_msgs_new(g, k, deadline, 2 * x->np);
  if (!m) return core_last_status();
  for (int p = 0; p < x->np; p++) {
    if (p == x->me) continue;
    char *to = buf + one * (size_t)p * 2, *from = to + one;
    memcpy(to, &H[x->me], sizeof H[x->me]);
    int64_t inl = 0;
    if (pl && sim_xp_plan_sbytes(pl, p) <= SIM_XP_INLINE) {
      inl = sim_xp_plan_sbytes(pl, p);
      if (inl) memcpy(to + sizeof H[x->me], sim_xp_plan_sbuf(pl, p), (size_t)inl);
    }
    ((sim_xp_header *)(void *)to)->inline_bytes = inl;
    sim_xp_msgs_send(m, p, to, (int64_t)sizeof H[x->me] + inl);
    sim_xp_msgs_recv(m, p, from, (int64_t)one);
  }
  dt_status st = sim_xp_msgs_wait(m, "the round's headers");
  if (st != DT_OK) return st;
  for (int p = 0; p < x->np; p++) {
    if (p == x->me) continue;
    const char *from = buf + one * (size_t)p * 2 + one;
    memcpy(&H[p], from, sizeof H[p]);
    /* a small payload came inline: where the plan expects it */
    if (pl && H[p].status == DT_OK && sim_xp_plan_rbytes(pl, p) <= SIM_XP_INLINE &&
        H[p].inline_bytes == sim_xp_plan_rbytes(pl, p) && H[p].inline_bytes)
      memcpy(sim_xp_plan_rbuf(pl, p), from + sizeof H[p], (size_t)H[p].inline_bytes);
  }
  return DT_OK;
}

/* the header buffers (kept with the group): two per process */
static bool header_room(sim_coll_xp *x) {
  size_t one = sizeof(sim_xp_header) + SIM_XP_INLINE;
  if (!x->hbuf) x->hbuf = core_host_malloc(one * 2 * (size_t)x->np);
  if (!x->harr) x->harr = core_host_malloc(sizeof(sim_xp_header) * (size_t)x->np);
  return x->hbuf && x->harr;
}

/* round k's plan with its first phase prepared in the leader's scratch,
 * or NULL with `local` / `why` set to this process's failure */
static sim_xp_plan *plan_round(sim_coll_group *g, uint64_t k,
                               const sim_coll_entry *E, dt_status *local,
                               char *why, size_t len) {
  const char *kind = sim_coll_kind_names[E[g->xp->leader].d.kind];
  sim_xp_plan *pl = sim_xp_plan_new(g, k, E);
  void *area = pl ? sim_xp_stage(g->xp, sim_xp_plan_bytes(pl)) : NULL;
  if (pl && area && sim_xp_plan_prepare(pl, area) == DT_OK) return pl;
  if (pl && area) { /* every process fails the round with it */
    *local = core_last_status();
    snprintf(why, len, "%s", core_last_error());
  } else {
    *local = DT_ERR_OUT_OF_MEMORY;
    snprintf(why, len, "%s on group %s: process %d is out of host memory for "
             "the exchange", kind, g->name, g->world->proc);
  }
  sim_xp_plan_free(pl);
  return NULL;
}

/* the exchanger's part of round k (`member`: the exchanger, whose own
 * failure's message is its thread's error); *shm: the members take it
 * through the node-shared window (coll_proc_shm.c) */
static dt_status lead(sim_coll_group *g, int member, uint64_t k,
                      int64_t deadline, bool *shm) {
  sim_coll_xp *x = g->xp;
  *shm = false;
  if (x->broken) return core_error_set(DT_ERR_TIMEOUT, "%s", x->broken);
  const char *kind = sim_coll_kind_names[g->entries[k & 1][x->leader].d.kind];
  if (!header_room(x))
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s on group %s: out of host "
                          "memory for the round's headers", kind, g->name);
  const sim_coll_entry *E = g->entries[k & 1];
  dt_status local = sim_coll_check_round(g, member, k, E);
  char why[SIM_XP_MSG];
  snprintf(why, sizeof why, "%s", local != DT_OK ? core_last_error() : "");
  bool can = local == DT_OK && sim_xp_shm_capable(g, &E[x->leader].d);
  sim_xp_plan *pl = NULL;
  if (local == DT_OK && !can) pl = plan_round(g, k, E, &local, why, sizeof why);
  sim_xp_header *H = x->harr;
  dt_status st = headers(g, k, E, local, why, can, pl, deadline, H);
  if (st == DT_OK) {
    st = verdict(g, k, H);
    for (int p = 0; st != DT_OK && p < x->np; p++)
      if (p != x->me && H[p].broken && !x->broken) /* as theirs: see abandon */
        x->broken = str_printf("%s; the group stays broken", core_last_error());
  }
  bool all = can;
  for (int p = 0; st == DT_OK && p < x->np; p++) all = all && H[p].shm;
  if (st == DT_OK && all) {
    st = sim_xp_shm_ensure(g, &E[x->leader].d);
    *shm = st == DT_OK;
    return st;
  }
  /* a process that would not use the window: the messages (the first
   * phase was too large to travel in the headers) */
  if (st == DT_OK && can) {
    pl = plan_round(g, k, E, &local, why, sizeof why);
    if (!pl) st = core_error_set(local, "%s", why);
  }
  if (st == DT_OK) st = sim_xp_plan_run(pl, deadline);
  sim_xp_plan_free(pl);
  return st;
}

static void tell_others(sim_coll_group *g, uint64_t k, const sim_coll_desc *d,
                        const char *site, dt_status st, const char *why,
                        sim_xp_header *h);

void sim_coll_xp_abandon(sim_coll_group *g, uint64_t k, const sim_coll_desc *d,
                         const char *site, dt_status st, const char *why_in) {
  sim_coll_xp *x = g->xp;
  char why[SIM_XP_MSG]; /* why_in may be this thread's error, reset below */
  snprintf(why, sizeof why, "%s", why_in);
  pthread_mutex_lock(&g->report_lock);
  bool first = x->abandoned <= k;
  if (first) x->abandoned = k + 1;
  pthread_mutex_unlock(&g->report_lock);
  if (!first || x->np < 2) return;
  sim_xp_header *h = core_host_calloc(1, sizeof *h);
  if (h) tell_others(g, k, d, site, st, why, h);
  /* the others' headers of round k stay unread: no later round can pair */
  if (!x->broken)
    x->broken = str_printf("%s on group %s: round %llu failed in process %d "
                           "(%s); the group stays broken",
                           sim_coll_kind_names[d->kind], g->name,
                           (unsigned long long)k, g->world->proc, why);
  core_error_set(st, "%s", why); /* the caller's error, as it was */
}

/* sim_coll_xp_abandon's failure header h to every other process (h
 * freed, or left to MPI when the send did not complete) */
static void tell_others(sim_coll_group *g, uint64_t k, const sim_coll_desc *d,
                        const char *site, dt_status st, const char *why,
                        sim_xp_header *h) {
  sim_coll_xp *x = g->xp;
  /* this member's call (the leader may be the member that left) */
  fill_header(g, k, d, site, st, why, false, h);
  h->broken = 1;
  sim_xp_msgs *m = sim_xp_msgs_new(g, k, sim_coll_deadline(g->world), x->np);
  if (m) {
    for (int p = 0; p < x->np; p++)
      if (p != x->me) sim_xp_msgs_send(m, p, h, (int64_t)sizeof *h);
    /* a failed wait leaves h to MPI (it may still read it) */
    if (sim_xp_msgs_wait(m, "the failed round's header") == DT_OK) free(h);
  } else {
    free(h);
  }
}

dt_status sim_coll_xp_round(sim_coll_group *g, int member, uint64_t k,
                            int64_t deadline, bool exchanger) {
  sim_coll_xp *x = g->xp;
  int s = (int)(k & 1);
  if (exchanger) {
    x->st[s] = lead(g, member, k, deadline, &x->shm_go[s]);
    snprintf(x->msg[s], sizeof x->msg[s], "%s",
             x->st[s] != DT_OK ? core_last_error() : "");
    sim_coll_depart_all(g, member); /* the verdict and outputs, released */
  } else {
    sim_coll_depart_wait(g, member);
  }
  if (x->st[s] != DT_OK) return core_error_set(x->st[s], "%s", x->msg[s]);
  /* every member works; nobody reads another's buffers after its
   * second arrival there, so no completion barrier follows */
  return x->shm_go[s] ? sim_xp_shm_all_reduce(g, member, k, deadline) : DT_OK;
}
