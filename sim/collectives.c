/* Collectives emulated between rank threads in one address space
 * (sim/collectives.h): the world and its group registry, the lock-free
 * rendezvous, the watchdog, and the split of the data movement. The
 * arithmetic is in coll_reduce.c, send/recv in coll_p2p.c.
 *
 * Rounds. Every member of a group calls the same collectives in the same
 * order; member m counts its own calls (me->seq, written only by m), so
 * call k of every member is round k of the group. Round k uses slot
 * s = k & 1: an arrival word arrive[s] and one entry per member, where the
 * member publishes its call (kind, dtype, counts, buffer pointers, and its
 * input itself when that is small) before arriving.
 *
 * Arrival. A word holds (arrivals << 1 | BROKEN). Counts never reset: the
 * j-th use of a slot (round k = 2j + s) completes when the count reaches
 * base + n (j + 1), compared modulo 2^31 (`reached`); base starts a few
 * rounds before the wrap so every run crosses it. A member arrives with a
 * seq_cst fetch_add (release: publishes its entry; acquire: the last
 * arriver reads everyone's); the others wait for the count with acquire
 * loads, which read the last arriver's RMW at the end of one release
 * sequence and so see every member's entry.
 *
 * Two phases. When every member's input fits its entry (SIM_COLL_INLINE
 * bytes), each member computes its own output from the entries and
 * returns: one barrier. Otherwise the members split the data movement and
 * write into each other's outputs straight from each other's buffers, so
 * a second barrier (the completion word, counted the same way) follows:
 * no member returns while another may still read its input or write its
 * output. The phase is decided from the entries, so every member decides
 * the same. Double buffering makes the one-phase rounds safe: member A
 * rewrites its slot-s entry in round k + 2 only after round k + 1
 * completed, i.e. after every member arrived at k + 1 and so finished
 * reading round k's entries (the seq_cst RMWs of arrive[1 - s] order the
 * reads before the rewrite). A waiter of round k never sees round k + 2's
 * arrivals for the same reason, so the count it polls lies in
 * [target - n, target].
 *
 * Sleeping and the no-lost-wake-up argument. A waiter spins (pause) for
 * spin_ns (and, when members outnumber CPUs, yields for yield_ns), then:
 * increments `sleepers` (seq_cst), re-reads the word
 * (seq_cst) and, if still short, FUTEX_WAITs on the value it read, with a
 * timeout slice. The last arriver does its fetch_add (seq_cst), then
 * loads `sleepers` (seq_cst) and FUTEX_WAKEs if nonzero. Four seq_cst
 * accesses to two locations (a Dekker pair): in their single total order
 * either the waiter's re-read follows the fetch_add (it sees the round
 * complete and does not sleep) or the arriver's load follows the
 * increment (it sees a sleeper and wakes). FUTEX_WAIT compares the word
 * with the value read atomically with respect to FUTEX_WAKE, so a wake
 * between the re-read and the sleep makes the wait return at once.
 *
 * Watchdog. A waiter whose arrival is older than the world's timeout
 * breaks the round with a CAS that sets BROKEN only while the count is
 * short. The word's modification order decides every race: a round either
 * completed before the bit (the breaker sees that and carries on) or is
 * broken, and then nobody moves data: waiters see the bit, and a late
 * arriver finds it in the value its fetch_add returns. The breaker does
 * the CAS holding `report_lock` and installs the slot's report before
 * releasing it, so a member that saw the bit and takes the lock reads
 * this break's report. Recovery: every member still arrives at the broken
 * round (a late one fails at once), and the arrival that brings the count
 * exactly to the round's target clears the bit, so the slot's next round
 * runs normally: a timeout fails that round's calls only. (If the group's
 * other slot breaks too before the late member arrives, members reach the
 * next round of the first slot early, fail at once, and their arrivals
 * overshoot the count: that slot then stays broken, every later call on
 * it failing at once with its report.) The completion phase has no
 * deadline: each member in it has arrived and has a bounded copy left,
 * and returning early would let it write into a buffer its owner had
 * already freed.
 *
 * Data movement (n members, member i): all_reduce reduces element range i
 * of every input, over the members' pairwise tree, into every output; reduce_scatter
 * reduces its own block; all_gather copies its input into every output;
 * all_to_all pulls block i of every input into its own output; broadcast,
 * scatter and gather copy range i of the whole to or from every
 * destination. Ranges are cut at 64-byte boundaries. Bad arguments or
 * members that disagree fail every member of the round (nothing moves)
 * and leave the group usable. */
#include "sim/collectives.h"

#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/host_alloc.h"
#include "core/error.h"
#include "sched/chaos.h"
#include "sched/fault_table.h"
#include "sched/help.h"
#include "sched/pool.h"
#include "sched/trace_recorder.h"
#include "sim/coll_internal.h"
#include "sim/coll_proc.h"
#include "sim/coll_reduce.h"
#include "sim/mpi_env.h"

/* how long a waiter spins (pause) before it sleeps: longer when every
 * member can have its own CPU, short when they share (spinning then delays
 * the very member being waited for). Sharing members then yield for a
 * while: sched_yield hands the CPU to a runnable member at the cost of a
 * context switch, where a futex wake-up costs an IPI and a wake latency
 * (several times faster when 8 members share 2 CPUs; it burns CPU only
 * when nothing else is runnable, and only that long). */
#define SPIN_NS_OWN_CPU ((int64_t)20 * 1000)
#define SPIN_NS_SHARED ((int64_t)2 * 1000)
#define YIELD_NS_SHARED ((int64_t)20 * 1000)

const char *const sim_coll_kind_names[] = {
  "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
  "scatter", "gather", "barrier", "abstention"};
_Static_assert(sizeof sim_coll_kind_names / sizeof sim_coll_kind_names[0] == KIND_COUNT,
               "one name per collective");


