/* Timelines (docs/trace.md): a known program (single-device ops, a fetch,
 * a DTensor matmul and a redistribute on a 2x2 mesh) traced to a file,
 * then the file checked line by line (the writer puts one event on a
 * line): a traceEvents object, every op on the rank tracks it ran on and
 * in program order, publishes on an issuer track, flow starts and ends
 * paired, collectives with their bytes; every error word for word, two
 * threads starting at once (one fails), DTORCH_TRACE.
 *
 * `test_trace --write PATH` only writes the known program's trace (the
 * ctest `trace_json` validates it with Python's json module). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "threads.h"

/* ---- the known program */
static void known_program(dt_runtime *rt) {
  dt_runtime_set_current(rt);
  dt_tensor *a = dt_ones(DT_SHAPE(4, 4), NULL);
  dt_tensor *b = dt_add(a, a);
  dt_tensor *c = dt_mul(b, b);
  float host[16];
  assert_int_equal(dt_to_host(c, host, sizeof host), DT_OK);
  assert_true(host[5] == 4.0f);
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2, 2), NULL);
  dt_tensor_options so = {.mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)};
  dt_tensor_options ro = {.mesh = m, .placements = DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE)};
  dt_tensor *x = dt_ones(DT_SHAPE(8, 8), &so);
  dt_tensor *y = dt_ones(DT_SHAPE(8, 8), &ro);
  dt_tensor *z = dt_matmul(x, y); /* [S(0), R]: no communication */
  assert_non_null(z);
  dt_tensor *r = dt_redistribute(z, m, DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE));
  assert_non_null(r); /* an all_gather along mesh dim 0 */
  dt_tensor *all[] = {a, b, c, x, y, z, r};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dt_tensor_release(all[i]);
  dt_mesh_release(m);
  dt_runtime_set_current(NULL);
}

static char *tmp_path(const char *tag) {
  static char buf[4][256];
  static int k;
  char *p = buf[k++ % 4];
  snprintf(p, 256, "%s/dtorch_trace_%s_%d.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
           tag, (int)getpid());
  return p;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = '\0';
  fclose(f);
  return s;
}

/* ---- one event line */
typedef struct ev {
  char name[64], cat[32], ph;
  int tid;
  double ts, dur; /* µs; dur -1 when absent */
  unsigned long long id;
  long long bytes;
} ev;

static bool str_field(const char *line, const char *key, char *out, size_t len) {
  char pat[40];
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  const char *p = strstr(line, pat);
  if (!p) return false;
  p += strlen(pat);
  size_t n = 0;
  while (p[n] && p[n] != '"' && n + 1 < len) n++;
  memcpy(out, p, n);
  out[n] = '\0';
  return true;
}

static bool num_field(const char *line, const char *key, double *out) {
  char pat[40];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(line, pat);
  if (!p) return false;
  *out = strtod(p + strlen(pat), NULL);
  return true;
}

/* the events of a trace file (metadata lines skipped); *n of them */
static ev *parse(char *text, int *n) {
  assert_true(strncmp(text, "{\"traceEvents\":[\n", 17) == 0);
  assert_non_null(strstr(text, "\n],\"displayTimeUnit\":\"ns\""));
  int cap = 1024;
  ev *v = malloc(sizeof *v * (size_t)cap);
  *n = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char ph[4];
    if (!str_field(line, "ph", ph, sizeof ph) || ph[0] == 'M') continue;
    if (*n == cap) v = realloc(v, sizeof *v * (size_t)(cap *= 2));
    ev *e = &v[(*n)++];
    memset(e, 0, sizeof *e);
    e->ph = ph[0];
    str_field(line, "name", e->name, sizeof e->name);
    str_field(line, "cat", e->cat, sizeof e->cat);
    double d = -1;
    assert_true(num_field(line, "tid", &d));
    e->tid = (int)d;
    assert_true(num_field(line, "ts", &e->ts));
    if (!num_field(line, "dur", &e->dur)) e->dur = -1;
    if (num_field(line, "id", &d)) e->id = (unsigned long long)d;
    e->bytes = num_field(line, "bytes", &d) ? (long long)d : -1;
  }
  return v;
}

static int count(const ev *v, int n, const char *name, const char *cat, int tid) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!strcmp(v[i].name, name) && !strcmp(v[i].cat, cat) && v[i].ph == 'X' &&
        (tid < 0 ? v[i].tid >= 100000 : v[i].tid == tid))
      k++;
  return k;
}

/* the ts of the first slice `name` on `tid` (any record cat), or -1 */
static double first_ts(const ev *v, int n, const char *name, int tid) {
  double t = -1;
  for (int i = 0; i < n; i++)
    if (v[i].tid == tid && v[i].ph == 'X' && !strcmp(v[i].name, name) &&
        strcmp(v[i].cat, "publish") && (t < 0 || v[i].ts < t))
      t = v[i].ts;
  return t;
}

