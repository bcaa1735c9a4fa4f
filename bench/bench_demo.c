/* `dtorch bench demo`: one training step of `dtorch demo`'s models
 * (tools/demo_model.c) — forward, backward, AdamW step, until every rank
 * is done (dt_runtime_synchronize) — on a dp × tp mesh (default 2 × 4),
 * against the same step on a single device, same shapes and values. The
 * baseline gets the same threads: its tensors live on rank 0 of a runtime
 * with as many ranks, whose idle ranks steal its chunks. The two alternate
 * step by step in the same run after two warm-up steps each.
 *
 *   dtorch bench demo [--reps N] [--only mlp|transformer] [--dp N --tp N]
 *                     [--hidden N] [--batch N] [--seq N] [--heads N]
 *                     [--layers N] [--breakdown] [--ranks-sweep]
 *
 * Defaults: mlp hidden 1024, batch 64; transformer hidden 256, seq 64,
 * 8 heads, batch 8. --ranks-sweep runs the MLP (hidden 256 unless
 * --hidden, batch 8 × dp) at 8 (2 × 4), 32 (4 × 8), 64 (8 × 8) and 256
 * (16 × 16) ranks: the fixed cost per op and rank.
 *
 * One JSON line per model (and mesh):
 *   {"bench":"train_step","dp":2,"tp":4,"ranks":8,"model":"mlp",
 *    "hidden":1024,"batch":64,"ms":M,"single_ms":S,"ratio":M/S,
 *    "plain_ms":P,"floor_ms":S+P,"over_floor":M/(S+P),"comm_bytes":B,
 *    "coll_bytes":B',"best_ms":..,"best_single_ms":..,"steps":N,
 *    "max_rel_diff":..,"cpu_ms":C,"single_cpu_ms":SC,"cpu_ratio":C/SC}
 * ms and single_ms are medians over the timed steps; cpu_ms and
 * single_cpu_ms the medians of the CPU time the runtime's rank threads
 * and the issuing thread ran in the step (the kernel's schedstat): on a
 * machine with fewer cores than ranks, the work the step costs whatever
 * the waits. The floor is what
 * the step cannot go below on this machine: the single-device step plus
 * the time a plain all-core loop takes, in the same run, to move the
 * step's collective bytes (bench collectives' accounting: an all_reduce
 * of S bytes over n ranks reads nS and writes nS, all_gather reads S and
 * writes nS, reduce_scatter reads nS and writes S, all_to_all copies nS;
 * bench/bench_stream.h). The step's collectives are those it issued, read
 * from one traced step after the timed ones (bench/bench_breakdown.h):
 * by kind and group size, each (kind, group) moved by one plain pass over
 * the step's total — the best case, as if every call were merged into one.
 * Before it, a line per (kind, group):
 *   {"bench":"train_step_collective","model":..,"kind":"all_reduce",
 *    "group":2,"calls":4,"bytes":B,"nccl_bytes":S,"plain_ms":P}
 * bytes is what the members fed in (dt_comm_count's accounting);
 * comm_bytes is dt_comm_count's own figure over the timed steps and
 * coll_bytes the sum of the collective lines' bytes: the two agree.
 *
 * --breakdown: `--reps` more steps of each copy under an in-process trace
 * (the other copy runs untraced between them, so the losses are still
 * compared), and where each rank's time went (bench/bench_breakdown.h):
 * one train_step_rank line per rank of the distributed copy and a
 * train_step_breakdown summary per copy. The trace costs time of its own
 * and turns helping (sched/help.h) off: each summary prints the traced
 * wall_ms next to the untraced step's.
 *
 * The losses of the two copies are compared at every step; the run fails
 * (exit 1) if they drift apart by more than 1e-4 relative or a call
 * fails; a bad flag exits 2. */
#include <math.h>

#include "bench/bench.h"
#include "bench/bench_breakdown.h"
#include "bench/bench_stream.h"
#include "tools/demo.h"

typedef struct train_bench {
  demo_config cfg;
  dt_runtime *rt, *rt1;
  dt_mesh *mesh;
  demo_model dist, single;
  pid_t *tids, *tids1;   /* the rank threads of rt, rt1 (their CPU times) */
  int step;              /* the next batch */
  double worst_rel;      /* of the losses so far */
} train_bench;

static void die(const char *what) {
  fprintf(stderr, "bench demo: %s: %s\n", what, dt_last_error());
  exit(1);
}

