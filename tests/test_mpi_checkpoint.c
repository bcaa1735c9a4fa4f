/* Safetensors checkpoints in a multi-process job (mesh/checkpoint*.c,
 * docs/io.md "Multi-process jobs"), run by scripts/mpirun.sh on 2 and 4
 * processes (ctest label mpi); a plain run (no mpirun) is a one-process
 * runtime. The job has 4 ranks on a 2 x 2 mesh whatever the process count.
 * References: values made by closed formulas on the host, the file's raw
 * bytes read with stdio, each process's expected byte count from a naive
 * torch.chunk box per local rank.
 *   (no flag)        the cmocka suite: save by the job and load with other
 *                    placements; each process writes and reads only its
 *                    shards' bytes (counters, and loads from a private copy
 *                    whose other bytes are garbage); errors in one process
 *                    reported in every process; a process that never comes
 *                    times the others out with a clear message
 *   --save PATH      saves the reference tensors (any process count)
 *   --load PATH      loads them with other placements and checks values,
 *                    bytes read and private copies (any process count)
 * tests/mpi_checkpoint_cross.sh runs --save and --load under different
 * process counts. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "threads.h"
#include "mesh/checkpoint.h"

#if DTORCH_HAVE_MPI
#include <mpi.h>
#endif

#define NR 4 /* the job's ranks: a 2 x 2 mesh, rank r at (r / 2, r % 2) */

static dt_runtime *rt;
static dt_mesh *mesh;
static int nprocs = 1, me = 0;
static char dir[256];

/* ---- the reference tensors: closed formulas */
typedef struct ref {
  const char *name;
  dt_dtype dtype;
  dt_shape shape;
  dt_placement save[2];  /* placements when saved */
} ref;

static const ref refs[] = {
  {"a", DT_FLOAT32, DT_SHAPE(6, 10), {DT_SHARD(0), DT_SHARD(1)}},
  {"b", DT_INT32, DT_SHAPE(5, 3), {DT_REPLICATE, DT_SHARD(0)}},
  {"c", DT_FLOAT32, DT_SHAPE(7), {DT_PARTIAL(DT_REDUCE_SUM), DT_REPLICATE}},
};
#define NREFS 3

static int64_t numel(dt_shape s) {
  int64_t n = 1;
  for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
  return n;
}

static double ref_value(int t, int64_t i) {
  switch (t) {
  case 0: return (double)i * 0.25 - 7.0;
  case 1: return 1000.0 - 37.0 * (double)i;
  default: return (double)i + 0.5;
  }
}

/* the global value as bytes of its dtype */
static void *ref_bytes(int t) {
  int64_t n = numel(refs[t].shape);
  char *p = malloc((size_t)n * 4 + 1);
  for (int64_t i = 0; i < n; i++) {
    if (refs[t].dtype == DT_INT32) {
      int32_t v = (int32_t)ref_value(t, i);
      memcpy(p + i * 4, &v, 4);
    } else {
      float v = (float)ref_value(t, i);
      memcpy(p + i * 4, &v, 4);
    }
  }
  return p;
}

/* ---- boxes: torch.chunk on each Shard dim, naive */
typedef struct box { int64_t lo[DT_MAX_DIMS], hi[DT_MAX_DIMS]; } box;

static box box_of(dt_shape s, const dt_placement *pl, int rank) {
  box b;
  for (int d = 0; d < s.ndim; d++) {
    b.lo[d] = 0;
    b.hi[d] = s.dims[d];
  }
  int coord[2] = {rank / 2, rank % 2};
  for (int m = 0; m < 2; m++) {
    if (pl[m].kind != DT_PLACEMENT_SHARD) continue;
    int d = pl[m].dim;
    int64_t n = s.dims[d], chunk = (n + 1) / 2; /* 2 parts per mesh dim */
    int64_t lo = coord[m] * chunk, hi = lo + chunk < n ? lo + chunk : n;
    b.lo[d] = lo < n ? lo : n;
    b.hi[d] = hi > b.lo[d] ? hi : b.lo[d];
  }
  return b;
}

