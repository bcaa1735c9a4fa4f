/* `dtorch demo`: the main job. Trains a model with data parallelism × tensor
 * parallelism over the virtual ranks of one runtime (default dp 2 × tp 4),
 * with AdamW on synthetic data, and the same model on single-device tensors
 * side by side: same initial values, same batches. Each step prints both
 * losses and their relative difference, the step times, the collectives
 * the distributed step issued, the sharding cache hit rate and the ranks'
 * memory; then a summary. Exit status 1 if the losses drift apart (relative
 * difference > 1e-5) or a call fails, 2 for a bad flag.
 *
 * The runtime is strict (auto_redistribute off): every collective of the
 * forward is an explicit dt_redistribute in tools/demo_model.c, so the
 * printed counts are the TP all-reduces asked for there plus the gradient
 * reductions of the backward and the optimiser. The single-device copy
 * lives on a runtime of its own (one rank), so the per-rank memory is the
 * distributed model's alone.
 *
 * The pass/fail check is on the losses. The summary's parameter
 * difference is for information: AdamW divides by sqrt(v), so where a
 * gradient is near zero, float rounding of the sums (a different order
 * per shard) moves a parameter by up to lr per step in either copy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "dispatch/dispatch.h"
#include "tools/demo.h"
#include "tools/tools.h"

#define DEMO_TOLERANCE 1e-5

typedef struct demo_opts {
  demo_config cfg;
  int steps;
  bool json, trace, shadow, comm_report, dry_run;
  double link_gbps, latency_us;  /* --dry-run's cost model (0: defaults) */
  const char *trace_file;  /* --trace FILE: a timeline of the distributed run */
  const char *launcher;    /* --launcher mpi: one process of an MPI job */
} demo_opts;

/* ---- flags */
static int usage(FILE *out) {
  fprintf(out,
    "usage: dtorch demo [flags]\n"
    "  --model mlp|transformer  the network (default mlp)\n"
    "  --dp N --tp N            the mesh: data × tensor parallel (2 x 4)\n"
    "  --steps N                training steps (20)\n"
    "  --hidden N --batch N     sizes (mlp 128, 32; transformer 64, 8)\n"
    "  --layers N               MLP or transformer blocks (1)\n"
    "  --seq N --heads N        transformer: sequence length, heads (16, 8)\n"
    "  --loss mse|ce            mean squared error to a random linear teacher,\n"
    "                           or cross-entropy on its argmax labels (mse)\n"
    "  --lr X                   AdamW learning rate (3e-3)\n"
    "  --seed N                 initial values and data (0)\n"
    "  --json                   one JSON object per step and a summary object\n"
    "  --trace-ops              print the ops of one distributed step\n"
    "  --shadow                 compare every distributed op with the same op\n"
    "                           on one device; report the first divergence\n"
    "  --trace FILE             write a timeline of the distributed run (Chrome\n"
    "                           trace JSON: open it in https://ui.perfetto.dev)\n"
    "  --dry-run                one step on a shapes-only runtime (no data, no\n"
    "                           compute): collectives, per-rank memory and a\n"
    "                           predicted step time; dp x tp up to 65536\n"
    "  --link-gbps X --latency-us X   the prediction's links (100 GB/s, 5 us)\n"
    "  --launcher mpi           run as one process of an MPI job (mpirun -np P\n"
    "                           dtorch demo --launcher mpi): each process hosts\n"
    "                           its block of the dp x tp ranks, process 0 prints\n"
    "                           (default: DTORCH_LAUNCHER, else one process)\n"
    "  --comm-report            which call caused which collective in step 1\n"
    "                           (by label: layerN.attn/mlp, loss, backward, optimizer)\n"
    "  --help                   this text\n");
  return out == stdout ? 0 : 2;
}

static bool parse_int(const char *flag, const char *v, int *out) {
  char *end;
  long x = strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || x < -1000000000L || x > 1000000000L) {
    fprintf(stderr, "dtorch demo: %s '%s' is not an integer\n", flag, v);
    return false;
  }
  *out = (int)x;
  return true;
}