static void setup(train_bench *b) {
  int n = b->cfg.dp * b->cfg.tp;
  b->rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = n});
  b->rt1 = dt_runtime_create(&(dt_runtime_options){.num_ranks = n});
  if (!b->rt || !b->rt1) die("dt_runtime_create");
  dt_runtime_set_current(b->rt1);
  b->mesh = dt_mesh_init(b->rt, "cpu", DT_SHAPE(b->cfg.dp, b->cfg.tp),
                         (const char *[]){"dp", "tp"});
  if (!b->mesh) die("dt_mesh_init");
  demo_init init;
  if (!demo_init_make(&b->cfg, &init)) die("initial values");
  if (!demo_model_create(&b->dist, &b->cfg, b->mesh, &init)) die("distributed model");
  if (!demo_model_create(&b->single, &b->cfg, NULL, &init)) die("single-device model");
  demo_init_free(&init);
  b->tids = calloc((size_t)n, sizeof *b->tids);
  b->tids1 = calloc((size_t)n, sizeof *b->tids1);
  if (!b->tids || !b->tids1) die("calloc");
  if (!bd_rank_tids(b->rt, b->tids) || !bd_rank_tids(b->rt1, b->tids1)) exit(1);
}

static void teardown(train_bench *b) {
  demo_model_destroy(&b->dist);
  demo_model_destroy(&b->single);
  dt_mesh_release(b->mesh);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(b->rt);
  dt_runtime_destroy(b->rt1);
  free(b->tids);
  free(b->tids1);
}

/* CPU seconds the rank threads tids[0..n) and this one ran since c0
 * (bd_threads_cpu); -1 where the kernel does not say */
static double cpu_since(const pid_t *tids, int n, int64_t c0) {
  int64_t c = bd_threads_cpu(tids, n, false);
  return c >= 0 && c0 >= 0 ? (double)(c - c0) * 1e-9 : -1;
}

/* one step of m, seconds until rt is done; *cpu the CPU seconds of rt's
 * rank threads (tids, n) and this one in it; *loss its value; ph (may be
 * NULL) stamps it */
static double timed_step(demo_model *m, dt_runtime *rt, const pid_t *tids, int n,
                         const demo_batch *batch, double *cpu, double *loss,
                         bd_phase *ph) {
  if (ph) bd_phase_step_begin(ph);
  int64_t c = bd_threads_cpu(tids, n, true);
  double t0 = bench_now();
  dt_tensor *l = demo_train_step(m, batch);
  if (ph) bd_phase_step_issued(ph);
  if (!l || dt_runtime_synchronize(rt) != DT_OK) die("train step");
  double t = bench_now() - t0;
  *cpu = cpu_since(tids, n, c);
  if (ph) bd_phase_step_end(ph);
  float v;
  if (dt_to_host(l, &v, sizeof v) != DT_OK) die("dt_to_host(loss)");
  dt_tensor_release(l);
  *loss = v;
  return t;
}

/* one step's seconds and CPU seconds of both copies */
typedef struct step_times { double td, ts, cd, cs; } step_times;

/* the next step of both copies (pd or ps, may be NULL, traces one of
 * them); the distributed step's counts into *comm */