static int64_t box_numel(dt_shape s, box b) {
  int64_t n = 1;
  for (int d = 0; d < s.ndim; d++) n *= b.hi[d] - b.lo[d];
  return n;
}

static bool in_box(dt_shape s, box b, int64_t flat) {
  for (int d = s.ndim - 1; d >= 0; d--) {
    int64_t k = flat % s.dims[d];
    flat /= s.dims[d];
    if (k < b.lo[d] || k >= b.hi[d]) return false;
  }
  return true;
}

/* the rank writes its box when saving: coordinate 0 on every non-Shard
 * mesh dim (a Partial is reduced to Replicate first) */
static bool owner(const dt_placement *pl, int rank) {
  int coord[2] = {rank / 2, rank % 2};
  for (int m = 0; m < 2; m++)
    if (pl[m].kind != DT_PLACEMENT_SHARD && coord[m] != 0) return false;
  return true;
}

static bool local(int rank) { return dt_runtime_rank_is_local(rt, rank); }

/* ---- setup */
static bool under_mpirun(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") ||
         getenv("PMIX_RANK");
}

static void start(void) {
  const char *launcher = under_mpirun() ? "mpi" : "none";
  rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = NR,
                                                .launcher = launcher});
  if (!rt) {
    fprintf(stderr, "dt_runtime_create: %s\n", dt_last_error());
    exit(1);
  }
  nprocs = dt_runtime_num_processes(rt);
  me = dt_runtime_process_index(rt);
  dt_runtime_set_current(rt);
  mesh = dt_mesh_create_range(rt, NULL, DT_SHAPE(2, 2), NULL);
}

