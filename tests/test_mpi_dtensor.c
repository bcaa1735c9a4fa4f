/* DTensors on a multi-process runtime (launcher "mpi"): every
 * redistribution kind, redistribution to another mesh, a tensor-parallel
 * MLP with AdamW and other ops, run by scripts/mpirun.sh on 2 and 4
 * processes (ctest label mpi); the program passes on 1 process too. A job
 * of N = 8 global ranks; process p hosts ranks p*N/P .. (p+1)*N/P - 1.
 * References: host arrays and naive loops (torch.chunk slicing, sums and
 * maxima in double), and the same program on a ONE-process runtime
 * (launcher "none", 8 ranks) made in the same process, whose results must
 * be bitwise the same. Every check runs in every process and counts
 * instead of jumping out; at the end of each test the processes add up
 * their failures (mpi_dtensor_common.h). Built without MPI: skipped (77).
 * The runtime's and the fetches' semantics are in test_mpi_semantics.c. */

#if !DTORCH_HAVE_MPI
#include <stdio.h>

int main(void) {
  printf("skipped: dtorch was built without MPI\n");
  return 77;
}

#else

#include "mpi_dtensor_common.h"

/* ---- 2. redistributions
 * A case: on mesh dims, `from` -> `to`. src HOST: dt_from_host with
 * `from`; SUM / MAX: a genuine Partial, dt_sum / dt_amax over dim 0 of a
 * base [Q, ...] sharded S(0) on the Partial mesh dims (every rank holds
 * its own rows: a zero-size shard adds nothing) */
enum { SRC_HOST, SRC_SUM, SRC_MAX };
typedef struct rcase {
  const char *name;
  int src;
  dt_placement from[2], to[2];
} rcase;


/* one mesh dim changes, the other stays Replicate */
static const rcase one_dim[] = {
  {"S(0)->R", SRC_HOST, {S0}, {R_}},     {"S(1)->R", SRC_HOST, {S1}, {R_}},
  {"R->S(0)", SRC_HOST, {R_}, {S0}},     {"R->S(1)", SRC_HOST, {R_}, {S1}},
  {"S(0)->S(1)", SRC_HOST, {S0}, {S1}},  {"S(1)->S(0)", SRC_HOST, {S1}, {S0}},
  {"P(sum)->R", SRC_SUM, {PS}, {R_}},    {"P(sum)->S(0)", SRC_SUM, {PS}, {S0}},
  {"P(sum)->S(1)", SRC_SUM, {PS}, {S1}}, {"P(max)->R", SRC_MAX, {PM}, {R_}},
  {"host P(sum)->R", SRC_HOST, {PS}, {R_}},
  {"host P(sum)->S(1)", SRC_HOST, {PS}, {S1}},
  {"host P(avg)->R", SRC_HOST, {PA}, {R_}},
  {"R->P(sum)", SRC_HOST, {R_}, {PS}},
};
/* both dims of a 2-D mesh */
static const rcase two_dim[] = {
  {"[S(0),S(1)]->[R,R]", SRC_HOST, {S0, S1}, {R_, R_}},
  {"[S(0),S(1)]->[S(1),S(0)]", SRC_HOST, {S0, S1}, {S1, S0}},
  {"[S(0),S(0)]->[R,S(1)]", SRC_HOST, {S0, S0}, {R_, S1}},
  {"[R,R]->[S(0),S(0)]", SRC_HOST, {R_, R_}, {S0, S0}},
  {"[P(sum),S(1)]->[R,R]", SRC_SUM, {PS, S1}, {R_, R_}},
  {"[S(1),P(sum)]->[S(0),R]", SRC_SUM, {S1, PS}, {S0, R_}},
  {"[P(sum),P(sum)]->[R,S(0)]", SRC_SUM, {PS, PS}, {R_, S0}},
  {"[P(max),S(0)]->[R,R]", SRC_MAX, {PM, S0}, {R_, R_}},
};

/* the case's input on mesh m (of rt or ref) and its host value (bytes in
 * the input's dtype, malloc'd); *tol the tolerance of a reduced value */
