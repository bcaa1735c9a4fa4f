/* `dtorch demo`: the main job. A two-layer MLP forward pass with a
 * cross-entropy loss, run with the op printer on so every op the dispatcher
 * sees is printed (seed 004's experiment 1), then the op counts (experiment
 * 2), and the logits checked against a naive double-precision loop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtorch/dtorch.h"
#include "runtime/dispatch.h"
#include "tools/tools.h"

enum { BATCH = 8, IN = 16, HIDDEN = 32, CLASSES = 10 };

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
  dt_tensor *all[] = {x, r1, w1, b1, r2, w2, b2, target, xn, z, h, logits,
                      probs, loss, conf};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) dt_tensor_release(all[i]);
  printf("live tensors at exit: %lld\n", (long long)dt_live_tensors());
  return worst >= 0 && worst < 1e-4 ? 0 : 1;
}

int tool_ops(void) {
  printf("%-16s %s\n", "op", "schema");
  for (int i = 0; i < DT_OP_COUNT; i++)
    printf("%-16s %s\n", dt_op_defs[i].name, dt_op_defs[i].schema);
  printf("(%d ops; schema: T tensor, t optional tensor, L tensor list, "
         "s scalar, d/i/b static double/int/bool, n non-static int, I int list, "
         "D dtype, P host pointer)\n", DT_OP_COUNT);
  return 0;
}
