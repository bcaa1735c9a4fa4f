/* The timeline recorder (see trace_recorder.h and docs/trace.md).
 *
 * Per thread: a node, made on the thread's first event and kept in a
 * global list (under `lock`) until the thread exits; it owns a list of
 * chunks of events that only its thread appends to.
 *
 * Invariants:
 *   T1 only a node's thread appends to its chunks, and only between its
 *      busy = 1 and busy = 0 with the switch seen on (for its pool);
 *   T2 the stop turns the switch off, then waits for busy == 0 on every
 *      node before it reads or frees chunks: a Dekker pair (the emitter
 *      stores busy then loads the switch, the stop stores the switch then
 *      loads busy, all seq_cst), so either the emitter sees the switch off
 *      and appends nothing, or the stop sees busy and waits;
 *   T3 the chunks the stop takes (head = NULL) are visible to the node's
 *      thread before it appends again: the next start's store of the
 *      switch (seq_cst, after the stop under `lock`) is what the emitter's
 *      seq_cst load reads. */
#include "sched/trace_recorder.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "sched/pool.h"

#define CHUNK_EVENTS 512
#define ISSUER_TID_BASE SCHED_TRACE_ISSUER_TID

_Atomic(struct sched_pool *) sched_trace_pool;
_Atomic bool sched_trace_fine_on;
_Thread_local bool sched_trace_tls_record;

typedef struct chunk {
  struct chunk *next;
  int n;
  sched_trace_event ev[CHUNK_EVENTS];
} chunk;

typedef struct node {
  struct node *next;      /* the list, under lock */
  _Atomic int busy;       /* T1, T2 */
  chunk *head, *tail;     /* the node's thread only (T1), or the stop (T2) */
  int64_t dropped;        /* events lost to a failed chunk allocation */
  int tid;                /* rank, or ISSUER_TID_BASE + issuer number */
  bool dead;              /* its thread exited: the stop frees it */
} node;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static node *nodes;       /* under lock */
static int issuers;       /* under lock */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static _Thread_local node *tls_node;
static _Thread_local char tls_args[SCHED_TRACE_ARGS];
static _Atomic uint64_t next_flow = 1;

/* the session (under lock) */
static FILE *out;
static char *out_path;
/* a part of a multi-process trace (sched_trace_start_part): written to
 * memory, its events on process `part_proc`'s tracks, ranks numbered from
 * part_base; part_proc < 0: a whole trace to out_path */
static int part_proc = -1, part_base;
static char *part_mem;
static size_t part_len;
static int64_t part_dropped;
/* an in-process session (sched_trace_start_visit): no file, out stays
 * NULL, the stop hands the events to a visitor */
static bool visiting;
static int64_t t_start;
static int session_ranks;

/* ---- the clock
 * Events are stamped in ticks of one clock for every thread. Where the
 * kernel itself keeps CLOCK_MONOTONIC with the TSC (its clocksource is
 * "tsc": invariant and synchronised across CPUs, else the kernel would
 * have switched away from it), a tick is a TSC count: rdtsc costs ~8 ns
 * where clock_gettime costs ~35 on this VM, and every record pays two on
 * the issuing thread and two on its rank. Elsewhere a tick is a
 * CLOCK_MONOTONIC ns. Ticks become CLOCK_MONOTONIC ns when the file is
 * written, on the line through two (ticks, ns) pairs: the first session's
 * start and this session's end (the longer the baseline, the smaller the
 * error of the two clock reads). */
enum { CLOCK_UNKNOWN, CLOCK_TSC, CLOCK_MONO };
/* relaxed: every thread that finds it unknown computes the same value */
static _Atomic int clock_kind;
static int64_t calib_ticks, calib_ns; /* the first session's start, under lock */
static double ns_per_tick = 1;        /* this session's, set by the stop */

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int pick_clock(void) {
  int k = CLOCK_MONO;
#if defined(__x86_64__) || defined(__i386__)
  char src[32] = "";
  FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f) {
    if (fgets(src, sizeof src, f) && !strncmp(src, "tsc", 3)) k = CLOCK_TSC;
    fclose(f);
  }
