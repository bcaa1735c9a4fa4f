/* `dtorch bench ops`: single ops at the sizes of the README's kernel table, each
 * against a baseline measured in the same run. One JSON line per op:
 *   ms          best of reps: the op through the public API until computed
 *               (dispatch, output allocation, the rank running it, idle
 *               ranks stealing its chunks, synchronize)
 *   bytes       what it must move: every input read once, every output
 *               written once plus the read-for-ownership of its plain
 *               stores (STREAM's count)
 *   flops       arithmetic (matmul 2MNK; others ~1 per element touched)
 *   baseline    memory ops: the all-core STREAM bandwidth of this run
 *               (bench_stream_bandwidth: the best of copy and add on every
 *               CPU, bytes counted alike), measured right after the op;
 *               matmul: cblas_sgemm with OpenBLAS on every CPU;
 *               blas_core: the kernels OpenBLAS picked for this CPU
 *               (OPENBLAS_CORETYPE overrides it: README, CPU kernels)
 *   compute_ms  ops bound by a transcendental function per element
 *               (gelu, softmax, log_softmax, cross_entropy and its
 *               backward, gelu_backward, log, sin): the same count of
 *               evaluations by glibc's vectorised libm on every CPU, from
 *               L1 (bench_libm.h); roofline_ms = max(bytes / STREAM,
 *               compute_ms) and ratio_roofline = roofline_ms / ms. Both
 *               parts are baselines, not bounds: dtorch's exp is faster
 *               than glibc's, so ratio_roofline can pass 1 (gelu did)
 *   ratio       achieved / baseline. A baseline, not a bound: add and
 *               cat exceed it (up to 1.7x; the plain STREAM loop does
 *               not reach what the chunked kernels' streamed stores do on
 *               this VM), so a ratio above 1 is possible; matmul's is
 *               one cblas_sgemm call of the same library on the same
 *               cores with OpenBLAS's own threads — a baseline too: the
 *               chunked grid of single-threaded calls beats it (1.03-1.11
 *               on 2 CPUs)
 *   simd        the instruction set the CPU kernels ran at (avx512,
 *               avx2, sse2, generic: cpu_simd_level; CMake's
 *               DTORCH_SIMD_MAX caps it, e.g. avx2 on an AVX-512 machine)
 * Ops run on rank 0 of the default runtime. `--only NAME` runs one op. */
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_libm.h"
#include "bench/bench_stream.h"
#include "dtorch/dtorch.h"
#include "kernels/cpu/cpu.h"

static void die(const char *what) {
  fprintf(stderr, "bench ops %s: %s\n", what, dt_last_error());
  exit(1);
}

static void sync_default(void) {
  if (dt_runtime_synchronize(dt_runtime_default()) != DT_OK) die("synchronize");
}

typedef enum op_kind {
  K_ADD, K_GELU, K_SUM, K_MATMUL, K_SOFTMAX, K_LOG_SOFTMAX, K_LAYER_NORM,
  K_CROSS_ENTROPY, K_TRANSPOSE, K_CAST_BF16, K_EMBEDDING, K_CAT, K_RAND,
  K_RANDN, K_LOG, K_SIN, K_GELU_BW, K_CE_BW
} op_kind;

typedef struct op_case {
  const char *name, *shape;
  op_kind kind;
  int64_t rows, cols;       /* the [rows, cols] operand (n = rows * cols) */
} op_case;

typedef struct op_run { const op_case *c; dt_tensor *x, *y, *w, *b, *t; } op_run;

