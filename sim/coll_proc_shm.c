/* The large all_reduce of a group whose processes share one node, through
 * an MPI-3 shared-memory window (sim/coll_proc_internal.h).
 *
 * Through MPI messages (coll_proc_move.c) the leader of each process
 * alone reduces its members' inputs, packs, exchanges, combines and
 * writes every local output, while the other members wait. Here every
 * member of every process works, on memory all the processes map:
 *
 *   window  [slots: one 64-byte line per member of the group]
 *           [partial of subtree 0][partial of subtree 1]...  (compute type)
 *           [result]                                          (the dtype)
 *
 *   A  member li of a process (of its nl members) reduces element range
 *      li of each of its process's subtrees of the fixed tree
 *      (sim/coll_reduce.h) from the local inputs into the subtree's
 *      partial in the window, then arrives (its slot = phase + 1);
 *   B  when every member of the group has arrived, member j (of n)
 *      evaluates the tree's root over element range j from all the
 *      partials, piece by piece into a small scratch, and stores each
 *      piece to the result and to every output of its process while it
 *      is in cache; then arrives (phase + 2);
 *   C  when all have, each member copies into its own output the ranges
 *      the other processes' members reduced.
 *
 * The tree and its subtrees are those of the message path and of one
 * process, evaluated on element ranges (which the tree's order does not
 * depend on), so the result has the same bits for any process count and
 * either path.
 *
 * Synchronisation: each slot is written only by its member (a monotonic
 * phase count: 2 per round since the window was made) with a release
 * store after the member's writes (and sim_coll_store_fence after
 * streaming stores); a waiter reads every slot with acquire until all
 * reach its target. The window is used as shared memory (C11 atomics on
 * lock-free 64-bit words, which are address-free), not for RMA. Reuse is
 * safe with two arrivals per round: a member writes partials of round
 * k+1 only after B of round k has passed (everyone finished reading
 * partials), and the result of k+1 (phase B) only after A of k+1 has
 * passed (everyone finished copying the result of k: they arrived for
 * k+1).
 *
 * The window and the group's communicator are made by the processes'
 * leaders after a round's verdict (every process has shown it is there,
 * with the same call and the same wish to use the window, in its
 * header), and grown the same way; those MPI calls block, the rest waits
 * with the round's deadline. A member that times out names the processes
 * whose members did not arrive, and the group stays broken (its slots
 * are out of step). Windows are freed when the world is destroyed, in
 * the order of their groups' hashes (MPI_Win_free is collective), except
 * a broken group's, which is left to the process's exit. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dtype.h"
#include "core/error.h"
#include "sim/coll_proc_internal.h"
#include "sim/coll_reduce.h"
#include "sim/mpi_env.h"

#define SLOT 64
/* a slot's top bit: its member failed its part of the round */
#define FAILED ((uint64_t)1 << 63)

/* the smallest all_reduce (bytes per member) that goes through the
 * window: DTORCH_MPI_SHM ("0": never; a number: that many bytes) */
static int64_t shm_min_bytes(void) {
  static _Atomic int64_t cached = -2; /* relaxed: a value read once */
  int64_t v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v != -2) return v;
  const char *e = getenv("DTORCH_MPI_SHM");
  v = (int64_t)1 << 20;
  if (e && *e) {
    char *end;
    long long x = strtoll(e, &end, 10);
    if (*end == '\0' && x >= 0) v = x == 0 ? -1 : x;
  }
  atomic_store_explicit(&cached, v, memory_order_relaxed);
  return v;
}

static size_t align64(size_t b) { return (b + 63) / 64 * 64; }

/* the window's layout for call d of group g */
static size_t part_bytes(const sim_coll_desc *d) {
  return align64((size_t)d->count * sim_coll_acc_size(d->dtype));
}
static size_t part_at(const sim_coll_group *g, const sim_coll_desc *d, int i) {
  return align64((size_t)g->n * SLOT) + part_bytes(d) * (size_t)i;
}
static size_t result_at(const sim_coll_group *g, const sim_coll_desc *d) {
  return part_at(g, d, g->xp->nsub);
}
static size_t window_bytes(const sim_coll_group *g, const sim_coll_desc *d) {
  return result_at(g, d) + align64((size_t)d->count * core_dtype_size(d->dtype));
}

/* member's range [lo, hi) of count elements among n: whole 64-byte units
 * of esz-byte elements, near-equal */
