/* Internals shared by sim/collectives.c (world, groups, rendezvous) and
 * sim/coll_p2p.c (send/recv): the world's layout and the futex and clock
 * helpers both wait with. Not part of the interface (sim/collectives.h). */
#ifndef SIM_COLL_INTERNAL_H
#define SIM_COLL_INTERNAL_H

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim/collectives.h"

#define SIM_COLL_LINE 64
/* longest single futex sleep: a safety net only (every state change that
 * ends a wait also wakes the word), bounded so no sleep outlives it */
#define SIM_COLL_SLICE_NS ((int64_t)50 * 1000 * 1000)

/* a member's input of at most this many bytes travels in its entry */
#define SIM_COLL_INLINE SIM_COLL_ONE_PHASE_BYTES
/* a group's arrival words: arrivals << 1 | BROKEN (collectives.c) */
#define WORD_BROKEN 1u
#define WORD_ONE 2u
#define COUNT_MASK 0x7fffffffu

/* a call site or label as carried in an entry (longer ones are cut) */
#define SIM_COLL_SITE 96

typedef enum sim_coll_kind {
  KIND_ALL_REDUCE, KIND_ALL_GATHER, KIND_REDUCE_SCATTER, KIND_ALL_TO_ALL,
  KIND_BROADCAST, KIND_SCATTER, KIND_GATHER, KIND_BARRIER,
  KIND_ABSTAIN, /* a member that could not make its call */
  KIND_COUNT
} sim_coll_kind;

/* a member's call, as published in its entry */
typedef struct sim_coll_desc {
  sim_coll_kind kind;
  dt_dtype dtype;
  dt_reduce_op op;   /* reducing kinds; 0 otherwise */
  int root;          /* rooted kinds; 0 otherwise */
  int64_t count;     /* elements: the count, or the sum of counts */
  uint64_t sig;      /* hash of the counts array (0: none) */
  const void *in;    /* broadcast: in == out == buf */
  void *out;
  const int64_t *counts, *send, *recv;
} sim_coll_desc;

/* one member's slot entry: written by its member before arriving, read by
 * all after the round completed (collectives.c: double buffering) */
typedef struct sim_coll_entry {
  sim_coll_desc d;
  dt_status bad;     /* DT_OK, or the member's own argument error */
  bool abstain;      /* it could not take part: `data` holds why */
  bool inl;          /* its input is in `data` (or it has none) */
  int32_t counts_at; /* inline all_to_all: its send then recv counts are
                        at data + counts_at (sim_coll_a2a_counts) */
  char site[SIM_COLL_SITE]; /* where it was called ("train.c:88"), or "" */
  /* device worlds (coll_device.c): the member's events, or NULL. ready is
   * set before arriving; done after its share moved, before departing */
  void *ev_ready, *ev_done;
  /* members yet to finish with ev_ready / ev_done (coll_device.c) */
  _Atomic int ready_refs, done_refs;
  /* whether its share was issued (device worlds: written before its
   * completion arrival, read by the others after the barrier) */
  dt_status moved;
  char moved_msg[256];
  _Alignas(SIM_COLL_LINE) unsigned char data[SIM_COLL_INLINE];
} sim_coll_entry;

typedef struct line_u32 {
  _Alignas(SIM_COLL_LINE) _Atomic uint32_t v;
} line_u32;

typedef struct sim_coll_member {
  _Alignas(SIM_COLL_LINE) uint64_t seq; /* rounds started; owner only */
  uint32_t ndepart;                 /* completion phases done; owner only */
  const void **ins;                 /* n scratch pointers; owner only */
  void **outs;                      /* n scratch pointers; owner only */
  _Atomic uint64_t arrived;         /* seq + 1 of its last arrival */
} sim_coll_member;

struct sim_coll_group {
  sim_coll_world *world;
  sim_coll_group *next;          /* registry list, under world->lock */
  int n;
  int na;                    /* members that arrive per round: n, or those
                                in this process (a cross-process group) */
  struct sim_coll_xp *xp;    /* a group spanning processes: coll_proc.h */
  int *ranks;                /* world rank of each member */
  char *name;                /* "[0, 2, 4, 6]" */
  int64_t spin_ns;           /* pause loop before sleeping */
  int64_t yield_ns;          /* then sched_yield loop (shared CPUs) */
  uint32_t base;             /* every count's initial value */
  sim_coll_member *members;
  sim_coll_entry *entries[2];    /* per slot, n each */
  line_u32 arrive[2];        /* futex words: arrivals << 1 | BROKEN */
  line_u32 depart;           /* futex word: completions << 1 */
  line_u32 sleepers;         /* waiters on their way into FUTEX_WAIT */
  pthread_mutex_t report_lock;  /* the watchdog's CAS and report[] */
  char *report[2];               /* per slot: the last break's report */
  dt_status report_st[2];        /* and its status */
};

/* An all_to_all member's send (recv: its recv) counts: the copy in its
 * entry when the input travelled there (the member may have left the
 * round by the time others read them), else its own array. */