static void stop(void) {
  dt_mesh_release(mesh);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

/* ---- save */
static dt_status save_refs(const char *path) {
  dt_tensor *ts[NREFS];
  const char *names[NREFS];
  for (int t = 0; t < NREFS; t++) {
    void *v = ref_bytes(t);
    ts[t] = dt_from_host(v, refs[t].shape, &(dt_tensor_options){
        .dtype = refs[t].dtype, .mesh = mesh, .placements = refs[t].save});
    free(v);
    assert_non_null(ts[t]);
    names[t] = refs[t].name;
  }
  dt_status st = dt_save_safetensors(path, ts, names, NREFS);
  for (int t = 0; t < NREFS; t++) dt_tensor_release(ts[t]);
  return st;
}

/* the file's data bytes against the references, read with stdio */
static void check_file(const char *path) {
  dt_safetensors_info *info = dt_safetensors_index(path);
  assert_non_null(info);
  assert_int_equal(info->n, NREFS);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  for (int t = 0; t < NREFS; t++) {
    int k = 0;
    while (k < info->n && strcmp(info->tensors[k].name, refs[t].name)) k++;
    assert_true(k < info->n);
    size_t nb = (size_t)numel(refs[t].shape) * 4;
    char *got = malloc(nb);
    assert_int_equal(fseek(f, (long)info->tensors[k].offset, SEEK_SET), 0);
    assert_int_equal(fread(got, 1, nb, f), nb);
    void *want = ref_bytes(t);
    assert_memory_equal(got, want, nb);
    free(want);
    free(got);
  }
  fclose(f);
  dt_safetensors_info_free(info);
}

/* bytes this process's ranks must write for the references */
static int64_t expected_written(void) {
  int64_t n = 0;
  for (int t = 0; t < NREFS; t++)
    for (int r = 0; r < NR; r++)
      if (local(r) && owner(refs[t].save, r))
        n += box_numel(refs[t].shape, box_of(refs[t].shape, refs[t].save, r)) * 4;
  return n;
}

static void save_and_check(const char *path) {
  int64_t r0, w0, r1, w1;
  mesh_st_io_bytes(&r0, &w0);
  assert_int_equal(save_refs(path), DT_OK);
  mesh_st_io_bytes(&r1, &w1);
  assert_int_equal(w1 - w0, expected_written());
  assert_int_equal(r1 - r0, 0);
  check_file(path);
}

/* ---- load */
/* the placements each reference is loaded with (none of them the saved) */
static const dt_placement loads[NREFS][2][2] = {
  {{DT_SHARD(1), DT_SHARD(0)}, {DT_REPLICATE, DT_SHARD(1)}},
  {{DT_SHARD(1), DT_REPLICATE}, {DT_SHARD(0), DT_SHARD(1)}},
  {{DT_SHARD(0), DT_REPLICATE}, {DT_REPLICATE, DT_SHARD(0)}},
};

/* a copy of src in which every data byte of tensor t outside this
 * process's local boxes under pl is 0xEE: a load from it is right only if
 * no rank read a byte it does not hold */
static void masked_copy(const char *src, const char *dst, int t,
                        const dt_placement *pl) {
  dt_safetensors_info *info = dt_safetensors_index(src);
  assert_non_null(info);
  int k = 0;
  while (strcmp(info->tensors[k].name, refs[t].name)) k++;
  FILE *f = fopen(src, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  unsigned char *buf = malloc((size_t)size);
  assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  unsigned char *data = buf + info->tensors[k].offset; /* a file offset */
  for (int64_t e = 0; e < numel(refs[t].shape); e++) {
    bool mine = false;
    for (int r = 0; r < NR && !mine; r++)
      mine = local(r) && in_box(refs[t].shape, box_of(refs[t].shape, pl, r), e);
    if (!mine) memset(data + e * 4, 0xEE, 4);
  }
  f = fopen(dst, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  free(buf);
  dt_safetensors_info_free(info);
}

/* t's global value and every local shard against the reference */
static void check_tensor(dt_tensor *x, int t, const dt_placement *pl) {
  size_t nb = (size_t)numel(refs[t].shape) * 4;
  char *got = malloc(nb);
  char *want = ref_bytes(t);
  assert_int_equal(dt_to_host(x, got, nb), DT_OK);
  assert_memory_equal(got, want, nb);
  for (int r = 0; r < NR; r++) {
    if (!local(r)) continue;
    box b = box_of(refs[t].shape, pl, r);
    int64_t n = box_numel(refs[t].shape, b), j = 0;
    char *shard = malloc((size_t)n * 4 + 1);
    assert_int_equal(dt_local_to_host(x, r, shard, (size_t)n * 4), DT_OK);
    for (int64_t e = 0; e < numel(refs[t].shape); e++)
      if (in_box(refs[t].shape, b, e)) {
        assert_memory_equal(shard + j * 4, want + e * 4, 4);
        j++;
      }
    assert_int_equal(j, n);
    free(shard);
  }
  free(want);
  free(got);
}

static dt_tensor *load(const char *path, int t, const dt_placement *pl) {
  dt_load_options o = {.mesh = mesh, .placements = pl, .merge_gap = -1};
  return dt_load_safetensors(path, refs[t].name, &o);
}

static void load_and_check(const char *path) {
  char priv[512];
  snprintf(priv, sizeof priv, "%s.mine.%d", path, me);
  for (int t = 0; t < NREFS; t++)
    for (int v = 0; v < 2; v++) {
      const dt_placement *pl = loads[t][v];
      int64_t r0, w0, r1, w1, want = 0;
      for (int r = 0; r < NR; r++)
        if (local(r))
          want += box_numel(refs[t].shape, box_of(refs[t].shape, pl, r)) * 4;
      mesh_st_io_bytes(&r0, &w0);
      dt_tensor *x = load(path, t, pl);
      assert_non_null(x);
      assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
      mesh_st_io_bytes(&r1, &w1);
      assert_int_equal(r1 - r0, want); /* merge_gap -1: exactly the boxes */
      check_tensor(x, t, pl);
      dt_tensor_release(x);
      masked_copy(path, priv, t, pl);
      x = load(priv, t, pl);
      assert_non_null(x);
      check_tensor(x, t, pl);
      dt_tensor_release(x);
      unlink(priv);
    }
  if (nprocs == 1) { /* one process: onto one device too */
    dt_tensor *x = dt_load_safetensors(path, "a", NULL);
    assert_non_null(x);
    float got[60];
    assert_int_equal(dt_to_host(x, got, sizeof got), DT_OK);
    for (int i = 0; i < 60; i++) assert_true(got[i] == (float)ref_value(0, i));
    dt_tensor_release(x);
  }
}

/* ---- the suite */
static void path_in_dir(char *p, size_t n, const char *name) {
  snprintf(p, n, "%s/%s", dir, name);
}

static void test_save_load(void **state) {
  (void)state;
  char p[512];
  path_in_dir(p, sizeof p, "job.safetensors");
  save_and_check(p);
  load_and_check(p);
}

/* a tiny safetensors file written by hand: tensor "w" of float32 zeros */
static void write_by_hand(const char *path, int64_t rows, int64_t cols) {
  char h[200];
  int64_t nb = rows * cols * 4;
  int n = snprintf(h, sizeof h, "{\"w\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],"
                   "\"data_offsets\":[0,%lld]}}", (long long)rows,
                   (long long)cols, (long long)nb);
  while (n % 8) h[n++] = ' ';
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  unsigned char pre[8];
  for (int i = 0; i < 8; i++) pre[i] = (unsigned char)((uint64_t)n >> (8 * i));
  fwrite(pre, 1, 8, f);
  fwrite(h, 1, (size_t)n, f);
  for (int64_t i = 0; i < nb; i++) fputc(0, f);
  fclose(f);
}

static void test_missing_everywhere(void **state) {
  (void)state;
  char p[512];
  path_in_dir(p, sizeof p, "absent.safetensors");
  dt_placement pl[2] = {DT_SHARD(0), DT_REPLICATE};
  dt_tensor *x = load(p, 0, pl);
  assert_null(x);
  assert_int_equal(dt_last_status(), DT_ERR_IO);
  assert_non_null(strstr(dt_last_error(), "cannot open"));
}

/* the last process misses the file; every process fails, naming it */
static void test_missing_in_one(void **state) {
  (void)state;
  char p[512], q[600];
  path_in_dir(p, sizeof p, "job.safetensors");
  snprintf(q, sizeof q, "%s.absent", p);
  dt_placement pl[2] = {DT_SHARD(0), DT_REPLICATE};
  dt_tensor *x = load(me == nprocs - 1 ? q : p, 0, pl);
  assert_null(x);
  assert_int_equal(dt_last_status(), DT_ERR_IO);
  assert_non_null(strstr(dt_last_error(), "cannot open"));
  if (me != nprocs - 1 && nprocs > 1) {
    char want[64];
    snprintf(want, sizeof want, "in process %d of %d", nprocs - 1, nprocs);
    assert_non_null(strstr(dt_last_error(), want));
  }
  /* the job goes on: a load that every process can do still works */
  x = load(p, 0, pl);
  assert_non_null(x);
  check_tensor(x, 0, pl);
  dt_tensor_release(x);
}

/* every process loads its own file: the shapes differ in process 1 */
static void test_shape_differs(void **state) {
  (void)state;
  char p[512];
  snprintf(p, sizeof p, "%s/shape.%d.safetensors", dir, me);
  write_by_hand(p, 4, me == 1 ? 5 : 4);
  dt_placement pl[2] = {DT_SHARD(0), DT_SHARD(1)};
  dt_tensor *x = dt_load_safetensors(p, "w", &(dt_load_options){
      .mesh = mesh, .placements = pl});
  if (nprocs == 1) { /* one process: nothing to differ */
    assert_non_null(x);
    dt_tensor_release(x);
  } else {
    assert_null(x);
    assert_int_equal(dt_last_status(), DT_ERR_IO);
    assert_non_null(strstr(dt_last_error(), "process 1 read another dtype, "
                                            "shape or offset"));
  }
  /* a wrong placement for the file's shape fails in every process alike */
  dt_placement bad[2] = {DT_SHARD(2), DT_REPLICATE};
  x = dt_load_safetensors(p, "w", &(dt_load_options){.mesh = mesh,
                                                     .placements = bad});
  assert_null(x);
  assert_int_equal(dt_last_status(), DT_ERR_PLACEMENT);
  unlink(p);
}

/* the last process saves into a directory that does not exist: every
 * process fails, and neither the target nor a temporary is left */
static void test_save_fails_in_one(void **state) {
  (void)state;
  char p[512], q[600];
  path_in_dir(p, sizeof p, "half.safetensors");
  snprintf(q, sizeof q, "%s/no-such-dir/half.safetensors", dir);
  dt_status st = save_refs(me == nprocs - 1 && nprocs > 1 ? q : p);
  if (nprocs == 1) {
    assert_int_equal(st, DT_OK);
    unlink(p);
    return;
  }
  assert_int_equal(st, DT_ERR_IO);
  if (me != nprocs - 1) {
    char want[64];
    snprintf(want, sizeof want, "in process %d of %d", nprocs - 1, nprocs);
    assert_non_null(strstr(dt_last_error(), want));
  }
  assert_non_null(strstr(dt_last_error(), "cannot open the temporary file"));
  struct stat sb;
  assert_int_not_equal(stat(p, &sb), 0);
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)))
    assert_null(strstr(e->d_name, "half.safetensors.tmp"));
  closedir(d);
}