static dt_tensor *run_once(const op_run *r) {
  switch (r->c->kind) {
  case K_ADD: return dt_add(r->x, r->y);
  case K_GELU: return dt_gelu(r->x);
  case K_SUM: return dt_sum(r->x, NULL, 0, false);
  case K_MATMUL: return dt_matmul(r->x, r->y);
  case K_SOFTMAX: return dt_softmax(r->x, -1);
  case K_LOG_SOFTMAX: return dt_log_softmax(r->x, -1);
  case K_LAYER_NORM: return dt_layer_norm(r->x, r->w, r->b, 1e-5);
  case K_CROSS_ENTROPY:
    return dt_cross_entropy(r->x, r->t, DT_REDUCTION_MEAN, -100);
  case K_TRANSPOSE: {
    dt_tensor *v = dt_transpose(r->x, 0, 1);
    if (!v) return NULL;
    dt_tensor *o = dt_contiguous(v);
    dt_tensor_release(v);
    return o;
  }
  case K_CAST_BF16: return dt_cast(r->x, DT_BFLOAT16);
  case K_EMBEDDING: return dt_embedding(r->t, r->x);
  case K_CAT: {
    dt_tensor *two[2] = {r->x, r->y};
    return dt_cat(two, 2, 0);
  }
  case K_RAND: return dt_rand(DT_SHAPE(r->c->rows, r->c->cols), NULL);
  case K_RANDN: return dt_randn(DT_SHAPE(r->c->rows, r->c->cols), NULL);
  case K_LOG: return dt_log(r->x);
  case K_SIN: return dt_sin(r->x);
  case K_GELU_BW: return dt_gelu_backward(r->y, r->x);
  case K_CE_BW:
    return dt_cross_entropy_backward(r->w, r->x, r->t, DT_REDUCTION_MEAN, -100, 0);
  }
  return NULL;
}

static void run_sync(void *p) {
  dt_tensor *o = run_once(p);
  if (!o) die(((op_run *)p)->c->name);
  sync_default();
  dt_tensor_release(o);
}

/* bytes an op must move and its flops */
static void op_cost(const op_case *c, double *bytes, double *flops) {
  double n = (double)c->rows * (double)c->cols, f = 4;
  switch (c->kind) {
  case K_ADD: *bytes = 4 * n * f; *flops = n; break;     /* a, b, c + RFO */
  case K_SUM: *bytes = n * f; *flops = n; break;
  case K_MATMUL: *bytes = 4 * n * f; *flops = 2 * n * (double)c->cols; break;
  case K_CROSS_ENTROPY: *bytes = n * f + (double)c->rows * 8; *flops = 3 * n;
    break;
  case K_CAST_BF16: *bytes = n * f + 2 * n * 2; *flops = n; break;
  case K_EMBEDDING: /* rows of the output gathered from the table */
    *bytes = 3 * n * f + (double)c->rows * 8; *flops = 0; break;
  case K_CAT: *bytes = 6 * n * f; *flops = 0; break; /* 2n in, 2n out */
  case K_RAND: case K_RANDN: *bytes = 2 * n * f; *flops = 10 * n; break;
  case K_GELU_BW: *bytes = 4 * n * f; *flops = 40 * n; break; /* g, x, out + RFO */
  case K_CE_BW: *bytes = 3 * n * f + (double)c->rows * 8; *flops = 5 * n; break;
  case K_GELU: *bytes = 3 * n * f; *flops = 30 * n; break;
  default: *bytes = 3 * n * f; *flops = 5 * n; break; /* in, out + RFO */
  }
}

