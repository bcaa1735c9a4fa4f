/* A step's time by category on each rank (bench/bench_breakdown.h).
 *
 * The trace's events arrive per thread (runtime_trace_end_visit); each
 * rank's are sorted by start (longer first at equal starts, so a parent
 * comes before what nests in it) and swept once per step with a stack:
 * every slice, clipped to the step's window, takes its length as self
 * time and gives it up to its parent, so the self times of a track add up
 * to the length of the union of its slices. The union is also measured
 * directly (a merge of the intervals); the difference of the two is
 * printed as unaccounted_ms: 0 when the slices nest as they should. */
#include "bench/bench_breakdown.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/call.h"
#include "runtime/exec.h"
#include "runtime/trace_session.h"
#include "sched/trace_recorder.h"

enum { MAX_CATS = 96, CACHE_SLOTS = 1024, CAT_LEN = 48 };

/* ---- op families, from the op table: the backward formula names an
 * op's family (ops_pointwise_grad, ops_view_grad, ...); an op without
 * one (ops_grad_none) is named by its sharding rule; a view (no kernel:
 * ops_alias_cpu) is a view whatever its row says */
#define CORE_OP(ID, name, schema, infer, cpu, rule, grad, cuda, pub, flags) \
  {#cpu, #rule, #grad},
static const struct op_row { const char *cpu, *rule, *grad; } op_rows[] = {
#include "core/op_list.h"
};
#undef CORE_OP
_Static_assert(sizeof op_rows / sizeof *op_rows == CORE_OP_COUNT,
               "one row per op of the op table");

/* families that share a name under two keys */
static const char *const family_alias[][2] = {
  {"pointwise", "elementwise"}, {"binary", "elementwise"},
  {"unary", "elementwise"}, {"gelu_backward", "elementwise"},
  {"view", "copies"}, {"join", "copies"}, {"slice_scatter", "copies"},
  {"reduce", "reductions"}, {"norm", "softmax_norms"}, {"linalg", "matmul"},
  {"index_select_backward", "nn"}, {"cross_entropy_backward", "nn"},
  {"factory", "creation"}, {"optim", "optimizer"}};

/* "ops_<key>_<suffix>" -> key, into buf */
static const char *strip(const char *fn, const char *suffix, char *buf, size_t n) {
  const char *k = strncmp(fn, "ops_", 4) ? fn : fn + 4;
  size_t len = strlen(k), sl = strlen(suffix);
  if (len > sl && !strcmp(k + len - sl, suffix)) len -= sl;
  snprintf(buf, n, "%.*s", (int)len, k);
  return buf;
}

static void family_of(int op, char *out, size_t n) {
  const struct op_row *r = &op_rows[op];
  char key[CAT_LEN];
  if (!strcmp(r->cpu, "ops_alias_cpu")) {
    snprintf(out, n, "views");
    return;
  }
  if (strcmp(r->grad, "ops_grad_none")) strip(r->grad, "_grad", key, sizeof key);
  else strip(r->rule, "_rule", key, sizeof key);
  for (size_t i = 0; i < sizeof family_alias / sizeof *family_alias; i++)
    if (!strcmp(key, family_alias[i][0])) {
      snprintf(out, n, "%s", family_alias[i][1]);
      return;
    }
  snprintf(out, n, "%s", key);
}

/* the op named `name`, or -1 */
static int op_named(const char *name) {
  for (int i = 0; i < CORE_OP_COUNT; i++)
    if (!strcmp(core_op_name((core_op_id)i), name)) return i;
  return -1;
}

/* ---- the phase */
typedef struct bd_ev {
  int64_t s, e;           /* CLOCK_MONOTONIC ns */
  int64_t cpu;            /* the thread's CPU ns in it; -1: not sampled */
  const char *name, *cat;
  int64_t bytes;          /* a collective's */
  int32_t arg;            /* a collective's group size; a steal's victim */
} bd_ev;

typedef struct track { bd_ev *v; int n, cap; int *top, ntop; } track;

typedef struct cache_slot { const char *name, *cat, *parent; int cat_idx, op; } cache_slot;

typedef struct coll_acc { const char *kind; int group; int64_t events, bytes; } coll_acc;

struct bd_phase {
  dt_runtime *rt;
  int nranks, cap_steps, nsteps;
  pid_t *tids;
  int64_t *t0, *tiss, *t1;         /* per step, CLOCK_MONOTONIC ns */
  int64_t *run0, *wait0;           /* per rank, at the current step's begin */
  double *cpu_ns, *runq_ns;        /* per rank, summed over the steps */
  int64_t my_run0, my_wait0;
  double my_cpu_ns;
  bool have_sched;
  track *tracks, issuer;
  int64_t dropped;
  int64_t read_cpu;                /* CPU ns one thread-CPU read costs */
  bool oom;
  int ncats;
  char cats[MAX_CATS][CAT_LEN];
  cache_slot cache[CACHE_SLOTS];
  double *self;                    /* [rank][MAX_CATS] ns over the steps */
  double *self_cpu;                /* the same, CPU ns */
  int64_t count[MAX_CATS];         /* slices over the ranks and steps */
  double op_ns[CORE_OP_COUNT], op_cpu[CORE_OP_COUNT]; /* compute.* by op */
  int64_t op_count[CORE_OP_COUNT];
  double *other, *unacc;           /* per rank, ns */
  double publish_ns;
  int64_t publishes;
  coll_acc colls[BD_MAX_COLLS];
  int ncolls;
};

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* the kernel's run and run-queue times of thread tid (0: this one) */
static bool schedstat(pid_t tid, int64_t *run, int64_t *wait) {
  char path[64];
  if (tid) snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)tid);
  else snprintf(path, sizeof path, "/proc/thread-self/schedstat");
  FILE *f = fopen(path, "r");
  long long r = 0, w = 0;
  bool ok = f && fscanf(f, "%lld %lld", &r, &w) == 2;
  if (f) fclose(f);
  *run = r;
  *wait = w;
  return ok;
}