static void share(int64_t count, int n, int member, size_t esz, int64_t *lo,
                  int64_t *hi) {
  int64_t unit = 64 / (int64_t)esz, units = (count + unit - 1) / unit;
  int64_t q = units / n, r = units % n;
  int64_t a = member * q + (member < r ? member : r);
  int64_t b = a + q + (member < r);
  *lo = a * unit < count ? a * unit : count;
  *hi = b * unit < count ? b * unit : count;
}

/* rounds this process's leaders took through a window (tests) */
static _Atomic int64_t shm_rounds;

int64_t sim_xp_shm_rounds(void) {
  return atomic_load_explicit(&shm_rounds, memory_order_relaxed);
}

static int by_hash(const void *a, const void *b) {
  uint64_t x = (*(sim_coll_group *const *)a)->xp->hash;
  uint64_t y = (*(sim_coll_group *const *)b)->xp->hash;
  return x < y ? -1 : x > y;
}

/* the groups' node-shared windows, freed in one order in every process
 * (by their rank lists' hashes: MPI_Win_free is collective) */
void sim_xp_shm_release_all(sim_coll_world *w) {
  int n = 0;
  for (sim_coll_group *g = w->groups; g; g = g->next) n += g->xp && g->xp->shm;
  sim_coll_group **v = n ? malloc((size_t)n * sizeof *v) : NULL;
  if (!v) return; /* none, or no memory: the windows are left to the exit */
  int i = 0;
  for (sim_coll_group *g = w->groups; g; g = g->next)
    if (g->xp && g->xp->shm) v[i++] = g;
  qsort(v, (size_t)n, sizeof *v, by_hash);
  for (i = 0; i < n; i++) sim_xp_shm_release(v[i]->xp, true);
  free(v);
}

#if DTORCH_HAVE_MPI
#include "sim/mpi_internal.h"

struct sim_xp_shm {
  MPI_Comm comm;  /* the group's processes (the leaders use it) */
  MPI_Win win;
  bool have_win;
  size_t cap;
  char *base;     /* the window, as this process maps it */
};

bool sim_xp_shm_capable(const sim_coll_group *g, const sim_coll_desc *d) {
  int64_t min = shm_min_bytes();
  if (d->kind != KIND_ALL_REDUCE || min < 0 || g->world->dev) return false;
  if (d->count * (int64_t)core_dtype_size(d->dtype) < min) return false;
  for (int p = 0; p < g->xp->np; p++)
    if (!sim_mpi_same_node(g->world->mpi, g->xp->procs[p])) return false;
  return true;
}

static dt_status make_comm(sim_coll_group *g, sim_xp_shm *s) {
  MPI_Comm parent = sim_mpi_coll_comm(g->world->mpi);
  MPI_Group all, mine;
  MPI_Comm_group(parent, &all);
  int rc = MPI_Group_incl(all, g->xp->np, g->xp->procs, &mine);
  if (rc == MPI_SUCCESS) {
    rc = MPI_Comm_create_group(parent, mine, g->xp->tag, &s->comm);
    MPI_Group_free(&mine);
  }
  MPI_Group_free(&all);
  if (rc == MPI_SUCCESS) MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
  return sim_mpi_check(rc, "all_reduce: MPI_Comm_create_group for the shared "
                       "window");
}