static void check_known(const char *path) {
  char *text = slurp(path);
  assert_non_null(strstr(text, "\"args\":{\"name\":\"rank 3\"}"));
  assert_non_null(strstr(text, "\"args\":{\"name\":\"issuer "));
  int n;
  ev *v = parse(text, &n);
  /* single-device ops on rank 0 only; the DTensor matmul on every rank */
  assert_int_equal(count(v, n, "add", "op", 0), 1);
  assert_int_equal(count(v, n, "mul", "op", 0), 1);
  assert_int_equal(count(v, n, "to_host", "host", 0), 1);
  for (int r = 1; r < 4; r++) {
    assert_int_equal(count(v, n, "add", "op", r), 0);
    assert_int_equal(count(v, n, "mul", "op", r), 0);
  }
  for (int r = 0; r < 4; r++) {
    assert_int_equal(count(v, n, "matmul", "dtensor", r), 1);
    assert_int_equal(count(v, n, "redistribute", "dtensor", r), 1);
    assert_int_equal(count(v, n, "all_gather", "collective", r), 1);
    /* program order on each rank */
    double mm = first_ts(v, n, "matmul", r), rd = first_ts(v, n, "redistribute", r);
    assert_true(mm >= 0 && rd > mm);
    if (r == 0) {
      double add = first_ts(v, n, "add", 0), mul = first_ts(v, n, "mul", 0),
             fetch = first_ts(v, n, "to_host", 0);
      assert_true(add >= 0 && add < mul && mul < fetch && fetch < mm);
    }
  }
  /* publishes on an issuer track */
  assert_int_equal(count(v, n, "add", "publish", -1), 1);
  assert_int_equal(count(v, n, "matmul", "publish", -1), 1);
  assert_int_equal(count(v, n, "redistribute", "publish", -1), 1);
  /* collectives carry their bytes: 8x8 float32 gathered */
  for (int i = 0; i < n; i++)
    if (!strcmp(v[i].cat, "collective")) assert_int_equal(v[i].bytes, 8 * 8 * 4); /* gathered */
  /* every flow start has exactly one end, and the reverse */
  int starts = 0;
  for (int i = 0; i < n; i++) {
    if (v[i].ph != 's' && v[i].ph != 'f') continue;
    assert_true(v[i].id != 0);
    int other = 0;
    for (int j = 0; j < n; j++)
      if (v[j].id == v[i].id && v[j].ph == (v[i].ph == 's' ? 'f' : 's')) other++;
    assert_int_equal(other, 1);
    starts += v[i].ph == 's';
  }
  assert_true(starts >= 4 + 4 + 3); /* matmul and redistribute to 4 ranks, ... */
  free(v);
  free(text);
}

static void test_known_program(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  assert_non_null(rt);
  const char *path = tmp_path("known");
  assert_int_equal(dt_trace_begin(rt, path), DT_OK);
  known_program(rt);
  assert_int_equal(dt_trace_end(rt), DT_OK);
  check_known(path);
  /* off again: a second program leaves the file alone */
  known_program(rt);
  dt_runtime_destroy(rt);
  check_known(path);
  unlink(path);
}

static void expect_error(dt_status st, dt_status want, const char *msg) {
  assert_int_equal(st, want);
  assert_string_equal(dt_last_error(), msg);
}

static void test_errors(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  dt_runtime *rt2 = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  expect_error(dt_trace_begin(NULL, "x.json"), DT_ERR_INVALID_ARGUMENT,
               "dt_trace_begin: rt is NULL");
  expect_error(dt_trace_begin(rt, NULL), DT_ERR_INVALID_ARGUMENT,
               "dt_trace_begin: path is NULL");
  expect_error(dt_trace_begin(rt, ""), DT_ERR_INVALID_ARGUMENT,
               "dt_trace_begin: path is empty");
  expect_error(dt_trace_begin(rt, "/nonexistent-dtorch-dir/t.json"), DT_ERR_IO,
               "dt_trace_begin: cannot open \"/nonexistent-dtorch-dir/t.json\" "
               "for writing: No such file or directory");
  expect_error(dt_trace_end(rt), DT_ERR_INVALID_ARGUMENT,
               "dt_trace_end: this runtime is not being traced (call "
               "dt_trace_begin first)");
  expect_error(dt_trace_end(NULL), DT_ERR_INVALID_ARGUMENT, "dt_trace_end: rt is NULL");
  const char *path = tmp_path("errors");
  assert_int_equal(dt_trace_begin(rt, path), DT_OK);
  char want[512];
  snprintf(want, sizeof want, "dt_trace_begin: already tracing a runtime to "
           "\"%s\" (one runtime at a time: call dt_trace_end first)", path);
  expect_error(dt_trace_begin(rt, path), DT_ERR_INVALID_ARGUMENT, want);
  expect_error(dt_trace_begin(rt2, path), DT_ERR_INVALID_ARGUMENT, want);
  expect_error(dt_trace_end(rt2), DT_ERR_INVALID_ARGUMENT,
               "dt_trace_end: this runtime is not being traced (call "
               "dt_trace_begin first)");
  assert_int_equal(dt_trace_end(rt), DT_OK);
  dt_runtime_destroy(rt2);
  dt_runtime_destroy(rt);
  unlink(path);
}