static void note_tid(void *arg, dt_runtime *rt, int rank) {
  (void)rt;
  ((pid_t *)arg)[rank] = (pid_t)syscall(SYS_gettid);
}

bool bd_rank_tids(dt_runtime *rt, pid_t *tids) {
  if (runtime_publish_named_call(rt, -1, "bench_tid", note_tid, NULL, tids) == DT_OK &&
      dt_runtime_synchronize(rt) == DT_OK)
    return true;
  fprintf(stderr, "bench demo: the rank threads' ids: %s\n", dt_last_error());
  return false;
}

int64_t bd_threads_cpu(const pid_t *tids, int n, bool self_last) {
  int64_t sum = 0, run, wait;
  for (int i = 0; i <= n; i++) {
    int k = self_last ? i : i - 1; /* k == n or -1: this thread */
    if (!schedstat(k >= 0 && k < n ? tids[k] : 0, &run, &wait)) return -1;
    sum += run;
  }
  return sum;
}

static bool alloc_all(bd_phase *p, int n, int steps) {
  p->tids = calloc((size_t)n, sizeof *p->tids);
  p->t0 = calloc((size_t)steps, sizeof *p->t0);
  p->tiss = calloc((size_t)steps, sizeof *p->tiss);
  p->t1 = calloc((size_t)steps, sizeof *p->t1);
  p->run0 = calloc((size_t)n, sizeof *p->run0);
  p->wait0 = calloc((size_t)n, sizeof *p->wait0);
  p->cpu_ns = calloc((size_t)n, sizeof *p->cpu_ns);
  p->runq_ns = calloc((size_t)n, sizeof *p->runq_ns);
  p->tracks = calloc((size_t)n, sizeof *p->tracks);
  p->self = calloc((size_t)n * MAX_CATS, sizeof *p->self);
  p->self_cpu = calloc((size_t)n * MAX_CATS, sizeof *p->self_cpu);
  p->other = calloc((size_t)n, sizeof *p->other);
  p->unacc = calloc((size_t)n, sizeof *p->unacc);
  return p->tids && p->t0 && p->tiss && p->t1 && p->run0 && p->wait0 &&
         p->cpu_ns && p->runq_ns && p->tracks && p->self && p->self_cpu &&
         p->other && p->unacc;
}

