/* The planted bug of the README's "Debugging a DP+TP program": a DP x TP
 * MLP block written SPMD-style (as a torchrun script) whose row-parallel
 * half runs on the local shards and is wrapped with dt_dtensor_from_local
 * claiming Replicate — but each tp rank holds only its partial sum: the
 * all-reduce is missing. Nothing fails; the loss is just wrong.
 *
 *   debug_tp                the buggy program
 *   debug_tp --fixed        the claim is Partial(sum) and the redistribute
 *                           to Replicate runs the all-reduce
 *   debug_tp --trace FILE   also writes the run's timeline
 *   debug_tp --no-shadow    without the shadow checks (their own gathers
 *                           would show in the timeline)
 *
 * Every rank shadows its calls (dt_shadow_begin) and counts its
 * collectives by label (dt_comm_debug_begin); rank 0 prints its comm
 * report. Exit status 0 when the tools say what the README says: the
 * buggy run diverges at the from_local call (op #5) on every rank, the
 * fixed run nowhere and its loss equals the single-device loss. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <dtorch/dtorch.h>

enum { DP = 2, TP = 2, RANKS = DP * TP, B = 8, IN = 16, HID = 32, OUT = 8 };
static float x[B * IN], w1[HID * IN], w2[OUT * HID], tgt[B * OUT];
static dt_mesh *mesh;
static bool fixed, shadow = true;
static float loss[RANKS];
static dt_shadow_report report[RANKS];

/* rows [r0, r0 + n) x cols [c0, c0 + m) of a row-major matrix of `cols` columns */
static dt_tensor *block(const float *a, int cols, int r0, int n, int c0, int m) {
  float buf[HID * IN];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) buf[i * m + j] = a[(r0 + i) * cols + c0 + j];
  return dt_from_host(buf, DT_SHAPE(n, m), NULL); /* on this rank's device */
}