/* a load whose shards fail to allocate in the last process only (its
 * runtime has 32 bytes per rank there, the shards need 60): the save that
 * follows fails in every process at its first step, before any Partial is
 * reduced or any file made */
static void test_poisoned_in_one(void **state) {
  (void)state;
  dt_runtime *r3 = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = NR, .launcher = nprocs > 1 ? "mpi" : "none",
      .device_memory = me == nprocs - 1 ? 32 : 0});
  assert_non_null(r3);
  dt_mesh *m3 = dt_mesh_create_range(r3, NULL, DT_SHAPE(2, 2), NULL);
  char p[512], s[512];
  path_in_dir(p, sizeof p, "job.safetensors");
  path_in_dir(s, sizeof s, "poisoned.safetensors");
  dt_placement pl[2] = {DT_SHARD(0), DT_SHARD(1)};
  dt_tensor *x = dt_load_safetensors(p, "a", &(dt_load_options){
      .mesh = m3, .placements = pl});
  assert_non_null(x);
  dt_runtime_synchronize(r3);
  const char *name = "a";
  dt_status st = dt_save_safetensors(s, &x, &name, 1);
  assert_int_equal(st, DT_ERR_OUT_OF_MEMORY);
  if (me != nprocs - 1) {
    char want[64];
    snprintf(want, sizeof want, "in process %d of %d", nprocs - 1, nprocs);
    assert_non_null(strstr(dt_last_error(), want));
  }
  struct stat sb;
  assert_int_not_equal(stat(s, &sb), 0);
  dt_tensor_release(x);
  dt_mesh_release(m3);
  dt_runtime_destroy(r3);
}