bd_phase *bd_phase_begin(dt_runtime *rt, int steps) {
  bd_phase *p = calloc(1, sizeof *p);
  int n = dt_runtime_num_ranks(rt);
  if (!p || n < 1 || steps < 1 || !alloc_all(p, n, steps)) {
    fprintf(stderr, "bench demo --breakdown: out of host memory\n");
    bd_phase_free(p);
    return NULL;
  }
  p->rt = rt;
  p->nranks = n;
  p->cap_steps = steps;
  /* each rank thread's kernel id, for its schedstat */
  if (!bd_rank_tids(rt, p->tids)) {
    bd_phase_free(p);
    return NULL;
  }
  if (runtime_trace_begin_visit(rt, "bench demo --breakdown") != DT_OK) {
    fprintf(stderr, "bench demo --breakdown: %s\n", dt_last_error());
    bd_phase_free(p);
    return NULL;
  }
  int64_t r, w;
  p->have_sched = schedstat(p->tids[0], &r, &w) && r > 0;
  /* a slice's CPU spans one read of the thread's clock (~0.3 µs, more
   * than a small slice itself): the least a read costs, taken off each */
  p->read_cpu = INT64_MAX;
  for (int i = 0; i < 64; i++) {
    int64_t c0 = sched_trace_thread_cpu(), c1 = sched_trace_thread_cpu();
    if (c1 - c0 < p->read_cpu) p->read_cpu = c1 - c0;
  }
  return p;
}

void bd_phase_step_begin(bd_phase *p) {
  if (p->nsteps == p->cap_steps) return;
  for (int k = 0; p->have_sched && k < p->nranks; k++)
    schedstat(p->tids[k], &p->run0[k], &p->wait0[k]);
  if (p->have_sched) schedstat(0, &p->my_run0, &p->my_wait0);
  p->t0[p->nsteps] = mono_ns();
}

void bd_phase_step_issued(bd_phase *p) {
  if (p->nsteps < p->cap_steps) p->tiss[p->nsteps] = mono_ns();
}

void bd_phase_step_end(bd_phase *p) {
  if (p->nsteps == p->cap_steps) return;
  p->t1[p->nsteps] = mono_ns();
  for (int k = 0; p->have_sched && k < p->nranks; k++) {
    int64_t r, w;
    schedstat(p->tids[k], &r, &w);
    p->cpu_ns[k] += (double)(r - p->run0[k]);
    p->runq_ns[k] += (double)(w - p->wait0[k]);
  }
  if (p->have_sched) {
    int64_t r, w;
    schedstat(0, &r, &w);
    p->my_cpu_ns += (double)(r - p->my_run0);
  }
  p->nsteps++;
}

/* ---- collecting the events */
static void push(bd_phase *p, track *t, const bd_ev *v) {
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 1024;
    bd_ev *nv = realloc(t->v, (size_t)cap * sizeof *nv);
    if (!nv) {
      p->oom = true;
      return;
    }
    t->v = nv;
    t->cap = cap;
  }
  t->v[t->n++] = *v;
}

static void on_event(void *ctx, int tid, const sched_trace_event *e) {
  bd_phase *p = ctx;
  if (e->ph != 'X') return;
  track *t = tid >= SCHED_TRACE_ISSUER_TID ? &p->issuer
             : tid >= 0 && tid < p->nranks ? &p->tracks[tid] : NULL;
  if (!t) return;
  bd_ev v = {.s = e->ts, .e = e->ts + e->dur, .cpu = -1, .name = e->name,
             .cat = e->cat, .arg = -1};
  if (e->has_cpu) { /* less the clock read it spans, within the wall time */
    int64_t c = e->cpu - p->read_cpu;
    v.cpu = c < 0 ? 0 : c > e->dur ? e->dur : c;
  }
  long long b;
  int g;
  if (!strcmp(e->cat, "collective") &&
      sscanf(e->args, "\"group_size\":%d,\"bytes\":%lld", &g, &b) == 2) {
    v.arg = g;
    v.bytes = b;
  } else if (!strcmp(e->cat, "sched") && !strcmp(e->name, "steal") &&
             sscanf(e->args, "\"victim\":%d", &g) == 1) {
    v.arg = g;
  }
  push(p, t, &v);
}

