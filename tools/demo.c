/* `dtorch demo`: the main job. A two-layer MLP forward pass with a
 * cross-entropy loss, run with the op printer on so every op the dispatcher
 * sees is printed, then the op counts, and the logits checked against a naive double-precision loop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtorch/dtorch.h"
#include "dispatch/dispatch.h"
#include "tools/tools.h"

enum { BATCH = 8, IN = 16, HIDDEN = 32, CLASSES = 10 };

static int demo_distributed(dt_tensor *w1);

static float *host(dt_tensor *t, size_t n) {
  float *p = malloc(n * sizeof *p);
  if (p && dt_to_host(t, p, n * sizeof *p) != DT_OK) {
    free(p);
    return NULL;
  }
  return p;
}

/* logits = gelu(layer_norm(x) W1ᵀ + b1) W2ᵀ + b2, in double */
static double check_against_double(dt_tensor *x, dt_tensor *w1, dt_tensor *b1,
                                   dt_tensor *w2, dt_tensor *b2,
                                   dt_tensor *logits) {
  float *hx = host(x, BATCH * IN), *hw1 = host(w1, HIDDEN * IN),
        *hb1 = host(b1, HIDDEN), *hw2 = host(w2, CLASSES * HIDDEN),
        *hb2 = host(b2, CLASSES), *hl = host(logits, BATCH * CLASSES);
  double worst = -1;
  if (hx && hw1 && hb1 && hw2 && hb2 && hl) {
    worst = 0;
    for (int r = 0; r < BATCH; r++) {
      double mean = 0, var = 0, xn[IN], h[HIDDEN];
      for (int i = 0; i < IN; i++) mean += hx[r * IN + i] / (double)IN;
      for (int i = 0; i < IN; i++)
        var += pow(hx[r * IN + i] - mean, 2) / IN;
      for (int i = 0; i < IN; i++) xn[i] = (hx[r * IN + i] - mean) / sqrt(var + 1e-5);
      for (int j = 0; j < HIDDEN; j++) {
        double s = hb1[j];
        for (int i = 0; i < IN; i++) s += xn[i] * hw1[j * IN + i];
        h[j] = 0.5 * s * erfc(-s / sqrt(2.0));
      }
      for (int k = 0; k < CLASSES; k++) {
        double s = hb2[k];
        for (int j = 0; j < HIDDEN; j++) s += h[j] * hw2[k * HIDDEN + j];
        double d = fabs(s - hl[r * CLASSES + k]);
        if (d > worst) worst = d;
      }
    }
  }
  free(hx); free(hw1); free(hb1); free(hw2); free(hb2); free(hl);
  return worst;
}

int tool_demo(int argc, char **argv) {
  (void)argc; (void)argv;
  printf("dtorch demo: a 2-layer MLP forward on one device "
         "(batch %d, %d → %d → %d), every op printed as the dispatcher "
         "sees it\n\n", BATCH, IN, HIDDEN, CLASSES);
  dt_manual_seed(0);
  dt_op_counter *counter = dt_op_counter_push();
  dt_op_printer_push(stdout);

  dt_tensor *x = dt_randn(DT_SHAPE(BATCH, IN), NULL);
  dt_tensor *r1 = dt_randn(DT_SHAPE(HIDDEN, IN), NULL);
  dt_tensor *w1 = dt_mul_scalar(r1, 0.25);
  dt_tensor *b1 = dt_zeros(DT_SHAPE(HIDDEN), NULL);
  dt_tensor *r2 = dt_randn(DT_SHAPE(CLASSES, HIDDEN), NULL);
  dt_tensor *w2 = dt_mul_scalar(r2, 0.18);
  dt_tensor *b2 = dt_full(DT_SHAPE(CLASSES), 0.01, NULL);
  dt_tensor *target = dt_arange(0, BATCH, 1, &(dt_tensor_options){.dtype = DT_INT64});

  dt_tensor *xn = dt_layer_norm(x, NULL, NULL, 1e-5);
  dt_tensor *z = dt_linear(xn, w1, b1);
  dt_tensor *h = dt_gelu(z);
  dt_tensor *logits = dt_linear(h, w2, b2);
  dt_tensor *probs = dt_softmax(logits, -1);
  dt_tensor *loss = dt_cross_entropy(logits, target, DT_REDUCTION_MEAN, -100);
  dt_tensor *conf = dt_amax(probs, (int[]){-1}, 1, false);

  dt_intercept_pop();
  dt_op_counter_pop(counter);
  if (!loss || !conf) {
    fprintf(stderr, "dtorch demo: %s\n", dt_last_error());
    dt_op_counter_free(counter);
    return 1;
  }
  char buf[2048];
  dt_op_counter_format(counter, buf, sizeof buf);
  printf("\nop counts (%lld ops):\n%s", (long long)dt_op_counter_total(counter), buf);
  dt_op_counter_free(counter);

  float l, c[BATCH];
  dt_to_host(loss, &l, sizeof l);
  dt_to_host(conf, c, sizeof c);
  printf("\nloss = %.6f (uniform guess: %.6f)\n", l, log((double)CLASSES));
  printf("max softmax probability per row:");
  for (int i = 0; i < BATCH; i++) printf(" %.3f", c[i]);
  double worst = check_against_double(x, w1, b1, w2, b2, logits);
  printf("\nlogits vs a naive double-precision loop: max |diff| = %.3g %s\n",
         worst, worst >= 0 && worst < 1e-4 ? "(ok)" : "(MISMATCH)");
  int rc = worst >= 0 && worst < 1e-4 ? 0 : 1;
  if (demo_distributed(w1) != 0) rc = 1;
  dt_tensor *all[] = {x, r1, w1, b1, r2, w2, b2, target, xn, z, h, logits,
                      probs, loss, conf};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) dt_tensor_release(all[i]);
  dt_runtime_synchronize(dt_runtime_default());
  printf("live tensors at exit: %lld\n", (long long)dt_live_tensors());
  return rc;
}