/* single-device tensors live in one process: their save and load are
 * that process's own (the others issue nothing and must not be waited
 * for); a job's save mixing one with DTensors fails in every process */
static void test_single_device(void **state) {
  (void)state;
  char p[512];
  snprintf(p, sizeof p, "%s/single.%d.safetensors", dir, me);
  int r = NR - 1;
  char dev[16];
  snprintf(dev, sizeof dev, "cpu:%d", r);
  dt_tensor *x = NULL;
  if (local(r)) {
    double v[5] = {1.5, -2, 3.25, 4, -5.5};
    x = dt_from_host(v, DT_SHAPE(5), &(dt_tensor_options){.dtype = DT_FLOAT64,
                                                          .device = dev});
    assert_non_null(x);
    const char *name = "s";
    assert_int_equal(dt_save_safetensors(p, &x, &name, 1), DT_OK);
    dt_tensor *y = dt_load_safetensors(p, "s", &(dt_load_options){.device = dev});
    assert_non_null(y);
    double got[5];
    assert_int_equal(dt_to_host(y, got, sizeof got), DT_OK);
    assert_memory_equal(got, v, sizeof v);
    dt_tensor_release(y);
    unlink(p);
  }
  void *av = ref_bytes(0), *bv = ref_bytes(1);
  dt_tensor *a = dt_from_host(av, refs[0].shape, &(dt_tensor_options){
      .dtype = refs[0].dtype, .mesh = mesh, .placements = refs[0].save});
  dt_tensor *b = dt_from_host(bv, refs[1].shape, &(dt_tensor_options){
      .dtype = refs[1].dtype, .mesh = mesh, .placements = refs[1].save});
  free(av);
  free(bv);
  dt_tensor *ts[2] = {a, x ? x : b};
  const char *names[2] = {"a", "b"};
  path_in_dir(p, sizeof p, "mixed.safetensors");
  dt_status st = dt_save_safetensors(p, ts, names, 2);
  if (nprocs == 1) {
    assert_int_equal(st, DT_OK); /* one process: nothing is mixed */
    unlink(p);
  } else {
    assert_int_equal(st, DT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(dt_last_error(), "a job's save takes DTensors only"));
    struct stat sb;
    assert_int_not_equal(stat(p, &sb), 0);
  }
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_tensor_release(x);
}