static bool parse_double(const char *flag, const char *v, double *out) {
  char *end;
  *out = strtod(v, &end);
  if (*v == '\0' || *end != '\0') {
    fprintf(stderr, "dtorch demo: %s '%s' is not a number\n", flag, v);
    return false;
  }
  return true;
}

static bool parse_enum(const char *flag, const char *v, const char *a,
                       const char *b, int *out) {
  if (!strcmp(v, a) || !strcmp(v, b)) {
    *out = strcmp(v, a) ? 1 : 0;
    return true;
  }
  fprintf(stderr, "dtorch demo: %s '%s' is not one of %s, %s\n", flag, v, a, b);
  return false;
}

/* one flag with its value; false after printing what is wrong */
static bool parse_flag(demo_opts *o, const char *f, const char *v) {
  demo_config *c = &o->cfg;
  static const struct { const char *name; size_t off; } ints[] = {
    {"--dp", offsetof(demo_config, dp)}, {"--tp", offsetof(demo_config, tp)},
    {"--hidden", offsetof(demo_config, hidden)},
    {"--batch", offsetof(demo_config, batch)},
    {"--layers", offsetof(demo_config, layers)},
    {"--seq", offsetof(demo_config, seq)},
    {"--heads", offsetof(demo_config, heads)}};
  for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
    if (!strcmp(f, ints[i].name))
      return parse_int(f, v, (int *)((char *)c + ints[i].off));
  int e, seed;
  if (!strcmp(f, "--steps")) return parse_int(f, v, &o->steps);
  if (!strcmp(f, "--lr")) return parse_double(f, v, &c->lr);
  if (!strcmp(f, "--link-gbps")) return parse_double(f, v, &o->link_gbps);
  if (!strcmp(f, "--latency-us")) return parse_double(f, v, &o->latency_us);
  if (!strcmp(f, "--model")) return parse_enum(f, v, "mlp", "transformer", &e);
  if (!strcmp(f, "--launcher")) {
    int mpi;
    if (!parse_enum(f, v, "none", "mpi", &mpi)) return false;
    o->launcher = v;
    return true;
  }
  if (!strcmp(f, "--seed")) {
    if (!parse_int(f, v, &seed)) return false;
    c->seed = (uint64_t)seed;
    return true;
  }
  if (!strcmp(f, "--loss")) {
    if (!parse_enum(f, v, "mse", "ce", &e)) return false;
    c->loss = e ? DEMO_LOSS_CE : DEMO_LOSS_MSE;
    return true;
  }
  fprintf(stderr, "dtorch demo: unknown flag '%s' (see dtorch demo --help)\n", f);
  return false;
}

/* the model first (it decides the defaults), then every flag in order;
 * returns -1 to go on, else the exit status */
static int parse_args(int argc, char **argv, demo_opts *o) {
  int kind = 0;
  for (int i = 0; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--model") &&
        !parse_enum("--model", argv[i + 1], "mlp", "transformer", &kind))
      return 2;
  *o = (demo_opts){.cfg = demo_config_default(kind ? DEMO_TRANSFORMER : DEMO_MLP),
                   .steps = 20};
  for (int i = 0; i < argc; i++) {
    const char *f = argv[i];
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) return usage(stdout);
    if (!strcmp(f, "--json")) o->json = true;
    else if (!strcmp(f, "--trace-ops")) o->trace = true;
    else if (!strcmp(f, "--shadow")) o->shadow = true;
    else if (!strcmp(f, "--comm-report")) o->comm_report = true;
    else if (!strcmp(f, "--dry-run")) {
      o->dry_run = true;
      o->cfg.max_ranks = DEMO_MAX_DRY_RANKS;
    }
    else if (!strcmp(f, "--trace") && i + 1 < argc) o->trace_file = argv[++i];
    else if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
      fprintf(stderr, "dtorch demo: %s needs a value\n", f);
      return 2;
    } else if (!parse_flag(o, f, argv[++i])) return 2;
  }
  char buf[256];
  const char *bad = demo_config_check(&o->cfg, buf, sizeof buf);
  if (!bad && o->steps < 1)
    bad = (snprintf(buf, sizeof buf, "--steps %d: must be >= 1", o->steps), buf);
  if (bad) {
    fprintf(stderr, "dtorch demo: %s\n", bad);
    return 2;
  }
  return -1;
}