/* Part 2: the same weights as DTensors on a 2 x 4 mesh of the default
 * runtime: shards per rank, redistributes with their collectives counted,
 * and the gathered value checked against the single-device tensor. */
static int demo_distributed(dt_tensor *w1) {
  printf("\n-- distributed: w1 [%d, %d] on a 2 x 4 mesh (dp, tp) --\n", HIDDEN, IN);
  dt_mesh *mesh = dt_mesh_init(NULL, "cpu", DT_SHAPE(2, 4),
                               (const char *[]){"dp", "tp"});
  float ref[HIDDEN * IN], got[HIDDEN * IN];
  if (!mesh || dt_to_host(w1, ref, sizeof ref) != DT_OK) goto fail;
  char buf[256];
  dt_mesh_format(mesh, buf, sizeof buf);
  printf("%s\n", buf);
  dt_tensor *w = dt_redistribute(w1, mesh, DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  if (!w) goto fail;
  printf("w1 as [R, S(0)]: local shapes");
  for (int r = 0; r < 8; r++) {
    dt_shape ls = dt_tensor_local_shape(w, r);
    printf(" %d:[%lld, %lld]", r, (long long)ls.dims[0], (long long)ls.dims[1]);
  }
  printf("\n");
  const struct { const char *name; const dt_placement *pl; } steps[] = {
      {"[S(1), S(0)]", DT_PLACEMENTS(DT_SHARD(1), DT_SHARD(0))},
      {"[S(1), R]", DT_PLACEMENTS(DT_SHARD(1), DT_REPLICATE)},
      {"[R, R]", DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE)},
  };
  int ok = 1;
  for (size_t i = 0; i < sizeof steps / sizeof *steps && ok; i++) {
    dt_comm_count_begin();
    dt_tensor *n = dt_redistribute(w, NULL, steps[i].pl);
    dt_comm_counts c = dt_comm_count_end();
    ok = n && dt_to_host(n, got, sizeof got) == DT_OK &&
         memcmp(got, ref, sizeof ref) == 0;
    printf("-> %-13s all_gather %lld, all_to_all %lld, all_reduce %lld, "
           "reduce_scatter %lld, %lld bytes: %s\n", steps[i].name,
           (long long)c.all_gather, (long long)c.all_to_all,
           (long long)c.all_reduce, (long long)c.reduce_scatter,
           (long long)c.bytes, ok ? "same values" : dt_last_error());
    dt_tensor_release(w);
    w = n;
  }
  dt_tensor_release(w);
  dt_mesh_release(mesh);
  return ok ? 0 : 1;
fail:
  fprintf(stderr, "dtorch demo: %s\n", dt_last_error());
  dt_mesh_release(mesh);
  return 1;
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