#endif
  atomic_store_explicit(&clock_kind, k, memory_order_relaxed);
  return k;
}

int64_t sched_trace_now(void) {
  int k = atomic_load_explicit(&clock_kind, memory_order_relaxed);
  if (__builtin_expect(k == CLOCK_UNKNOWN, 0)) k = pick_clock();
#if defined(__x86_64__) || defined(__i386__)
  if (k == CLOCK_TSC) return (int64_t)__builtin_ia32_rdtsc();
#endif
  return mono_ns();
}

/* this session's ticks per ns from the calibration pair to now (under lock) */
static void calibrate_end(void) {
  int64_t ticks = sched_trace_now(), ns = mono_ns();
  ns_per_tick = ticks > calib_ticks && ns > calib_ns
      ? (double)(ns - calib_ns) / (double)(ticks - calib_ticks) : 1;
}

static void vformat(char *buf, const char *fmt, va_list ap) {
  int n = vsnprintf(buf, SCHED_TRACE_ARGS, fmt, ap);
  if (n < 0 || n >= SCHED_TRACE_ARGS) snprintf(buf, SCHED_TRACE_ARGS, "\"truncated\":true");
}

void sched_trace_args(sched_trace_event *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vformat(e->args, fmt, ap);
  va_end(ap);
}

uint64_t sched_trace_flow_ids(int n) {
  /* relaxed: ids need only be distinct */
  return atomic_fetch_add_explicit(&next_flow, (uint64_t)n, memory_order_relaxed);
}

/* ---- thread nodes */
static void free_chunks(chunk *c) {
  while (c) {
    chunk *next = c->next;
    free(c);
    c = next;
  }
}

/* at thread exit: a node with events waits for the stop, else it goes */
static void on_thread_exit(void *p) {
  node *n = p;
  pthread_mutex_lock(&lock);
  if (n->head) {
    n->dead = true;
  } else {
    for (node **pp = &nodes; *pp; pp = &(*pp)->next)
      if (*pp == n) {
        *pp = n->next;
        break;
      }
    free(n);
  }
  pthread_mutex_unlock(&lock);
  tls_node = NULL;
}

static void make_key(void) { pthread_key_create(&exit_key, on_thread_exit); }

static node *node_register(void) {
  pthread_once(&exit_once, make_key);
  node *n = calloc(1, sizeof *n);
  if (!n) return NULL;
  pthread_mutex_lock(&lock);
  n->tid = sched_current_pool() ? sched_current_rank() : ISSUER_TID_BASE + issuers++;
  n->next = nodes;
  nodes = n;
  pthread_mutex_unlock(&lock);
  pthread_setspecific(exit_key, n);
  tls_node = n;
  return n;
}

static void append(node *n, const sched_trace_event *e) {
  if (!n->tail || n->tail->n == CHUNK_EVENTS) {
    chunk *c = malloc(sizeof *c);
    if (!c) {
      n->dropped++;
      return;
    }
    c->next = NULL;
    c->n = 0;
    if (n->tail) n->tail->next = c;
    else n->head = c;
    n->tail = c;
  }
  n->tail->ev[n->tail->n++] = *e;
}

void sched_trace_emit(const struct sched_pool *p, const sched_trace_event *e) {
  node *n = tls_node ? tls_node : node_register();
  if (!n) return;
  /* seq_cst: busy before the look at the switch; pairs with the stop's
   * seq_cst store of the switch and load of busy (T2) */
  atomic_store_explicit(&n->busy, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&sched_trace_pool, memory_order_seq_cst) == p)
    append(n, e);
  /* release: the appended event before the stop's acquire load of busy */
  atomic_store_explicit(&n->busy, 0, memory_order_release);
}