dt_status sim_xp_shm_ensure(sim_coll_group *g, const sim_coll_desc *d) {
  sim_coll_xp *x = g->xp;
  size_t need = window_bytes(g, d);
  sim_xp_shm *s = x->shm;
  /* relaxed: a count the tests read after the round */
  atomic_fetch_add_explicit(&shm_rounds, 1, memory_order_relaxed);
  if (s && s->have_win && s->cap >= need) return DT_OK;
  if (!s) {
    if (!(s = calloc(1, sizeof *s)))
      return core_error_set(DT_ERR_OUT_OF_MEMORY, "all_reduce on group %s: out "
                            "of host memory", g->name);
    s->comm = MPI_COMM_NULL;
    x->shm = s;
  }
  if (s->comm == MPI_COMM_NULL) {
    dt_status st = make_comm(g, s);
    if (st != DT_OK) return st;
  }
  if (s->have_win) { /* every process grows it in the same round */
    MPI_Win_free(&s->win);
    s->have_win = false;
  }
  size_t cap = (need + ((size_t)1 << 21) - 1) / ((size_t)1 << 21) << 21;
  void *mine = NULL;
  int rc = MPI_Win_allocate_shared(x->me == 0 ? (MPI_Aint)cap : 0, 1,
                                   MPI_INFO_NULL, s->comm, &mine, &s->win);
  dt_status st = sim_mpi_check(rc, "all_reduce: MPI_Win_allocate_shared");
  if (st != DT_OK)
    return core_error_set(st, "all_reduce on group %s: a shared window of %zu "
                          "bytes: %s", g->name, cap, core_last_error());
  s->have_win = true;
  MPI_Aint size = 0;
  int disp = 0;
  MPI_Win_shared_query(s->win, 0, &size, &disp, &s->base);
  s->cap = cap;
  /* the slots start at phase 0 in every process before anyone arrives */
  if (x->me == 0) memset(s->base, 0, align64((size_t)g->n * SLOT));
  return sim_mpi_check(MPI_Barrier(s->comm), "all_reduce: MPI_Barrier after "
                       "the shared window's allocation");
}

void sim_xp_shm_release(sim_coll_xp *x, bool collective) {
  sim_xp_shm *s = x ? x->shm : NULL;
  if (!s) return;
  int fin = 0;
  MPI_Finalized(&fin);
  if (collective && !fin && !x->broken) { /* collective: the caller orders the groups */
    if (s->have_win) MPI_Win_free(&s->win);
    if (s->comm != MPI_COMM_NULL) MPI_Comm_free(&s->comm);
  }
  free(s);
  x->shm = NULL;
}

static _Atomic uint64_t *slot_of(const sim_xp_shm *s, int member) {
  return (_Atomic uint64_t *)(void *)(s->base + (size_t)member * SLOT);
}

/* the report of a wait that timed out: the processes with a member short
 * of the target */
static dt_status timed_out(sim_coll_group *g, uint64_t k, uint64_t target,
                           const char *what) {
  sim_coll_xp *x = g->xp;
  char msg[SIM_XP_MSG];
  size_t n = (size_t)snprintf(msg, sizeof msg, "all_reduce on group %s (seq "
                              "%llu): timed out after %.3f s waiting for ",
                              g->name, (unsigned long long)k,
                              (double)sim_coll_world_timeout(g->world) * 1e-9);
  int c = 0;
  for (int p = 0; p < x->np && n < sizeof msg - 128; p++) {
    bool late = false;
    for (int j = 0; j < g->n; j++)
      late = late || (x->pidx[j] == p &&
                      (atomic_load_explicit(slot_of(x->shm, j),
                                            memory_order_relaxed) & ~FAILED) <
                          target);
    if (!late) continue;
    char who[96];
    sim_xp_proc_name(g, p, who, sizeof who);
    n += (size_t)snprintf(msg + n, sizeof msg - n, "%s%s", c++ ? ", " : "", who);
  }
  if (n < sizeof msg)
    snprintf(msg + n, sizeof msg - n, "%s (%s, in the shared window); the "
             "group stays broken", c ? "" : "another process", what);
  pthread_mutex_lock(&g->report_lock);
  if (!x->broken) x->broken = strdup(msg);
  pthread_mutex_unlock(&g->report_lock);
  sim_mpi_note_broken(sim_coll_world_timeout(g->world));
  return core_error_set(DT_ERR_TIMEOUT, "%s", msg);
}

/* arrives at `target` (with FAILED when !ok) and waits until every member
 * of the group has: spins ~20 us, yields for up to 5 ms, then sleeps 50 us
 * growing to 1 ms (a peer sharing the CPU runs; a stopped one costs
 * little). *failed: the lowest member that arrived with FAILED, or -1 */