static dt_tensor *make_input(const rcase *c, dt_mesh *m, dt_shape ms,
                             dt_shape s, dt_dtype d, const double *base,
                             int64_t q, char **host, double *tol) {
  dt_placement pl[2];
  for (int i = 0; i < ms.ndim; i++) pl[i] = c->from[i];
  if (c->src == SRC_HOST) {
    *host = encode(base, tu_numel(s), d);
    *tol = -1;
    return from_host(*host, s, d, m, pl);
  }
  /* the base [q, s...]: S(0) where the case is Partial, Shard dims moved */
  dt_shape bs = {.ndim = s.ndim + 1, .dims = {q}};
  for (int i = 0; i < s.ndim; i++) bs.dims[i + 1] = s.dims[i];
  dt_placement bp[2];
  for (int i = 0; i < ms.ndim; i++)
    bp[i] = pl[i].kind == DT_PLACEMENT_PARTIAL ? DT_SHARD(0)
            : pl[i].kind == DT_PLACEMENT_SHARD ? DT_SHARD(pl[i].dim + 1)
                                                : pl[i];
  char *bb = encode(base, tu_numel(bs), d);
  dt_tensor *b = from_host(bb, bs, d, m, bp);
  free(bb);
  dt_tensor *x = c->src == SRC_SUM ? dt_sum(b, (const int[]){0}, 1, false)
                                   : dt_amax(b, (const int[]){0}, 1, false);
  dt_tensor_release(b);
  double *v = reduce_rows(base, q, tu_numel(s), c->src == SRC_MAX);
  dt_dtype od = x ? dt_tensor_dtype(x) : d; /* int32 sums are int64 */
  *host = encode(v, tu_numel(s), od);
  free(v);
  *tol = c->src == SRC_MAX || !tu_is_float(od) ? -1
         : od == DT_FLOAT32                    ? 1e-5
                                               : 1.0 / 16;
  return x;
}

/* mesh dims are placed at offset `at` (one_dim) or 0 (two_dim) */
static void run_case(const rcase *c, int at, dt_mesh *m, dt_mesh *mr,
                     dt_shape s, dt_dtype d, uint64_t seed) {
  dt_shape ms = dt_mesh_shape(m);
  rcase k = *c;
  if (at >= 0) { /* one_dim: the case at mesh dim `at`, Replicate elsewhere */
    for (int i = 0; i < ms.ndim; i++) {
      k.from[i] = i == at ? c->from[0] : DT_REPLICATE;
      k.to[i] = i == at ? c->to[0] : DT_REPLICATE;
    }
  }
  int64_t q = k.src == SRC_MAX || s.dims[0] % 2 == 0 ? N : 5; /* 5: uneven */
  int64_t count = tu_numel(s) * (k.src == SRC_HOST ? 1 : q);
  /* bfloat16 in [-1, 1): its sums of 8 stay within 1/16 of exact */
  double lim = d == DT_BFLOAT16 ? 1 : 8;
  double *base = tu_random_values(count, d, seed, -lim, lim, true);
  char *host = NULL, *hr = NULL;
  double tol;
  dt_tensor *x = make_input(&k, m, ms, s, d, base, q, &host, &tol);
  dt_tensor *xr = make_input(&k, mr, ms, s, d, base, q, &hr, &tol);
  char what[200], sh[32], msh[32];
  tu_shape_str(s, sh, sizeof sh);
  tu_shape_str(ms, msh, sizeof msh);
  snprintf(what, sizeof what, "mesh %s dim %d, %s %s, %s: input", msh, at, sh,
           dt_dtype_name(d), k.name);
  check_result(x, xr, k.from, host, tol, what);
  dt_tensor *y = dt_redistribute(x, NULL, k.to);
  dt_tensor *yr = dt_redistribute(xr, NULL, k.to);
  memcpy(strstr(what, ": input"), ": output", sizeof ": output");
  /* every result holds the input's value (R -> P too) */
  check_result(y, yr, k.to, host, tol, what);
  free(base), free(host), free(hr);
  TU_RELEASE(x, xr, y, yr);
}

static const dt_shape mesh_shapes[3] = {{1, {8}}, {2, {2, 4}}, {2, {4, 2}}};

static void run_redistributions(dt_dtype d, bool uneven) {
  dt_shape s = uneven ? DT_SHAPE(5, 3) : DT_SHAPE(8, 12);
  uint64_t seed = 100 * (uint64_t)d + uneven;
  for (int mi = 0; mi < 3; mi++) {
    dt_mesh *m = dt_mesh_create_range(rt, NULL, mesh_shapes[mi], NULL);
    dt_mesh *mr = dt_mesh_create_range(ref, NULL, mesh_shapes[mi], NULL);
    for (int at = 0; at < mesh_shapes[mi].ndim; at++)
      for (size_t i = 0; i < sizeof one_dim / sizeof *one_dim; i++) {
        if (one_dim[i].from[0].reduce == DT_REDUCE_AVG && !tu_is_float(d))
          continue; /* an average of integers is not a placement dtorch keeps */
        run_case(&one_dim[i], at, m, mr, s, d, seed++);
      }
    for (size_t i = 0; mesh_shapes[mi].ndim == 2 &&
                       i < sizeof two_dim / sizeof *two_dim; i++)
      run_case(&two_dim[i], -1, m, mr, s, d, seed++);
    dt_mesh_release(m);
    dt_mesh_release(mr);
  }
}