/* ---- the run */
typedef struct step_rec {
  double loss, single_loss, rel, ms, single_ms, hit_rate;
  dt_comm_counts comm;
  int64_t mem_used_max, mem_peak_max;
} step_rec;

typedef struct demo_run {
  demo_opts o;
  dt_runtime *rt, *rt1;   /* the mesh's ranks; the single device */
  dt_mesh *mesh;
  demo_model dist, single;
  step_rec *recs;
  int done;
  int64_t used[DEMO_MAX_RANKS], peak[DEMO_MAX_RANKS]; /* this step's */
  FILE *out;              /* stdout, or stderr for --json's extras */
} demo_run;

static int fail(const char *what) {
  fprintf(stderr, "dtorch demo: %s failed: %s\n", what, dt_last_error());
  return 1;
}

static bool fetch_scalar(dt_tensor *t, double *out) {
  float v;
  if (dt_to_host(t, &v, sizeof v) != DT_OK) return false;
  *out = v;
  return true;
}

static void rank_memory(demo_run *r, step_rec *s) {
  int n = dt_runtime_num_ranks(r->rt);
  for (int k = 0; k < n; k++) {
    dt_memory_stats m;
    if (dt_runtime_memory(r->rt, k, &m) != DT_OK) m.used = m.peak = -1;
    r->used[k] = m.used;
    r->peak[k] = m.peak;
    if (m.used > s->mem_used_max) s->mem_used_max = m.used;
    if (m.peak > s->mem_peak_max) s->mem_peak_max = m.peak;
  }
}

/* one distributed step, timed until every rank is done, its collectives
 * and sharding cache lookups counted */
static dt_tensor *dist_step(demo_run *r, const demo_batch *b, step_rec *s,
                            bool trace) {
  dt_cache_stats c0 = dt_sharding_cache_stats();
  demo_tracer tracer;
  if (trace) demo_trace_begin(&tracer, r->out);
  else dt_comm_count_begin();
  double t0 = bench_now();
  dt_tensor *loss = demo_train_step(&r->dist, b);
  dt_status st = dt_runtime_synchronize(r->rt);
  s->ms = (bench_now() - t0) * 1e3;
  s->comm = trace ? demo_trace_end(&tracer) : dt_comm_count_end();
  dt_cache_stats c1 = dt_sharding_cache_stats();
  int64_t hits = c1.hits - c0.hits, all = hits + c1.misses - c0.misses;
  s->hit_rate = all ? (double)hits / (double)all : 0;
  if (loss && st != DT_OK) {
    dt_tensor_release(loss);
    loss = NULL;
  }
  return loss;
}

static dt_tensor *single_step(demo_run *r, const demo_batch *b, step_rec *s) {
  double t0 = bench_now();
  dt_tensor *loss = demo_train_step(&r->single, b);
  dt_status st = dt_runtime_synchronize(r->rt1);
  s->single_ms = (bench_now() - t0) * 1e3;
  if (loss && st != DT_OK) {
    dt_tensor_release(loss);
    loss = NULL;
  }
  return loss;
}

static void print_header(const demo_run *r) {
  const demo_config *c = &r->o.cfg;
  printf("dtorch demo: %s, %d layer(s), hidden %d, batch %d", c->model == DEMO_MLP
         ? "MLP" : "transformer", c->layers, c->hidden, c->batch);
  if (c->model == DEMO_TRANSFORMER) printf(", seq %d, heads %d", c->seq, c->heads);
  printf(", %s loss, AdamW lr %g\n", c->loss == DEMO_LOSS_MSE ? "mse" : "ce", c->lr);
  char buf[1024];
  dt_mesh_format(r->mesh, buf, sizeof buf);
  int np = dt_runtime_num_processes(r->rt);
  if (np > 1)
    printf("processes: %d MPI processes, %d ranks each (this is process 0)\n",
           np, dt_runtime_num_ranks(r->rt) / np);
  printf("distributed: %s (strict)\nsingle device: a 1-rank runtime, "
         "same initial values and batches\n\n", buf);
  printf("%4s %13s %13s %9s %9s %9s  %-39s %6s %10s\n", "step", "loss",
         "single loss", "rel diff", "ms", "single ms",
         "collectives (ar/ag/rs/a2a/other, bytes)", "cache", "mem/rank");
}