static dt_status meet(sim_coll_group *g, int member, uint64_t k,
                      uint64_t target, bool ok, int64_t deadline,
                      const char *what, int *failed) {
  sim_xp_shm *s = g->xp->shm;
  sim_coll_store_fence(); /* streaming stores, before the release */
  /* release: pairs with the acquire loads below in the other members */
  atomic_store_explicit(slot_of(s, member), target | (ok ? 0 : FAILED),
                        memory_order_release);
  int64_t start = sim_coll_now_ns(), nap = 50000;
  *failed = -1;
  for (int spin = 0;; spin++) {
    int j = 0;
    for (; j < g->n; j++) {
      uint64_t v = atomic_load_explicit(slot_of(s, j), memory_order_acquire);
      if ((v & ~FAILED) < target) break;
      if ((v & FAILED) && *failed < 0) *failed = j;
    }
    if (j == g->n) return DT_OK;
    *failed = -1;
    if (spin < 256) continue;
    int64_t now = sim_coll_now_ns();
    if (deadline > 0 && now >= deadline) return timed_out(g, k, target, what);
    if (now - start < 5000000) {
      sched_yield();
    } else {
      nanosleep(&(struct timespec){0, nap}, NULL);
      nap = nap * 2 < 1000000 ? nap * 2 : 1000000;
    }
  }
}

static const char *in_of(const sim_coll_entry *E, int j) {
  return (const char *)E[j].d.in;
}

/* phase A: my range of each of my process's subtrees' partials */
static dt_status partials(sim_coll_group *g, int member, const sim_coll_entry *E,
                          const sim_coll_desc *d) {
  sim_coll_xp *x = g->xp;
  int li = 0;
  for (int j = 0; j < member; j++) li += x->pidx[j] == x->me;
  size_t ds = core_dtype_size(d->dtype), as = sim_coll_acc_size(d->dtype);
  int64_t lo, hi;
  share(d->count, x->nl, li, as > ds ? as : ds, &lo, &hi);
  if (hi <= lo) return DT_OK;
  sim_coll_node small[64];
  sim_coll_node *nodes = g->n <= 64 ? small : malloc((size_t)g->n * sizeof *nodes);
  if (!nodes)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "all_reduce on group %s: out of "
                          "host memory", g->name);
  dt_status st = DT_OK;
  for (int i = 0; st == DT_OK && i < x->nsub; i++) {
    if (x->sub_proc[i] != x->me) continue;
    int a = x->sub_lo[i], b = x->sub_hi[i];
    for (int m = a; m < b; m++)
      nodes[m - a] = (sim_coll_node){.lo = m, .hi = m + 1, .acc = false,
                                     .p = in_of(E, m) + lo * (int64_t)ds};
    st = sim_coll_tree_reduce(nodes, b - a, g->n, hi - lo, d->dtype, d->op,
                              x->shm->base + part_at(g, d, i) + lo * (int64_t)as,
                              true);
  }
  if (nodes != small) free(nodes);
  return st;
}

/* elements per piece of phase B: reduced into an L1/L2 scratch, then
 * stored to the window and to this process's outputs while it is hot */
#define PIECE_ELEMS ((int64_t)8192)

/* phase B: the root over my range of the elements, from every partial,
 * into the result and into every local member's output */
static dt_status root(sim_coll_group *g, int member, const sim_coll_entry *E,
                      const sim_coll_desc *d) {
  sim_coll_xp *x = g->xp;
  size_t ds = core_dtype_size(d->dtype), as = sim_coll_acc_size(d->dtype);
  int64_t lo, hi;
  share(d->count, g->n, member, as > ds ? as : ds, &lo, &hi);
  if (hi <= lo) return DT_OK;
  sim_coll_node small[64];
  sim_coll_node *nodes = x->nsub <= 64 ? small
                                       : malloc((size_t)x->nsub * sizeof *nodes);
  char *piece = malloc((size_t)PIECE_ELEMS * ds);
  if (!nodes || !piece) {
    if (nodes != small) free(nodes);
    free(piece);
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "all_reduce on group %s: out of "
                          "host memory", g->name);
  }
  bool stream = sim_coll_streams((hi - lo) * (int64_t)ds);
  dt_status st = DT_OK;
  for (int64_t at = lo; st == DT_OK && at < hi; at += PIECE_ELEMS) {
    int64_t len = hi - at < PIECE_ELEMS ? hi - at : PIECE_ELEMS;
    for (int i = 0; i < x->nsub; i++)
      nodes[i] = (sim_coll_node){.lo = x->sub_lo[i], .hi = x->sub_hi[i],
                                 .acc = true,
                                 .p = x->shm->base + part_at(g, d, i) +
                                      at * (int64_t)as};
    st = sim_coll_tree_reduce(nodes, x->nsub, g->n, len, d->dtype, d->op,
                              piece, false);
    int64_t off = at * (int64_t)ds, bytes = len * (int64_t)ds;
    sim_coll_copy(x->shm->base + result_at(g, d) + off, piece, bytes, stream);
    for (int j = 0; j < g->n; j++)
      if (x->pidx[j] == x->me)
        sim_coll_copy((char *)E[j].d.out + off, piece, bytes, stream);
  }
  if (nodes != small) free(nodes);
  free(piece);
  return st;
}