int64_t sched_trace_thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sched_trace_slice(const struct sched_pool *p, const char *name,
                       const char *cat, int64_t t0, int64_t cpu0,
                       const char *args) {
  sched_trace_event e = {.ts = t0, .dur = sched_trace_now() - t0,
                         .name = name, .cat = cat, .ph = 'X'};
  sched_trace_set_cpu(&e, cpu0);
  snprintf(e.args, sizeof e.args, "%s", args ? args : "");
  sched_trace_emit(p, &e);
}

/* ---- a record's pending args */
void sched_trace_record_enter(void) {
  sched_trace_tls_record = true;
  tls_args[0] = '\0';
}

void sched_trace_record_args(const char *fmt, ...) {
  if (!sched_trace_tls_record) return;
  va_list ap;
  va_start(ap, fmt);
  vformat(tls_args, fmt, ap);
  va_end(ap);
}

void sched_trace_record_leave(char *buf) {
  sched_trace_tls_record = false;
  memcpy(buf, tls_args, SCHED_TRACE_ARGS);
}

/* ---- start and stop */
static dt_status start(struct sched_pool *p, int nranks, const char *path,
                       const char *fn, int proc, int base, bool visit);

dt_status sched_trace_start(struct sched_pool *p, int nranks, const char *path,
                            const char *fn) {
  return start(p, nranks, path, fn, -1, 0, false);
}

dt_status sched_trace_start_part(struct sched_pool *p, int nranks, int rank_base,
                                 int proc, const char *path, const char *fn) {
  return start(p, nranks, path, fn, proc, rank_base, false);
}

dt_status sched_trace_start_visit(struct sched_pool *p, int nranks, const char *fn) {
  return start(p, nranks, "(in process)", fn, -1, 0, true);
}

static dt_status start(struct sched_pool *p, int nranks, const char *path,
                       const char *fn, int proc, int base, bool visit) {
  pthread_mutex_lock(&lock);
  dt_status st = DT_OK;
  if (out || visiting) {
    st = core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: already tracing a "
                        "runtime to \"%s\" (one runtime at a time: call "
                        "dt_trace_end first)", fn, out_path);
  } else if (!(out_path = strdup(path))) {
    st = core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  } else if (!visit && !(out = proc >= 0 ? open_memstream(&part_mem, &part_len)
                                          : fopen(path, "w"))) {
    st = core_error_set(DT_ERR_IO, "%s: cannot open \"%s\" for writing: %s",
                        fn, path, strerror(errno));
    free(out_path);
    out_path = NULL;
  } else {
    t_start = sched_trace_now();
    if (!calib_ns) { /* the first session: the calibration's first pair */
      calib_ticks = t_start;
      calib_ns = mono_ns();
    }
    session_ranks = nranks;
    visiting = visit;
    /* relaxed: published to the emitters by the switch's store below */
    atomic_store_explicit(&sched_trace_fine_on, visit, memory_order_relaxed);
    part_proc = proc;
    part_base = base;
    /* seq_cst: after the session's state (and the stop's take of every
     * node's chunks, T3); pairs with the emitters' seq_cst load */
    atomic_store_explicit(&sched_trace_pool, p, memory_order_seq_cst);
  }
  pthread_mutex_unlock(&lock);
  return st;
}

bool sched_trace_in_process(void) {
  pthread_mutex_lock(&lock);
  bool v = visiting;
  pthread_mutex_unlock(&lock);
  return v;
}

const char *sched_trace_path(void) {
  pthread_mutex_lock(&lock);
  const char *p = out_path ? out_path : "";
  pthread_mutex_unlock(&lock);
  return p;
}

bool sched_trace_is_traced(const struct sched_pool *p) {
  /* acquire: pairs with the start's store (a caller then reads nothing
   * else of the session; the order is only for good measure) */
  return p && atomic_load_explicit(&sched_trace_pool, memory_order_acquire) == p;
}

/* ticks to µs on this session's line */
static double us(int64_t ticks) { return (double)ticks * ns_per_tick / 1000.0; }