static int cmp_ev(const void *a, const void *b) {
  const bd_ev *x = a, *y = b;
  if (x->s != y->s) return x->s < y->s ? -1 : 1;
  return (x->e < y->e) - (x->e > y->e); /* the longer (the parent) first */
}

/* each track sorted, and its top-level slices listed (a steal's victim's
 * record is looked up there) */
static bool index_tracks(bd_phase *p) {
  for (int k = 0; k < p->nranks; k++) {
    track *t = &p->tracks[k];
    qsort(t->v, (size_t)t->n, sizeof *t->v, cmp_ev);
    t->top = malloc((size_t)(t->n ? t->n : 1) * sizeof *t->top);
    if (!t->top) return false;
    int64_t end = INT64_MIN;
    for (int i = 0; i < t->n; i++)
      if (t->v[i].s >= end) {
        t->top[t->ntop++] = i;
        end = t->v[i].e;
      } else if (t->v[i].e > end) {
        end = t->v[i].e; /* overlaps without nesting: keep the union's end */
      }
  }
  return true;
}

/* ---- categories */
static int cat_index(bd_phase *p, const char *name) {
  for (int i = 0; i < p->ncats; i++)
    if (!strcmp(p->cats[i], name)) return i;
  if (p->ncats == MAX_CATS) return MAX_CATS - 1; /* the last one collects */
  size_t l = strnlen(name, CAT_LEN - 1); /* a longer name is cut */
  memcpy(p->cats[p->ncats], name, l);
  p->cats[p->ncats][l] = '\0';
  return p->ncats++;
}

/* the category of a record or slice named name in cat (parent: the slice
 * it nests in, for a rendezvous) */
static void category_name(const char *name, const char *cat, const char *parent,
                          char *out, size_t n, int *op_out) {
  int op;
  *op_out = -1;
  if (!strcmp(cat, "collective")) snprintf(out, n, "collective.%s", name);
  else if (!strcmp(cat, "wait")) snprintf(out, n, "rendezvous.%s", parent ? parent : "other");
  else if (!strcmp(cat, "memory"))
    snprintf(out, n, "%s", strcmp(name, "device_alloc") ? "memory.free" : "memory.alloc");
  else if (!strcmp(cat, "sched") && !strcmp(name, "park")) snprintf(out, n, "idle.parked");
  else if (!strcmp(cat, "sched") && !strcmp(name, "spin")) snprintf(out, n, "idle.spin");
  else if (!strcmp(cat, "sched")) snprintf(out, n, "sched.%s", name);
  else if (!strcmp(cat, "free") || !strcmp(name, "free_dtensor"))
    snprintf(out, n, "memory.free");
  else if (!strcmp(cat, "barrier")) snprintf(out, n, "sync");
  else if (!strcmp(cat, "host") || !strcmp(name, "to_host")) snprintf(out, n, "host");
  else if (!strncmp(name, "redistribute", 12)) snprintf(out, n, "redistribute");
  else if ((op = op_named(name)) >= 0) {
    char fam[CAT_LEN];
    *op_out = op;
    family_of(op, fam, sizeof fam);
    snprintf(out, n, "compute.%s", fam);
  } else {
    snprintf(out, n, "record.%s", name);
  }
}