static step_times step_both(train_bench *b, bd_phase *pd, bd_phase *ps,
                            dt_comm_counts *comm) {
  demo_batch batch;
  if (!demo_batch_make(&b->cfg, b->step++, &batch)) die("batch");
  double ld, ls;
  int n = b->cfg.dp * b->cfg.tp;
  step_times r;
  dt_comm_count_begin();
  r.td = timed_step(&b->dist, b->rt, b->tids, n, &batch, &r.cd, &ld, pd);
  *comm = dt_comm_count_end();
  r.ts = timed_step(&b->single, b->rt1, b->tids1, n, &batch, &r.cs, &ls, ps);
  demo_batch_free(&batch);
  b->worst_rel = fmax(b->worst_rel, fabs(ld - ls) / fmax(fabs(ls), 1e-30));
  return r;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the floor: the step's collectives moved by plain all-core loops */
static int plain_kind(const char *kind) {
  static const char *const names[] = {"all_reduce", "all_gather",
                                      "reduce_scatter", "all_to_all"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(kind, names[i])) return i; /* bench_coll's order */
  return -1;
}

/* best of reps seconds to move c's bytes the plain way; 0 for kinds
 * without a plain form (barrier, broadcast) or no bytes. A pass moving
 * less than PLAIN_MIN_TRAFFIC bytes is timed scaled up to it and the time
 * scaled back: a thread start (~0.1 ms, more on a loaded machine) is no
 * part of moving a few hundred KiB. */
#define PLAIN_MIN_TRAFFIC ((int64_t)64 << 20)
static double plain_seconds(const bd_coll *c, int reps) {
  int k = plain_kind(c->kind), n = c->group;
  int64_t len = c->nccl_bytes / 4;
  if (k < 0 || len < 1 || n > BENCH_PLAIN_MAX) return 0;
  /* the pass's reads and writes in S (bench/bench_stream.h) */
  static const int per_s[4][2] = {{1, 1}, {0, 1}, {1, 0}, {1, 1}};
  int64_t traffic = 4 * len * (per_s[k][0] * n + per_s[k][1] * n +
                               (k == 1 || k == 2));
  int64_t run = traffic < PLAIN_MIN_TRAFFIC
      ? (int64_t)ceil((double)len * (double)PLAIN_MIN_TRAFFIC / (double)traffic) : len;
  double scale = (double)run / (double)len;
  len = run;
  float **in = calloc((size_t)n, sizeof *in), **out = calloc((size_t)n, sizeof *out);
  bool ok = in && out;
  size_t bytes = ((size_t)len * sizeof(float) + 63) / 64 * 64;
  for (int j = 0; ok && j < n; j++) {
    in[j] = aligned_alloc(64, bytes);
    out[j] = aligned_alloc(64, bytes);
    ok = in[j] && out[j];
    for (int64_t e = 0; ok && e < len; e++) in[j][e] = 1.0f;
  } /* the outputs fault in during the first pass; reps >= 3 keep the best */
  if (!ok) die("memory for the plain loop");
  double t = bench_plain_best((bench_coll)k, n, (const float *const *)in, out, len, reps) /
             scale;
  for (int j = 0; j < n; j++) {
    free(in[j]);
    free(out[j]);
  }
  free(in);
  free(out);
  return t;
}

static const char *model_name(const demo_config *c) {
  return c->model == DEMO_MLP ? "mlp" : "transformer";
}

/* the collective lines; returns the plain seconds in all, *bytes the
 * members' bytes in all */
static double print_colls(const demo_config *cfg, const bd_phase *ph, int reps,
                          int64_t *bytes) {
  bd_coll cs[BD_MAX_COLLS];
  int n = bd_phase_colls(ph, cs, BD_MAX_COLLS);
  double total = 0;
  *bytes = 0;
  for (int i = 0; i < n; i++) {
    double t = plain_seconds(&cs[i], reps);
    total += t;
    *bytes += cs[i].member_bytes;
    printf("{\"bench\":\"train_step_collective\",\"model\":\"%s\",\"dp\":%d,"
           "\"tp\":%d,\"kind\":\"%s\",\"group\":%d,\"calls\":%.2f,\"bytes\":%lld,"
           "\"nccl_bytes\":%lld,", model_name(cfg), cfg->dp, cfg->tp, cs[i].kind,
           cs[i].group, cs[i].calls, (long long)cs[i].member_bytes,
           (long long)cs[i].nccl_bytes);
    if (plain_kind(cs[i].kind) >= 0) printf("\"plain_ms\":%.4f}\n", t * 1e3);
    else printf("\"plain_ms\":null}\n");
  }
  return total;
}

/* ---- one model */
typedef struct timed {
  double ms, sms, best, sbest, cpu, scpu; /* cpu < 0: not known */
  int n;
  dt_comm_counts comm;
} timed;

static timed run_timed(train_bench *b, int reps) {
  enum { WARMUP = 2 };
  timed r = {.best = 1e300, .sbest = 1e300, .n = reps < 3 ? 3 : reps};
  double ms[r.n], sms[r.n], cpu[r.n], scpu[r.n];
  for (int i = 0; i < WARMUP + r.n; i++) {
    step_times t = step_both(b, NULL, NULL, &r.comm);
    if (i < WARMUP) continue;
    ms[i - WARMUP] = t.td * 1e3;
    sms[i - WARMUP] = t.ts * 1e3;
    cpu[i - WARMUP] = t.cd * 1e3;
    scpu[i - WARMUP] = t.cs * 1e3;
    r.best = fmin(r.best, t.td * 1e3);
    r.sbest = fmin(r.sbest, t.ts * 1e3);
  }
  r.ms = median(ms, r.n);
  r.sms = median(sms, r.n);
  r.cpu = median(cpu, r.n);
  r.scpu = median(scpu, r.n);
  return r;
}

/* steps steps of both copies, the distributed (dist) or the single one
 * traced */
static bd_phase *run_traced(train_bench *b, int steps, bool dist) {
  bd_phase *ph = bd_phase_begin(dist ? b->rt : b->rt1, steps);
  if (!ph) exit(1);
  dt_comm_counts comm;
  for (int i = 0; i < steps; i++) step_both(b, dist ? ph : NULL, dist ? NULL : ph, &comm);
  if (!bd_phase_end(ph)) exit(1);
  return ph;
}

static void print_train(const demo_config *cfg, const timed *r, double plain,
                        int64_t coll_bytes, double worst_rel) {
  double floor_ms = r->sms + plain * 1e3;
  printf("{\"bench\":\"train_step\",\"dp\":%d,\"tp\":%d,\"ranks\":%d,"
         "\"model\":\"%s\",\"hidden\":%d,\"batch\":%d,", cfg->dp, cfg->tp,
         cfg->dp * cfg->tp, model_name(cfg), cfg->hidden, cfg->batch);
  if (cfg->model == DEMO_TRANSFORMER)
    printf("\"seq\":%d,\"heads\":%d,", cfg->seq, cfg->heads);
  if (cfg->layers != 1) printf("\"layers\":%d,", cfg->layers);
  printf("\"ms\":%.3f,\"single_ms\":%.3f,\"ratio\":%.3f,\"plain_ms\":%.3f,"
         "\"floor_ms\":%.3f,\"over_floor\":%.3f,\"comm_bytes\":%lld,"
         "\"coll_bytes\":%lld,\"best_ms\":%.3f,\"best_single_ms\":%.3f,"
         "\"steps\":%d,\"max_rel_diff\":%.3g,",
         r->ms, r->sms, r->ms / r->sms, plain * 1e3, floor_ms, r->ms / floor_ms,
         (long long)r->comm.bytes, (long long)coll_bytes, r->best, r->sbest,
         r->n, worst_rel);
  if (r->cpu >= 0 && r->scpu > 0)
    printf("\"cpu_ms\":%.3f,\"single_cpu_ms\":%.3f,\"cpu_ratio\":%.3f}\n", r->cpu,
           r->scpu, r->cpu / r->scpu);
  else
    printf("\"cpu_ms\":null,\"single_cpu_ms\":null,\"cpu_ratio\":null}\n");
  fflush(stdout);
}

static void run_train(demo_config cfg, int reps, bool breakdown) {
  train_bench b = {.cfg = cfg};
  setup(&b);
  timed r = run_timed(&b, reps);
  bd_phase *pd = run_traced(&b, breakdown ? r.n : 1, true);
  bd_phase *ps = breakdown ? run_traced(&b, r.n, false) : NULL;
  int64_t coll_bytes;
  double plain = print_colls(&b.cfg, pd, r.n, &coll_bytes);
  print_train(&b.cfg, &r, plain, coll_bytes, b.worst_rel);
  if (breakdown) {
    bd_phase_print(pd, model_name(&cfg), "distributed", r.ms, true);
    bd_phase_print(ps, model_name(&cfg), "single", r.sms, false);
  }
  bd_phase_free(pd);
  bd_phase_free(ps);
  teardown(&b);
  if (!(b.worst_rel <= 1e-4)) {
    fprintf(stderr, "bench demo: the distributed and single-device losses "
            "differ by %.3g (relative)\n", b.worst_rel);
    exit(1);
  }
}

/* ---- flags */
typedef struct demo_flags {
  int reps;
  const char *only;
  bool breakdown, sweep;
  int dp, tp, hidden, batch, seq, heads, layers; /* 0: the model's default */
} demo_flags;

static int usage(FILE *out) {
  fprintf(out,
    "usage: dtorch bench demo [flags]\n"
    "  --reps N                 timed steps of each copy (5; at least 3)\n"
    "  --only mlp|transformer   one model (default both)\n"
    "  --dp N --tp N            the mesh (2 x 4)\n"
    "  --hidden N --batch N     sizes (mlp 1024, 64; transformer 256, 8)\n"
    "  --seq N --heads N        transformer: sequence, heads (64, 8)\n"
    "  --layers N               blocks (1)\n"
    "  --breakdown              where each rank's time goes (JSON lines)\n"
    "  --ranks-sweep            the MLP (hidden 256, batch 8 x dp) at 8, 32,\n"
    "                           64 and 256 ranks (2x4, 4x8, 8x8, 16x16)\n"
    "  --help                   this text\n");
  return out == stdout ? 0 : 2;
}

static bool parse_int(const char *flag, const char *v, int *out) {
  char *end;
  long x = strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || x < 1 || x > 1000000) {
    fprintf(stderr, "dtorch bench demo: %s '%s' is not an integer in 1..1000000\n",
            flag, v);
    return false;
  }
  *out = (int)x;
  return true;
}

