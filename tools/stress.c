/* `dtorch stress`: random programs (tools/stress_prog.c) on a mesh of
 * rank threads, under chaos scheduling and fault injection, from several
 * issuing threads at once, plus SPMD collective rounds, each compared with
 * one device / a naive loop. Runs for --seconds or --iters with a
 * progress line; a failure prints its seed, the replay command and the
 * program shrunk to the steps that still fail.
 *
 * What must hold for every program: every value equals the single-device
 * value (float64 to 1e-9, float32 to 2e-4, relative to 1 + |value|); with
 * a fault armed, a run either does that or fails with the injected
 * fault's message (never another error, never a hang: the watchdog is
 * 10 s), and after dt_fault_clear the same runtime runs the program
 * right; no tensor outlives its iteration. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/stress.h"

typedef struct opts {
  double seconds;
  int64_t iters;
  uint64_t seed;
  bool replay, faults, chaos;
  int ranks, threads;
  const char *launcher;  /* --launcher mpi: one process of an MPI job */
  dt_runtime *ctl;       /* a multi-process job: the runtime the processes
                            agree on when to stop through */
  bool quiet;            /* a process other than 0: no progress lines */
} opts;

typedef struct stats {
  int64_t programs, steps, chaos_runs, faults_armed, faults_fired, spmd_rounds, failures;
} stats;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* first element where got and want differ beyond the tolerance, or -1 */
static int64_t mismatch(const double *want, const double *got, size_t n, dt_dtype d) {
  double tol = d == DT_FLOAT64 ? 1e-9 : 2e-4;
  for (size_t i = 0; i < n; i++) {
    if (isnan(want[i]) && isnan(got[i])) continue;
    if (!(fabs(want[i] - got[i]) <= tol * (1 + fabs(want[i])))) return (int64_t)i;
  }
  return -1;
}

/* ---- one program on a mesh, from several threads at once */
typedef struct run_ctx {
  const stress_program *p;
  dt_mesh *mesh;
  const double *want;
  size_t n;
  bool fault;          /* a fault is armed: its error is an accepted outcome */
  _Atomic int bad;
  char why[1024];
  pthread_mutex_t lock;
} run_ctx;

static void note_bad(run_ctx *c, const char *text) {
  pthread_mutex_lock(&c->lock);
  if (!c->bad) snprintf(c->why, sizeof c->why, "%s", text);
  atomic_store(&c->bad, 1);
  pthread_mutex_unlock(&c->lock);
}

static void *issuer(void *arg) {
  run_ctx *c = arg;
  double *got = malloc(sizeof(double) * (c->n ? c->n : 1));
  char msg[768] = "";
  dt_status st = got ? stress_execute(c->p, c->mesh, got, msg, sizeof msg) : DT_ERR_OUT_OF_MEMORY;
  char text[1024];
  if (st != DT_OK && !(c->fault && strstr(msg, "injected fault"))) {
    snprintf(text, sizeof text, "failed: %s", got ? msg : "out of memory");
    note_bad(c, text);
  }
  int64_t at = st == DT_OK ? mismatch(c->want, got, c->n, c->p->dtype) : -1;
  if (at >= 0) {
    snprintf(text, sizeof text, "output element %lld: %.17g on the mesh, %.17g on one "
             "device", (long long)at, got[at], c->want[at]);
    note_bad(c, text);
  }
  free(got);
  return NULL;
}

static bool run_threads(run_ctx *c, int threads) {
  pthread_t t[16];
  int n = threads < 16 ? threads : 16;
  for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, issuer, c);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  return !atomic_load(&c->bad);
}

/* ---- SPMD rounds: random collectives checked against naive loops */
typedef struct spmd_arg { uint64_t seed; _Atomic int bad; char why[256]; } spmd_arg;

static double val(int rank, int64_t i, uint64_t seed) {
  return (double)((mix(seed ^ (uint64_t)(rank * 1000003 + i)) >> 40) % 1000) * 0.25;
}

