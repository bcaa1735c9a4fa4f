/* The semantics of a multi-process runtime (launcher "mpi"), run by
 * scripts/mpirun.sh on 2 and 4 processes (ctest label mpi; the program
 * passes on 1 process too): the process layout against MPI's size and
 * rank, creation errors, DTORCH_LAUNCHER and two runtimes, where a fetch
 * may be made and what it says where it may not, the async fetch,
 * single-device tensors, random factories and a local synchronize. Checks
 * count in every process and the processes agree at the end of each test
 * (mpi_dtensor_common.h). Built without MPI: skipped (77). DTensor values
 * are in test_mpi_dtensor.c. */

#if !DTORCH_HAVE_MPI
#include <stdio.h>

int main(void) {
  printf("skipped: dtorch was built without MPI\n");
  return 77;
}

#else

#include "mpi_dtensor_common.h"

static void test_runtime_layout(void **state) {
  (void)state;
  CHECK(dt_runtime_num_processes(rt) == P, "num_processes %d, MPI size %d",
        dt_runtime_num_processes(rt), P);
  CHECK(dt_runtime_process_index(rt) == me, "process_index %d, MPI rank %d",
        dt_runtime_process_index(rt), me);
  CHECK(dt_runtime_num_ranks(rt) == N, "num_ranks %d", dt_runtime_num_ranks(rt));
  for (int r = 0; r < N; r++) {
    bool want = r >= me * N / P && r < (me + 1) * N / P;
    CHECK(dt_runtime_rank_is_local(rt, r) == want, "rank_is_local(%d)", r);
    CHECK(dt_runtime_rank_is_local(ref, r), "ref: rank_is_local(%d)", r);
  }
  dt_clear_error();
  CHECK(!dt_runtime_rank_is_local(rt, N), "rank_is_local(N)");
  CHECK_ERR(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_runtime_rank_is_local");
  CHECK(dt_runtime_num_processes(ref) == 1 && dt_runtime_process_index(ref) == 0,
        "ref: %d processes, index %d", dt_runtime_num_processes(ref),
        dt_runtime_process_index(ref));
  agree();
}

/* the layout queries answer the same from several threads at once and
 * from a future's callback (dtorch's completion thread) */
static bool layout_right(void) {
  bool ok = dt_runtime_num_processes(rt) == P && dt_runtime_process_index(rt) == me;
  for (int r = 0; r < N; r++)
    ok = ok && dt_runtime_rank_is_local(rt, r) == (r / (N / P) == me);
  return ok;
}

static void layout_body(void *arg, int i) {
  (void)arg, (void)i;
  for (int k = 0; k < 2000; k++) TU_CHECK(layout_right(), "thread %d, call %d", i, k);
}

static void layout_cb(dt_future *f, dt_status st, void *user) {
  (void)f;
  *(int *)user = st == DT_OK && layout_right() ? 1 : -1;
}

static void test_layout_threads_and_callback(void **state) {
  (void)state;
  tu_run_threads(4, layout_body, NULL);
  CHECK(tu_thread_failures_take() == 0, "a thread saw another layout");
  dt_tensor *t = dt_zeros(DT_SHAPE(4), NULL);
  dt_future *f = t ? dt_to_host_async(t, (float[4]){0}, 4 * sizeof(float)) : NULL;
  _Atomic int seen = 0;
  CHECK(f && dt_future_then(f, layout_cb, (void *)&seen) == DT_OK, "then: %s",
        dt_last_error());
  if (f) dt_future_wait(f, -1);
  for (int i = 0; i < 5000 && !seen; i++) tu_sleep_ns(1000000);
  CHECK(seen == 1, "the callback saw %d", (int)seen);
  dt_future_release(f);
  dt_tensor_release(t);
  agree();
}

static void test_runtime_create_errors(void **state) {
  (void)state;
  if (P > 1) { /* 3 ranks at -np 2, 6 at -np 4 (collective: each refuses) */
    int n = P + P / 2;
    char ranks[32], procs[32];
    snprintf(ranks, sizeof ranks, "%d ranks", n);
    snprintf(procs, sizeof procs, "%d processes", P);
    dt_runtime *bad = make_runtime("mpi", n);
    CHECK(!bad, "%d ranks over %d processes made a runtime", n, P);
    dt_runtime_destroy(bad);
    CHECK_ERR(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_runtime_create",
              ranks, procs);
  }
  dt_runtime *bogus = make_runtime("bogus", N);
  CHECK(!bogus, "launcher \"bogus\" made a runtime");
  dt_runtime_destroy(bogus);
  CHECK_ERR(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_runtime_create",
            "options.launcher \"bogus\"");
  agree();
}

/* an S(0) -> R all-gather on a [n] mesh of r (over every process) */
static void check_gather(dt_runtime *r, int n, const char *what) {
  dt_mesh *m = dt_mesh_create_range(r, NULL, DT_SHAPE(n), NULL);
  double v[16];
  for (int i = 0; i < 2 * n; i++) v[i] = 3 * i + 1;
  char *want = encode(v, 2 * n, DT_FLOAT32);
  dt_tensor *x = from_host(want, DT_SHAPE(2 * n), DT_FLOAT32, m,
                           DT_PLACEMENTS(DT_SHARD(0)));
  dt_tensor *y = dt_redistribute(x, NULL, DT_PLACEMENTS(DT_REPLICATE));
  char *got = fetch(y);
  CHECK(memcmp(got, want, (size_t)(2 * n) * 4) == 0, "%s: gathered wrongly",
        what);
  free(got);
  free(want);
  TU_RELEASE(x, y);
  dt_mesh_release(m);
}

static void test_runtime_env_and_two(void **state) {
  (void)state;
  setenv("DTORCH_LAUNCHER", "mpi", 1);
  dt_runtime *env = make_runtime(NULL, N);
  unsetenv("DTORCH_LAUNCHER");
  CHECK(env && dt_runtime_num_processes(env) == P &&
            dt_runtime_process_index(env) == me,
        "DTORCH_LAUNCHER=mpi: %s", env ? "wrong layout" : dt_last_error());
  /* alive together with rt (and ref): collectives of each runtime, their
   * issue interleaved */
  if (env) check_gather(env, N, "DTORCH_LAUNCHER runtime");
  check_gather(rt, N, "the job's runtime beside it");
  dt_runtime_destroy(env);
  /* one after another, with another rank count; two alive together */
  for (int i = 0; i < 2; i++) {
    dt_runtime *a = make_runtime("mpi", P);
    dt_runtime *b = make_runtime("mpi", 2 * P);
    CHECK(a && b, "runtime %d: %s", i, dt_last_error());
    if (a && b) {
      check_gather(b, 2 * P, "second of two");
      check_gather(a, P, "first of two");
      CHECK(dt_runtime_rank_is_local(a, me) &&
                dt_runtime_rank_is_local(b, 2 * me + 1),
            "layout of a %d-rank runtime", P);
    }
    dt_runtime_destroy(b);
    dt_runtime_destroy(a);
  }
  agree();
}

static void check_fetch_on(const int *ranks, int n, const char *where) {
  dt_mesh *m = dt_mesh_create(rt, NULL, DT_SHAPE(n), ranks, NULL);
  float v[8] = {1.5f, -2, 3, 4.25f, 5, 6, 7, 8}, got[8] = {0};
  dt_tensor *t = from_host(v, DT_SHAPE(8), DT_FLOAT32, m,
                           DT_PLACEMENTS(S0));
  bool hosted = false;
  for (int i = 0; i < n; i++) hosted = hosted || proc_of(ranks[i]) == me;
  dt_status st = dt_to_host(t, got, sizeof got);
  if (hosted) {
    CHECK(st == DT_OK && memcmp(got, v, sizeof v) == 0,
          "ranks %d..%d: dt_to_host in process %d: %s", ranks[0], ranks[n - 1],
          me, dt_last_error());
  } else {
    char self[64];
    snprintf(self, sizeof self, "(process %d, ranks %d..%d)", me, first_rank(),
             first_rank() + N / P - 1);
    CHECK_ERR(st, DT_ERR_DEVICE, "dt_to_host", "no rank in this process", self,
              where);
    /* a shard of another process's rank: names it */
    int r = ranks[0];
    char owner[64];
    snprintf(owner, sizeof owner, "rank %d runs in process %d", r, proc_of(r));
    CHECK_ERR(dt_local_to_host(t, r, got, sizeof got), DT_ERR_DEVICE,
              "dt_local_to_host", owner, self);
  }
  dt_tensor_release(t);
  dt_mesh_release(m);
}

static void test_fetch_where(void **state) {
  (void)state;
  /* a mesh over ranks 4..7: process 1's at -np 2, 2 and 3's at -np 4 */
  check_fetch_on((const int[]){4, 5, 6, 7}, 4,
                 P == 2 ? "ranks 4, 5, 6, 7 run in process 1"
                        : "ranks 4, 5, 6, 7 run in processes 2, 3");
  /* across the first two processes' boundary (all local at -np 1) */
  int per = N / P;
  check_fetch_on((const int[]){per - 1, per % N}, 2,
                 P == 4 ? "ranks 1, 2 run in processes 0, 1" : "-");
  /* every other process's rank of an [8] mesh */
  dt_mesh *m = dt_mesh_create_range(rt, NULL, DT_SHAPE(N), NULL);
  dt_tensor *t = dt_zeros(DT_SHAPE(N), &(dt_tensor_options){.mesh = m,
                          .placements = DT_PLACEMENTS(S0)});
  float x = 1;
  for (int r = 0; r < N; r++) {
    if (proc_of(r) == me) {
      CHECK(dt_local_to_host(t, r, &x, 4) == DT_OK && x == 0, "rank %d", r);
      continue;
    }
    char owner[64];
    snprintf(owner, sizeof owner, "rank %d runs in process %d (ranks %d..%d)",
             r, proc_of(r), proc_of(r) * per, proc_of(r) * per + per - 1);
    CHECK_ERR(dt_local_to_host(t, r, &x, 4), DT_ERR_DEVICE, owner);
  }
  dt_tensor_release(t);
  dt_mesh_release(m);
  agree();
}

/* dt_to_host_async of tensors spanning the processes: every process
 * starts it, every process's future gives the full value */
static void test_fetch_async(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_create_range(rt, NULL, DT_SHAPE(2, 4), NULL);
  float v[40], got[2][40];
  for (int i = 0; i < 40; i++) v[i] = (float)(i * i % 17) - 8.5f;
  dt_tensor *x = from_host(v, DT_SHAPE(5, 8), DT_FLOAT32, m,
                           DT_PLACEMENTS(S1, S0));
  dt_tensor *p = from_host(v, DT_SHAPE(5, 8), DT_FLOAT32, m,
                           DT_PLACEMENTS(PS, S1));
  dt_future *f[2] = {dt_to_host_async(x, got[0], sizeof got[0]),
                     dt_to_host_async(p, got[1], sizeof got[1])};
  for (int i = 0; i < 2; i++) {
    CHECK(f[i] && dt_future_wait(f[i], -1) == DT_OK, "fetch %d: %s", i,
          dt_last_error());
    CHECK(memcmp(got[i], v, sizeof v) == 0, "fetch %d: wrong value", i);
    dt_future_release(f[i]);
  }
  TU_RELEASE(x, p);
  dt_mesh_release(m);
  agree();
}

/* factories without a mesh: this process's first local rank, or cpu:N of
 * a local N; a non-local N is refused */
static void test_single_device(void **state) {
  (void)state;
  dt_tensor *t = dt_arange(0, 6, 1, NULL);
  float v[6] = {0}, want[6] = {0, 1, 2, 3, 4, 5};
  CHECK(dt_local_to_host(t, first_rank(), v, sizeof v) == DT_OK &&
            memcmp(v, want, sizeof v) == 0,
        "dt_local_to_host(first rank %d): %s", first_rank(), dt_last_error());
  char lives[32];
  snprintf(lives, sizeof lives, "it lives on cpu:%d", first_rank());
  int other = (first_rank() + N / P) % N;
  if (P > 1)
    CHECK_ERR(dt_local_to_host(t, other, v, sizeof v), DT_ERR_MESH, lives);
  dt_tensor *u = dt_add(t, t); /* runs here alone, and fetches alone */
  CHECK(dt_to_host(u, v, sizeof v) == DT_OK && v[5] == 10, "add: %s",
        dt_last_error());
  for (int r = 0; r < N; r++) {
    char dev[16];
    snprintf(dev, sizeof dev, "cpu:%d", r);
    dt_tensor *z = dt_ones(DT_SHAPE(2), &(dt_tensor_options){.device = dev});
    if (proc_of(r) == me) {
      float o[2] = {0};
      CHECK(z && dt_local_to_host(z, r, o, sizeof o) == DT_OK && o[1] == 1,
            "%s: %s", dev, dt_last_error());
    } else {
      char owner[64];
      snprintf(owner, sizeof owner, "rank %d runs in process %d", r, proc_of(r));
      CHECK(!z, "%s made a tensor in process %d", dev, me);
      CHECK_ERR(dt_last_status(), DT_ERR_DEVICE, "dt_ones", owner);
    }
    dt_tensor_release(z);
  }
  TU_RELEASE(t, u);
  agree();
}

/* dt_randn / dt_rand on a mesh: the values of one process's runtime and
 * of a single-device draw (element i is element i whatever the split) */
static void test_random(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_create_range(rt, NULL, DT_SHAPE(2, 4), NULL);
  dt_mesh *mr = dt_mesh_create_range(ref, NULL, DT_SHAPE(2, 4), NULL);
  const dt_placement *pl = DT_PLACEMENTS(S1, S0);
  for (int k = 0; k < 2; k++) {
    dt_tensor *(*f)(dt_shape, const dt_tensor_options *) = k ? dt_rand : dt_randn;
    dt_manual_seed(11);
    dt_tensor *x = f(DT_SHAPE(5, 12), &(dt_tensor_options){.mesh = m,
                     .placements = pl});
    dt_manual_seed(11);
    dt_tensor *xr = f(DT_SHAPE(5, 12), &(dt_tensor_options){.mesh = mr,
                      .placements = pl});
    dt_manual_seed(11);
    dt_runtime_set_current(ref);
    dt_tensor *one = f(DT_SHAPE(5, 12), NULL);
    dt_runtime_set_current(rt);
    char *want = fetch(one);
    check_result(x, xr, pl, want, -1, k ? "dt_rand" : "dt_randn");
    free(want);
    TU_RELEASE(x, xr, one);
  }
  dt_mesh_release(m);
  dt_mesh_release(mr);
  agree();
}

/* dt_runtime_synchronize waits for this process's ranks only: process 0
 * runs work of its own (a single-device op, a collective of a mesh within
 * its ranks) and synchronises while every other process waits for its
 * message and so has issued nothing; then each of the others does the
 * same. A synchronize that waited for another process would never
 * return (the alarm, or the waiting processes' deadline, fails it). */
static void local_work(void) {
  int per = N / P, ranks[N];
  for (int i = 0; i < per; i++) ranks[i] = first_rank() + i;
  dt_mesh *m = dt_mesh_create(rt, NULL, DT_SHAPE(per), ranks, NULL);
  dt_tensor *x = dt_ones(DT_SHAPE(per, 2), &(dt_tensor_options){.mesh = m,
                         .placements = DT_PLACEMENTS(S0)});
  dt_tensor *y = dt_redistribute(x, NULL, DT_PLACEMENTS(R_));
  dt_tensor *s = dt_arange(0, 4, 1, NULL);
  dt_tensor *u = dt_mul(s, s);
  CHECK(dt_runtime_synchronize(rt) == DT_OK, "process %d: synchronize: %s", me,
        dt_last_error());
  TU_RELEASE(x, y, s, u);
  dt_mesh_release(m);
}

static void test_synchronize_local(void **state) {
  (void)state;
  CHECK(dt_runtime_synchronize(rt) == DT_OK, "%s", dt_last_error());
  MPI_Barrier(MPI_COMM_WORLD); /* nothing of earlier tests in flight */
  int token = 0;
  if (me == 0) {
    local_work();
    for (int p = 1; p < P; p++) MPI_Send(&token, 1, MPI_INT, p, 17, MPI_COMM_WORLD);
  } else {
    MPI_Request req;
    MPI_Irecv(&token, 1, MPI_INT, 0, 17, MPI_COMM_WORLD, &req);
    int done = 0;
    int64_t deadline = tu_now_ns() + 30000000000LL;
    while (!done && tu_now_ns() < deadline) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done) tu_sleep_ns(1000000);
    }
    CHECK(done, "process 0's synchronize did not return within 30 s while "
                "process %d issued nothing", me);
    if (!done) { /* release process 0, then take the message */
      dt_runtime_synchronize(rt);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    local_work();
  }
  agree();
}

int main(void) {
  rt = make_runtime("mpi", N);
  if (!rt) {
    fprintf(stderr, "test_mpi_semantics: %s\n", dt_last_error());
    return 1;
  }
  ref = make_runtime("none", N);
  if (!ref) {
    fprintf(stderr, "test_mpi_semantics: %s\n", dt_last_error());
    return 1;
  }
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  dt_runtime_set_current(rt);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_runtime_layout),
    cmocka_unit_test(test_layout_threads_and_callback),
    cmocka_unit_test(test_runtime_create_errors),
    cmocka_unit_test(test_runtime_env_and_two),
    cmocka_unit_test(test_fetch_where),
    cmocka_unit_test(test_fetch_async),
    cmocka_unit_test(test_single_device),
    cmocka_unit_test(test_random),
    cmocka_unit_test(test_synchronize_local),
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