/* the phase probe (sim_coll_probe) */
static _Atomic bool probing;
static _Thread_local int64_t probe_rendezvous_ns;
/* in a traced record: when this thread's round found every member
 * arrived (trace ticks; 0 if it did not) */
static _Thread_local int64_t trace_met, trace_met_cpu;
/* the call site of this thread's next collective (sim_coll_set_site) */
static _Thread_local const char *tls_site;
static _Thread_local const char *tls_scope_site; /* sim_coll_set_scope_site */

void sim_coll_set_site(const char *site) { tls_site = site; }
void sim_coll_set_scope_site(const char *site) { tls_scope_site = site; }

void sim_coll_probe(bool on) {
  atomic_store_explicit(&probing, on, memory_order_relaxed);
}
int64_t sim_coll_probe_rendezvous_ns(void) { return probe_rendezvous_ns; }

/* the report used when there is no memory to format one */
char sim_coll_oom_report[] = "collective timed out (no memory for the report)";

/* ---- world and group registry */

sim_coll_world *sim_coll_world_create(int nranks, int64_t timeout_ns) {
  if (nranks < 1) {
    core_error_set(DT_ERR_INVALID_ARGUMENT,
                 "coll_world_create: %d ranks (need at least 1)", nranks);
    return NULL;
  }
  sim_coll_world *w = calloc(1, sizeof *w);
  _Atomic(sim_coll_mailbox *) *mail = w ? calloc((size_t)nranks, sizeof *mail)
                                        : NULL;
  if (!mail) {
    free(w);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "coll_world_create: out of memory");
    return NULL;
  }
  w->gone = calloc((size_t)nranks, sizeof *w->gone);
  w->waiting = calloc((size_t)nranks, sizeof *w->waiting);
  if (!w->gone || !w->waiting) {
    free(w->gone);
    free(w->waiting);
    free(mail);
    free(w);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "coll_world_create: out of memory");
    return NULL;
  }
  atomic_init(&w->ngone, 0);
  w->nranks = nranks;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  w->ncpu = ncpu > 0 ? (int)ncpu : 1;
  w->nprocs = 1;
  w->per = nranks;
  atomic_init(&w->timeout_ns, timeout_ns);
  pthread_mutex_init(&w->lock, NULL);
  w->mail = mail;
  return w;
}

static void group_free(sim_coll_group *g) {
  if (!g) return;
  for (int s = 0; s < 2; s++)
    if (g->report[s] != sim_coll_oom_report) free(g->report[s]);
  pthread_mutex_destroy(&g->report_lock);
  if (g->members)
    for (int i = 0; i < g->n; i++) {
      free(g->members[i].ins);
      free(g->members[i].outs);
    }
  free(g->members);
  free(g->entries[0]);
  free(g->entries[1]);
  sim_coll_xp_free(g->xp);
  free(g->ranks);
  free(g->name);
  free(g);
}

void sim_coll_world_destroy(sim_coll_world *w) {
  if (!w) return;
  sim_xp_shm_release_all(w);
  for (sim_coll_group *g = w->groups, *next; g; g = next) {
    next = g->next;
    group_free(g);
  }
  pthread_mutex_destroy(&w->lock);
  for (int i = 0; i < w->nranks; i++)
    free(atomic_load_explicit(&w->mail[i], memory_order_relaxed));
  free(w->mail);
  free(w->gone);
  free(w->waiting);
  free(w);
}

sim_coll_mailbox *sim_coll_mailbox_of(sim_coll_world *w, int from, int to) {
  /* acquire: pairs with the installing CAS below (the row's zeroed words) */
  sim_coll_mailbox *row = atomic_load_explicit(&w->mail[from],
                                               memory_order_acquire);
  if (!row) {
    size_t bytes = (size_t)w->nranks * sizeof *row;
    sim_coll_mailbox *mine = core_host_aligned_alloc(SIM_COLL_LINE, bytes);
    if (!mine) {
      core_error_set(DT_ERR_OUT_OF_MEMORY, "coll_send/coll_recv: out of "
                     "memory for rank %d's mailboxes", from);
      return NULL;
    }
    memset(mine, 0, bytes);
    for (int i = 0; i < w->nranks; i++) atomic_init(&mine[i].state, 0);
    /* acq_rel: release publishes the zeroed row; acquire (on failure)
     * reads the winner's */
    if (atomic_compare_exchange_strong_explicit(&w->mail[from], &row, mine,
                                                memory_order_acq_rel,
                                                memory_order_acquire))
      row = mine;
    else
      free(mine); /* the sender and the receiver raced to make it */
  }
  return &row[to];
}

void sim_coll_world_set_procs(sim_coll_world *w, struct sim_mpi *mpi) {
  int np = sim_mpi_size(mpi);
  if (!w || !mpi || np <= 1 || w->nranks % np) return;
  w->mpi = mpi;
  w->nprocs = np;
  w->proc = sim_mpi_rank(mpi);
  w->per = w->nranks / np;
}

void sim_coll_world_set_timeout(sim_coll_world *w, int64_t timeout_ns) {
  if (w) atomic_store_explicit(&w->timeout_ns, timeout_ns,
                               memory_order_relaxed);
}

int64_t sim_coll_world_timeout(const sim_coll_world *w) {
  /* relaxed: a setting, as the setter's */
  return w ? atomic_load_explicit(&w->timeout_ns, memory_order_relaxed) : 0;
}

static char *format_name(const int *ranks, int n) {
  char *s = malloc((size_t)n * 13 + 3);
  if (!s) return NULL;
  size_t len = 0;
  s[len++] = '[';
  for (int i = 0; i < n; i++)
    len += (size_t)sprintf(s + len, "%s%d", i ? ", " : "", ranks[i]);
  strcpy(s + len, "]");
  return s;
}