static dt_status spmd_round(dt_spmd_ctx *ctx) {
  spmd_arg *a = ctx->arg;
  int n = ctx->world_size;
  int64_t len = 1 + (int64_t)(a->seed % 37);
  double *x = malloc(sizeof(double) * (size_t)len), *got = malloc(sizeof(double) * (size_t)(len * n));
  for (int64_t i = 0; i < len; i++) x[i] = val(ctx->rank, i, a->seed);
  dt_tensor *t = dt_from_host(x, DT_SHAPE(len), &(dt_tensor_options){.dtype = DT_FLOAT64});
  bool gather = a->seed % 2;
  dt_tensor *r = gather ? dt_all_gather(t, 0, NULL) : dt_all_reduce(t, DT_REDUCE_SUM, NULL);
  dt_status st = r ? dt_to_host(r, got, sizeof(double) * (size_t)(gather ? len * n : len))
                   : dt_last_status();
  for (int64_t i = 0; st == DT_OK && i < (gather ? len * n : len); i++) {
    double want = 0;
    if (gather) want = val((int)(i / len), i % len, a->seed);
    else for (int q = 0; q < n; q++) want += val(q, i, a->seed);
    if (got[i] != want) {
      snprintf(a->why, sizeof a->why, "SPMD %s: rank %d element %lld: %g, want %g",
               gather ? "all_gather" : "all_reduce", ctx->rank, (long long)i, got[i], want);
      atomic_store(&a->bad, 1);
      break;
    }
  }
  if (st != DT_OK) {
    snprintf(a->why, sizeof a->why, "SPMD: %s", dt_last_error());
    atomic_store(&a->bad, 1);
  }
  dt_tensor_release(t);
  dt_tensor_release(r);
  free(x);
  free(got);
  return DT_OK;
}

/* ---- one iteration */
typedef struct iteration {
  uint64_t seed;
  bool chaos, fault;
  dt_fault f;
} iteration;

static iteration plan(uint64_t seed, const opts *o) {
  uint64_t h = mix(seed + 0x5bd1e995);
  iteration it = {.seed = seed, .chaos = o->chaos && (h & 1), .fault = o->faults && (h >> 1) % 4 == 0};
  static const unsigned kinds[] = {DT_FAULT_OOM, DT_FAULT_RANK_FAIL, DT_FAULT_COLLECTIVE_FAIL};
  it.f = (dt_fault){.kind = kinds[(h >> 8) % 3], .rank = (int)((h >> 16) % (uint64_t)o->ranks),
                    .after = 1 + (int64_t)((h >> 24) % 30)};
  return it;
}

/* runs p under `it` on a fresh runtime; false (why) on a failure */
static bool run_program(const stress_program *p, const iteration *it, const opts *o,
                        dt_runtime *ref_rt, stats *st, char *why, size_t len) {
  size_t n = stress_out_size(p);
  double *want = malloc(sizeof(double) * (n ? n : 1));
  char msg[768];
  dt_runtime_set_current(ref_rt);
  dt_status rs = want ? stress_execute(p, NULL, want, msg, sizeof msg) : DT_ERR_OUT_OF_MEMORY;
  dt_runtime_set_current(NULL);
  if (rs != DT_OK) {
    snprintf(why, len, "the single-device run failed: %s", want ? msg : "out of memory");
    free(want);
    return false;
  }
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = o->ranks,
      .auto_redistribute = true, .chaos_seed = it->chaos ? (it->seed | 1) : 0,
      .collective_timeout_ms = 10000, .launcher = o->launcher});
  dt_mesh *m = rt ? dt_mesh_init(rt, NULL, p->mesh_ndim == 2 ? DT_SHAPE(p->mesh[0], p->mesh[1])
                                                              : DT_SHAPE(p->mesh[0]), NULL) : NULL;
  bool ok = m != NULL;
  if (!ok) snprintf(why, len, "runtime: %s", dt_last_error());
  run_ctx c = {.p = p, .mesh = m, .want = want, .n = n, .fault = it->fault};
  pthread_mutex_init(&c.lock, NULL);
  int64_t fired = 0;
  if (ok && it->fault) ok = dt_fault_inject(rt, &it->f) == DT_OK;
  if (ok) ok = run_threads(&c, o->threads);
  if (ok && it->fault) { /* the fault (if it fired) healed: run once more */
    fired = dt_fault_count(rt);
    dt_fault_clear(rt);
    c.fault = false;
    ok = run_threads(&c, 1);
  }
  if (!ok && c.bad) snprintf(why, len, "%s", c.why);
  spmd_arg sa = {.seed = mix(it->seed)};
  if (ok && (it->seed & 3) == 1) {
    ok = dt_spmd_run(rt, spmd_round, &sa) == DT_OK && !sa.bad;
    if (!ok) snprintf(why, len, "%s", sa.bad ? sa.why : dt_last_error());
    st->spmd_rounds++;
  }
  pthread_mutex_destroy(&c.lock);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
  free(want);
  st->chaos_runs += it->chaos;
  st->faults_armed += it->fault;
  st->faults_fired += fired;
  return ok;
}