static void print_ranks(const char *key, const int64_t *v, int n) {
  printf(",\"%s\":[", key);
  for (int k = 0; k < n; k++) printf("%s%lld", k ? "," : "", (long long)v[k]);
  printf("]");
}

static void print_json_step(const demo_run *r, int i, const step_rec *s) {
  printf("{\"step\":%d,\"loss\":%.9g,\"single_loss\":%.9g,\"rel_diff\":%.3g,"
         "\"ms\":%.3f,\"single_ms\":%.3f,\"all_reduce\":%lld,\"all_gather\":%lld,"
         "\"reduce_scatter\":%lld,\"all_to_all\":%lld,\"other\":%lld,"
         "\"comm_bytes\":%lld,\"cache_hit_rate\":%.4f", i + 1, s->loss,
         s->single_loss, s->rel, s->ms, s->single_ms, (long long)s->comm.all_reduce,
         (long long)s->comm.all_gather, (long long)s->comm.reduce_scatter,
         (long long)s->comm.all_to_all,
         (long long)(s->comm.broadcast + s->comm.other), (long long)s->comm.bytes,
         s->hit_rate);
  int n = dt_runtime_num_ranks(r->rt);
  print_ranks("mem_used", r->used, n);
  print_ranks("mem_peak", r->peak, n);
  printf("}\n");
}

static void print_step(const demo_run *r, int i, const step_rec *s) {
  char coll[96];
  snprintf(coll, sizeof coll, "%lld/%lld/%lld/%lld/%lld %lld B",
           (long long)s->comm.all_reduce, (long long)s->comm.all_gather,
           (long long)s->comm.reduce_scatter, (long long)s->comm.all_to_all,
           (long long)(s->comm.broadcast + s->comm.other), (long long)s->comm.bytes);
  if (r->o.json)
    print_json_step(r, i, s);
  else
    printf("%4d %13.6e %13.6e %9.2e %9.2f %9.2f  %-39s %5.1f%% %7.0f KiB%s\n",
           i + 1, s->loss, s->single_loss, s->rel, s->ms, s->single_ms, coll,
           100 * s->hit_rate, (double)s->mem_used_max / 1024,
           s->rel > DEMO_TOLERANCE ? "  MISMATCH" : "");
  fflush(stdout);
}

/* step i of both copies: 0 or 1 */
static int run_step(demo_run *r, int i) {
  demo_batch b;
  step_rec *s = &r->recs[i];
  if (!demo_batch_make(&r->o.cfg, i, &b)) {
    fprintf(stderr, "dtorch demo: out of memory for batch %d\n", i + 1);
    return 1;
  }
  bool trace = r->o.trace && i == 0, report = r->o.comm_report && i == 0;
  if (trace) fprintf(r->out, "-- the ops of distributed step 1 --\n");
  if (report) dt_comm_debug_begin();
  dt_tensor *ld = dist_step(r, &b, s, trace);
  if (report) {
    fprintf(r->out, "-- the collectives of distributed step 1 --\n");
    if (dt_comm_debug_end(r->out, NULL) != DT_OK) fprintf(stderr, "%s\n", dt_last_error());
  }
  if (trace) fprintf(r->out, "-- end of step 1 --\n");
  dt_tensor *ls = ld ? single_step(r, &b, s) : NULL;
  demo_batch_free(&b);
  int rc = 0;
  if (!ld || !ls || !fetch_scalar(ld, &s->loss) || !fetch_scalar(ls, &s->single_loss))
    rc = fail(ld ? "the single-device step" : "the distributed step");
  dt_tensor_release(ld);
  dt_tensor_release(ls);
  if (rc) return rc;
  s->rel = fabs(s->loss - s->single_loss) / fmax(fabs(s->single_loss), 1e-30);
  rank_memory(r, s);
  print_step(r, i, s);
  r->done = i + 1;
  return 0;
}

/* the largest |distributed - single| over every parameter, relative to
 * the largest |single| value; < 0 if a fetch failed */