static sim_coll_group *group_new(sim_coll_world *w, const int *ranks, int n) {
  sim_coll_group *g = aligned_alloc(SIM_COLL_LINE, sizeof *g);
  if (!g) return NULL;
  memset(g, 0, sizeof *g);
  g->world = w;
  g->n = n;
  g->members = aligned_alloc(SIM_COLL_LINE, (size_t)n * sizeof *g->members);
  for (int s = 0; s < 2; s++)
    g->entries[s] = aligned_alloc(SIM_COLL_LINE, (size_t)n * sizeof(sim_coll_entry));
  g->ranks = malloc((size_t)n * sizeof *g->ranks);
  g->name = format_name(ranks, n);
  if (!g->members || !g->entries[0] || !g->entries[1] || !g->ranks ||
      !g->name) {
    if (g->members) memset(g->members, 0, (size_t)n * sizeof *g->members);
    group_free(g);
    return NULL;
  }
  memcpy(g->ranks, ranks, (size_t)n * sizeof *ranks);
  memset(g->members, 0, (size_t)n * sizeof *g->members);
  bool xp_err;
  g->xp = sim_coll_xp_new(w, ranks, n, &xp_err);
  g->na = g->xp ? g->xp->nl : n;
  if (xp_err) {
    group_free(g);
    return NULL;
  }
  bool ok = true;
  for (int i = 0; i < n; i++) {
    g->members[i].ins = malloc((size_t)n * sizeof(void *));
    g->members[i].outs = malloc((size_t)n * sizeof(void *));
    ok = ok && g->members[i].ins && g->members[i].outs;
    atomic_init(&g->members[i].arrived, 0);
  }
  if (!ok) {
    group_free(g);
    return NULL;
  }
  /* members spin on their own CPUs only while one is left over for the
   * thread that issues their work (and waits for it) */
  g->spin_ns = g->na < w->ncpu ? SPIN_NS_OWN_CPU : SPIN_NS_SHARED;
  g->yield_ns = g->na < w->ncpu ? 0 : YIELD_NS_SHARED;
  /* three uses of each slot before the counts wrap around 2^31 */
  g->base = (COUNT_MASK + 1u - 3u * (uint32_t)g->na) & COUNT_MASK;
  for (int s = 0; s < 2; s++) atomic_init(&g->arrive[s].v, g->base << 1);
  atomic_init(&g->depart.v, g->base << 1);
  atomic_init(&g->sleepers.v, 0);
  pthread_mutex_init(&g->report_lock, NULL);
  return g;
}

static dt_status check_ranks(sim_coll_world *w, const int *ranks, int n) {
  if (!w || !ranks || n < 1)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "coll_group_get: need a world and at least one rank "
                        "(got %d)", n);
  for (int i = 0; i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= w->nranks)
      return core_error_set(DT_ERR_INVALID_ARGUMENT,
                          "coll_group_get: rank %d out of range [0, %d)",
                          ranks[i], w->nranks);
    for (int j = 0; j < i; j++)
      if (ranks[j] == ranks[i])
        return core_error_set(DT_ERR_INVALID_ARGUMENT,
                            "coll_group_get: rank %d listed twice",
                            ranks[i]);
  }
  return DT_OK;
}

sim_coll_group *sim_coll_group_get(sim_coll_world *w, const int *ranks, int n) {
  if (check_ranks(w, ranks, n) != DT_OK) return NULL;
  pthread_mutex_lock(&w->lock);
  sim_coll_group *g = w->groups;
  while (g && (g->n != n || memcmp(g->ranks, ranks,
                                   (size_t)n * sizeof *ranks) != 0))
    g = g->next;
  if (!g) {
    g = group_new(w, ranks, n);
    if (g) {
      g->next = w->groups;
      w->groups = g;
    }
  }
  pthread_mutex_unlock(&w->lock);
  if (!g)
    core_error_set(DT_ERR_OUT_OF_MEMORY, "coll_group_get: out of memory");
  return g;
}

int sim_coll_group_size(const sim_coll_group *g) { return g ? g->n : 0; }

const char *sim_coll_group_name(const sim_coll_group *g) { return g ? g->name : ""; }

/* ---- rendezvous */

typedef enum wait_result { WAIT_DONE, WAIT_BROKEN, WAIT_TIMEOUT,
                           WAIT_CHECK /* a rank left (SPMD), or a sleep
                                         slice passed: look for a cause */
} wait_result;

/* a rank left its SPMD function: a hint (relaxed), see coll_spmd.c */
static inline bool any_gone(const sim_coll_group *g) {
  return atomic_load_explicit(&g->world->ngone, memory_order_relaxed) != 0;
}

/* another rank left since *seen (updated): acquire, pairing with the
 * departure's increment, so its flag and reason are visible */
static inline bool more_gone(const sim_coll_group *g, int *seen) {
  int now = atomic_load_explicit(&g->world->ngone, memory_order_acquire);
  if (now == *seen) return false;
  *seen = now;
  return true;
}

/* the count in v has reached target, modulo 2^31 (a waiter's word holds a
 * count in [target - n, target], see the top) */
static inline bool reached(uint32_t v, uint32_t target) {
  return (((v >> 1) - target) & COUNT_MASK) < (1u << 30);
}

static inline uint32_t target_of(const sim_coll_group *g, uint32_t uses) {
  return (g->base + (uint32_t)g->na * uses) & COUNT_MASK;
}

/* adds one arrival to word; the last arriver wakes the sleepers. Returns
 * the word's old value. */
static uint32_t arrive_at(sim_coll_group *g, _Atomic uint32_t *word,
                          uint32_t target) {
  /* seq_cst: release publishes our entry / our writes into the others'
   * outputs to the waiters' acquire loads (wait_count); acquire lets the
   * last arriver read the others' entries; seq_cst for the Dekker pair
   * with wait_count's sleepers increment + re-read (see the top) */
  uint32_t old = atomic_fetch_add_explicit(word, WORD_ONE,
                                           memory_order_seq_cst);
  /* seq_cst: the other half of that Dekker pair */
  if (!(old & WORD_BROKEN) && reached(old + WORD_ONE, target) &&
      atomic_load_explicit(&g->sleepers.v, memory_order_seq_cst) != 0)
    sim_coll_futex_wake(word);
  return old;
}

