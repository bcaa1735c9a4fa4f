/* `dtorch bench dispatch`: the DTensor layer's costs on the issuing thread
 * (docs/sharding.md). One JSON line per figure:
 *   cache_hit_lookup  ns for one lookup of a cached key in this thread's
 *                     sharding cache (`lookup_ns`), for building the
 *                     key of a 2-input add and looking it up (`key_ns`),
 *                     and for an add_scalar with a changing scalar: the
 *                     key, the infer that runs on every call of an op
 *                     with a scalar, the infer's words and the lookup
 *                     (`scalar_key_ns`)
 *   dtensor_add_hit   a 4x4 add of [S(0), R] DTensors on a 2-D mesh with a
 *                     cache hit, 8 and 64 ranks: `ns` = the issuing
 *                     thread's CPU time per op (best burst of 256;
 *                     DTensor and single-device bursts alternate),
 *                     `single_device_ns` = the same 4x4 add on single-device
 *                     tensors of the same runtime in the same run, `ratio`
 *                     = ns / single_device_ns; `wall_ns` for reference
 *                     (wall time includes the ranks' time on 2 cores);
 *                     the 64-rank line's `vs_8_ranks` = its ns / the
 *                     8-rank ns (both runtimes' bursts alternate)
 *   dtensor_add_scalar_hit  a 4x4 add_scalar of an [S(0), R] DTensor on a
 *                     2x4 mesh (8 ranks) with a scalar that changes every
 *                     call (a training loop's step): `ns` as above,
 *                     `hit_rate` = the cache hits / calls of the timed
 *                     bursts (1: the changing scalar still hits)
 *   dtensor_add_loop  the whole job's cost of the same cached add: a loop
 *                     of adds ending in dt_runtime_synchronize, at 8, 64
 *                     and 256 ranks (20,000 / 4,000 / 1,000 ops): `us`
 *                     wall µs per op, `cpu_us` the process's CPU µs per
 *                     op (the issuing thread and every rank's record),
 *                     `record_cpu_us` = cpu_us / ranks (the fixed cost
 *                     per op per rank), `single_device_us` the same loop
 *                     on single-device tensors of the same runtime in
 *                     the same run, `ratio` = us / single_device_us (what
 *                     spreading the op over the ranks costs against one
 *                     device: not the same work, the ranks run one record
 *                     each); best of the reps (loops alternate)
 *   matmul_miss       a [64, 32] x [32, 16] matmul on a 2x4 mesh with the
 *                     cache cleared before each call: the full first-time
 *                     propagation (infer, rule per mesh dim, costs, checks)
 *                     plus the output handle and the record, issuing thread
 *                     CPU ns (best of the reps); `hit_ns` = the same call
 *                     with the cache warm, for the difference */
#include <time.h>

#include "bench/bench.h"
#include "dispatch/propagate.h"
#include "ops/ops.h"
#include "dtorch/dtorch.h"

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "bench dispatch: %s: %s\n", what, dt_last_error());
  exit(1);
}

typedef struct burst { double cpu, wall; } burst;
/* one burst of 256 adds a + b: per-op CPU and wall ns, folded into best */
static void add_burst(dt_runtime *rt, dt_tensor *a, dt_tensor *b, burst *best) {
  double t0 = bench_now(), c0 = cpu_now();
  for (int i = 0; i < 256; i++) {
    dt_tensor *c = dt_add(a, b);
    if (!c) die("dt_add");
    dt_tensor_release(c);
  }
  double c = (cpu_now() - c0) / 256 * 1e9, t = (bench_now() - t0) / 256 * 1e9;
  if (c < best->cpu) best->cpu = c;
  if (t < best->wall) best->wall = t;
  dt_runtime_synchronize(rt);
}

/* one runtime's inputs: a 4x4 [S(0), R] pair on a rows x (ranks/rows)
 * mesh and a single-device pair */
typedef struct add_setup {
  int ranks;
  int64_t rows;
  dt_runtime *rt;
  dt_mesh *m;
  dt_tensor *a, *b, *sa, *sb;
  burst d, s; /* best DTensor and single-device bursts */
  burst t;    /* --trace: the best traced DTensor burst */
} add_setup;