static void write_event(FILE *f, int pid, int tid, const sched_trace_event *e) {
  if (tid < ISSUER_TID_BASE) tid += part_base; /* a rank: its global number */
  fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"%c\",\"pid\":%d,"
          "\"tid\":%d,\"ts\":%.3f", e->name, e->cat, e->ph, pid, tid,
          us(e->ts - t_start));
  if (e->ph == 'X') fprintf(f, ",\"dur\":%.3f", us(e->dur));
  if (e->ph == 'i') fprintf(f, ",\"s\":\"t\"");
  if (e->ph == 's' || e->ph == 'f') fprintf(f, ",\"id\":%llu", (unsigned long long)e->id);
  if (e->ph == 'f') fprintf(f, ",\"bp\":\"e\"");
  if (e->pub_kind)
    fprintf(f, ",\"args\":{\"rank\":%d,\"kind\":\"%s\"}}",
            e->pub_rank >= 0 ? e->pub_rank + part_base : e->pub_rank, e->pub_kind);
  else
    fprintf(f, ",\"args\":{%s}}", e->args);
  if (e->ph != 'X' || !e->id || !e->flows) return;
  /* a publish's flow starts mid-slice; a record's end 1 ns in, both
   * inside their slice (bound to it) */
  sched_trace_event s = {.name = "publish", .cat = "flow", .args = ""};
  s.ph = e->flows > 0 ? 's' : 'f';
  s.ts = e->flows > 0 ? e->ts + e->dur / 2 : e->ts + (e->dur > 2 ? 1 : 0);
  for (int32_t i = 0; i < (e->flows > 0 ? e->flows : 1); i++) {
    s.id = e->id + (uint64_t)i;
    write_event(f, pid, tid, &s);
  }
}

static void write_name(FILE *f, int pid, int tid, const char *what, int k) {
  fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
          "\"args\":{\"name\":\"%s %d\"}}", pid, tid, what, k);
  fprintf(f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,"
          "\"tid\":%d,\"args\":{\"sort_index\":%d}}", pid, tid, tid);
}

/* hands every node's events to fn (e NULL first: the node's events
 * begin), frees them and the nodes of exited threads; returns the events
 * dropped (under lock, switch off, no thread busy) */
typedef void (*node_fn)(void *ctx, int tid, const sched_trace_event *e);
static int64_t drain_nodes(node_fn fn, void *ctx) {
  int64_t dropped = 0;
  for (node **pp = &nodes; *pp;) {
    node *n = *pp;
    if (n->head) fn(ctx, n->tid, NULL);
    for (chunk *c = n->head; c; c = c->next)
      for (int i = 0; i < c->n; i++) fn(ctx, n->tid, &c->ev[i]);
    free_chunks(n->head);
    n->head = n->tail = NULL;
    dropped += n->dropped;
    n->dropped = 0;
    if (n->dead) {
      *pp = n->next;
      free(n);
    } else {
      pp = &n->next;
    }
  }
  return dropped;
}

typedef struct file_ctx { FILE *f; int pid; } file_ctx;

static void file_event(void *ctx, int tid, const sched_trace_event *e) {
  const file_ctx *w = ctx;
  if (e) write_event(w->f, w->pid, tid, e);
  else if (tid >= ISSUER_TID_BASE)
    write_name(w->f, w->pid, tid, "issuer", tid - ISSUER_TID_BASE);
}

/* writes and frees every node's events (under lock, switch off, no
 * thread busy) */
static void write_all(FILE *f) {
  int pid = part_proc >= 0 ? part_proc : (int)getpid();
  if (part_proc < 0)
    fprintf(f, "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\","
            "\"pid\":%d,\"args\":{\"name\":\"dtorch runtime (%d ranks)\"}}",
            pid, session_ranks);
  else /* a part: every event after a comma (the merge strips the first) */
    fprintf(f, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
            "\"args\":{\"name\":\"dtorch process %d (ranks %d..%d)\"}}", pid,
            part_proc, part_base, part_base + session_ranks - 1);
  for (int r = 0; r < session_ranks; r++)
    write_name(f, pid, part_base + r, "rank", part_base + r);
  int64_t dropped = drain_nodes(file_event, &(file_ctx){f, pid});
  part_dropped = dropped;
  if (part_proc < 0)
    fprintf(f, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"dropped_events\""
            ":%lld}}\n", (long long)dropped);
}

