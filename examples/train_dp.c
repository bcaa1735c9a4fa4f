/* Data parallelism with the public API: a linear regression trained with
 * SGD on a 1-D mesh of 4 ranks. The batch is split over the ranks
 * (Shard(0)), the weights are replicated; the gradient of a replicated
 * weight used by sharded activations comes out Partial(sum), and the
 * optimiser's redistribution of it to Replicate is the DP all-reduce.
 * The same model runs on one device from the same values; the program
 * fails (exit 1) if the two disagree. */
#include <dtorch/dtorch.h>
#include <math.h>
#include <stdio.h>

enum { RANKS = 4, N = 32, IN = 8, OUT = 4, STEPS = 10 };

/* loss = mean((x·wᵀ + b - y)^2); a new reference or NULL */
static dt_tensor *mse(dt_tensor *x, dt_tensor *w, dt_tensor *b, dt_tensor *y) {
  dt_tensor *p = dt_linear(x, w, b), *d = dt_sub(p, y), *d2 = dt_mul(d, d);
  dt_tensor *loss = dt_mean(d2, NULL, 0, false);
  dt_tensor_release(p);
  dt_tensor_release(d);
  dt_tensor_release(d2);
  return loss;
}

/* trains on mesh (NULL: one device); w_out gets the final weight */
static int train(dt_mesh *mesh, const float *xs, const float *ys,
                 const float *w0, float *w_out, float *losses) {
  /* placements only with a mesh; NULL: a single-device tensor */
  dt_tensor_options data = {.mesh = mesh,
                            .placements = mesh ? DT_PLACEMENTS(DT_SHARD(0)) : NULL};
  dt_tensor_options param = {.mesh = mesh, .requires_grad = true};
  dt_tensor *x = dt_from_host(xs, DT_SHAPE(N, IN), &data);
  dt_tensor *y = dt_from_host(ys, DT_SHAPE(N, OUT), &data);
  dt_tensor *params[2] = {dt_from_host(w0, DT_SHAPE(OUT, IN), &param),
                          dt_zeros(DT_SHAPE(OUT), &param)};
  dt_optimizer *opt = dt_sgd_create(params, 2, &(dt_sgd_options){.lr = 0.1});
  int rc = opt ? 0 : 1;
  for (int s = 0; s < STEPS && !rc; s++) {
    dt_tensor *loss = mse(x, params[0], params[1], y);
    rc = !loss || dt_backward(loss) != DT_OK || dt_optimizer_step(opt) != DT_OK ||
         dt_to_host(loss, &losses[s], sizeof *losses) != DT_OK;
    dt_optimizer_zero_grad(opt);
    dt_tensor_release(loss);
  }
  /* the step replaced the tensors in the slots: read params[0] now */
  if (!rc) rc = dt_to_host(params[0], w_out, sizeof(float) * OUT * IN) != DT_OK;
  if (rc) fprintf(stderr, "train_dp: %s\n", dt_last_error());
  dt_optimizer_release(opt);
  dt_tensor_release(params[0]);
  dt_tensor_release(params[1]);
  dt_tensor_release(x);
  dt_tensor_release(y);
  return rc;
}

int main(void) {
  float xs[N * IN], ys[N * OUT], w0[OUT * IN], wd[OUT * IN], ws[OUT * IN];
  float ld[STEPS], ls[STEPS];
  for (int i = 0; i < N * IN; i++) xs[i] = (float)sin(0.37 * i);
  for (int i = 0; i < OUT * IN; i++) w0[i] = (float)(0.1 * cos(1.3 * i));
  for (int r = 0; r < N; r++) /* the teacher: y = 0.5 * (x0 + ... + x{k}) */
    for (int o = 0; o < OUT; o++) {
      ys[r * OUT + o] = 0;
      for (int k = 0; k <= o; k++) ys[r * OUT + o] += 0.5f * xs[r * IN + k];
    }
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = RANKS});
  dt_mesh *mesh = dt_mesh_init(rt, "cpu", DT_SHAPE(RANKS), (const char *[]){"dp"});
  dt_runtime_set_current(rt);
  int rc = !mesh || train(mesh, xs, ys, w0, wd, ld) || train(NULL, xs, ys, w0, ws, ls);
  double worst = 0;
  for (int s = 0; s < STEPS && !rc; s++) {
    printf("step %2d  loss %.6f  single device %.6f\n", s + 1, ld[s], ls[s]);
    worst = fmax(worst, fabs(ld[s] - ls[s]) / fmax(fabs(ls[s]), 1e-12));
  }
  for (int i = 0; i < OUT * IN && !rc; i++)
    worst = fmax(worst, fabs(wd[i] - ws[i]) / fmax(fabs(ws[i]), 1e-3));
  if (!rc) printf("largest relative difference: %.2e\n", worst);
  if (!rc && worst > 1e-5) {
    fprintf(stderr, "train_dp: the distributed run differs from one device\n");
    rc = 1;
  }
  dt_mesh_release(mesh);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  return rc;
}