/* waits until word's count reaches target, the round breaks, or the
 * deadline (< 0: none) passes */
static wait_result wait_count(sim_coll_group *g, _Atomic uint32_t *word,
                              uint32_t target, int64_t deadline,
                              int *gone_seen, bool may_help) {
  int64_t start = sim_coll_now_ns();
  bool yielding = false;
  for (unsigned i = 1;; i++) {
    /* acquire: pairs with every arriver's seq_cst fetch_add (one release
     * sequence ending at the last arriver's) */
    uint32_t v = atomic_load_explicit(word, memory_order_acquire);
    if (v & WORD_BROKEN) return WAIT_BROKEN;
    if (reached(v, target)) return WAIT_DONE;
    /* an issuing thread running a sleeping member's part: make the next
     * sleeping member arrive (sched/help.h) instead of waiting for it */
    if (__builtin_expect(sched_help_owed != 0, 0)) {
      if (may_help) sched_help_next();
      else sched_help_flush();
      continue;
    }
    if (yielding || i % 64 == 0) {
      if (gone_seen && more_gone(g, gone_seen)) return WAIT_CHECK;
      int64_t t = sim_coll_now_ns() - start;
      if (t >= g->spin_ns + g->yield_ns) break;
      yielding = t >= g->spin_ns;
    }
    if (yielding)
      sched_yield();
    else
      sim_coll_relax();
  }
  sched_help_flush(); /* nobody sleeps owing a wake-up */
  for (;;) {
    if (gone_seen && more_gone(g, gone_seen)) return WAIT_CHECK;
    int64_t rel = sim_coll_sleep_ns(deadline);
    if (rel <= 0) return WAIT_TIMEOUT;
    /* seq_cst (both): the Dekker pair with arrive_at's fetch_add + load
     * of sleepers */
    atomic_fetch_add_explicit(&g->sleepers.v, 1, memory_order_seq_cst);
    uint32_t v = atomic_load_explicit(word, memory_order_seq_cst);
    if (!(v & WORD_BROKEN) && !reached(v, target))
      sim_coll_futex_wait(word, v, rel);
    atomic_fetch_sub_explicit(&g->sleepers.v, 1, memory_order_relaxed);
    /* acquire: as in the spin loop above */
    v = atomic_load_explicit(word, memory_order_acquire);
    if (v & WORD_BROKEN) return WAIT_BROKEN;
    if (reached(v, target)) return WAIT_DONE;
    if (gone_seen) return WAIT_CHECK; /* a slice passed */
  }
}

/* "ranks 0, 1, 3" / "rank 2" / "none": members whose arrival for round seq
 * is (or is not) recorded in flags */
static size_t put_ranks(char *p, const sim_coll_group *g, const bool *flags,
                        bool want) {
  int count = 0;
  for (int j = 0; j < g->n; j++)
    count += flags[j] == want && sim_coll_here(g, j);
  if (!count) return (size_t)sprintf(p, "none");
  size_t len = (size_t)sprintf(p, count == 1 ? "rank " : "ranks ");
  const char *sep = "";
  for (int j = 0; j < g->n; j++)
    if (flags[j] == want && sim_coll_here(g, j)) {
      len += (size_t)sprintf(p + len, "%s%d", sep, g->ranks[j]);
      sep = ", ";
    }
  return len;
}

static char *format_report(const sim_coll_group *g, sim_coll_kind kind,
                           uint64_t seq) {
  size_t cap = 160 + strlen(g->name) + (size_t)g->n * 26 + 8 * 64;
  char *msg = core_host_malloc(cap);
  bool *flags = core_host_malloc((size_t)g->n * sizeof *flags);
  if (!msg || !flags) {
    free(msg);
    free(flags);
    return NULL;
  }
  for (int j = 0; j < g->n; j++) /* relaxed: a report, not a decision */
    flags[j] = atomic_load_explicit(&g->members[j].arrived,
                                    memory_order_relaxed) > seq;
  int64_t t = atomic_load_explicit(&g->world->timeout_ns,
                                   memory_order_relaxed);
  size_t len = (size_t)sprintf(msg, "%s on group %s (seq %llu): timed out "
                               "after %.3f s; arrived: ", sim_coll_kind_names[kind],
                               g->name, (unsigned long long)seq,
                               (double)t * 1e-9);
  len += put_ranks(msg + len, g, flags, true);
  len += (size_t)sprintf(msg + len, "; missing: ");
  len += put_ranks(msg + len, g, flags, false);
  for (int j = 0, shown = 0; j < g->n && shown < 8; j++) {
    const char *at = flags[j] || !g->world->where ? NULL
        : g->world->where(g->world->where_ctx, g->ranks[j]);
    if (!at) continue;
    len += (size_t)snprintf(msg + len, cap - len, "%s rank %d is in %.40s",
                            shown++ ? "," : ";", g->ranks[j], at);
  }
  free(flags);
  return msg;
}

/* breaks round `seq` unless it completed meanwhile, with report msg
 * (allocated; taken) and status st: the watchdog's timeout, or a member
 * that left (SPMD) */
static wait_result try_break(sim_coll_group *g, _Atomic uint32_t *word,
                             uint32_t target, uint64_t seq, char *msg,
                             dt_status st) {
  if (!msg) msg = sim_coll_oom_report;
  wait_result r = WAIT_TIMEOUT;
  pthread_mutex_lock(&g->report_lock);
  /* acquire (this load and the CAS's failure load): pairs with the
   * arrivers' fetch_adds when the value shows the round complete (we then
   * read their entries) */
  uint32_t v = atomic_load_explicit(word, memory_order_acquire);
  for (;;) {
    if (v & WORD_BROKEN) { r = WAIT_BROKEN; break; }
    if (reached(v, target)) { r = WAIT_DONE; break; }
    if (atomic_compare_exchange_weak_explicit(word, &v, v | WORD_BROKEN,
                                              memory_order_acquire,
                                              memory_order_acquire))
      break;
  }
  if (r == WAIT_TIMEOUT) { /* we broke it: the slot's report is ours */
    char **slot = &g->report[seq & 1];
    if (*slot != sim_coll_oom_report) free(*slot);
    *slot = msg;
    g->report_st[seq & 1] = st;
    msg = NULL;
  }
  pthread_mutex_unlock(&g->report_lock);
  if (msg != sim_coll_oom_report) free(msg);
  if (r == WAIT_TIMEOUT) sim_coll_futex_wake(word);
  return r;
}

