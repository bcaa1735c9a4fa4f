/* `dtorch bench demo`: one training step of `dtorch demo`'s models
 * (tools/demo_model.c) — forward, backward, AdamW step, until every rank
 * is done (dt_runtime_synchronize) — on a dp 2 × tp 4 mesh, against the
 * same step on a single device, same shapes and
 * values. The two alternate step by step in the same run after two
 * warm-up steps each. One JSON line per model:
 *   {"bench":"train_step","dp":2,"tp":4,"model":"mlp","hidden":1024,
 *    "batch":64,"ms":M,"single_ms":S,"ratio":M/S,"best_ms":..,
 *    "best_single_ms":..,"steps":N,"max_rel_diff":..}
 * ms and single_ms are medians over the timed steps. The losses of the two
 * copies are compared at every step; the run fails (exit 1) if they drift
 * apart by more than 1e-4 relative or a call fails. */
#include <math.h>

#include "bench/bench.h"
#include "tools/demo.h"

typedef struct train_bench {
  demo_config cfg;
  dt_runtime *rt, *rt1;
  dt_mesh *mesh;
  demo_model dist, single;
} train_bench;

static void die(const char *what) {
  fprintf(stderr, "bench demo: %s: %s\n", what, dt_last_error());
  exit(1);
}

static void setup(train_bench *b) {
  b->rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = b->cfg.dp * b->cfg.tp});
  /* the baseline gets the same threads: its tensors live on rank 0 of a
   * runtime with as many ranks, whose idle ranks steal its chunks */
  b->rt1 = dt_runtime_create(&(dt_runtime_options){.num_ranks = b->cfg.dp * b->cfg.tp});
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
}

static void teardown(train_bench *b) {
  demo_model_destroy(&b->dist);
  demo_model_destroy(&b->single);
  dt_mesh_release(b->mesh);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(b->rt);
  dt_runtime_destroy(b->rt1);
}

/* one step of m, seconds until rt is done; *loss its value */
static double timed_step(demo_model *m, dt_runtime *rt, const demo_batch *batch,
                         double *loss) {
  double t0 = bench_now();
  dt_tensor *l = demo_train_step(m, batch);
  if (!l || dt_runtime_synchronize(rt) != DT_OK) die("train step");
  double t = bench_now() - t0;
  float v;
  if (dt_to_host(l, &v, sizeof v) != DT_OK) die("dt_to_host(loss)");
  dt_tensor_release(l);
  *loss = v;
  return t;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void run_train(demo_config cfg, int reps) {
  enum { WARMUP = 2 };
  train_bench b = {.cfg = cfg};
  setup(&b);
  int n = reps < 3 ? 3 : reps;
  double ms[n], sms[n], best = 1e300, sbest = 1e300, worst_rel = 0;
  for (int i = 0; i < WARMUP + n; i++) {
    demo_batch batch;
    if (!demo_batch_make(&b.cfg, i, &batch)) die("batch");
    double ld, ls;
    double t = timed_step(&b.dist, b.rt, &batch, &ld);
    double st = timed_step(&b.single, b.rt1, &batch, &ls);
    demo_batch_free(&batch);
    worst_rel = fmax(worst_rel, fabs(ld - ls) / fmax(fabs(ls), 1e-30));
    if (i < WARMUP) continue;
    ms[i - WARMUP] = t * 1e3;
    sms[i - WARMUP] = st * 1e3;
    best = fmin(best, t * 1e3);
    sbest = fmin(sbest, st * 1e3);
  }
  teardown(&b);
  double m = median(ms, n), sm = median(sms, n);
  printf("{\"bench\":\"train_step\",\"dp\":%d,\"tp\":%d,\"model\":\"%s\","
         "\"hidden\":%d,\"batch\":%d,", cfg.dp, cfg.tp,
         cfg.model == DEMO_MLP ? "mlp" : "transformer", cfg.hidden, cfg.batch);
  if (cfg.model == DEMO_TRANSFORMER)
    printf("\"seq\":%d,\"heads\":%d,", cfg.seq, cfg.heads);
  printf("\"ms\":%.3f,\"single_ms\":%.3f,\"ratio\":%.3f,\"best_ms\":%.3f,"
         "\"best_single_ms\":%.3f,\"steps\":%d,\"max_rel_diff\":%.3g}\n",
         m, sm, m / sm, best, sbest, n, worst_rel);
  fflush(stdout);
  if (!(worst_rel <= 1e-4)) {
    fprintf(stderr, "bench demo: the distributed and single-device losses "
            "differ by %.3g (relative)\n", worst_rel);
    exit(1);
  }
}

static void bench_mlp(int reps) {
  demo_config c = demo_config_default(DEMO_MLP);
  c.hidden = 1024;
  c.batch = 64;
  run_train(c, reps);
}

static void bench_transformer(int reps) {
  demo_config c = demo_config_default(DEMO_TRANSFORMER);
  c.hidden = 256;
  c.seq = 64;
  c.heads = 8;
  c.batch = 8;
  run_train(c, reps);
}

int bench_demo(int argc, char **argv) {
  static const bench_figure figs[] = {{"mlp", bench_mlp},
                                      {"transformer", bench_transformer}};
  return bench_main(argc, argv, "demo", figs, 2);
}