/* two threads begin (and then end) at once: exactly one of each succeeds */
typedef struct race {
  dt_runtime *rt;
  const char *path;
  _Atomic int begun, ended, go;
} race;

static void race_body(void *arg, int i) {
  race *r = arg;
  atomic_fetch_add(&r->go, 1);
  while (atomic_load(&r->go) < 2) {}
  dt_status st = dt_trace_begin(r->rt, r->path);
  TU_CHECK(st == DT_OK || (st == DT_ERR_INVALID_ARGUMENT &&
                           strstr(dt_last_error(), "already tracing")),
           "thread %d: %s", i, dt_last_error());
  if (st == DT_OK) atomic_fetch_add(&r->begun, 1);
  dt_runtime_set_current(r->rt);
  dt_tensor *a = dt_ones(DT_SHAPE(4), NULL);
  dt_tensor_release(dt_add(a, a));
  dt_tensor_release(a);
  dt_runtime_set_current(NULL);
  atomic_fetch_add(&r->go, 1);
  while (atomic_load(&r->go) < 4) {}
  st = dt_trace_end(r->rt);
  TU_CHECK(st == DT_OK || (st == DT_ERR_INVALID_ARGUMENT &&
                           strstr(dt_last_error(), "not being traced")),
           "thread %d: %s", i, dt_last_error());
  if (st == DT_OK) atomic_fetch_add(&r->ended, 1);
}

static void test_two_threads(void **state) {
  (void)state;
  race r = {.rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2}),
            .path = tmp_path("race")};
  for (int round = 0; round < 20; round++) {
    atomic_store(&r.begun, 0);
    atomic_store(&r.ended, 0);
    atomic_store(&r.go, 0);
    tu_run_threads(2, race_body, &r);
    assert_int_equal(tu_thread_failures_take(), 0);
    assert_int_equal(atomic_load(&r.begun), 1);
    assert_int_equal(atomic_load(&r.ended), 1);
  }
  char *text = slurp(r.path);
  int n;
  ev *v = parse(text, &n);
  assert_true(count(v, n, "add", "op", 0) >= 1);
  free(v);
  free(text);
  dt_runtime_destroy(r.rt);
  unlink(r.path);
}

/* DTORCH_TRACE: from creation to destroy */
static void test_env(void **state) {
  (void)state;
  const char *path = tmp_path("env");
  setenv("DTORCH_TRACE", path, 1);
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  unsetenv("DTORCH_TRACE");
  assert_non_null(rt);
  dt_runtime_set_current(rt);
  dt_tensor *a = dt_ones(DT_SHAPE(4), NULL);
  dt_tensor_release(dt_mul(a, a));
  dt_tensor_release(a);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  char *text = slurp(path);
  int n;
  ev *v = parse(text, &n);
  assert_int_equal(count(v, n, "mul", "op", 0), 1);
  free(v);
  free(text);
  unlink(path);
}

/* the trace clock in ns of CLOCK_MONOTONIC (sched/trace_recorder.c converts TSC ticks
 * where it stamps with them): an SPMD function sleeping 30 ms is a slice
 * of 30 ms on every rank, and the session's slices fit in the wall time
 * the test measured around it */
static dt_status sleepy(dt_spmd_ctx *ctx) {
  (void)ctx;
  usleep(30000);
  return DT_OK;
}

static double wall_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void test_clock(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  const char *path = tmp_path("clock");
  double w0 = wall_us();
  assert_int_equal(dt_trace_begin(rt, path), DT_OK);
  usleep(5000);
  assert_int_equal(dt_spmd_run(rt, sleepy, NULL), DT_OK);
  assert_int_equal(dt_trace_end(rt), DT_OK);
  double wall = wall_us() - w0;
  char *text = slurp(path);
  int n;
  ev *v = parse(text, &n);
  int slices = 0;
  for (int i = 0; i < n; i++) {
    if (v[i].ph != 'X') continue;
    assert_true(v[i].ts >= 0 && v[i].ts + v[i].dur <= wall);
    if (!strcmp(v[i].name, "spmd") && v[i].tid < 2) {
      slices++;
      assert_true(v[i].ts >= 5000);                 /* after the 5 ms sleep */
      assert_true(v[i].dur >= 30000 * 0.98 && v[i].dur <= wall);
    }
  }
  assert_int_equal(slices, 2);
  free(v);
  free(text);
  dt_runtime_destroy(rt);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--write")) {
    dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
    if (!rt || dt_trace_begin(rt, argv[2]) != DT_OK) {
      fprintf(stderr, "test_trace: %s\n", dt_last_error());
      return 1;
    }
    known_program(rt);
    dt_status st = dt_trace_end(rt);
    dt_runtime_destroy(rt);
    return st == DT_OK ? 0 : 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_program),
      cmocka_unit_test(test_clock),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_two_threads),
      cmocka_unit_test(test_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