/* this thread's error: the report of the break that the round `seq` saw
 * (the breaker installed it before releasing the lock) */
static dt_status fail_broken(sim_coll_group *g, uint64_t seq) {
  pthread_mutex_lock(&g->report_lock);
  const char *m = g->report[seq & 1];
  dt_status st = core_error_set(m ? g->report_st[seq & 1] : DT_ERR_TIMEOUT,
                                "%s", m ? m : "collective timed out");
  pthread_mutex_unlock(&g->report_lock);
  return st;
}

/* the runtime rank of a member that left (SPMD) without arriving at round
 * k, or -1 (while one that left stays away, the waiter keeps waiting) */
static int gone_missing(const sim_coll_group *g, uint64_t k) {
  int who = -1;
  for (int j = 0; j < g->n; j++)
    /* relaxed: a member that arrived has its count above k; one that left
     * never arrives again (acquire in sim_coll_is_gone for its reason) */
    if (atomic_load_explicit(&g->members[j].arrived, memory_order_relaxed) <= k &&
        sim_coll_is_gone(g->world, g->ranks[j]) &&
        (who < 0 || g->world->gone[g->ranks[j]].order < g->world->gone[who].order))
      who = g->ranks[j];
  return who;
}

static char *gone_report(const sim_coll_group *g, sim_coll_kind kind,
                         uint64_t seq, int rank) {
  char why[1200];
  sim_coll_gone_str(g->world, rank, why, sizeof why);
  size_t cap = strlen(why) + strlen(g->name) + 96;
  char *msg = core_host_malloc(cap);
  if (msg) snprintf(msg, cap, "%s on group %s (seq %llu): %s without making "
                    "this call", sim_coll_kind_names[kind], g->name,
                    (unsigned long long)seq, why);
  return msg;
}

/* arrival phase of round k: DT_OK once every member arrived */
static dt_status rendezvous(sim_coll_group *g, int member, uint64_t k,
                            sim_coll_kind kind, int64_t deadline, bool *last) {
  _Atomic uint32_t *word = &g->arrive[k & 1].v;
  *last = false;
  uint32_t target = target_of(g, (uint32_t)(k >> 1) + 1u);
  uint32_t old = arrive_at(g, word, target);
  if (old & WORD_BROKEN) {
    /* the last of the broken round's n arrivals reopens the slot */
    if ((((old >> 1) + 1u - target) & COUNT_MASK) == 0)
      /* release: the round's bookkeeping before the slot's next use */
      atomic_fetch_and_explicit(word, ~WORD_BROKEN, memory_order_release);
    return fail_broken(g, k);
  }
  if (reached(old + WORD_ONE, target)) {
    *last = true;
    return DT_OK;
  }
  wait_result r;
  int gone_seen = 0; /* a departure before our arrival shows as a change */
  sim_coll_probe_state probe = {0};
  sim_coll_wait_mark(g, member, k);
  /* an issuing thread helping sleeping members (sched/help.h) makes the
   * next one arrive from this wait only in a one-phase round: a helped
   * member of a two-phase round would wait in the completion barrier for
   * this member, suspended below it on the same stack. A cross-process
   * round is one-phase for its local members: the last to arrive does the
   * exchange and waits for none of them (sim_coll_xp_round) */
  bool one_phase = g->entries[k & 1][member].inl || g->xp;
  while ((r = wait_count(g, word, target, deadline, &gone_seen, one_phase)) ==
         WAIT_CHECK) {
    int who = gone_missing(g, k);
    char *cycle = who < 0 ? sim_coll_deadlock(g, member, k, &probe) : NULL;
    if (who >= 0 || cycle) {
      r = try_break(g, word, target, k,
                    cycle ? cycle : gone_report(g, kind, k, who), DT_ERR_DESYNC);
      break;
    }
  }
  sim_coll_wait_clear(g, member);
  if (r == WAIT_TIMEOUT)
    r = try_break(g, word, target, k, format_report(g, kind, k), DT_ERR_TIMEOUT);
  if (r == WAIT_DONE) return DT_OK;
  return fail_broken(g, k);
}

/* completion phase: returns once every member finished its share */
static void depart(sim_coll_group *g, sim_coll_member *me);

/* A cross-process round's completion: its exchanger counts the na local
 * members' departures at once (it waits for none of them: they may be
 * suspended below it on a helping thread's stack); the others wait for
 * that count. Every local member takes one of the two per round, so
 * their ndepart stay in step. */
void sim_coll_depart_all(sim_coll_group *g, int member) {
  ++g->members[member].ndepart;
  sim_coll_store_fence(); /* our streaming stores, before the release */
  /* seq_cst: release publishes the exchanger's outputs and verdict to
   * the waiters' acquire loads (wait_count); seq_cst for the Dekker pair
   * with wait_count's sleepers increment + re-read */
  atomic_fetch_add_explicit(&g->depart.v, WORD_ONE * (uint32_t)g->na,
                            memory_order_seq_cst);
  /* seq_cst: the other half of that Dekker pair */
  if (atomic_load_explicit(&g->sleepers.v, memory_order_seq_cst) != 0)
    sim_coll_futex_wake(&g->depart.v);
}