static void test_redistribute_float32(void **state) {
  (void)state;
  run_redistributions(DT_FLOAT32, false);
  run_redistributions(DT_FLOAT32, true);
  agree();
}

static void test_redistribute_int32(void **state) {
  (void)state;
  run_redistributions(DT_INT32, false);
  run_redistributions(DT_INT32, true);
  agree();
}

/* a bfloat16 reduction on every mesh dim of [2, 4]: P(sum) -> R, S(1) */
static void test_redistribute_bfloat16_sum(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_create_range(rt, NULL, DT_SHAPE(2, 4), NULL);
  dt_mesh *mr = dt_mesh_create_range(ref, NULL, DT_SHAPE(2, 4), NULL);
  for (int at = 0; at < 2; at++) {
    run_case(&one_dim[6], at, m, mr, DT_SHAPE(8, 12), DT_BFLOAT16, 900 + at);
    run_case(&one_dim[8], at, m, mr, DT_SHAPE(5, 3), DT_BFLOAT16, 910 + at);
  }
  run_case(&two_dim[6], -1, m, mr, DT_SHAPE(8, 12), DT_BFLOAT16, 920);
  dt_mesh_release(m);
  dt_mesh_release(mr);
  agree();
}

/* a redistribute to another mesh of the job: the source replicated on its
 * mesh, then each target rank takes its box */
static void check_cross(const int *sr, int sn, const dt_placement *sp,
                        const int *dr, int dn, const dt_placement *dp) {
  dt_mesh *ms[2], *md[2];
  dt_runtime *rts[2] = {rt, ref};
  dt_tensor *y[2];
  double *v = tu_random_values(24, DT_FLOAT32, 77, -4, 4, true);
  char *host = encode(v, 24, DT_FLOAT32);
  for (int i = 0; i < 2; i++) {
    /* sn 0: a single-device tensor (each process's own, on its first
     * rank) distributed onto the target mesh */
    ms[i] = sn ? dt_mesh_create(rts[i], NULL, DT_SHAPE(sn), sr, NULL) : NULL;
    md[i] = dt_mesh_create(rts[i], NULL, dn == 4 ? DT_SHAPE(2, 2) : DT_SHAPE(dn),
                           dr, NULL);
    dt_runtime_set_current(rts[i]);
    dt_tensor *x = from_host(host, DT_SHAPE(4, 6), DT_FLOAT32, ms[i], sp);
    dt_runtime_set_current(rt);
    y[i] = dt_redistribute(x, md[i], dp);
    dt_tensor_release(x);
  }
  bool hosted = false;
  for (int i = 0; i < dn; i++) hosted = hosted || proc_of(dr[i]) == me;
  char what[64];
  snprintf(what, sizeof what, "ranks %d.. to ranks %d, ..", sn ? sr[0] : -1,
           dr[0]);
  if (hosted) {
    check_result(y[0], y[1], dp, host, -1, what);
  } else {
    char got[96];
    CHECK_ERR(dt_to_host(y[0], got, sizeof got), DT_ERR_DEVICE, "no rank in this process");
  }
  TU_RELEASE(y[0], y[1]);
  for (int i = 0; i < 2; i++) {
    dt_mesh_release(ms[i]);
    dt_mesh_release(md[i]);
  }
  free(v);
  free(host);
}

static void test_cross_mesh(void **state) {
  (void)state;
  const int all[N] = {0, 1, 2, 3, 4, 5, 6, 7};
  /* every process holds source ranks and target ranks */
  check_cross(all, N, DT_PLACEMENTS(S0), (const int[]){6, 1, 4, 3}, 4,
              DT_PLACEMENTS(S1, R_));
  check_cross((const int[]){6, 1, 4, 3}, 4, DT_PLACEMENTS(S1),
              all, N, DT_PLACEMENTS(S0));
  /* the targets' processes hold no source rank */
  check_cross((const int[]){0, 1}, 2, DT_PLACEMENTS(S0),
              (const int[]){6, 7}, 2, DT_PLACEMENTS(S1));
  check_cross(NULL, 0, NULL, (const int[]){6, 7}, 2, DT_PLACEMENTS(S0));
  check_cross(NULL, 0, NULL, (const int[]){6, 1, 4, 3}, 4,
              DT_PLACEMENTS(S0, S1));
  agree();
}