/* -1 to go on, else the exit status */
static int parse(int argc, char **argv, demo_flags *f) {
  *f = (demo_flags){.reps = 5};
  static const struct { const char *name; size_t off; } ints[] = {
    {"--reps", offsetof(demo_flags, reps)}, {"--dp", offsetof(demo_flags, dp)},
    {"--tp", offsetof(demo_flags, tp)}, {"--hidden", offsetof(demo_flags, hidden)},
    {"--batch", offsetof(demo_flags, batch)}, {"--seq", offsetof(demo_flags, seq)},
    {"--heads", offsetof(demo_flags, heads)}, {"--layers", offsetof(demo_flags, layers)}};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    size_t k = 0;
    while (k < sizeof ints / sizeof *ints && strcmp(a, ints[k].name)) k++;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout);
    if (!strcmp(a, "--breakdown")) f->breakdown = true;
    else if (!strcmp(a, "--ranks-sweep")) f->sweep = true;
    else if ((k < sizeof ints / sizeof *ints || !strcmp(a, "--only")) && i + 1 >= argc) {
      fprintf(stderr, "dtorch bench demo: %s needs a value\n", a);
      return 2;
    } else if (!strcmp(a, "--only")) {
      f->only = argv[++i];
      if (strcmp(f->only, "mlp") && strcmp(f->only, "transformer")) {
        fprintf(stderr, "dtorch bench demo: --only '%s' is not one of mlp, "
                "transformer\n", f->only);
        return 2;
      }
    } else if (k < sizeof ints / sizeof *ints) {
      if (!parse_int(a, argv[++i], (int *)((char *)f + ints[k].off))) return 2;
    } else {
      fprintf(stderr, "dtorch bench demo: unknown argument '%s' (see dtorch "
              "bench demo --help)\n", a);
      return 2;
    }
  }
  if (f->sweep && (f->dp || f->tp || f->batch || (f->only && strcmp(f->only, "mlp")))) {
    fprintf(stderr, "dtorch bench demo: --ranks-sweep sets the mesh and the batch "
            "of the MLP itself (no --dp, --tp, --batch, --only transformer)\n");
    return 2;
  }
  return -1;
}