/* cached by the (static) strings' addresses; *op the op (or -1) */
static int classify_named(bd_phase *p, const char *name, const char *cat,
                          const char *parent, int *op) {
  if (strcmp(cat, "wait")) parent = NULL;
  uintptr_t h = ((uintptr_t)name * 31 + (uintptr_t)cat) * 31 + (uintptr_t)parent;
  char buf[CAT_LEN + 16];
  for (unsigned i = 0; i < CACHE_SLOTS; i++) {
    cache_slot *c = &p->cache[(h + i) % CACHE_SLOTS];
    if (c->name == name && c->cat == cat && c->parent == parent) {
      *op = c->op;
      return c->cat_idx;
    }
    if (!c->name) {
      category_name(name, cat, parent, buf, sizeof buf, op);
      *c = (cache_slot){name, cat, parent, cat_index(p, buf), *op};
      return c->cat_idx;
    }
  }
  category_name(name, cat, parent, buf, sizeof buf, op);
  return cat_index(p, buf);
}

/* a stolen chunk: the family of the victim's op running at time s */
static int classify_steal(bd_phase *p, const bd_ev *v, int *op) {
  const track *t = v->arg >= 0 && v->arg < p->nranks ? &p->tracks[v->arg] : NULL;
  int lo = 0, hi = t ? t->ntop : 0;
  while (lo < hi) { /* the last top-level slice starting at or before s */
    int mid = (lo + hi) / 2;
    if (t->v[t->top[mid]].s <= v->s) lo = mid + 1;
    else hi = mid;
  }
  const bd_ev *r = lo > 0 ? &t->v[t->top[lo - 1]] : NULL;
  if (r && r->e > v->s) {
    int c = classify_named(p, r->name, r->cat, NULL, op);
    if (*op >= 0) return c;
  }
  *op = -1;
  return cat_index(p, "steal.other");
}

static int classify(bd_phase *p, const bd_ev *v, const bd_ev *parent, int *op) {
  if (!strcmp(v->cat, "sched") && !strcmp(v->name, "steal"))
    return classify_steal(p, v, op);
  return classify_named(p, v->name, v->cat, parent ? parent->name : NULL, op);
}

/* ---- one rank's step */
typedef struct open_ev {
  int64_t s, e;
  double self, self_cpu;   /* self_cpu < 0: not sampled */
  int cat, op;
  const bd_ev *v;
} open_ev;

/* v's CPU in its part [s, e) (in proportion), -1 if not sampled */
static double clipped_cpu(const bd_ev *v, int64_t s, int64_t e) {
  if (v->cpu < 0) return -1;
  return v->e > v->s ? (double)v->cpu * (double)(e - s) / (double)(v->e - v->s) : 0;
}

static void count_coll(bd_phase *p, const bd_ev *v) {
  if (v->arg < 1) return;
  int i = 0;
  while (i < p->ncolls && (strcmp(p->colls[i].kind, v->name) || p->colls[i].group != v->arg))
    i++;
  if (i == p->ncolls) {
    if (i == BD_MAX_COLLS) return;
    p->colls[p->ncolls++] = (coll_acc){v->name, v->arg, 0, 0};
  }
  p->colls[i].events++;
  p->colls[i].bytes += v->bytes;
}

/* the union of the track's slices clipped to [t0, t1) */
static int64_t union_ns(const track *t, int64_t t0, int64_t t1) {
  int64_t total = 0, cs = 0, ce = INT64_MIN;
  for (int i = 0; i < t->n; i++) {
    int64_t s = t->v[i].s > t0 ? t->v[i].s : t0, e = t->v[i].e < t1 ? t->v[i].e : t1;
    if (e <= s || !strcmp(t->v[i].cat, "publish")) continue;
    if (s > ce) {
      if (ce > cs) total += ce - cs;
      cs = s;
      ce = e;
    } else if (e > ce) {
      ce = e;
    }
  }
  if (ce > cs) total += ce - cs;
  return total;
}