/* ---- 3. ops and autograd */
/* the MLP's tensors: W1 [32, 16] column-parallel, b1 [32], W2 [8, 32]
 * row-parallel, b2 [8], the input x [8, 16] and target [8, 8] on dp */
static const dt_placement mlp_pl[6][2] = {{R_, S0}, {R_, S0}, {R_, S1},
                                          {R_, R_}, {S0, R_}, {S0, R_}};
static const dt_shape mlp_shape[6] = {{2, {32, 16}}, {1, {32}}, {2, {8, 32}},
                                      {1, {8}},      {2, {8, 16}}, {2, {8, 8}}};
enum { MLP_LR = 1, MLP_WD = 2 }; /* lr 1e-2, weight decay 1e-2 */
#define MLP_CLIP 0.05 /* below the grads' norm: clipping scales them */

typedef struct mlp_run {
  dt_tensor *p[4], *grad[4], *x, *t, *loss;
  double norm; /* the grads' global norm before clipping */
} mlp_run;

/* forward (gelu(x W1ᵀ + b1) W2ᵀ + b2, mean squared error), backward and
 * one AdamW step on mesh m; r keeps the loss, the grads and the new
 * parameters */
static void mlp_step(dt_mesh *m, double *const *vals, mlp_run *r) {
  dt_tensor *in[6];
  for (int i = 0; i < 6; i++) {
    char *b = encode(vals[i], tu_numel(mlp_shape[i]), DT_FLOAT32);
    in[i] = dt_from_host(b, mlp_shape[i], &(dt_tensor_options){
        .mesh = m, .placements = mlp_pl[i], .requires_grad = i < 4});
    free(b);
  }
  memcpy(r->p, in, sizeof r->p);
  r->x = in[4];
  r->t = in[5];
  dt_optimizer *opt = dt_adamw_create(r->p, 4, &(dt_adamw_options){
      .lr = MLP_LR * 1e-2, .weight_decay = MLP_WD * 1e-2});
  CHECK(opt, "dt_adamw_create: %s", dt_last_error());
  dt_tensor *l1 = dt_linear(r->x, r->p[0], r->p[1]);
  dt_tensor *h = dt_gelu(l1);
  dt_tensor *y = dt_linear(h, r->p[2], r->p[3]);
  dt_tensor *d = dt_sub(y, r->t);
  dt_tensor *sq = dt_mul(d, d);
  r->loss = dt_mean(sq, NULL, 0, false);
  CHECK(dt_backward(r->loss) == DT_OK, "dt_backward: %s", dt_last_error());
  for (int i = 0; i < 4; i++) r->grad[i] = dt_grad(r->p[i]);
  /* the global norm over every shard of every process, clipped to half */
  CHECK(dt_clip_grad_norm(r->p, 4, MLP_CLIP, &r->norm) == DT_OK, "clip: %s",
        dt_last_error());
  CHECK(dt_optimizer_step(opt) == DT_OK, "step: %s", dt_last_error());
  TU_RELEASE(l1, h, y, d, sq);
  dt_optimizer_free(opt);
}

static void mlp_free(mlp_run *r) {
  TU_RELEASE(r->p[0], r->p[1], r->p[2], r->p[3], r->grad[0], r->grad[1],
             r->grad[2], r->grad[3], r->x, r->t, r->loss);
}

/* the loss in double: the host forward */
static double mlp_host_loss(double *const *v) {
  double loss = 0;
  for (int b = 0; b < 8; b++) {
    double h[32];
    for (int j = 0; j < 32; j++) {
      double a = v[1][j];
      for (int k = 0; k < 16; k++) a += v[4][b * 16 + k] * v[0][j * 16 + k];
      h[j] = 0.5 * a * (1 + erf(a / sqrt(2.0)));
    }
    for (int o = 0; o < 8; o++) {
      double y = v[3][o];
      for (int j = 0; j < 32; j++) y += h[j] * v[2][o * 32 + j];
      loss += (y - v[5][b * 8 + o]) * (y - v[5][b * 8 + o]);
    }
  }
  return loss / 64;
}

