/* dt_save_safetensors / dt_load_safetensors in a multi-process job
 * (launcher "mpi"), run by scripts/mpirun.sh on 2 and 4 processes (ctest
 * label mpi; it passes on 1 process too). N = 8 global ranks.
 * References: the file the same tensors give when saved from a
 * ONE-process runtime of 8 ranks (launcher "none", made in the same
 * process) must be byte for byte the file the job saves, and loads must
 * give the host values. Checks count instead of jumping out, and the
 * processes add up their failures at the end of each test (MPI_Allreduce),
 * so all of them fail or none. Built without MPI: skipped (77). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "testutil.h"
#include "threads.h"

#if !DTORCH_HAVE_MPI

int main(void) {
  printf("skipped: dtorch was built without MPI\n");
  return 77;
}

#else

#include <mpi.h>

enum { N = 8, NT = 4 };
static dt_runtime *rt, *ref; /* the job's; one process of N ranks */
static int P, me, fails;
static char dir[64];         /* process 0's temporary directory */

#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fails++;                                                              \
      fprintf(stderr, "[process %d] %s:%d: check failed: %s: ", me,         \
              __FILE__, __LINE__, #cond);                                   \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
    }                                                                       \
  } while (0)

static void agree(void) {
  int mine = fails, all = 0;
  fails = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  assert_int_equal(all, 0);
}

static dt_runtime *make_runtime(const char *launcher) {
  dt_runtime_options o = {.num_ranks = N, .launcher = launcher,
                          .pin_ranks = -1, .collective_timeout_ms = 20000};
  return dt_runtime_create(&o);
}

static char *read_file(const char *path, long *len) {
  FILE *f = fopen(path, "rb");
  char *b = NULL;
  *len = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) >= 0) {
    b = malloc((size_t)*len + 1);
    rewind(f);
    if (fread(b, 1, (size_t)*len, f) != (size_t)*len) *len = -1;
  }
  if (f) fclose(f);
  return b;
}

/* the tensors on runtime r: [2, 4] S(0), S(1); a Partial(sum) on [8]
 * (the value on coordinate 0); on ranks 4..7 only (none of process 0's
 * at -np 2 and 4); single-device (each process's own) */
static void make_tensors(dt_runtime *r, const float *v, dt_tensor **t) {
  dt_mesh *m24 = dt_mesh_create_range(r, NULL, DT_SHAPE(2, 4), NULL);
  dt_mesh *m8 = dt_mesh_create_range(r, NULL, DT_SHAPE(8), NULL);
  dt_mesh *hi = dt_mesh_create(r, NULL, DT_SHAPE(4), (const int[]){4, 5, 6, 7},
                               NULL);
  dt_shape s = DT_SHAPE(5, 8);
  t[0] = dt_from_host(v, s, &(dt_tensor_options){.mesh = m24,
      .placements = DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1))});
  t[1] = dt_from_host(v, s, &(dt_tensor_options){.mesh = m8,
      .placements = DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM))});
  t[2] = dt_from_host(v, s, &(dt_tensor_options){.mesh = hi,
      .placements = DT_PLACEMENTS(DT_SHARD(1))});
  dt_runtime_set_current(r);
  t[3] = dt_from_host(v, s, NULL);
  dt_runtime_set_current(rt);
  dt_mesh_release(m24);
  dt_mesh_release(m8);
  dt_mesh_release(hi);
}

static const char *const names[NT] = {"sharded", "partial", "high", "single"};

static void test_save_load(void **state) {
  (void)state;
  float v[40], got[40];
  for (int i = 0; i < 40; i++) v[i] = (float)i * 0.75f - 9;
  dt_tensor *a[NT], *b[NT];
  make_tensors(rt, v, a);
  make_tensors(ref, v, b);
  char job[128], one[128];
  snprintf(job, sizeof job, "%s/job.safetensors", dir);
  snprintf(one, sizeof one, "%s/one-%d.safetensors", dir, me);
  CHECK(dt_save_safetensors(job, a, names, NT) == DT_OK, "save: %s",
        dt_last_error());
  CHECK(dt_save_safetensors(one, b, names, NT) == DT_OK, "save: %s",
        dt_last_error());
  /* the job's save returned in every process: the file is whole */
  long la, lb;
  char *fa = read_file(job, &la), *fb = read_file(one, &lb);
  CHECK(la > 0 && la == lb && memcmp(fa, fb, (size_t)la) == 0,
        "the job's file (%ld bytes) is not the one process's (%ld)", la, lb);
  free(fa);
  free(fb);
  /* each loaded on the job's [8] mesh, sharded over every process */
  dt_mesh *m8 = dt_mesh_create_range(rt, NULL, DT_SHAPE(8), NULL);
  for (int i = 0; i < NT; i++) {
    dt_tensor *l = dt_load_safetensors(job, names[i], &(dt_load_options){
        .mesh = m8, .placements = DT_PLACEMENTS(DT_SHARD(1))});
    memset(got, 0, sizeof got);
    CHECK(dt_to_host(l, got, sizeof got) == DT_OK &&
              memcmp(got, v, sizeof v) == 0,
          "%s: loaded wrongly: %s", names[i], dt_last_error());
    dt_tensor_release(l);
  }
  dt_mesh_release(m8);
  unlink(one);
  MPI_Barrier(MPI_COMM_WORLD); /* every process read the file */
  if (me == 0) unlink(job);
  for (int i = 0; i < NT; i++) {
    dt_tensor_release(a[i]);
    dt_tensor_release(b[i]);
  }
  agree();
}

/* a save that fails in process 0 (it writes the file) fails everywhere */
static void test_save_error(void **state) {
  (void)state;
  dt_runtime_set_current(rt);
  dt_tensor *t = dt_ones(DT_SHAPE(4), NULL);
  char bad[128];
  snprintf(bad, sizeof bad, "%s/no/such/dir/x.safetensors", dir);
  const char *name = "x";
  dt_status st = dt_save_safetensors(bad, &t, &name, 1);
  const char *msg = dt_last_error();
  CHECK(st == DT_ERR_IO, "status %s: %s", dt_status_name(st), msg);
  CHECK(strstr(msg, "dt_save_safetensors") && strstr(msg, "no/such/dir"),
        "message: %s", msg);
  if (me != 0)
    CHECK(strstr(msg, "failed in another process with DT_ERR_IO"),
          "message: %s", msg);
  dt_clear_error();
  dt_tensor_release(t);
  agree();
}

int main(void) {
  rt = make_runtime("mpi");
  ref = rt ? make_runtime("none") : NULL;
  if (!rt || !ref) {
    fprintf(stderr, "test_mpi_checkpoint: %s\n", dt_last_error());
    return 1;
  }
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (me == 0) {
    snprintf(dir, sizeof dir, "/tmp/test_mpi_checkpoint.XXXXXX");
    if (!mkdtemp(dir)) dir[0] = '\0';
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (!dir[0]) return 1;
  dt_runtime_set_current(rt);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_save_load),
    cmocka_unit_test(test_save_error),
  };
  tu_alarm(120);
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 0) rmdir(dir);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(ref);
  dt_runtime_destroy(rt);
  return failed;
}

#endif