static double param_diff(demo_run *r) {
  double worst = 0, scale = 0;
  for (int i = 0; i < r->dist.n; i++) {
    int64_t n = dt_tensor_numel(r->single.params[i]);
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    bool ok = a && b &&
              dt_to_host(r->dist.params[i], a, (size_t)n * sizeof *a) == DT_OK &&
              dt_to_host(r->single.params[i], b, (size_t)n * sizeof *b) == DT_OK;
    for (int64_t k = 0; ok && k < n; k++) {
      worst = fmax(worst, fabs((double)a[k] - b[k]));
      scale = fmax(scale, fabs((double)b[k]));
    }
    free(a);
    free(b);
    if (!ok) return -1;
  }
  return scale > 0 ? worst / scale : worst;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* median of field f over the recorded steps, step 1 (warm-up) left out
 * when there are more */
static double median_of(const demo_run *r, size_t off) {
  int first = r->done > 1, n = r->done - first;
  double v[n > 0 ? n : 1];
  for (int i = 0; i < n; i++)
    v[i] = *(const double *)((const char *)&r->recs[first + i] + off);
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

static void print_summary(const demo_run *r, double pdiff, bool ok) {
  const step_rec *first = &r->recs[0], *last = &r->recs[r->done - 1];
  double worst = 0, ms = median_of(r, offsetof(step_rec, ms)),
         sms = median_of(r, offsetof(step_rec, single_ms));
  int64_t peak = 0;
  for (int i = 0; i < r->done; i++) {
    worst = fmax(worst, r->recs[i].rel);
    if (r->recs[i].mem_peak_max > peak) peak = r->recs[i].mem_peak_max;
  }
  if (r->o.json) {
    printf("{\"summary\":true,\"model\":\"%s\",\"dp\":%d,\"tp\":%d,\"steps\":%d,"
           "\"first_loss\":%.9g,\"last_loss\":%.9g,\"last_single_loss\":%.9g,"
           "\"max_rel_diff\":%.3g,\"param_rel_diff\":%.3g,\"median_ms\":%.3f,"
           "\"median_single_ms\":%.3f,\"comm_bytes_per_step\":%lld,"
           "\"mem_peak_max\":%lld,\"ok\":%s}\n",
           r->o.cfg.model == DEMO_MLP ? "mlp" : "transformer", r->o.cfg.dp,
           r->o.cfg.tp, r->done, first->loss, last->loss, last->single_loss,
           worst, pdiff, ms, sms, (long long)last->comm.bytes,
           (long long)peak, ok ? "true" : "false");
    return;
  }
  printf("\n%-34s %14s %14s\n", "summary", "distributed", "single device");
  printf("%-34s %14.6e %14.6e\n", "loss at step 1", first->loss, first->single_loss);
  printf("%-34s %14.6e %14.6e\n", "loss at the last step", last->loss,
         last->single_loss);
  printf("%-34s %14.2f %14.2f\n", "median step time (ms, after step 1)", ms, sms);
  printf("%-34s %14.2e %14s\n", "largest relative loss difference", worst, "");
  printf("%-34s %14.2e %14s\n", "parameters: max diff / max value", pdiff, "");
  printf("%-34s %14lld %14s\n", "collective bytes per step", (long long)last->comm.bytes, "");
  printf("%-34s %13.1f KiB %13s\n", "peak memory of the fullest rank",
         (double)peak / 1024, "");
  printf("%s (tolerance %.0e)\n", ok ? "ok: the two runs agree" :
         "MISMATCH: the two runs disagree", DEMO_TOLERANCE);
}

static int setup(demo_run *r) {
  const demo_config *c = &r->o.cfg;
  r->rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = c->dp * c->tp,
                                                  .launcher = r->o.launcher});
  /* the reference is one device in this process, whatever the launcher */
  r->rt1 = dt_runtime_create(&(dt_runtime_options){.num_ranks = 1,
                                                   .launcher = "none"});
  if (!r->rt || !r->rt1) return fail("dt_runtime_create");
  /* a multi-process job: process 0 prints, the others only their errors */
  if (dt_runtime_process_index(r->rt) > 0 && !freopen("/dev/null", "w", stdout))
    return fail("freopen");
  /* single-device tensors (the reference copy, its batches) go to rt1 */
  dt_runtime_set_current(r->rt1);
  r->mesh = dt_mesh_init(r->rt, NULL, DT_SHAPE(c->dp, c->tp),
                         (const char *[]){"dp", "tp"});
  if (!r->mesh) return fail("dt_mesh_init");
  demo_init init;
  int rc = 0;
  if (!demo_init_make(c, &init)) rc = fail("making the initial values");
  else if (!demo_model_create(&r->dist, c, r->mesh, &init))
    rc = fail("creating the distributed model");
  else if (!demo_model_create(&r->single, c, NULL, &init))
    rc = fail("creating the single-device model");
  demo_init_free(&init);
  r->recs = calloc((size_t)r->o.steps, sizeof *r->recs);
  return rc ? rc : r->recs ? 0 : fail("calloc");
}