/* ---- shrinking: drop steps nothing reads while the program still fails */
static void shrink(stress_program *p, const iteration *it, const opts *o, dt_runtime *ref) {
  stats scratch = {0};
  char why[1024];
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = p->n - 1; i >= 1; i--) {
      if (p->s[i].k == STRESS_NONE || stress_used(p, i)) continue;
      stress_step keep = p->s[i];
      p->s[i].k = STRESS_NONE;
      bool fails = false; /* a schedule-dependent failure gets three tries */
      for (int t = 0; t < 3 && !fails; t++)
        fails = !run_program(p, it, o, ref, &scratch, why, sizeof why);
      if (fails) changed = true;
      else p->s[i] = keep;
    }
  }
}

static void report(uint64_t seed, stress_program *p, const iteration *it, const opts *o,
                   dt_runtime *ref, const char *why) {
  fprintf(stderr, "\nstress: FAILED at seed %llu%s%s: %s\n", (unsigned long long)seed,
          it->chaos ? " (chaos)" : "", it->fault ? " (fault armed)" : "", why);
  fprintf(stderr, "replay: dtorch stress --replay %llu --ranks %d --threads %d%s%s\n",
          (unsigned long long)seed, o->ranks, o->threads, o->faults ? "" : " --no-faults",
          o->chaos ? "" : " --no-chaos");
  shrink(p, it, o, ref);
  fprintf(stderr, "shrunk to:\n");
  stress_print(stderr, p);
}

static int parse(int argc, char **argv, opts *o) {
  *o = (opts){.seconds = 10, .iters = -1, .seed = 1, .faults = true, .chaos = true,
              .ranks = 4, .threads = 2};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *end = NULL;
    if (!strcmp(a, "--no-faults")) o->faults = false;
    else if (!strcmp(a, "--no-chaos")) o->chaos = false;
    else if (!strcmp(a, "--seconds") && v) o->seconds = strtod(v, &end), i++;
    else if (!strcmp(a, "--iters") && v) o->iters = strtoll(v, &end, 10), i++;
    else if (!strcmp(a, "--seed") && v) o->seed = strtoull(v, &end, 10), i++;
    else if (!strcmp(a, "--replay") && v) o->seed = strtoull(v, &end, 10), o->replay = true, i++;
    else if (!strcmp(a, "--ranks") && v) o->ranks = (int)strtol(v, &end, 10), i++;
    else if (!strcmp(a, "--threads") && v) o->threads = (int)strtol(v, &end, 10), i++;
    else if (!strcmp(a, "--launcher") && v) o->launcher = v, i++;
    else end = (char *)"?";
    if (end && *end) {
      fprintf(stderr, "dtorch stress: bad argument '%s'%s%s\nusage: dtorch stress "
              "[--seconds T | --iters N] [--seed S] [--replay SEED] [--ranks 2|4|8] "
              "[--threads 1..16] [--no-faults] [--no-chaos] [--launcher mpi]\n", a,
              v ? " " : "", v ? v : "");
      return 2;
    }
  }
  if (o->ranks != 2 && o->ranks != 4 && o->ranks != 8) {
    fprintf(stderr, "dtorch stress: --ranks %d (2, 4 or 8)\n", o->ranks);
    return 2;
  }
  if (o->threads < 1 || o->threads > 16 || o->seconds <= 0) {
    fprintf(stderr, "dtorch stress: --threads %d (1..16), --seconds %g (> 0)\n", o->threads,
            o->seconds);
    return 2;
  }
  return 0;
}

/* --launcher mpi: one runtime for the whole run through which the
 * processes agree on when to stop; process 0 prints, the others only
 * their failures; one issuing thread (several would issue one group's
 * collectives in a different order in each process) */
static int join(opts *o) {
  if (!o->launcher) o->launcher = getenv("DTORCH_LAUNCHER"); /* as the runtime */
  if (o->launcher && !*o->launcher) o->launcher = NULL;
  if (!o->launcher || strcmp(o->launcher, "mpi") != 0) {
    if (o->launcher && strcmp(o->launcher, "none") != 0) {
      fprintf(stderr, "dtorch stress: --launcher %s (mpi or none)\n", o->launcher);
      return 2;
    }
    return 0;
  }
  o->ctl = dt_runtime_create(&(dt_runtime_options){.num_ranks = o->ranks,
                                                   .launcher = "mpi"});
  if (!o->ctl) {
    fprintf(stderr, "dtorch stress: %s\n", dt_last_error());
    return 1;
  }
  bool first = dt_runtime_process_index(o->ctl) == 0;
  if (o->threads > 1 && first)
    fprintf(stderr, "dtorch stress: one issuing thread per process under "
            "--launcher mpi (not %d)\n", o->threads);
  o->threads = 1;
  o->quiet = !first;
  if (!first && !freopen("/dev/null", "w", stdout)) return 1;
  return 0;
}