static void add_setup_init(add_setup *x, int ranks) {
  *x = (add_setup){.ranks = ranks, .rows = ranks == 8 ? 2 : ranks == 256 ? 16 : 8,
                   .d = {1e300, 1e300}, .s = {1e300, 1e300},
                   .t = {1e300, 1e300}};
  x->rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = ranks});
  if (!x->rt) die("dt_runtime_create");
  x->m = dt_mesh_init(x->rt, "cpu", DT_SHAPE(x->rows, ranks / x->rows), NULL);
  dt_tensor_options o = {.mesh = x->m,
                         .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)};
  x->a = dt_ones(DT_SHAPE(4, 4), &o);
  x->b = dt_ones(DT_SHAPE(4, 4), &o);
  dt_runtime_set_current(x->rt);
  x->sa = dt_ones(DT_SHAPE(4, 4), NULL);
  x->sb = dt_ones(DT_SHAPE(4, 4), NULL);
  dt_runtime_set_current(NULL);
  if (!x->a || !x->b || !x->sa || !x->sb) die("inputs");
}

/* --trace: each run adds a traced DTensor burst (dt_trace_begin /
 * dt_trace_end around it; writing the file is outside the timed burst)
 * beside the untraced ones, so `traced_ns` / `ns` compares figures taken
 * at the same time on the same runtime */
static bool trace_on;

