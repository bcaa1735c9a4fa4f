/* Tensor parallelism with the public API: a two-layer MLP split
 * Megatron-style over a 1-D mesh of 4 ranks and trained with SGD. The
 * first weight is column-parallel (Shard(0): each rank computes a slice of
 * the hidden features, no communication), the second row-parallel
 * (Shard(1): each rank's product is a partial sum), and one explicit
 * dt_redistribute Partial(sum) -> Replicate is the all-reduce; autograd
 * differentiates through it. The same model runs on one device from the
 * same values; the program fails (exit 1) if the two disagree. */
#include <dtorch/dtorch.h>
#include <math.h>
#include <stdio.h>

enum { RANKS = 4, N = 16, D = 8, H = 32, STEPS = 10 };

/* mean((W2·gelu(W1·x)) - y)^2): a new reference or NULL */
static dt_tensor *forward(dt_tensor *x, dt_tensor *const *w, dt_tensor *y) {
  dt_tensor *z = dt_linear(x, w[0], NULL), *h = dt_gelu(z);
  dt_tensor *part = dt_linear(h, w[1], NULL);          /* Partial(sum) */
  dt_tensor *out = dt_tensor_mesh(part)                /* the all-reduce */
      ? dt_redistribute(part, NULL, DT_PLACEMENTS(DT_REPLICATE))
      : dt_tensor_retain(part);
  dt_tensor *d = dt_sub(out, y), *d2 = dt_mul(d, d);
  dt_tensor *loss = dt_mean(d2, NULL, 0, false);
  dt_tensor *tmp[] = {z, h, part, out, d, d2};
  for (int i = 0; i < 6; i++) dt_tensor_release(tmp[i]);
  return loss;
}

static int train(dt_mesh *mesh, const float *xs, const float *ys,
                 const float *w1, const float *w2, float *losses) {
  dt_tensor_options rep = {.mesh = mesh};
  /* placements only with a mesh; NULL: a single-device tensor */
  dt_tensor_options col = {.mesh = mesh, .requires_grad = true,
                           .placements = mesh ? DT_PLACEMENTS(DT_SHARD(0)) : NULL};
  dt_tensor_options row = {.mesh = mesh, .requires_grad = true,
                           .placements = mesh ? DT_PLACEMENTS(DT_SHARD(1)) : NULL};
  dt_tensor *x = dt_from_host(xs, DT_SHAPE(N, D), &rep);
  dt_tensor *y = dt_from_host(ys, DT_SHAPE(N, D), &rep);
  dt_tensor *w[2] = {dt_from_host(w1, DT_SHAPE(H, D), &col),
                     dt_from_host(w2, DT_SHAPE(D, H), &row)};
  dt_optimizer *opt = dt_sgd_create(w, 2, &(dt_sgd_options){.lr = 0.05, .momentum = 0.9});
  int rc = opt ? 0 : 1;
  for (int s = 0; s < STEPS && !rc; s++) {
    dt_tensor *loss = forward(x, w, y);  /* w: the slots the step refills */
    rc = !loss || dt_backward(loss) != DT_OK || dt_optimizer_step(opt) != DT_OK ||
         dt_to_host(loss, &losses[s], sizeof *losses) != DT_OK;
    dt_optimizer_zero_grad(opt);
    dt_tensor_release(loss);
  }
  if (rc) fprintf(stderr, "train_tp: %s\n", dt_last_error());
  dt_optimizer_release(opt);
  dt_tensor *all[] = {x, y, w[0], w[1]};
  for (int i = 0; i < 4; i++) dt_tensor_release(all[i]);
  return rc;
}

int main(void) {
  float xs[N * D], ys[N * D], w1[H * D], w2[D * H], ld[STEPS], ls[STEPS];
  for (int i = 0; i < N * D; i++) {
    xs[i] = (float)sin(0.53 * i);
    ys[i] = (float)cos(0.53 * i);     /* a target the MLP can fit */
  }
  for (int i = 0; i < H * D; i++) {
    w1[i] = (float)(0.3 * sin(0.71 * i + 1));
    w2[i] = (float)(0.2 * cos(0.29 * i));
  }
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = RANKS});
  dt_mesh *mesh = dt_mesh_init(rt, "cpu", DT_SHAPE(RANKS), (const char *[]){"tp"});
  dt_runtime_set_current(rt);
  int rc = !mesh || train(mesh, xs, ys, w1, w2, ld) || train(NULL, xs, ys, w1, w2, ls);
  double worst = 0;
  for (int s = 0; s < STEPS && !rc; s++) {
    printf("step %2d  loss %.6f  single device %.6f\n", s + 1, ld[s], ls[s]);
    worst = fmax(worst, fabs(ld[s] - ls[s]) / fmax(fabs(ls[s]), 1e-12));
  }
  if (!rc) printf("largest relative loss difference: %.2e\n", worst);
  if (!rc && worst > 1e-5) {
    fprintf(stderr, "train_tp: the distributed run differs from one device\n");
    rc = 1;
  }
  dt_mesh_release(mesh);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  return rc;
}