static void test_mlp_adamw(void **state) {
  (void)state;
  double *vals[6];
  for (int i = 0; i < 6; i++)
    vals[i] = tu_random_values(tu_numel(mlp_shape[i]), DT_FLOAT32, 40 + i,
                               -1, 1, true);
  dt_mesh *m = dt_mesh_create_range(rt, NULL, DT_SHAPE(2, 4), NULL);
  dt_mesh *mr = dt_mesh_create_range(ref, NULL, DT_SHAPE(2, 4), NULL);
  mlp_run a = {0}, b = {0};
  mlp_step(m, vals, &a);
  mlp_step(mr, vals, &b);
  float la = 0, lb = 0;
  CHECK(dt_to_host(a.loss, &la, 4) == DT_OK && dt_to_host(b.loss, &lb, 4) == DT_OK,
        "loss: %s", dt_last_error());
  CHECK(memcmp(&la, &lb, 4) == 0, "loss %.9g, one process %.9g", la, lb);
  double want = mlp_host_loss(vals);
  CHECK(fabs(la - want) <= 1e-5 * (1 + want), "loss %.9g, host %.9g", la, want);
  CHECK(memcmp(&a.norm, &b.norm, sizeof a.norm) == 0,
        "grad norm %.17g, one process %.17g", a.norm, b.norm);
  double sq = 0;
  for (int i = 0; i < 4; i++) {
    char *g = fetch(b.grad[i]);
    for (int64_t j = 0; j < tu_numel(mlp_shape[i]); j++)
      sq += pow(tu_decode(g + 4 * j, DT_FLOAT32), 2);
    free(g);
  }
  CHECK(fabs(a.norm - sqrt(sq)) <= 1e-5 * sqrt(sq), "grad norm %.9g, host %.9g",
        a.norm, sqrt(sq));
  double coef = MLP_CLIP / (sqrt(sq) + 1e-6);
  CHECK(coef < 1, "the norm %.9g does not clip", sqrt(sq));
  for (int i = 0; i < 4; i++) {
    char what[64];
    snprintf(what, sizeof what, "parameter %d's grad", i);
    check_result(a.grad[i], b.grad[i], NULL, NULL, -1, what);
    /* AdamW's first step from its definition on the clipped grad g:
     * m̂ = g, v̂ = g² */
    char *g = fetch(b.grad[i]);
    int64_t n = tu_numel(mlp_shape[i]);
    double *nv = malloc((size_t)n * sizeof *nv);
    for (int64_t j = 0; j < n; j++) {
      double gj = coef * tu_decode(g + 4 * j, DT_FLOAT32), lr = MLP_LR * 1e-2;
      nv[j] = vals[i][j] * (1 - lr * MLP_WD * 1e-2) - lr * gj / (fabs(gj) + 1e-8);
    }
    char *host = encode(nv, n, DT_FLOAT32);
    snprintf(what, sizeof what, "parameter %d after the step", i);
    check_result(a.p[i], b.p[i], mlp_pl[i], host, 1e-5, what);
    free(g);
    free(nv);
    free(host);
  }
  mlp_free(&a);
  mlp_free(&b);
  dt_mesh_release(m);
  dt_mesh_release(mr);
  for (int i = 0; i < 6; i++) free(vals[i]);
  agree();
}

/* op(A, B) on rt and on ref: placements `pl` (NULL: as on ref), the host
 * value `want` within tol (< 0: bitwise) */
typedef dt_tensor *(*binop)(dt_tensor *, dt_tensor *);
static void check_op(const char *what, binop op, dt_mesh *const *ms,
                     const double *a, dt_shape sa, const dt_placement *pa,
                     const double *b, dt_shape sb, const dt_placement *pb,
                     const dt_placement *pl, const double *want, double tol) {
  dt_tensor *y[2];
  for (int i = 0; i < 2; i++) {
    char *ea = encode(a, tu_numel(sa), DT_FLOAT32);
    char *eb = b ? encode(b, tu_numel(sb), DT_FLOAT32) : NULL;
    dt_tensor *x = from_host(ea, sa, DT_FLOAT32, ms[i], pa);
    dt_tensor *z = b ? from_host(eb, sb, DT_FLOAT32, ms[i], pb) : NULL;
    y[i] = op(x, z);
    TU_RELEASE(x, z);
    free(ea);
    free(eb);
  }
  int64_t n = y[1] ? dt_tensor_numel(y[1]) : 0;
  char *w = encode(want, n, DT_FLOAT32);
  check_result(y[0], y[1], pl, w, tol, what);
  free(w);
  TU_RELEASE(y[0], y[1]);
}