static void add_setup_run(add_setup *x) {
  dt_runtime_set_current(x->rt);
  add_burst(x->rt, x->a, x->b, &x->d);
  add_burst(x->rt, x->sa, x->sb, &x->s);
  if (trace_on) {
    char path[256];
    snprintf(path, sizeof path, "%s/dtorch_bench_trace.json",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (dt_trace_begin(x->rt, path) != DT_OK) die("dt_trace_begin");
    add_burst(x->rt, x->a, x->b, &x->t);
    if (dt_trace_end(x->rt) != DT_OK) die("dt_trace_end");
  }
  dt_runtime_set_current(NULL);
}

static void add_setup_print(const add_setup *x, const add_setup *base) {
  printf("{\"bench\":\"dtensor_add_hit\",\"ranks\":%d,\"mesh\":\"%lldx%lld\","
         "\"ns\":%.0f,\"single_device_ns\":%.0f,\"ratio\":%.2f,\"wall_ns\":%.0f,"
         "\"single_device_wall_ns\":%.0f", x->ranks, (long long)x->rows,
         (long long)(x->ranks / x->rows), x->d.cpu, x->s.cpu, x->d.cpu / x->s.cpu,
         x->d.wall, x->s.wall);
  if (base) printf(",\"vs_%d_ranks\":%.2f", base->ranks, x->d.cpu / base->d.cpu);
  if (trace_on)
    printf(",\"traced_ns\":%.0f,\"traced_wall_ns\":%.0f,\"trace_ratio\":%.2f,"
           "\"trace_wall_ratio\":%.2f", x->t.cpu, x->t.wall, x->t.cpu / x->d.cpu,
           x->t.wall / x->d.wall);
  printf("}\n");
}

static void add_setup_free(add_setup *x) {
  dt_tensor_release(x->a);
  dt_tensor_release(x->b);
  dt_tensor_release(x->sa);
  dt_tensor_release(x->sb);
  dt_mesh_release(x->m);
  dt_runtime_destroy(x->rt);
}

/* 8 and 64 ranks, each DTensor burst beside a single-device one on the
 * same runtime; the two runtimes alternate too, so vs_8_ranks compares
 * figures taken on the same machine at the same time */
static void bench_add(int reps) {
  add_setup x8, x64;
  add_setup_init(&x8, 8);
  add_setup_init(&x64, 64);
  for (int r = 0; r < reps * 20; r++) {
    add_setup_run(&x8);
    add_setup_run(&x64);
  }
  add_setup_print(&x8, NULL);
  add_setup_print(&x64, &x8);
  add_setup_free(&x8);
  add_setup_free(&x64);
}

static double proc_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* n adds a + b and a synchronize: per-op wall and process CPU µs */
static burst add_loop(dt_runtime *rt, dt_tensor *a, dt_tensor *b, int n) {
  double t0 = bench_now(), c0 = proc_cpu_now();
  for (int i = 0; i < n; i++) {
    dt_tensor *c = dt_add(a, b);
    if (!c) die("dt_add");
    dt_tensor_release(c);
  }
  if (dt_runtime_synchronize(rt) != DT_OK) die("dt_runtime_synchronize");
  return (burst){(proc_cpu_now() - c0) / n * 1e6, (bench_now() - t0) / n * 1e6};
}

static void bench_add_loop(int reps) {
  static const int ranks[] = {8, 64, 256}, ops[] = {20000, 4000, 1000};
  for (int k = 0; k < 3; k++) {
    add_setup x;
    add_setup_init(&x, ranks[k]);
    dt_runtime_set_current(x.rt);
    for (int r = 0; r < reps; r++) {
      burst d = add_loop(x.rt, x.a, x.b, ops[k]), s = add_loop(x.rt, x.sa, x.sb, ops[k]);
      if (d.wall < x.d.wall) x.d = d;
      if (s.wall < x.s.wall) x.s = s;
    }
    dt_runtime_set_current(NULL);
    printf("{\"bench\":\"dtensor_add_loop\",\"ranks\":%d,\"mesh\":\"%lldx%lld\","
           "\"ops\":%d,\"us\":%.3f,\"cpu_us\":%.3f,\"record_cpu_us\":%.3f,"
           "\"single_device_us\":%.3f,\"ratio\":%.2f}\n", x.ranks, (long long)x.rows,
           (long long)(x.ranks / x.rows), ops[k], x.d.wall, x.d.cpu,
           x.d.cpu / x.ranks, x.s.wall, x.d.wall / x.s.wall);
    add_setup_free(&x);
  }
}

/* one burst of 256 add_scalar calls, the scalar changing each call */
static void scalar_burst(dt_runtime *rt, dt_tensor *a, burst *best) {
  double t0 = bench_now(), c0 = cpu_now();
  for (int i = 0; i < 256; i++) {
    dt_tensor *c = dt_add_scalar(a, 0.25 * i + 1);
    if (!c) die("dt_add_scalar");
    dt_tensor_release(c);
  }
  double c = (cpu_now() - c0) / 256 * 1e9, t = (bench_now() - t0) / 256 * 1e9;
  if (c < best->cpu) best->cpu = c;
  if (t < best->wall) best->wall = t;
  dt_runtime_synchronize(rt);
}

static void bench_add_scalar(int reps) {
  add_setup x;
  add_setup_init(&x, 8);
  dt_runtime_set_current(x.rt);
  dt_tensor_release(dt_add_scalar(x.a, 0.5)); /* cached now */
  dt_cache_stats before = dt_sharding_cache_stats();
  for (int r = 0; r < reps * 20; r++) scalar_burst(x.rt, x.a, &x.d);
  dt_cache_stats after = dt_sharding_cache_stats();
  dt_runtime_set_current(NULL);
  double calls = (double)(after.hits - before.hits + after.misses - before.misses);
  printf("{\"bench\":\"dtensor_add_scalar_hit\",\"ranks\":8,\"mesh\":\"2x4\","
         "\"ns\":%.0f,\"wall_ns\":%.0f,\"hit_rate\":%.3f}\n", x.d.cpu, x.d.wall,
         calls > 0 ? (double)(after.hits - before.hits) / calls : 0.0);
  add_setup_free(&x);
}

static void bench_lookup(int reps) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 8});
  dt_mesh *m = dt_mesh_init(rt, "cpu", DT_SHAPE(2, 4), NULL);
  dt_tensor_options o = {.mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)};
  dt_tensor *a = dt_ones(DT_SHAPE(4, 4), &o);
  dt_tensor_release(dt_add(a, a)); /* cached now */
  dt_op_call c;
  core_call_init(&c, CORE_OP_ADD, "dt_add");
  core_call_tensor(&c, a);
  core_call_tensor(&c, a);
  dispatch_key k;
  dispatch_key_build(&c, &k);
  enum { N = 1 << 16 };
  double lookup = 1e300, key = 1e300;
  const dispatch_plan *volatile sink;
  for (int r = 0; r < reps * 4; r++) {
    double t0 = bench_now();
    for (int i = 0; i < N; i++) sink = dispatch_cache_find(&k);
    double t1 = bench_now();
    for (int i = 0; i < N; i++) {
      dispatch_key_build(&c, &k);
      sink = dispatch_cache_find(&k);
    }
    double t2 = bench_now();
    if ((t1 - t0) / N < lookup) lookup = (t1 - t0) / N;
    if ((t2 - t1) / N < key) key = (t2 - t1) / N;
  }
  dt_tensor_release(dt_add_scalar(a, 1)); /* cached now */
  double scalar = 1e300;
  for (int r = 0; r < reps * 4; r++) {
    double t0 = bench_now();
    for (int i = 0; i < N; i++) { /* what dispatch_dtensor_layer does */
      core_call_init(&c, CORE_OP_ADD_SCALAR, "dt_add_scalar");
      core_call_tensor(&c, a);
      core_call_double(&c, 1 + 0.25 * (i & 63));
      core_call_int(&c, DT_SCALAR_AUTO);
      dispatch_key_build(&c, &k);
      c.nmeta = 1;
      c.meta[0].alias = -1;
      c.meta[0].offset = 0;
      if (ops_defs[c.op].infer(&c) != DT_OK) die("add_scalar infer");
      dispatch_key_put_meta(&c, &k);
      sink = dispatch_cache_find(&k);
      if (!sink) die("add_scalar: no cache hit");
    }
    double t = (bench_now() - t0) / N;
    if (t < scalar) scalar = t;
  }
  (void)sink;
  printf("{\"bench\":\"cache_hit_lookup\",\"lookup_ns\":%.1f,\"key_ns\":%.1f,"
         "\"scalar_key_ns\":%.1f}\n", lookup * 1e9, key * 1e9, scalar * 1e9);
  dt_tensor_release(a);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