/* the model's bench defaults, then the flags; false after printing why */
static bool config_of(const demo_flags *f, demo_model_kind kind, demo_config *c) {
  *c = demo_config_default(kind);
  c->hidden = kind == DEMO_MLP ? 1024 : 256;
  c->batch = kind == DEMO_MLP ? 64 : 8;
  if (kind == DEMO_TRANSFORMER) c->seq = 64, c->heads = 8;
  int *fields[] = {&c->dp, &c->tp, &c->hidden, &c->batch, &c->seq, &c->heads, &c->layers};
  const int vals[] = {f->dp, f->tp, f->hidden, f->batch, f->seq, f->heads, f->layers};
  for (int i = 0; i < 7; i++)
    if (vals[i]) *fields[i] = vals[i];
  char buf[256];
  const char *bad = demo_config_check(c, buf, sizeof buf);
  if (bad) fprintf(stderr, "dtorch bench demo: %s\n", bad);
  return !bad;
}

int bench_demo(int argc, char **argv) {
  demo_flags f;
  int rc = parse(argc, argv, &f);
  if (rc >= 0) return rc;
  demo_config c;
  if (f.sweep) {
    static const int mesh[][2] = {{2, 4}, {4, 8}, {8, 8}, {16, 16}};
    for (int i = 0; i < 4; i++) {
      demo_flags g = f;
      g.dp = mesh[i][0];
      g.tp = mesh[i][1];
      g.hidden = f.hidden ? f.hidden : 256;
      g.batch = 8 * g.dp;
      if (!config_of(&g, DEMO_MLP, &c)) return 2;
      run_train(c, f.reps, f.breakdown);
    }
    return 0;
  }
  demo_config runs[2];
  int n = 0;
  if ((!f.only || !strcmp(f.only, "mlp")) && !config_of(&f, DEMO_MLP, &runs[n++])) return 2;
  if ((!f.only || !strcmp(f.only, "transformer")) &&
      !config_of(&f, DEMO_TRANSFORMER, &runs[n++]))
    return 2;
  for (int i = 0; i < n; i++) run_train(runs[i], f.reps, f.breakdown);
  return 0;
}