void sim_coll_depart_wait(sim_coll_group *g, int member) {
  uint32_t target = target_of(g, ++g->members[member].ndepart);
  wait_result r = wait_count(g, &g->depart.v, target, -1, NULL, false);
  CORE_ASSERT(r == WAIT_DONE); /* only arrival words are ever broken */
}

static void depart(sim_coll_group *g, sim_coll_member *me) {
  uint32_t target = target_of(g, ++me->ndepart);
  sim_coll_store_fence(); /* our streaming stores, before arrive_at's release */
  uint32_t old = arrive_at(g, &g->depart.v, target);
  if (reached(old + WORD_ONE, target)) return;
  wait_result r = wait_count(g, &g->depart.v, target, -1, NULL, false);
  CORE_ASSERT(r == WAIT_DONE); /* only arrival words are ever broken */
}

/* ---- argument checks: coll_check.c (sim_coll_prepare) */

/* ---- the round's verdict: the same on every member (entries only) */


static bool same_call(const sim_coll_desc *a, const sim_coll_desc *b);

/* appends to buf (cap bytes, *n used), cutting at the end */
static void put(char *buf, size_t cap, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *n, const char *fmt, ...) {
  if (*n + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *n, cap - *n, fmt, ap);
  va_end(ap);
  if (w > 0) *n = *n + (size_t)w < cap ? *n + (size_t)w : cap - 1;
}

static bool same_site(const sim_coll_entry *a, const sim_coll_entry *b) {
  return same_call(&a->d, &b->d) && strcmp(a->site, b->site) == 0;
}

/* "members disagree: rank 3 called all_reduce(float32[1024], sum) at
 * train.c:88; ranks 0, 1, 2 called all_gather(float32[256]) at train.c:91"
 * (the calls that differ, each with the ranks that made it) */
static dt_status desync_error(const sim_coll_group *g, uint64_t k,
                              const sim_coll_entry *E) {
  char msg[1536];
  bool *seen = core_host_calloc((size_t)g->n, sizeof *seen);
  if (!seen)
    return core_error_set(DT_ERR_DESYNC, "%s on group %s (seq %llu): members "
                          "disagree (no memory to say how)",
                          sim_coll_kind_names[E[0].d.kind], g->name, (unsigned long long)k);
  size_t n = 0;
  put(msg, sizeof msg, &n, "%s on group %s (seq %llu): members disagree: ",
      sim_coll_kind_names[E[0].d.kind], g->name, (unsigned long long)k);
  for (int j = 0; j < g->n; j++) seen[j] = !sim_coll_here(g, j);
  for (int j = 0, shown = 0; j < g->n; j++) {
    if (seen[j]) continue;
    if (shown++ == 6) {
      put(msg, sizeof msg, &n, "; ...");
      break;
    }
    int count = 0;
    for (int i = j; i < g->n; i++) count += !seen[i] && same_site(&E[j], &E[i]);
    put(msg, sizeof msg, &n, "%s%s", shown > 1 ? "; " : "",
        count == 1 ? "rank " : "ranks ");
    for (int i = j, c = 0; i < g->n; i++)
      if (!seen[i] && same_site(&E[j], &E[i])) {
        seen[i] = true;
        put(msg, sizeof msg, &n, "%s%d", c++ ? ", " : "", g->ranks[i]);
      }
    char a[256];
    sim_coll_describe(a, sizeof a, &E[j]);
    put(msg, sizeof msg, &n, " called %s", a);
  }
  free(seen);
  return core_error_set(DT_ERR_DESYNC, "%s", msg);
}

static bool same_call(const sim_coll_desc *a, const sim_coll_desc *b) {
  return a->kind == b->kind && a->dtype == b->dtype && a->op == b->op &&
         a->root == b->root && a->count == b->count && a->sig == b->sig;
}

dt_status sim_coll_check_round(const sim_coll_group *g, int member, uint64_t k,
                               const sim_coll_entry *E) {
  if (E[member].bad != DT_OK) return E[member].bad; /* own message set */
  const char *kind = sim_coll_kind_names[E[member].d.kind];
  unsigned long long seq = (unsigned long long)k;
  /* another process's members have no entry here: never read theirs */
  for (int j = 0; j < g->n; j++)
    if (sim_coll_here(g, j) && E[j].abstain)
      return core_error_set(E[j].bad, "%s on group %s (seq %llu): member %d "
                            "(rank %d) could not take part: %s", kind,
                            g->name, seq, j, g->ranks[j],
                            (const char *)E[j].data);
  for (int j = 0; j < g->n; j++)
    if (sim_coll_here(g, j) && E[j].bad != DT_OK)
      return core_error_set(E[j].bad, "%s on group %s (seq %llu): member %d "
                          "(rank %d) passed invalid arguments (%s); nothing "
                          "was moved", kind, g->name, seq, j, g->ranks[j],
                          core_status_name(E[j].bad));
  if (g->xp) { /* the local members; the other processes' headers next */
    for (int j = 0; j < g->n; j++)
      if (sim_coll_here(g, j) && !same_call(&E[member].d, &E[j].d))
        return desync_error(g, k, E);
    return DT_OK;
  }
  for (int j = 1; j < g->n; j++)
    if (!same_call(&E[0].d, &E[j].d)) return desync_error(g, k, E);
  if (E[0].d.kind != KIND_ALL_TO_ALL) return DT_OK;
  for (int i = 0; i < g->n; i++)
    for (int j = 0; j < g->n; j++) {
      int64_t s = sim_coll_a2a_counts(&E[j], g->n, false)[i];
      int64_t r = sim_coll_a2a_counts(&E[i], g->n, true)[j];
      if (s != r)
        return core_error_set(DT_ERR_DESYNC, "all_to_all on group %s (seq "
                            "%llu): member %d sends %lld elements to member "
                            "%d, which expects %lld", g->name, seq, j,
                            (long long)s, i, (long long)r);
    }
  return DT_OK;
}

/* ---- one collective call */

/* a member of g other than the caller left (SPMD): the call fails before
 * it touches the group, naming who left */