static inline const int64_t *sim_coll_a2a_counts(const sim_coll_entry *e,
                                                 int n, bool recv) {
  if (!e->inl) return recv ? e->d.recv : e->d.send;
  return (const int64_t *)(const void *)(e->data + e->counts_at) + (recv ? n : 0);
}
/* bytes an inline all_to_all entry needs for an input of `bytes` */
static inline int64_t sim_coll_a2a_inline_bytes(int64_t bytes, int n) {
  return (bytes + 7) / 8 * 8 + 16 * (int64_t)n;
}

/* the report a break installs when there is no memory to format one */
extern char sim_coll_oom_report[];

/* How a split round moves its bytes: mv NULL, on the host (memcpy and
 * sim_coll_reduce); else through the world's device operations on the
 * stream of rank mv->rank, the first failure kept in mv->st. */
typedef struct sim_coll_mover {
  const sim_coll_device *dev;
  int rank;
  dt_status st;
} sim_coll_mover;

/* The data movement of a round whose entries E[0..n) agree (coll_move.c).
 * pull: every input is in its entry; member writes only its own output.
 * split: member does its share of the whole, reading and writing the
 * members' own buffers; the caller then runs the completion barrier.
 * ins/outs: n scratch pointers owned by the member. */
void sim_coll_move_pull(const sim_coll_entry *E, int n, int member,
                    const void **ins);
void sim_coll_move_split(const sim_coll_entry *E, int n, int member,
                     const void **ins, void **outs, sim_coll_mover *mv);

/* ---- device worlds (coll_device.c), called by run_round on the member's
 * thread: begin before arriving (the ready event of a call that is not
 * `bad`, unless the device runs whole collectives (`call`) and this is
 * not a barrier; returns bad, or the error of recording it); after a rendezvous
 * that failed, abandon; after one that passed, settle (waits on the
 * others' ready events when `wait`: moving rounds and barriers), then in
 * moving rounds move (the share, the done event) and, after the
 * completion barrier, end (waits on the others' done events). */
dt_status sim_coll_dev_begin(sim_coll_group *g, int member, uint64_t k,
                             sim_coll_entry *e, dt_status bad);
void sim_coll_dev_abandon(sim_coll_group *g, int member, uint64_t k);
dt_status sim_coll_dev_settle(sim_coll_group *g, int member, uint64_t k,
                              bool wait);
dt_status sim_coll_dev_move(sim_coll_group *g, int member, uint64_t k,
                            dt_status before);
dt_status sim_coll_dev_end(sim_coll_group *g, int member, uint64_t k);
/* a device with `call`: the member's whole collective (moving rounds) */
dt_status sim_coll_dev_call(sim_coll_group *g, int member, uint64_t k);

/* One point-to-point channel (from, to); see coll_p2p.c. */
typedef struct sim_coll_mailbox {
  _Alignas(SIM_COLL_LINE) _Atomic uint32_t state; /* futex word: MAIL_* */
  const void *buf;   /* sender's buffer, published by the POSTED store */
  int64_t bytes;     /* sender's size, idem */
  uint64_t msg;      /* the message's number on this pair, idem */
  int64_t want;      /* receiver's size, published by its MISMATCH store */
  /* device worlds: the sender's ready event (published with POSTED), the
   * receiver's done event and the status of its copy (with DONE) */
  void *ev, *ev_done;
  dt_status dev_st;
  uint64_t nsent;    /* sends started on this pair: the sender's own */
  uint64_t nrecv;    /* recvs started on this pair: the receiver's own */
} sim_coll_mailbox;

/* the mailbox (from, to), made on first use; NULL + error without memory */
sim_coll_mailbox *sim_coll_mailbox_of(sim_coll_world *w, int from, int to);

struct sim_coll_world {
  int nranks;
  int ncpu;                      /* online CPUs: sets how long waiters spin */
  _Atomic int64_t timeout_ns;    /* relaxed: read once per call */
  pthread_mutex_t lock;          /* guards `groups` (lookup, not hot) */
  sim_coll_group *groups;            /* registry: a list keyed by rank list */
  /* per sending rank, its nranks mailboxes [to], made on its first send
   * or recv (most rank pairs never talk: no nranks² block up front) */
  _Atomic(sim_coll_mailbox *) *mail;
  /* SPMD departures (coll_spmd.c): how many ranks left their function
   * while the others may still call collectives, and per rank why */
  _Atomic int ngone;
  _Atomic int norder;            /* departure numbers (sim_coll_gone.order) */
  struct sim_coll_gone *gone;    /* nranks entries */
  /* what a rank is doing now, for the watchdog's report of the ranks
   * that did not arrive (sim_coll_world_set_where; NULL: not known) */
  sim_coll_where_fn where;
  void *where_ctx;
  struct sched_faults *faults;   /* may be NULL */
  const sim_coll_device *dev;    /* device worlds; NULL: host memory */
  /* per rank: the round it waits in now (group NULL: none), for the
   * deadlock check (coll_spmd.c) */
  struct sim_coll_waiting *waiting;
  /* a multi-process job (sim_coll_world_set_procs): the MPI job, its
   * processes, this one's index, ranks per process; else NULL, 1, 0, nranks */
  struct sim_mpi *mpi;
  int nprocs, proc, per;
};

