/* SPMD mode, as a torchrun script would be written: every rank runs
 * train_step on its own thread with its own shards of a tensor-parallel
 * MLP (column-parallel w1, row-parallel w2) and calls the all-reduce
 * itself; then the same layer as DTensors built from the shards. Both are
 * checked against the controller (global view) run. Finally a planted
 * desync: rank 3 calls a different collective and every rank is told
 * which rank called what, where. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <dtorch/dtorch.h>

#define RANKS 4
enum { B = 4, IN = 8, HID = 16, OUT = 4 };
static float x[B * IN], w1[HID * IN], w2[OUT * HID];
static float out_plain[RANKS][B * OUT], out_dtensor[RANKS][B * OUT];
static dt_mesh *mesh;

static dt_tensor *local(const float *v, dt_shape s) {
  return dt_from_host(v, s, NULL); /* on this rank's own device */
}

static dt_status train_step(dt_spmd_ctx *ctx) {
  int r = ctx->rank, k = HID / RANKS;
  float a[HID / RANKS * IN], b[OUT * (HID / RANKS)];
  memcpy(a, w1 + r * k * IN, sizeof a);           /* my rows of w1 */
  for (int o = 0; o < OUT; o++)                   /* my columns of w2 */
    for (int j = 0; j < k; j++) b[o * k + j] = w2[o * HID + r * k + j];
  dt_tensor *xl = local(x, DT_SHAPE(B, IN));
  dt_tensor *al = local(a, DT_SHAPE(HID / RANKS, IN));
  dt_tensor *bl = local(b, DT_SHAPE(OUT, HID / RANKS));
  /* 1. plain local tensors and an explicit all-reduce */
  dt_tensor *h = dt_linear(xl, al, NULL), *g = dt_relu(h);
  dt_tensor *part = dt_linear(g, bl, NULL);
  dt_tensor *y = dt_all_reduce(part, DT_REDUCE_SUM, NULL);
  dt_status st = y ? dt_to_host(y, out_plain[r], sizeof out_plain[r]) : dt_last_status();
  /* 2. DTensors from the shards: the ops propagate the placements and the
   * redistribute runs the all-reduce */
  dt_tensor *X = dt_dtensor_from_local(xl, mesh, DT_PLACEMENTS(DT_REPLICATE));
  dt_tensor *A = dt_dtensor_from_local(al, mesh, DT_PLACEMENTS(DT_SHARD(0)));
  dt_tensor *Bw = dt_dtensor_from_local(bl, mesh, DT_PLACEMENTS(DT_SHARD(1)));
  dt_tensor *H = dt_linear(X, A, NULL), *G = dt_relu(H), *P = dt_linear(G, Bw, NULL);
  dt_tensor *R = dt_redistribute(P, NULL, DT_PLACEMENTS(DT_REPLICATE));
  dt_tensor *Rl = dt_dtensor_to_local(R);
  if (st == DT_OK)
    st = Rl ? dt_to_host(Rl, out_dtensor[r], sizeof out_dtensor[r]) : dt_last_status();
  dt_tensor *all[] = {xl, al, bl, h, g, part, y, X, A, Bw, H, G, P, R, Rl};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dt_tensor_release(all[i]);
  return st;
}

static dt_status desync(dt_spmd_ctx *ctx) {
  float v[4] = {1, 2, 3, 4};
  dt_tensor *t = local(v, DT_SHAPE(4)), *y;
  if (ctx->rank == 3) y = dt_all_gather(t, 0, NULL);   /* the planted bug */
  else y = dt_all_reduce(t, DT_REDUCE_SUM, NULL);
  if (!y && ctx->rank == 0) printf("rank 0 was told: %s\n", dt_last_error());
  dt_status st = y ? DT_OK : dt_last_status();
  dt_tensor_release(y);
  dt_tensor_release(t);
  return st;
}

int main(void) {
  for (int i = 0; i < B * IN; i++) x[i] = (float)sin(i * 0.5);
  for (int i = 0; i < HID * IN; i++) w1[i] = (float)cos(i * 0.3) * 0.5f;
  for (int i = 0; i < OUT * HID; i++) w2[i] = (float)sin(i * 0.7) * 0.5f;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = RANKS});
  mesh = dt_mesh_init(rt, "cpu", DT_SHAPE(RANKS), (const char *const[]){"tp"});
  if (!rt || !mesh || dt_spmd_run(rt, train_step, NULL) != DT_OK) {
    fprintf(stderr, "spmd_tp: %s\n", dt_last_error());
    return 1;
  }
  /* the controller run of the same layer */
  dt_tensor_options o = {.mesh = mesh, .placements = DT_PLACEMENTS(DT_REPLICATE)};
  dt_tensor *X = dt_from_host(x, DT_SHAPE(B, IN), &o);
  o.placements = DT_PLACEMENTS(DT_SHARD(0));
  dt_tensor *A = dt_from_host(w1, DT_SHAPE(HID, IN), &o);
  o.placements = DT_PLACEMENTS(DT_SHARD(1));
  dt_tensor *Bw = dt_from_host(w2, DT_SHAPE(OUT, HID), &o);
  dt_tensor *H = dt_linear(X, A, NULL), *G = dt_relu(H), *Y = dt_linear(G, Bw, NULL);
  float want[B * OUT];
  if (dt_to_host(Y, want, sizeof want) != DT_OK) return 1;
  double worst = 0;
  for (int r = 0; r < RANKS; r++)
    for (int i = 0; i < B * OUT; i++) {
      worst = fmax(worst, fabs(out_plain[r][i] - want[i]));
      worst = fmax(worst, fabs(out_dtensor[r][i] - want[i]));
    }
  printf("SPMD TP MLP on %d ranks: y[0] = %.6f, max |SPMD - controller| = %g\n",
         RANKS, out_plain[0][0], worst);
  dt_status st = dt_spmd_run(rt, desync, NULL);
  printf("planted desync: dt_spmd_run returned %s\n", dt_status_name(st));
  dt_tensor *all[] = {X, A, Bw, H, G, Y};
  for (int i = 0; i < 6; i++) dt_tensor_release(all[i]);
  dt_mesh_release(mesh);
  dt_runtime_destroy(rt);
  return worst == 0 && st == DT_ERR_DESYNC ? 0 : 1;
}