static void setup(op_run *r) {
  const op_case *c = r->c;
  dt_manual_seed(18);
  dt_shape s = DT_SHAPE(c->rows, c->cols);
  if (c->kind != K_RAND && c->kind != K_RANDN) r->x = dt_randn(s, NULL);
  if (c->kind == K_LOG) { /* positive arguments */
    dt_tensor *a = dt_abs(r->x);
    dt_tensor_release(r->x);
    r->x = a;
  }
  if (c->kind == K_ADD || c->kind == K_CAT || c->kind == K_GELU_BW)
    r->y = dt_randn(s, NULL);
  if (c->kind == K_CE_BW) r->w = dt_ones(DT_SHAPE(), NULL); /* d loss */
  if (c->kind == K_MATMUL) r->y = dt_randn(DT_SHAPE(c->cols, c->cols), NULL);
  if (c->kind == K_LAYER_NORM) {
    r->w = dt_randn(DT_SHAPE(c->cols), NULL);
    r->b = dt_randn(DT_SHAPE(c->cols), NULL);
  }
  if (c->kind == K_CROSS_ENTROPY || c->kind == K_CE_BW || c->kind == K_EMBEDDING) {
    int64_t m = c->rows, *idx = malloc((size_t)m * sizeof *idx);
    if (!idx) die("setup");
    for (int64_t i = 0; i < m; i++) idx[i] = (i * 7919) % (c->kind == K_EMBEDDING ? c->rows : c->cols);
    dt_tensor_options o = {.dtype = DT_INT64};
    r->t = dt_from_host(idx, DT_SHAPE(m), &o);
    free(idx);
  }
}

static void teardown(op_run *r) {
  dt_tensor_release(r->x);
  dt_tensor_release(r->y);
  dt_tensor_release(r->w);
  dt_tensor_release(r->b);
  dt_tensor_release(r->t);
}

typedef struct sgemm_arg { float *a, *b, *c; int n; } sgemm_arg;
static void run_sgemm(void *p) {
  sgemm_arg *x = p;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, x->n, x->n, x->n,
              1.0f, x->a, x->n, x->b, x->n, 0.0f, x->c, x->n);
}

/* the GEMM baseline: one call with OpenBLAS on every CPU (the runtime
 * keeps it at one thread, its ranks being the parallelism; restored
 * after). Not a peak: dtorch's grid of single-threaded calls beats it */
static double gemm_baseline_flops(int n, int reps) {
  size_t bytes = (size_t)n * (size_t)n * sizeof(float);
  sgemm_arg g = {malloc(bytes), malloc(bytes), malloc(bytes), n};
  if (!g.a || !g.b || !g.c) die("sgemm buffers");
  for (size_t i = 0; i < (size_t)n * (size_t)n; i++) {
    g.a[i] = (float)(i % 7) * 0.25f;
    g.b[i] = (float)(i % 5) * 0.5f;
  }
  int before = openblas_get_num_threads();
  openblas_set_num_threads((int)sysconf(_SC_NPROCESSORS_ONLN));
  run_sgemm(&g);
  double t = bench_best(run_sgemm, &g, reps, 2);
  openblas_set_num_threads(before);
  free(g.a);
  free(g.b);
  free(g.c);
  return 2.0 * n * (double)n * n / t;
}

static const op_case cases[] = {
    {"add", "16M", K_ADD, 4096, 4096},
    {"gelu", "16M", K_GELU, 4096, 4096},
    {"sum", "16M", K_SUM, 4096, 4096},
    {"matmul", "1024x1024", K_MATMUL, 1024, 1024},
    {"softmax", "4096x1024", K_SOFTMAX, 4096, 1024},
    {"log_softmax", "4096x1024", K_LOG_SOFTMAX, 4096, 1024},
    {"layer_norm", "4096x1024", K_LAYER_NORM, 4096, 1024},
    {"cross_entropy", "4096x1000", K_CROSS_ENTROPY, 4096, 1000},
    {"transpose_contiguous", "4096x1024", K_TRANSPOSE, 4096, 1024},
    {"cast_bf16", "16M", K_CAST_BF16, 4096, 4096},
    {"embedding", "4096x1024", K_EMBEDDING, 4096, 1024},
    {"cat", "2x4096x1024", K_CAT, 4096, 1024},
    {"rand", "16M", K_RAND, 4096, 4096},
    {"randn", "16M", K_RANDN, 4096, 4096},
    {"log", "16M", K_LOG, 4096, 4096},
    {"sin", "16M", K_SIN, 4096, 4096},
    {"gelu_backward", "16M", K_GELU_BW, 4096, 4096},
    {"cross_entropy_backward", "4096x1000", K_CE_BW, 4096, 1000},
};