typedef struct sim_coll_waiting {
  _Atomic(sim_coll_group *) g;   /* release-stored after seq and member */
  _Atomic uint64_t seq;
  _Atomic int member;
} sim_coll_waiting;

/* a member starts / stops waiting for round k of g (collectives.c) */
void sim_coll_wait_mark(sim_coll_group *g, int member, uint64_t k);
void sim_coll_wait_clear(sim_coll_group *g, int member);
/* Called by a member waiting in round k of g at every sleep slice: a
 * report (allocated) when the waiters form a cycle — each waits for the
 * next, which waits in another round for the one before — seen twice in
 * the same state (*probe keeps the last sighting), else NULL. */
typedef struct sim_coll_probe_state { int n; uint64_t sig; } sim_coll_probe_state;
char *sim_coll_deadlock(sim_coll_group *g, int member, uint64_t k,
                        sim_coll_probe_state *probe);
/* "all_reduce(float32[4], sum) at t.c:9" for an entry (collectives.c) */
void sim_coll_describe(char *buf, size_t len, const sim_coll_entry *e);

/* why a rank left (coll_spmd.c): set before ngone's increment */
typedef struct sim_coll_gone {
  _Atomic bool gone;
  int order;         /* departures before it (the first names the cause) */
  dt_status st;
  char msg[1024];
} sim_coll_gone;

/* is rank gone (an acquire load: its entry's fields are then readable) */
static inline bool sim_coll_is_gone(const sim_coll_world *w, int rank) {
  /* acquire: pairs with the release store in sim_coll_depart */
  return atomic_load_explicit(&w->gone[rank].gone, memory_order_acquire);
}
/* "rank 3 left its SPMD function (it returned DT_OK)" into buf */
void sim_coll_gone_str(const sim_coll_world *w, int rank, char *buf, size_t len);
/* wakes every waiter of every group that has rank as a member
 * (collectives.c) */
void sim_coll_wake_groups_of(sim_coll_world *w, int rank);

static inline int64_t sim_coll_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* the absolute deadline of a wait that starts now (-1: none) */
static inline int64_t sim_coll_deadline(sim_coll_world *w) {
  int64_t t = atomic_load_explicit(&w->timeout_ns, memory_order_relaxed);
  return t > 0 ? sim_coll_now_ns() + t : -1;
}

/* the sleep before re-checking: a slice, cut short by the deadline; <= 0
 * when the deadline has passed */
static inline int64_t sim_coll_sleep_ns(int64_t deadline) {
  if (deadline < 0) return SIM_COLL_SLICE_NS;
  int64_t left = deadline - sim_coll_now_ns();
  return left < SIM_COLL_SLICE_NS ? left : SIM_COLL_SLICE_NS;
}

static inline void sim_coll_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* sleeps while *word == val, at most rel_ns; the result is a hint only:
 * callers re-read the word */
static inline void sim_coll_futex_wait(_Atomic uint32_t *word, uint32_t val,
                                   int64_t rel_ns) {
  struct timespec ts = {(time_t)(rel_ns / 1000000000),
                        (long)(rel_ns % 1000000000)};
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, &ts, NULL,
          0);
}

static inline void sim_coll_futex_wake(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL,
          NULL, 0);
}

/* "all_reduce", ...: one name per sim_coll_kind (collectives.c) */
extern const char *const sim_coll_kind_names[];

static inline bool sim_coll_is_reducing(sim_coll_kind k) {
  return k == KIND_ALL_REDUCE || k == KIND_REDUCE_SCATTER;
}
static inline bool sim_coll_is_rooted(sim_coll_kind k) {
  return k == KIND_BROADCAST || k == KIND_SCATTER || k == KIND_GATHER;
}

/* the verdict of round k from its entries (collectives.c): DT_OK, or the
 * error every member reaches (the caller's own argument error first);
 * only members in this process are read */
dt_status sim_coll_check_round(const sim_coll_group *g, int member, uint64_t k,
                               const sim_coll_entry *E);
/* whether member j of g runs in this process: one load in a group of one
 * process (the in-process rounds' loops call it per member) */
bool sim_coll_xp_local(const sim_coll_group *g, int j);
static inline bool sim_coll_here(const sim_coll_group *g, int j) {
  return !g->xp || sim_coll_xp_local(g, j);
}
/* a cross-process round's completion (collectives.c): the member that
 * did the exchange counts every local member's departure without
 * waiting; each other member waits for it */
void sim_coll_depart_all(sim_coll_group *g, int member);
void sim_coll_depart_wait(sim_coll_group *g, int member);

/* validates member's call d against g and fills what the round's entry
 * compares; *bytes: its input's size (-1: must stay in the caller's
 * buffer). coll_check.c */
dt_status sim_coll_prepare(const sim_coll_group *g, int member, sim_coll_desc *d,
                           int64_t *bytes);

#endif