/* whether to stop: this process's answer, or process 0's in a
 * multi-process job (every process asks once per program). Each rank of
 * a sharded [ranks] tensor holds its process's answer: the gathered
 * value shows process 0's to everyone. */
static bool agree_stop(const opts *o, bool stop) {
  if (!o->ctl) return stop;
  int n = o->ranks;
  dt_mesh *m = dt_mesh_init(o->ctl, NULL, DT_SHAPE(n), NULL);
  float *v = calloc((size_t)n, sizeof *v), *all = calloc((size_t)n, sizeof *all);
  for (int i = 0; v && i < n; i++) v[i] = stop;
  dt_tensor *t = m && v ? dt_from_host(v, DT_SHAPE(n), &(dt_tensor_options){
                                .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))})
                        : NULL;
  bool ok = t && all && dt_to_host(t, all, sizeof *all * (size_t)n) == DT_OK;
  if (!ok) fprintf(stderr, "dtorch stress: agreeing on the stop: %s\n", dt_last_error());
  bool r = ok ? all[0] != 0 : true;
  dt_tensor_release(t);
  dt_mesh_release(m);
  free(v);
  free(all);
  return r;
}

static void progress(const opts *o, const stats *st, double t0, bool end) {
  if (o->quiet) return;
  double el = now_s() - t0;
  if (isatty(2)) {
    int w = 30, done = o->iters > 0 ? (int)(w * st->programs / o->iters) : (int)(w * el / o->seconds);
    fprintf(stderr, "\r[%-*.*s] %5.1f s  %lld programs  %lld failures", w, done > w ? w : done,
            "##############################", el, (long long)st->programs, (long long)st->failures);
    if (end) fputc('\n', stderr);
  } else {
    fprintf(stderr, "stress: %.0f s, %lld programs, %lld failures\n", el,
            (long long)st->programs, (long long)st->failures);
  }
}

int tool_stress(int argc, char **argv) {
  opts o;
  int bad = parse(argc, argv, &o);
  o.ctl = NULL;
  if (bad) return bad;
  dt_runtime *ref = dt_runtime_create(&(dt_runtime_options){.num_ranks = 1,
                                                             .launcher = "none"});
  if (!ref || (bad = join(&o)) != 0) {
    if (!bad) fprintf(stderr, "dtorch stress: %s\n", dt_last_error());
    dt_runtime_destroy(ref);
    return bad ? bad : 1;
  }
  stats st = {0};
  double t0 = now_s(), last = t0;
  int64_t live = dt_live_tensors();
  for (uint64_t s = o.seed;; s++) {
    bool stop = o.replay ? st.programs == 1 : o.iters >= 0 ? st.programs >= o.iters
                                                          : now_s() - t0 >= o.seconds;
    if (agree_stop(&o, stop)) break;
    stress_program p;
    stress_generate(&p, s, o.ranks);
    iteration it = plan(s, &o);
    if (o.replay) stress_print(stdout, &p);
    char why[1024];
    st.programs++;
    st.steps += p.n;
    bool ok = run_program(&p, &it, &o, ref, &st, why, sizeof why);
    if (ok && dt_live_tensors() != live) {
      snprintf(why, sizeof why, "%lld tensors outlived the program",
               (long long)(dt_live_tensors() - live));
      ok = false;
    }
    if (!ok) {
      st.failures++;
      report(s, &p, &it, &o, ref, why);
      break;
    }
    if (now_s() - last >= (isatty(2) ? 0.2 : 10)) {
      progress(&o, &st, t0, false);
      last = now_s();
    }
  }
  progress(&o, &st, t0, true);
  printf("stress: %lld programs (%lld steps, %d ranks, %d issuing threads), %lld under "
         "chaos, %lld with a fault armed (%lld fired and healed), %lld SPMD rounds: %s\n",
         (long long)st.programs, (long long)st.steps, o.ranks, o.threads,
         (long long)st.chaos_runs, (long long)st.faults_armed, (long long)st.faults_fired,
         (long long)st.spmd_rounds, st.failures ? "FAILED" : "all equal to one device");
  dt_runtime_destroy(ref);
  dt_runtime_destroy(o.ctl);
  return st.failures ? 1 : 0;
}
