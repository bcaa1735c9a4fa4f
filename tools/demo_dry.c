/* `dtorch demo --dry-run`: one training step of the demo model (forward,
 * loss, backward, AdamW) on a dry-run runtime of dp × tp ranks — shapes,
 * placements, redistribution plans, collectives and per-rank memory, no
 * data and no compute — and a table of what a real step would move, hold
 * and take under the alpha-beta model (docs/spmd.md "Dry runs"). */
#include <stdio.h>
#include <sys/resource.h>

#include "bench/bench.h"
#include "tools/demo.h"

static void row(const char *what, const char *fmt, double v) {
  printf("  %-34s ", what);
  printf(fmt, v);
  putchar('\n');
}

static void print_table(const demo_config *c, const dt_dry_run_stats *s,
                        const dt_comm_counts *cc, double wall_s, double link_gbps,
                        double latency_us) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("dtorch demo --dry-run: %s, %d layer(s), hidden %d, batch %d on a %d x %d "
         "(dp x tp) mesh: %d ranks\n", c->model == DEMO_TRANSFORMER ? "transformer" : "MLP",
         c->layers, c->hidden, c->batch, c->dp, c->tp, c->dp * c->tp);
  printf("model: links %.0f GB/s, %.1f us per step; device memory 2000 GB/s; "
         "matmul 400 TFLOP/s\n\n", link_gbps > 0 ? link_gbps : 100,
         latency_us > 0 ? latency_us : 5);
  printf("one training step (forward, loss, backward, AdamW)\n");
  row("ops issued", "%.0f", (double)s->ops);
  printf("  %-34s %lld all_reduce, %lld all_gather, %lld reduce_scatter, %lld "
         "all_to_all\n", "collectives", (long long)cc->all_reduce,
         (long long)cc->all_gather, (long long)cc->reduce_scatter,
         (long long)cc->all_to_all);
  row("collective bytes (all ranks' inputs)", "%.0f", (double)s->comm_bytes);
  row("peak memory, fullest rank (bytes)", "%.0f", (double)s->peak_max);
  row("peak memory, emptiest rank (bytes)", "%.0f", (double)s->peak_min);
  row("predicted communication (us)", "%.1f", s->comm_s * 1e6);
  row("predicted compute (us)", "%.1f", s->compute_s * 1e6);
  row("predicted step, no overlap (us)", "%.1f", s->step_s * 1e6);
  printf("\ndry run: %.2f s wall, %.0f MiB peak resident\n", wall_s,
         (double)ru.ru_maxrss / 1024.0);
}

int demo_dry_run(const demo_config *c, double link_gbps, double latency_us) {
  double t0 = bench_now();
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = c->dp * c->tp, .dry_run = true, .dry_link_gbps = link_gbps,
      .dry_link_latency_us = latency_us});
  dt_mesh *mesh = rt ? dt_mesh_init(rt, NULL, DT_SHAPE(c->dp, c->tp),
                                    (const char *[]){"dp", "tp"}) : NULL;
  demo_init init;
  demo_model m;
  demo_batch b;
  bool ok = mesh && demo_init_make(c, &init);
  bool made = ok && demo_model_create(&m, c, mesh, &init);
  if (ok) demo_init_free(&init);
  ok = made && demo_batch_make(c, 0, &b);
  dt_comm_counts cc = {0};
  dt_dry_run_stats s = {0};
  if (ok) {
    dt_dry_run_reset(rt); /* the step's own counts; peaks from the model up */
    dt_comm_count_begin();
    dt_tensor *loss = demo_train_step(&m, &b);
    cc = dt_comm_count_end();
    ok = loss && dt_runtime_synchronize(rt) == DT_OK &&
         dt_dry_run_report(rt, &s) == DT_OK;
    dt_tensor_release(loss);
    demo_batch_free(&b);
  }
  if (!ok) fprintf(stderr, "dtorch demo --dry-run: %s\n", dt_last_error());
  if (made) demo_model_destroy(&m);
  dt_mesh_release(mesh);
  dt_runtime_destroy(rt);
  if (ok) print_table(c, &s, &cc, bench_now() - t0, link_gbps, latency_us);
  return ok ? 0 : 1;
}