static bool sweep_rank(bd_phase *p, int k, int64_t t0, int64_t t1, open_ev *st) {
  const track *t = &p->tracks[k];
  double *self = p->self + (size_t)k * MAX_CATS, sum = 0;
  double *self_cpu = p->self_cpu + (size_t)k * MAX_CATS;
  int sp = 0;
  for (int i = 0; i <= t->n; i++) {
    const bd_ev *v = i < t->n ? &t->v[i] : NULL;
    int64_t s = v ? (v->s > t0 ? v->s : t0) : INT64_MAX;
    int64_t e = v ? (v->e < t1 ? v->e : t1) : INT64_MAX;
    if (v && e <= s) continue;
    while (sp && st[sp - 1].e <= s) { /* closed before this one starts */
      sp--;
      self[st[sp].cat] += st[sp].self;
      if (st[sp].self_cpu > 0) self_cpu[st[sp].cat] += st[sp].self_cpu;
      p->count[st[sp].cat]++;
      if (st[sp].op >= 0) {
        p->op_ns[st[sp].op] += st[sp].self;
        p->op_cpu[st[sp].op] += st[sp].self_cpu > 0 ? st[sp].self_cpu : 0;
        p->op_count[st[sp].op]++;
      }
      sum += st[sp].self;
    }
    if (!v) break;
    if (!strcmp(v->cat, "publish")) continue; /* an issuer's, not a rank's */
    open_ev *parent = sp ? &st[sp - 1] : NULL;
    if (parent && e > parent->e) e = parent->e; /* nests: no longer than it */
    double cpu = clipped_cpu(v, s, e);
    if (parent) parent->self -= (double)(e - s);
    if (parent && parent->self_cpu >= 0 && cpu >= 0) parent->self_cpu -= cpu;
    if (!strcmp(v->cat, "collective") && v->s >= t0) count_coll(p, v);
    int op, c = classify(p, v, parent ? parent->v : NULL, &op);
    st[sp++] = (open_ev){s, e, (double)(e - s), cpu, c, op, v};
  }
  double covered = (double)union_ns(t, t0, t1);
  p->other[k] += (double)(t1 - t0) - covered;
  p->unacc[k] += covered - sum;
  return true;
}

static void sweep_issuer(bd_phase *p, int64_t t0, int64_t t1) {
  for (int i = 0; i < p->issuer.n; i++) {
    const bd_ev *v = &p->issuer.v[i];
    if (strcmp(v->cat, "publish") || v->s < t0 || v->s >= t1) continue;
    int64_t e = v->e < t1 ? v->e : t1;
    p->publish_ns += (double)(e - v->s);
    p->publishes++;
  }
}

bool bd_phase_end(bd_phase *p) {
  dt_status st = runtime_trace_end_visit(p->rt, on_event, p, &p->dropped,
                                         "bench demo --breakdown");
  if (st != DT_OK || p->oom || !index_tracks(p)) {
    fprintf(stderr, "bench demo --breakdown: %s\n",
            st != DT_OK ? dt_last_error() : "out of host memory for the events");
    return false;
  }
  int depth = 1;
  for (int k = 0; k < p->nranks; k++)
    if (p->tracks[k].n > depth) depth = p->tracks[k].n;
  open_ev *stack = malloc((size_t)depth * sizeof *stack);
  if (!stack) {
    fprintf(stderr, "bench demo --breakdown: out of host memory\n");
    return false;
  }
  for (int s = 0; s < p->nsteps; s++) {
    for (int k = 0; k < p->nranks; k++) sweep_rank(p, k, p->t0[s], p->t1[s], stack);
    sweep_issuer(p, p->t0[s], p->t1[s]);
  }
  free(stack);
  return true;
}

void bd_phase_free(bd_phase *p) {
  if (!p) return;
  for (int k = 0; p->tracks && k < p->nranks; k++) {
    free(p->tracks[k].v);
    free(p->tracks[k].top);
  }
  free(p->issuer.v);
  free(p->tracks);
  free(p->tids);
  free(p->t0);
  free(p->tiss);
  free(p->t1);
  free(p->run0);
  free(p->wait0);
  free(p->cpu_ns);
  free(p->runq_ns);
  free(p->self);
  free(p->self_cpu);
  free(p->other);
  free(p->unacc);
  free(p);
}