/* ops bound by a transcendental per element: the libmvec evaluations of
 * the same count (bench_libm.h); false for the others */
static bool libm_work(const op_case *c, int reps, double *sec, char *what,
                      size_t cap) {
  int64_t n = c->rows * c->cols;
  bench_libm_fn f;
  switch (c->kind) {
  case K_GELU: f = BENCH_LIBM_ERFF; break;
  case K_SOFTMAX: case K_LOG_SOFTMAX: case K_CROSS_ENTROPY: case K_CE_BW:
    f = BENCH_LIBM_EXPF;
    break;
  case K_LOG: f = BENCH_LIBM_LOGF; break;
  case K_SIN: f = BENCH_LIBM_SINF; break;
  case K_GELU_BW: /* Phi and phi: an erf and an exp per element */
    *sec = bench_libm_seconds(BENCH_LIBM_ERFF, n, reps) +
           bench_libm_seconds(BENCH_LIBM_EXPF, n, reps);
    snprintf(what, cap, "libmvec erff+expf x %lld", (long long)n);
    return true;
  default: return false;
  }
  *sec = bench_libm_seconds(f, n, reps);
  snprintf(what, cap, "libmvec %s x %lld", bench_libm_name(f), (long long)n);
  return true;
}

int bench_ops(int argc, char **argv) {
  int reps = 7;
  const char *only = NULL;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr, "dtorch bench ops: unknown argument '%s' (expected "
              "--reps N, --only OP)\n", argv[i]);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  dt_runtime_default(); /* the runtime sets OpenBLAS to one thread */
  double peak = 0;
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    const op_case *c = &cases[k];
    if (only && strcmp(only, c->name)) continue;
    op_run r = {.c = c};
    setup(&r);
    run_sync(&r); /* warm: allocator cache, pages */
    double t = bench_best(run_sync, &r, reps, 1);
    teardown(&r);
    double bytes, flops;
    op_cost(c, &bytes, &flops);
    bool gemm = c->kind == K_MATMUL;
    /* the baseline right after the op, so both see the same machine (other
     * jobs on a shared VM move the bandwidth by 2x within a minute) */
    double copy_bps, add_bps, bw = 0;
    if (gemm) peak = gemm_baseline_flops((int)c->cols, reps);
    else bw = bench_stream_bandwidth(16 << 20, &copy_bps, &add_bps);
    if (!gemm && bw <= 0) die("stream buffers");
    double ratio = gemm ? flops / t / peak : bytes / t / bw;
    printf("{\"bench\":\"ops\",\"op\":\"%s\",\"shape\":\"%s\",\"ms\":%.3f,"
           "\"bytes\":%.0f,\"flops\":%.0f,\"gbs\":%.2f,\"gflops\":%.2f,",
           c->name, c->shape, t * 1e3, bytes, flops, bytes / t / 1e9,
           flops / t / 1e9);
    if (gemm)
      printf("\"baseline\":\"sgemm_all_cores\",\"baseline_gflops\":%.2f,"
             "\"blas_core\":\"%s\",", peak / 1e9, openblas_get_corename());
    else
      printf("\"baseline\":\"stream_all_cores\",\"baseline_gbs\":%.2f,", bw / 1e9);
    double csec = 0;
    char what[64];
    if (!gemm && libm_work(c, reps, &csec, what, sizeof what)) {
      /* the roofline: the larger of the memory time and the compute time */
      double mem = bytes / bw, roof = mem > csec ? mem : csec;
      printf("\"compute_baseline\":\"%s\",\"compute_ms\":%.3f,"
             "\"roofline_ms\":%.3f,\"ratio_roofline\":%.3f,",
             what, csec * 1e3, roof * 1e3, roof / t);
    }
    printf("\"ratio\":%.3f,\"ranks\":%d,\"simd\":\"%s\"}\n", ratio,
           dt_runtime_num_ranks(dt_runtime_default()), cpu_simd_level());
    fflush(stdout);
  }
  return 0;
}