static dt_status fail_if_gone(const sim_coll_group *g, int member,
                              sim_coll_kind kind, const char *site) {
  int who = -1;
  for (int j = 0; j < g->n; j++)
    if (j != member && sim_coll_is_gone(g->world, g->ranks[j]) &&
        (who < 0 || g->world->gone[g->ranks[j]].order < g->world->gone[who].order))
      who = g->ranks[j];
  if (who >= 0) {
    char why[1200];
    sim_coll_gone_str(g->world, who, why, sizeof why);
    return core_error_set(DT_ERR_DESYNC, "%s%s%s on group %s: %s before this "
                          "call", sim_coll_kind_names[kind], site ? " at " : "",
                          site ? site : "", g->name, why);
  }
  return DT_OK;
}

/* why: NULL for a call; else the member abstains with status why_st and
 * this message (sim_coll_abstain); the round runs its phases as any other
 * so that members that moved nothing still pass its completion barrier */
static dt_status run_round(sim_coll_group *g, int member, sim_coll_desc *d,
                           dt_status why_st, const char *why) {
  CORE_ASSERT(g != NULL && member >= 0 && member < g->n);
  const char *site = tls_site ? tls_site : tls_scope_site;
  tls_site = NULL;
  if (__builtin_expect(any_gone(g), 0)) {
    dt_status st = fail_if_gone(g, member, d->kind, site);
    /* the other processes expect our header of the next round */
    if (st != DT_OK && g->xp)
      sim_coll_xp_abandon(g, g->members[member].seq, d, site, st,
                          core_last_error());
    if (st != DT_OK) return st;
  }
  int64_t deadline = sim_coll_deadline(g->world);
  sim_coll_member *me = &g->members[member];
  int64_t bytes = 0;
  dt_status bad = why ? core_error_set(why_st, "%s", why)
                      : sim_coll_prepare(g, member, d, &bytes);
  uint64_t k = me->seq++;
  sim_coll_entry *e = &g->entries[k & 1][member];
  e->d = *d;
  e->bad = bad;
  e->abstain = why != NULL;
  if (site) snprintf(e->site, sizeof e->site, "%s", site);
  else e->site[0] = '\0';
  if (why) snprintf((char *)e->data, sizeof e->data, "%s", why);
  /* device memory never travels in an entry: a device world's round is
   * one-phase only when no member has input */
  const sim_coll_device *dev = g->world->dev;
  if (dev) bad = e->bad = sim_coll_dev_begin(g, member, k, e, bad);
  /* a cross-process round reads inputs where they are (its members wait
   * in its completion barrier) */
  e->inl = bad != DT_OK ||
           (bytes >= 0 && bytes <= (dev || g->xp ? 0 : SIM_COLL_INLINE));
  if (bad == DT_OK && e->inl && bytes > 0)
    memcpy(e->data, d->in, (size_t)bytes);
  if (bad == DT_OK && e->inl && d->kind == KIND_ALL_TO_ALL) {
    e->counts_at = (int32_t)((bytes + 7) / 8 * 8);
    memcpy(e->data + e->counts_at, d->send, sizeof(int64_t) * (size_t)g->n);
    memcpy(e->data + e->counts_at + sizeof(int64_t) * (size_t)g->n, d->recv,
           sizeof(int64_t) * (size_t)g->n);
  }
  /* relaxed: read only by the watchdog's report */
  atomic_store_explicit(&me->arrived, k + 1, memory_order_relaxed);
  bool last;
  dt_status st = rendezvous(g, member, k, d->kind, deadline, &last);
  if (st != DT_OK) {
    if (dev) sim_coll_dev_abandon(g, member, k);
    /* the other processes would wait for our header: tell them */
    if (g->xp) sim_coll_xp_abandon(g, k, d, site, st, core_last_error());
    return st;
  }
  /* relaxed: a benchmark switch */
  if (atomic_load_explicit(&probing, memory_order_relaxed))
    probe_rendezvous_ns = sim_coll_now_ns();
  if (sched_trace_in_record()) {
    trace_met = sched_trace_now();
    trace_met_cpu = sched_trace_cpu();
  }
  if (g->xp) return sim_coll_xp_round(g, member, k, deadline, last);
  const sim_coll_entry *E = g->entries[k & 1];
  bool pull = true;
  for (int j = 0; j < g->n; j++) pull = pull && E[j].inl;
  st = sim_coll_check_round(g, member, k, E);
  if (pull) {
    if (st == DT_OK) sim_coll_move_pull(E, g->n, member, me->ins);
    /* a barrier orders the members' streams too */
    dt_status ds = dev ? sim_coll_dev_settle(g, member, k, st == DT_OK &&
                                             d->kind == KIND_BARRIER)
                       : DT_OK;
    return st != DT_OK ? st : ds;
  }
  if (!dev) {
    if (st == DT_OK)
      sim_coll_move_split(E, g->n, member, me->ins, me->outs, NULL);
    depart(g, me);
    return st;
  }
  if (dev->call) { /* the device synchronises the members (NCCL) */
    (void)sim_coll_dev_settle(g, member, k, false); /* a barrier's event */
    /* nobody returns while another may still read its counts arrays
     * (check_round above reads every member's) */
    depart(g, me);
    return st == DT_OK ? sim_coll_dev_call(g, member, k) : st;
  }
  bool moving = st == DT_OK;
  dt_status ds = sim_coll_dev_settle(g, member, k, moving);
  /* after a failed wait: no share, but the done event and the status */
  if (moving) ds = sim_coll_dev_move(g, member, k, ds);
  depart(g, me);
  dt_status end = moving ? sim_coll_dev_end(g, member, k) : DT_OK;
  return st != DT_OK ? st : ds != DT_OK ? ds : end;
}

/* a round as a slice on the rank's track (inside its record): kind,
 * group, bytes (elements × dtype size: the count, or the sum of counts);
 * inside it, the wait for the other members' arrival (`rendezvous`) */