/* ---- results */
int bd_phase_colls(const bd_phase *p, bd_coll *out, int max) {
  int n = 0, steps = p->nsteps ? p->nsteps : 1;
  for (int i = 0; i < p->ncolls && n < max; i++) {
    const coll_acc *c = &p->colls[i];
    bool gathered = !strcmp(c->kind, "all_gather");
    out[n++] = (bd_coll){
        .kind = c->kind, .group = c->group,
        .calls = (double)c->events / c->group / steps,
        .member_bytes = (gathered ? c->bytes / c->group : c->bytes) / steps,
        .nccl_bytes = c->bytes / c->group / steps};
  }
  return n;
}

static double mean_steps(const bd_phase *p, const int64_t *a, const int64_t *b) {
  double s = 0;
  for (int i = 0; i < p->nsteps; i++) s += (double)(b[i] - a[i]);
  return p->nsteps ? s / p->nsteps / 1e6 : 0;
}

/* a rank's ms per step of category c (c == ncats: other): wall (cpu
 * false) or CPU; a rank's other CPU is its kernel figure less its slices' */
static double rank_ms(const bd_phase *p, int k, int c, bool cpu) {
  double steps = p->nsteps ? p->nsteps : 1, ns;
  const double *row = (cpu ? p->self_cpu : p->self) + (size_t)k * MAX_CATS;
  if (c < p->ncats) {
    ns = row[c];
  } else if (!cpu) {
    ns = p->other[k];
  } else {
    ns = p->have_sched ? p->cpu_ns[k] : 0;
    for (int i = 0; i < p->ncats; i++) ns -= row[i];
  }
  return ns / steps / 1e6;
}

static const char *cat_name(const bd_phase *p, int c) {
  return c < p->ncats ? p->cats[c] : "other";
}

static void print_map(const bd_phase *p, int k, bool cpu) {
  printf("{");
  for (int c = 0; c <= p->ncats; c++)
    printf("%s\"%s\":%.4f", c ? "," : "", cat_name(p, c), rank_ms(p, k, c, cpu));
  printf("}");
}

static void print_rank(const bd_phase *p, int k, const char *model, const char *copy) {
  double steps = p->nsteps ? p->nsteps : 1;
  printf("{\"bench\":\"train_step_rank\",\"model\":\"%s\",\"copy\":\"%s\","
         "\"rank\":%d,\"wall_ms\":%.4f,", model, copy, k,
         mean_steps(p, p->t0, p->t1));
  if (p->have_sched)
    printf("\"cpu_ms\":%.4f,\"runq_ms\":%.4f,", p->cpu_ns[k] / steps / 1e6,
           p->runq_ns[k] / steps / 1e6);
  else
    printf("\"cpu_ms\":null,\"runq_ms\":null,");
  printf("\"ms\":");
  print_map(p, k, false);
  printf(",\"cpu\":");
  print_map(p, k, true);
  printf(",\"unaccounted_ms\":%.4f}\n", p->unacc[k] / steps / 1e6);
}

typedef struct stat4 { double min, mean, max, cpu_sum; } stat4;

static stat4 across(const bd_phase *p, int c) {
  stat4 s = {1e300, 0, -1e300, 0};
  for (int k = 0; k < p->nranks; k++) {
    double v = rank_ms(p, k, c, false);
    s.min = v < s.min ? v : s.min;
    s.max = v > s.max ? v : s.max;
    s.mean += v / p->nranks;
    s.cpu_sum += rank_ms(p, k, c, true);
  }
  return s;
}