static void wait_not_busy(void) {
  for (node *n = nodes; n; n = n->next)
    /* acquire: pairs with the emitter's release store of busy = 0 (its
     * events are complete); seq_cst for the Dekker pair of T2 */
    while (atomic_load_explicit(&n->busy, memory_order_seq_cst))
      sched_yield();
}

static dt_status stop(struct sched_pool *p, const char *fn, char **mem,
                      size_t *len, int64_t *dropped);

/* an in-process session's events, their ticks turned into ns on the
 * session's line (as the file's are) */
typedef struct visit_ctx { sched_trace_visit_fn fn; void *ctx; } visit_ctx;

static void visit_event(void *ctx, int tid, const sched_trace_event *e) {
  const visit_ctx *v = ctx;
  if (!e || !v->fn) return;
  sched_trace_event c = *e;
  c.ts = calib_ns + (int64_t)((double)(e->ts - calib_ticks) * ns_per_tick);
  c.dur = (int64_t)((double)e->dur * ns_per_tick);
  v->fn(v->ctx, tid, &c);
}

/* the switch off, every emitter out (T2): under lock, p traced */
static void switch_off(void) {
  /* seq_cst: the switch off before the loads of busy (T2) */
  atomic_store_explicit(&sched_trace_pool, NULL, memory_order_seq_cst);
  wait_not_busy();
  calibrate_end();
}

dt_status sched_trace_stop_visit(struct sched_pool *p, const char *fn,
                                 sched_trace_visit_fn visit, void *ctx,
                                 int64_t *dropped) {
  *dropped = 0;
  pthread_mutex_lock(&lock);
  if (!visiting || atomic_load_explicit(&sched_trace_pool, memory_order_relaxed) != p) {
    pthread_mutex_unlock(&lock);
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: this runtime is not "
                          "being traced in process (call "
                          "sched_trace_start_visit first)", fn);
  }
  switch_off();
  *dropped = drain_nodes(visit_event, &(visit_ctx){visit, ctx});
  visiting = false;
  atomic_store_explicit(&sched_trace_fine_on, false, memory_order_relaxed);
  free(out_path);
  out_path = NULL;
  pthread_mutex_unlock(&lock);
  return DT_OK;
}

dt_status sched_trace_stop(struct sched_pool *p, const char *fn) {
  char *mem = NULL;
  size_t len;
  int64_t dropped;
  dt_status st = stop(p, fn, &mem, &len, &dropped);
  free(mem); /* a part nobody asked for */
  return st;
}

dt_status sched_trace_stop_part(struct sched_pool *p, const char *fn,
                                char **mem, size_t *len, int64_t *dropped) {
  return stop(p, fn, mem, len, dropped);
}

static dt_status stop(struct sched_pool *p, const char *fn, char **mem,
                      size_t *len, int64_t *dropped) {
  *mem = NULL;
  *len = 0;
  *dropped = 0;
  pthread_mutex_lock(&lock);
  if (!out || atomic_load_explicit(&sched_trace_pool, memory_order_relaxed) != p) {
    pthread_mutex_unlock(&lock);
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: this runtime is not "
                          "being traced (call dt_trace_begin first)", fn);
  }
  switch_off();
  write_all(out);
  int werr = ferror(out) ? errno : 0;
  if (fclose(out) != 0 && !werr) werr = errno ? errno : EIO;
  dt_status st = DT_OK;
  if (werr)
    st = core_error_set(DT_ERR_IO, "%s: cannot write the trace to \"%s\": %s",
                        fn, out_path, strerror(werr));
  out = NULL;
  free(out_path);
  out_path = NULL;
  if (part_proc >= 0) { /* the memory stream's buffer is the caller's */
    *mem = part_mem;
    *len = part_len;
    *dropped = part_dropped;
    part_mem = NULL;
  }
  part_proc = -1;
  part_base = 0;
  pthread_mutex_unlock(&lock);
  return st;
}