/* releases everything; 1 if a tensor or graph node outlived it */
static int teardown(demo_run *r) {
  demo_model_destroy(&r->dist);
  demo_model_destroy(&r->single);
  dt_mesh_release(r->mesh);
  dt_runtime_synchronize(r->rt);
  dt_runtime_synchronize(r->rt1);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(r->rt);
  dt_runtime_destroy(r->rt1);
  free(r->recs);
  int64_t tensors = dt_live_tensors(), nodes = dt_autograd_live_nodes();
  if (!r->o.json) printf("live tensors at exit: %lld, autograd nodes: %lld\n",
                         (long long)tensors, (long long)nodes);
  if (tensors || nodes)
    fprintf(stderr, "dtorch demo: leaked %lld tensors, %lld autograd nodes\n",
            (long long)tensors, (long long)nodes);
  return tensors || nodes;
}

/* --shadow: what the comparison found; 1 if an op diverged */
static int shadow_report(demo_run *r) {
  dt_shadow_report rep;
  if (dt_shadow_end(&rep) != DT_OK) return fail("dt_shadow_end");
  if (rep.first_divergence || rep.failed)
    fprintf(r->out, "shadow: %s\n", rep.message);
  else
    fprintf(r->out, "shadow: %lld distributed ops compared with one device, "
            "all agree\n", (long long)rep.ops_checked);
  return rep.first_divergence || rep.failed;
}

int tool_demo(int argc, char **argv) {
  demo_run r = {.out = stdout};
  int rc = parse_args(argc, argv, &r.o);
  if (rc >= 0) return rc;
  if (r.o.dry_run) return demo_dry_run(&r.o.cfg, r.o.link_gbps, r.o.latency_us);
  if (r.o.json) r.out = stderr;
  rc = setup(&r);
  if (!rc && !r.o.json) print_header(&r);
  if (!rc && r.o.shadow && dt_shadow_begin(0) != DT_OK) rc = fail("dt_shadow_begin");
  if (!rc && r.o.trace_file && dt_trace_begin(r.rt, r.o.trace_file) != DT_OK)
    rc = fail("dt_trace_begin");
  for (int i = 0; !rc && i < r.o.steps; i++) rc = run_step(&r, i);
  if (r.o.shadow) rc = shadow_report(&r) || rc;
  if (r.o.trace_file && !rc) {
    if (dt_trace_end(r.rt) != DT_OK) rc = fail("dt_trace_end");
    else fprintf(r.out, "timeline written to %s (open it in https://ui.perfetto.dev)\n",
                 r.o.trace_file);
  }
  if (!rc) {
    double pdiff = param_diff(&r);
    bool ok = pdiff >= 0;
    for (int i = 0; i < r.done; i++) ok = ok && r.recs[i].rel <= DEMO_TOLERANCE;
    if (pdiff < 0) rc = fail("fetching the parameters");
    print_summary(&r, pdiff, ok);
    rc = rc || !ok;
  }
  return teardown(&r) || rc;
}

int tool_ops(void) {
  printf("%-16s %s\n", "op", "schema");
  for (int i = 0; i < CORE_OP_COUNT; i++)
    printf("%-16s %s\n", core_op_name(i), core_op_schema(i));
  printf("(%d ops; schema: T tensor, t optional tensor, L tensor list, "
         "s scalar, d/i/b static double/int/bool, n non-static int, I int list, "
         "D dtype, P host pointer)\n", CORE_OP_COUNT);
  return 0;
}