/* the categories with the largest mean wall (cpu false) or CPU sum */
static void print_top(const bd_phase *p, const char *key, bool cpu) {
  enum { TOP = 6 };
  int idx[MAX_CATS + 1], n = p->ncats + 1;
  double v[MAX_CATS + 1];
  for (int c = 0; c < n; c++) {
    stat4 s = across(p, c);
    idx[c] = c;
    v[c] = cpu ? s.cpu_sum : s.mean;
  }
  for (int i = 0; i < n && i < TOP; i++) /* selection of the largest */
    for (int j = i + 1; j < n; j++)
      if (v[idx[j]] > v[idx[i]]) {
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
      }
  printf(",\"%s\":[", key);
  for (int i = 0; i < n && i < TOP; i++)
    printf("%s{\"name\":\"%s\",\"%s\":%.4f}", i ? "," : "", cat_name(p, idx[i]),
           cpu ? "cpu_ms" : "mean_ms", v[idx[i]]);
  printf("]");
}

/* the ops with the most CPU over the ranks (stolen chunks included) */
static void print_top_ops(const bd_phase *p) {
  enum { TOP = 10 };
  int idx[CORE_OP_COUNT];
  for (int i = 0; i < CORE_OP_COUNT; i++) idx[i] = i;
  for (int i = 0; i < TOP; i++)
    for (int j = i + 1; j < CORE_OP_COUNT; j++)
      if (p->op_cpu[idx[j]] > p->op_cpu[idx[i]]) {
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
      }
  double steps = p->nsteps ? p->nsteps : 1;
  printf(",\"top_ops\":[");
  for (int i = 0, n = 0; i < TOP && p->op_count[idx[i]]; i++, n++)
    printf("%s{\"op\":\"%s\",\"cpu_ms\":%.4f,\"ms\":%.4f,\"slices\":%.1f}",
           n ? "," : "", core_op_name((core_op_id)idx[i]), p->op_cpu[idx[i]] / steps / 1e6,
           p->op_ns[idx[i]] / steps / 1e6, (double)p->op_count[idx[i]] / steps);
  printf("]");
}

static void print_issuer(const bd_phase *p) {
  double steps = p->nsteps ? p->nsteps : 1;
  printf(",\"issuer\":{\"issue_ms\":%.4f,\"sync_ms\":%.4f,\"publish_ms\":%.4f,"
         "\"publishes\":%.1f,\"cpu_ms\":", mean_steps(p, p->t0, p->tiss),
         mean_steps(p, p->tiss, p->t1), p->publish_ns / steps / 1e6,
         (double)p->publishes / steps);
  if (p->have_sched) printf("%.4f}", p->my_cpu_ns / steps / 1e6);
  else printf("null}");
}

void bd_phase_print(const bd_phase *p, const char *model, const char *copy,
                    double untraced_ms, bool per_rank) {
  for (int k = 0; per_rank && k < p->nranks; k++) print_rank(p, k, model, copy);
  double steps = p->nsteps ? p->nsteps : 1, cpu = 0;
  for (int k = 0; p->have_sched && k < p->nranks; k++) cpu += p->cpu_ns[k] / steps / 1e6;
  printf("{\"bench\":\"train_step_breakdown\",\"model\":\"%s\",\"copy\":\"%s\","
         "\"ranks\":%d,\"steps\":%d,\"wall_ms\":%.4f,\"untraced_ms\":%.4f,"
         "\"dropped_events\":%lld,\"ranks_cpu_ms\":%.4f", model, copy, p->nranks,
         p->nsteps, mean_steps(p, p->t0, p->t1), untraced_ms,
         (long long)p->dropped, cpu);
  print_issuer(p);
  printf(",\"ms\":{");
  for (int c = 0; c <= p->ncats; c++) {
    stat4 s = across(p, c);
    printf("%s\"%s\":{\"min\":%.4f,\"mean\":%.4f,\"max\":%.4f,\"cpu_sum\":%.4f,"
           "\"slices\":%.1f}", c ? "," : "", cat_name(p, c), s.min, s.mean, s.max,
           s.cpu_sum, c < p->ncats ? (double)p->count[c] / steps : 0.0);
  }
  printf("}");
  print_top(p, "top", false);
  print_top(p, "top_cpu", true);
  print_top_ops(p);
  printf("}\n");
  fflush(stdout);
}