/* the last process never loads: the others time out naming it (a
 * runtime of its own with a short collective timeout, destroyed after) */
static void test_absent_process_times_out(void **state) {
  (void)state;
  if (nprocs == 1) skip();
  dt_runtime *r2 = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = NR, .launcher = "mpi", .collective_timeout_ms = 1500});
  assert_non_null(r2);
  dt_mesh *m2 = dt_mesh_create_range(r2, NULL, DT_SHAPE(2, 2), NULL);
  char p[512];
  path_in_dir(p, sizeof p, "job.safetensors");
  if (me != nprocs - 1) {
    dt_placement pl[2] = {DT_SHARD(0), DT_REPLICATE};
    dt_tensor *x = dt_load_safetensors(p, "a", &(dt_load_options){
        .mesh = m2, .placements = pl});
    assert_null(x);
    assert_int_equal(dt_last_status(), DT_ERR_TIMEOUT);
    char want[96];
    snprintf(want, sizeof want, "process %d of %d did not reach", nprocs - 1,
             nprocs);
    assert_non_null(strstr(dt_last_error(), want));
  }
  dt_mesh_release(m2);
  dt_runtime_destroy(r2);
}

/* the job's processes agree on one directory: process 0's mkdtemp */
static void make_dir(void) {
  if (me == 0) {
    snprintf(dir, sizeof dir, "%s/dtorch-ckpt-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
      perror("mkdtemp");
      exit(1);
    }
  }
#if DTORCH_HAVE_MPI
  if (nprocs > 1) MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
#endif
}

static void remove_dir(void) {
#if DTORCH_HAVE_MPI
  if (nprocs > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
  if (me != 0) return;
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[600];
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  if (d) closedir(d);
  rmdir(dir);
}

static void run_save(void **state) {
  (void)state;
  save_and_check(dir);
}

static void run_load(void **state) {
  (void)state;
  load_and_check(dir);
}

int main(int argc, char **argv) {
  start();
  int rc;
  if (argc == 3 && (!strcmp(argv[1], "--save") || !strcmp(argv[1], "--load"))) {
    snprintf(dir, sizeof dir, "%s", argv[2]); /* the file itself */
    const struct CMUnitTest one[] = {
      cmocka_unit_test(!strcmp(argv[1], "--save") ? run_save : run_load)};
    rc = TU_RUN_TESTS_WITH_ALARM(120, one);
  } else {
    make_dir();
    const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_save_load),
      cmocka_unit_test(test_missing_everywhere),
      cmocka_unit_test(test_missing_in_one),
      cmocka_unit_test(test_shape_differs),
      cmocka_unit_test(test_save_fails_in_one),
      cmocka_unit_test(test_poisoned_in_one),
      cmocka_unit_test(test_single_device),
      cmocka_unit_test(test_absent_process_times_out),
    };
    rc = TU_RUN_TESTS_WITH_ALARM(240, tests);
    remove_dir();
  }
  stop();
  return rc;
}