/* phase C: the ranges other processes' members reduced, into my output
 * (my process's were written in phase B) */
static void collect(sim_coll_group *g, int member, const sim_coll_entry *E,
                    const sim_coll_desc *d) {
  sim_coll_xp *x = g->xp;
  size_t ds = core_dtype_size(d->dtype), as = sim_coll_acc_size(d->dtype);
  const char *res = x->shm->base + result_at(g, d);
  bool stream = sim_coll_streams(d->count * (int64_t)ds);
  for (int j = 0; j < g->n; j++) {
    if (x->pidx[j] == x->me) continue;
    int64_t lo, hi;
    share(d->count, g->n, j, as > ds ? as : ds, &lo, &hi);
    if (hi > lo)
      sim_coll_copy((char *)E[member].d.out + lo * (int64_t)ds,
                    res + lo * (int64_t)ds, (hi - lo) * (int64_t)ds, stream);
  }
  sim_coll_store_fence();
}

/* a member's failure in phase A or B, as every member reports it */
static dt_status part_failed(sim_coll_group *g, uint64_t k, int member,
                             int failed, dt_status mine, const char *why) {
  if (failed == member) return core_error_set(mine, "%s", why);
  char who[96];
  sim_xp_proc_name(g, g->xp->pidx[failed], who, sizeof who);
  return core_error_set(DT_ERR_DEVICE, "all_reduce on group %s (seq %llu): "
                        "rank %d in %s failed its part in the shared window "
                        "(its own error says why)", g->name,
                        (unsigned long long)k, g->ranks[failed], who);
}

dt_status sim_xp_shm_all_reduce(sim_coll_group *g, int member, uint64_t k,
                                int64_t deadline) {
  sim_coll_xp *x = g->xp;
  const sim_coll_entry *E = g->entries[k & 1];
  const sim_coll_desc *d = &E[x->leader].d;
  /* relaxed: only this member writes its slot (and the slots of a failed
   * round stay in step: every member still arrives twice) */
  uint64_t phase = atomic_load_explicit(slot_of(x->shm, member),
                                        memory_order_relaxed) & ~FAILED;
  char why[SIM_XP_MSG] = "";
  int failed = -1;
  dt_status st = partials(g, member, E, d);
  if (st != DT_OK) snprintf(why, sizeof why, "%s", core_last_error());
  dt_status w = meet(g, member, k, phase + 1, st == DT_OK, deadline,
                     "the partials", &failed);
  if (w != DT_OK) return w;
  if (st == DT_OK && failed < 0) {
    st = root(g, member, E, d);
    if (st != DT_OK) snprintf(why, sizeof why, "%s", core_last_error());
  }
  bool ok = st == DT_OK && failed < 0;
  int failed2 = -1;
  w = meet(g, member, k, phase + 2, ok, deadline, "the reduced ranges", &failed2);
  if (w != DT_OK) return w;
  if (failed < 0) failed = failed2;
  if (failed >= 0) return part_failed(g, k, member, failed, st, why);
  collect(g, member, E, d);
  return DT_OK;
}

#else /* no MPI: no group spans processes */

bool sim_xp_shm_capable(const sim_coll_group *g, const sim_coll_desc *d) {
  (void)g, (void)d, (void)shm_min_bytes, (void)shm_rounds, (void)window_bytes, (void)share;
  return false;
}
dt_status sim_xp_shm_ensure(sim_coll_group *g, const sim_coll_desc *d) {
  (void)d;
  return core_error_set(DT_ERR_UNSUPPORTED, "all_reduce on group %s: this "
                        "build has no MPI", g->name);
}
void sim_xp_shm_release(sim_coll_xp *x, bool collective) {
  (void)x, (void)collective;
}
dt_status sim_xp_shm_all_reduce(sim_coll_group *g, int member, uint64_t k,
                                int64_t deadline) {
  (void)member, (void)k, (void)deadline;
  return core_error_set(DT_ERR_UNSUPPORTED, "all_reduce on group %s: this "
                        "build has no MPI", g->name);
}

#endif