static void trace_round(const sim_coll_group *g, int member, const sim_coll_desc *d,
                        uint64_t seq, int64_t t0, int64_t cpu0, dt_status st) {
  if (trace_met > t0) {
    sched_trace_event w = {.ts = t0, .dur = trace_met - t0, .name = "rendezvous",
                           .cat = "wait", .ph = 'X', .has_cpu = cpu0 >= 0,
                           .cpu = trace_met_cpu - cpu0};
    sched_trace_emit(sched_current_pool(), &w);
  }
  sched_trace_event e = {.ts = t0, .dur = sched_trace_now() - t0,
                         .name = sim_coll_kind_names[d->kind], .cat = "collective", .ph = 'X'};
  sched_trace_set_cpu(&e, cpu0);
  sched_trace_args(&e, "\"group_size\":%d,\"bytes\":%lld,\"member\":%d,"
                   "\"seq\":%llu,\"status\":\"%s\",\"group\":\"%s\"", g->n,
                   (long long)(d->count * (int64_t)core_dtype_size(d->dtype)),
                   member, (unsigned long long)seq, core_status_name(st), g->name);
  sched_trace_emit(sched_current_pool(), &e);
}

static dt_status sim_coll_run(sim_coll_group *g, int member, sim_coll_desc *d,
                              dt_status why_st, const char *why) {
  sched_pool *p = sched_current_pool();
  if (p) sched_chaos_point(sched_pool_chaos_seed(p), g->ranks[member],
                           SCHED_CHAOS_COLLECTIVE);
  char fault[128];
  if (!why && g->world->faults && __builtin_expect(sched_faults_armed(g->world->faults), 0) &&
      sched_fault_take_at(g->world->faults, g->ranks[member], SCHED_FAULT_COLLECTIVE,
                          fault, sizeof fault)) {
    why_st = DT_ERR_FAULT;
    why = fault;
    d->kind = KIND_ABSTAIN;
  }
  if (!sched_trace_in_record()) return run_round(g, member, d, why_st, why);
  int64_t cpu0 = sched_trace_cpu(), t0 = sched_trace_now();
  uint64_t seq = g->members[member].seq;
  trace_met = 0;
  dt_status st = run_round(g, member, d, why_st, why);
  trace_round(g, member, d, seq, t0, cpu0, st);
  return st;
}

/* ---- the collectives */

dt_status sim_coll_all_reduce(sim_coll_group *g, int member, const void *in,
                          void *out, int64_t count, dt_dtype dtype,
                          dt_reduce_op op) {
  sim_coll_desc d = {.kind = KIND_ALL_REDUCE, .dtype = dtype, .op = op,
                 .count = count, .in = in, .out = out};
  return sim_coll_run(g, member, &d, DT_OK, NULL);
}

dt_status sim_coll_all_gather(sim_coll_group *g, int member, const void *in,
                          void *out, const int64_t *counts, dt_dtype dtype) {
  sim_coll_desc d = {.kind = KIND_ALL_GATHER, .dtype = dtype, .in = in,
                 .out = out, .counts = counts};
  return sim_coll_run(g, member, &d, DT_OK, NULL);
}

dt_status sim_coll_reduce_scatter(sim_coll_group *g, int member, const void *in,
                              void *out, const int64_t *counts,
                              dt_dtype dtype, dt_reduce_op op) {
  sim_coll_desc d = {.kind = KIND_REDUCE_SCATTER, .dtype = dtype, .op = op,
                 .in = in, .out = out, .counts = counts};
  return sim_coll_run(g, member, &d, DT_OK, NULL);
}

dt_status sim_coll_all_to_all(sim_coll_group *g, int member, const void *in,
                          const int64_t *send, void *out,
                          const int64_t *recv, dt_dtype dtype) {
  sim_coll_desc d = {.kind = KIND_ALL_TO_ALL, .dtype = dtype, .in = in,
                 .out = out, .send = send, .recv = recv};
  return sim_coll_run(g, member, &d, DT_OK, NULL);
}

dt_status sim_coll_broadcast(sim_coll_group *g, int member, void *buf, int64_t count,
                         dt_dtype dtype, int root) {
  sim_coll_desc d = {.kind = KIND_BROADCAST, .dtype = dtype, .root = root,
                 .count = count, .in = buf, .out = buf};
  return sim_coll_run(g, member, &d, DT_OK, NULL);
}

dt_status sim_coll_scatter(sim_coll_group *g, int member, const void *in, void *out,
                       const int64_t *counts, dt_dtype dtype, int root) {
  sim_coll_desc d = {.kind = KIND_SCATTER, .dtype = dtype, .root = root,
                 .in = in, .out = out, .counts = counts};
  return sim_coll_run(g, member, &d, DT_OK, NULL);
}

dt_status sim_coll_gather(sim_coll_group *g, int member, const void *in, void *out,
                      const int64_t *counts, dt_dtype dtype, int root) {
  sim_coll_desc d = {.kind = KIND_GATHER, .dtype = dtype, .root = root,
                 .in = in, .out = out, .counts = counts};
  return sim_coll_run(g, member, &d, DT_OK, NULL);
}

dt_status sim_coll_barrier(sim_coll_group *g, int member) {
  sim_coll_desc d = {.kind = KIND_BARRIER, .dtype = DT_FLOAT32};
  return sim_coll_run(g, member, &d, DT_OK, NULL);
}

dt_status sim_coll_abstain(sim_coll_group *g, int member, dt_status st,
                           const char *msg) {
  CORE_ASSERT(st != DT_OK);
  char why[SIM_COLL_INLINE]; /* msg may be this thread's error buffer */
  snprintf(why, sizeof why, "%s", msg && msg[0] ? msg : core_status_name(st));
  sim_coll_desc d = {.kind = KIND_ABSTAIN, .dtype = DT_FLOAT32};
  return sim_coll_run(g, member, &d, st, why);
}