static void bench_matmul_miss(int reps) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 8});
  dt_mesh *m = dt_mesh_init(rt, "cpu", DT_SHAPE(2, 4), NULL);
  dt_tensor_options oa = {.mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)};
  dt_tensor_options ob = {.mesh = m, .placements = DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1))};
  dt_tensor *a = dt_ones(DT_SHAPE(64, 32), &oa), *b = dt_ones(DT_SHAPE(32, 16), &ob);
  double miss = 1e300, hit = 1e300;
  for (int r = 0; r < reps * 20; r++) {
    for (int warm = 0; warm < 2; warm++) {
      if (!warm) dt_sharding_cache_clear();
      double c0 = cpu_now();
      dt_tensor *y = dt_matmul(a, b);
      double c = (cpu_now() - c0) * 1e9;
      if (!y) die("dt_matmul");
      dt_tensor_release(y);
      if (warm && c < hit) hit = c;
      if (!warm && c < miss) miss = c;
    }
    dt_runtime_synchronize(rt);
  }
  printf("{\"bench\":\"matmul_miss\",\"mesh\":\"2x4\",\"ns\":%.0f,\"hit_ns\":%.0f,"
         "\"propagation_ns\":%.0f}\n", miss, hit, miss - hit);
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

int bench_dispatch(int argc, char **argv) {
  int k = 0; /* --trace is ours; the rest goes to bench_main */
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--trace")) trace_on = true;
    else argv[k++] = argv[i];
  argc = k;
  static const bench_figure figs[] = {{"cache_hit_lookup", bench_lookup},
                                      {"dtensor_add_hit", bench_add},
                                      {"dtensor_add_scalar_hit", bench_add_scalar},
                                      {"dtensor_add_loop", bench_add_loop},
                                      {"matmul_miss", bench_matmul_miss}};
  return bench_main(argc, argv, "dispatch", figs, 5);
}