static dt_tensor *softmax1(dt_tensor *a, dt_tensor *b) { (void)b; return dt_softmax(a, 1); }
static dt_tensor *sum1(dt_tensor *a, dt_tensor *b) {
  (void)b;
  return dt_sum(a, (const int[]){1}, 1, false);
}

static void test_ops(void **state) {
  (void)state;
  dt_mesh *ms[2] = {dt_mesh_create_range(rt, NULL, DT_SHAPE(2, 4), NULL),
                    dt_mesh_create_range(ref, NULL, DT_SHAPE(2, 4), NULL)};
  dt_shape s = DT_SHAPE(8, 12), sc = DT_SHAPE(12, 6);
  double *a = tu_random_values(96, DT_FLOAT32, 51, -3, 3, true);
  double *b = tu_random_values(96, DT_FLOAT32, 52, -3, 3, true);
  double *c = tu_random_values(72, DT_FLOAT32, 53, -3, 3, true);
  double w[96];
  for (int i = 0; i < 96; i++) w[i] = tu_round(a[i] + b[i], DT_FLOAT32);
  check_op("add", dt_add, ms, a, s, DT_PLACEMENTS(S0, S1), b, s,
           DT_PLACEMENTS(S0, S1), DT_PLACEMENTS(S0, S1), w, -1);
  for (int i = 0; i < 96; i++) w[i] = tu_round(a[i] * b[i], DT_FLOAT32);
  check_op("mul", dt_mul, ms, a, s, DT_PLACEMENTS(S1, R_), b, s,
           DT_PLACEMENTS(R_, S0), NULL, w, -1);
  for (int i = 0; i < 8; i++) {
    double mx = -INFINITY, z = 0;
    for (int j = 0; j < 12; j++) mx = fmax(mx, a[i * 12 + j]);
    for (int j = 0; j < 12; j++) z += exp(a[i * 12 + j] - mx);
    for (int j = 0; j < 12; j++) w[i * 12 + j] = exp(a[i * 12 + j] - mx) / z;
  }
  check_op("softmax over a sharded dim", softmax1, ms, a, s,
           DT_PLACEMENTS(S0, S1), NULL, s, NULL, NULL, w, 1e-6);
  for (int i = 0; i < 8; i++) {
    w[i] = 0;
    for (int j = 0; j < 12; j++) w[i] += a[i * 12 + j];
  }
  check_op("sum over a sharded dim", sum1, ms, a, s, DT_PLACEMENTS(S0, S1),
           NULL, s, NULL, DT_PLACEMENTS(S0, PS), w, 1e-5);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 6; j++) {
      w[i * 6 + j] = 0;
      for (int k = 0; k < 12; k++) w[i * 6 + j] += a[i * 12 + k] * c[k * 6 + j];
    }
  check_op("matmul, sharded inner dim", dt_matmul, ms, a, s,
           DT_PLACEMENTS(R_, S1), c, sc, DT_PLACEMENTS(R_, S0),
           DT_PLACEMENTS(R_, PS), w, 1e-5);
  free(a), free(b), free(c);
  dt_mesh_release(ms[0]), dt_mesh_release(ms[1]);
  agree();
}

/* ---- 4. semantics */
/* a [4] tensor on the mesh of `ranks`: every process hosting one of them
 * fetches the full value (collective among those processes); the others
 * get DT_ERR_DEVICE naming where the ranks run (`where`, with "%d" the
 * first such process) */
int main(void) {
  rt = make_runtime("mpi", N);
  if (!rt) {
    fprintf(stderr, "test_mpi_dtensor: %s\n", dt_last_error());
    return 1;
  }
  ref = make_runtime("none", N);
  if (!ref) {
    fprintf(stderr, "test_mpi_dtensor: %s\n", dt_last_error());
    return 1;
  }
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  dt_runtime_set_current(rt);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_redistribute_float32),
    cmocka_unit_test(test_redistribute_int32),
    cmocka_unit_test(test_redistribute_bfloat16_sum),
    cmocka_unit_test(test_cross_mesh),
    cmocka_unit_test(test_mlp_adamw),
    cmocka_unit_test(test_ops),
  };
  /* MPI_DTENSOR_FILTER: only the tests matching it (cmocka's pattern) */
  if (getenv("MPI_DTENSOR_FILTER"))
    cmocka_set_test_filter(getenv("MPI_DTENSOR_FILTER"));
  tu_alarm(120);
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(ref);
  dt_runtime_destroy(rt);
  return failed;
}

#endif