static dt_tensor *mlp(int dp, int tp, dt_tensor **keep) {
  dt_label_push("block.mlp");
  dt_tensor *X = dt_dtensor_from_local(keep[0] = block(x, IN, dp * B / DP, B / DP, 0, IN),
                                       mesh, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_tensor *W1 = dt_dtensor_from_local( /* column-parallel: rows of w1 */
      keep[1] = block(w1, IN, tp * HID / TP, HID / TP, 0, IN), mesh,
      DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  dt_tensor *H = dt_linear(X, W1, NULL), *G = dt_relu(H); /* [S(0), S(1)] */
  dt_label_push("row_parallel"); /* by hand, on the local shards */
  dt_tensor *w2l = keep[2] = block(w2, HID, 0, OUT, tp * HID / TP, HID / TP);
  dt_tensor *gl = keep[3] = dt_dtensor_to_local(G);
  dt_tensor *part = keep[4] = dt_linear(gl, w2l, NULL); /* this rank's partial sum */
  dt_tensor *Y = dt_dtensor_from_local(part, mesh, fixed
      ? DT_PLACEMENTS(DT_SHARD(0), DT_PARTIAL(DT_REDUCE_SUM))
      : DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)); /* the planted bug */
  dt_tensor *R = dt_redistribute(Y, NULL, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_label_pop();
  dt_label_pop();
  dt_tensor *all[] = {X, W1, H, G, Y};
  for (int i = 0; i < 5; i++) dt_tensor_release(all[i]);
  return R;
}

static dt_status step(dt_spmd_ctx *ctx) {
  int r = ctx->rank, dp = r / TP, tp = r % TP;
  if (shadow) dt_shadow_begin(1e-5);
  dt_comm_debug_begin();
  dt_tensor *keep[6] = {0};
  dt_tensor *Y = mlp(dp, tp, keep);
  dt_label_push("loss");
  dt_tensor *T = dt_dtensor_from_local(keep[5] = block(tgt, OUT, dp * B / DP, B / DP, 0, OUT),
                                       mesh, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_tensor *D = dt_sub(Y, T), *D2 = dt_mul(D, D), *L = dt_sum(D2, NULL, 0, false);
  dt_tensor *LR = dt_redistribute(L, NULL, DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE));
  dt_tensor *Ll = dt_dtensor_to_local(LR);
  dt_label_pop();
  dt_status st = Ll ? dt_to_host(Ll, &loss[r], sizeof loss[r]) : dt_last_status();
  if (shadow) dt_shadow_end(&report[r]);
  dt_comm_debug_end(r == 0 ? stdout : NULL, NULL);
  dt_tensor *all[] = {Y, T, D, D2, L, LR, Ll};
  for (int i = 0; i < 7; i++) dt_tensor_release(all[i]);
  for (int i = 0; i < 6; i++) dt_tensor_release(keep[i]);
  return st;
}

/* the same block on one device, in double precision */
static double reference_loss(void) {
  double s = 0, h[HID];
  for (int b = 0; b < B; b++) {
    for (int j = 0; j < HID; j++) {
      h[j] = 0;
      for (int i = 0; i < IN; i++) h[j] += (double)x[b * IN + i] * w1[j * IN + i];
      h[j] = h[j] > 0 ? h[j] : 0;
    }
    for (int o = 0; o < OUT; o++) {
      double y = 0;
      for (int j = 0; j < HID; j++) y += h[j] * w2[o * HID + j];
      s += (y - tgt[b * OUT + o]) * (y - tgt[b * OUT + o]);
    }
  }
  return s;
}

int main(int argc, char **argv) {
  const char *trace = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--fixed")) fixed = true;
    else if (!strcmp(argv[i], "--no-shadow")) shadow = false;
    else if (!strcmp(argv[i], "--trace") && i + 1 < argc) trace = argv[++i];
    else {
      fprintf(stderr, "usage: debug_tp [--fixed] [--no-shadow] [--trace FILE]\n");
      return 2;
    }
  }
  for (int i = 0; i < B * IN; i++) x[i] = (float)sin(i * 0.37);
  for (int i = 0; i < HID * IN; i++) w1[i] = (float)cos(i * 0.11) * 0.3f;
  for (int i = 0; i < OUT * HID; i++) w2[i] = (float)sin(i * 0.23) * 0.3f;
  for (int i = 0; i < B * OUT; i++) tgt[i] = (float)cos(i * 0.5);
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = RANKS});
  mesh = dt_mesh_init(rt, "cpu", DT_SHAPE(DP, TP), (const char *const[]){"dp", "tp"});
  printf("debug_tp: an MLP block on a %d x %d (dp, tp) mesh, SPMD, %s\n\n", DP, TP,
         fixed ? "fixed: the row-parallel output is Partial(sum), then reduced"
               : "planted bug: the row-parallel output is declared Replicate");
  if (!mesh || (trace && dt_trace_begin(rt, trace) != DT_OK) ||
      dt_spmd_run(rt, step, NULL) != DT_OK || (trace && dt_trace_end(rt) != DT_OK)) {
    fprintf(stderr, "debug_tp: %s\n", dt_last_error());
    return 1;
  }
  double want = reference_loss();
  printf("\nloss: rank 0 %.6f, rank 1 %.6f, rank 2 %.6f, rank 3 %.6f; one device "
         "%.6f\n", loss[0], loss[1], loss[2], loss[3], want);
  bool same = true, right = true;
  for (int r = 0; r < RANKS; r++) {
    same = same && report[r].first_divergence == report[0].first_divergence;
    right = right && fabs(loss[r] - want) <= 1e-4 * (1 + fabs(want));
  }
  if (shadow)
    printf("shadow (%lld ops checked on each rank): %s\n", (long long)report[0].ops_checked,
           report[0].first_divergence ? report[0].message : "no divergence");
  if (trace) printf("timeline: %s (open it in https://ui.perfetto.dev)\n", trace);
  dt_mesh_release(mesh);
  dt_runtime_destroy(rt);
  bool ok = same && (fixed ? right && !report[0].first_divergence
                           : !right && (!shadow || report[0].first_divergence == 5));
  return ok ? 0 : 1;
}
