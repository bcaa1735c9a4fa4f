/* Safetensors checkpoints (docs/io.md): round trips of every dtype and
 * placement kind checked against the bytes written (the file's data
 * region compared with the host values, offsets computed here), loads
 * into other meshes and placements (2x4 -> 8 ranks, -> 1, Shard(1))
 * checked shard by shard against a naive torch.chunk loop, the index,
 * bad files each with its status and message, bad arguments, atomic
 * saves, the async path (an op on the handle before the read ran), a
 * file cut short under a queued read (poison), O_DIRECT, several threads
 * and a future callback at once, and no leaked handle. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "testutil.h"
#include "threads.h"
#include "sched/future.h"

static dt_runtime *rt;
static dt_mesh *m24, *m8;
static char dir[64];

static int setup(void **state) {
  (void)state;
  rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 8});
  dt_runtime_set_current(rt);
  m24 = dt_mesh_init(rt, NULL, DT_SHAPE(2, 4), NULL);
  m8 = dt_mesh_init(rt, NULL, DT_SHAPE(8), NULL);
  snprintf(dir, sizeof dir, "/tmp/dt_st_XXXXXX");
  return rt && m24 && m8 && mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  dt_mesh_release(m24);
  dt_mesh_release(m8);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static const char *file(const char *name) {
  static __thread char p[160];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return p;
}

/* the whole file (malloc'd) and its size */
static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("fopen %s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(*n + 1);
  assert_int_equal(fread(b, 1, *n, f), *n);
  fclose(f);
  return b;
}

/* a file of an 8-byte length `claimed`, the header text, then data */
static const char *raw_file(const char *name, uint64_t claimed, const char *hdr,
                            const void *data, size_t n) {
  const char *p = file(name);
  FILE *f = fopen(p, "wb");
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)(claimed >> (8 * i));
  fwrite(len, 1, 8, f);
  fwrite(hdr, 1, strlen(hdr), f);
  if (n) fwrite(data, 1, n, f);
  fclose(f);
  return p;
}
static const char *json_file(const char *name, const char *hdr, const void *data,
                             size_t n) {
  return raw_file(name, strlen(hdr), hdr, data, n);
}

/* random host bytes for n elements of d (valid values: bools 0/1) */
static void *host_bytes(int64_t n, dt_dtype d, uint64_t seed) {
  size_t es = dt_dtype_size(d);
  unsigned char *b = malloc((size_t)n * es + 1);
  double *v = tu_random_values(n, d, seed, -50, 50, true);
  for (int64_t i = 0; i < n; i++) tu_encode(b + (size_t)i * es, d, v[i]);
  free(v);
  return b;
}

static void expect_host(dt_tensor *t, const void *want, size_t bytes,
                        const char *what) {
  if (!t) fail_msg("%s: %s", what, dt_last_error());
  void *got = malloc(bytes + 1);
  if (dt_to_host(t, got, bytes) != DT_OK) fail_msg("%s: %s", what, dt_last_error());
  if (memcmp(got, want, bytes)) fail_msg("%s: values differ", what);
  free(got);
}

/* ---- a naive torch.chunk box per rank, and the shard it must hold */
static void naive_box(const int64_t *mshape, int mnd, const dt_placement *pl,
                      int idx, dt_shape g, int64_t *off, int64_t *len) {
  int64_t coord[8];
  for (int d = mnd - 1, r = idx; d >= 0; d--) {
    coord[d] = r % mshape[d];
    r /= (int)mshape[d];
  }
  for (int i = 0; i < g.ndim; i++) {
    off[i] = 0;
    len[i] = g.dims[i];
  }
  for (int d = 0; d < mnd; d++) {
    if (pl[d].kind != DT_PLACEMENT_SHARD) continue;
    int k = pl[d].dim;
    int64_t chunk = (len[k] + mshape[d] - 1) / mshape[d];
    int64_t o = coord[d] * chunk < len[k] ? coord[d] * chunk : len[k];
    int64_t l = len[k] - o < chunk ? len[k] - o : chunk;
    off[k] += o;
    len[k] = l;
  }
}

/* every rank's shard of t equals the naive box of host (row-major g) */
static void expect_shards(dt_tensor *t, dt_mesh *m, const dt_placement *pl,
                          const unsigned char *host, dt_shape g, size_t es) {
  dt_shape ms = dt_mesh_shape(m);
  for (int idx = 0; idx < dt_mesh_size(m); idx++) {
    int64_t off[8], len[8], n = 1;
    naive_box(ms.dims, ms.ndim, pl, idx, g, off, len);
    for (int i = 0; i < g.ndim; i++) n *= len[i];
    unsigned char *got = malloc((size_t)n * es + 1), *want = malloc((size_t)n * es + 1);
    assert_int_equal(dt_local_to_host(t, idx, got, (size_t)n * es), DT_OK);
    int64_t ix[8] = {0};
    for (int64_t k = 0; k < n; k++) {
      int64_t gi = 0;
      for (int i = 0; i < g.ndim; i++) gi = gi * g.dims[i] + off[i] + ix[i];
      memcpy(want + k * (int64_t)es, host + gi * (int64_t)es, es);
      for (int i = g.ndim - 1; i >= 0 && ++ix[i] == len[i]; i--) ix[i] = 0;
    }
    if (memcmp(got, want, (size_t)n * es)) fail_msg("rank %d's shard differs", idx);
    free(got);
    free(want);
  }
}

/* the data region of a file: starts after 8 + N */
static const unsigned char *data_of(const unsigned char *f, size_t n) {
  uint64_t h = 0;
  for (int i = 7; i >= 0; i--) h = h << 8 | f[i];
  assert_true(8 + h <= n);
  assert_int_equal((8 + h) % 8, 0); /* padded for alignment */
  return f + 8 + h;
}

/* ---- round trips */
static void test_roundtrip_dtypes(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  for (int k = 0; k < 8; k++) {
    dt_dtype d = tu_all_dtypes[k];
    size_t es = dt_dtype_size(d);
    dt_shape s1 = DT_SHAPE(5, 7), s2 = DT_SHAPE(6, 10);
    void *h1 = host_bytes(35, d, 10 + k), *h2 = host_bytes(60, d, 20 + k);
    dt_tensor *a = dt_from_host(h1, s1, &(dt_tensor_options){.dtype = d});
    dt_tensor *b = dt_from_host(h2, s2, &(dt_tensor_options){.dtype = d,
        .mesh = m24, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1))});
    const char *p = file("rt.safetensors");
    assert_int_equal(dt_save_safetensors(p, (dt_tensor *[]){a, b},
                                         (const char *[]){"a", "b"}, 2), DT_OK);
    size_t n;
    unsigned char *f = slurp(p, &n);
    const unsigned char *data = data_of(f, n);
    /* the bytes written: a's, then b's, then nothing */
    assert_memory_equal(data, h1, 35 * es);
    assert_memory_equal(data + 35 * es, h2, 60 * es);
    assert_int_equal((size_t)(f + n - data), 95 * es);
    free(f);
    dt_tensor *la = dt_load_safetensors(p, "a", NULL);
    dt_tensor *lb = dt_load_safetensors(p, "b", &(dt_load_options){.mesh = m8,
        .placements = DT_PLACEMENTS(DT_SHARD(1))});
    expect_host(la, h1, 35 * es, dt_dtype_name(d));
    expect_host(lb, h2, 60 * es, dt_dtype_name(d));
    assert_int_equal(dt_tensor_dtype(lb), d);
    expect_shards(lb, m8, DT_PLACEMENTS(DT_SHARD(1)), h2, s2, es);
    TU_RELEASE(a, b, la, lb);
    free(h1);
    free(h2);
  }
  tu_leaks_end();
}

/* every placement kind saved from 2x4, loaded on 2x4, 8 ranks and one */
static void test_placements_reshard(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  static const dt_placement pls[][2] = {
      {DT_REPLICATE, DT_REPLICATE}, {DT_SHARD(0), DT_REPLICATE},
      {DT_SHARD(1), DT_SHARD(2)},   {DT_SHARD(0), DT_SHARD(0)},
      {DT_PARTIAL(DT_REDUCE_SUM), DT_REPLICATE},
      {DT_REPLICATE, DT_PARTIAL(DT_REDUCE_MAX)},
      {DT_SHARD(2), DT_PARTIAL(DT_REDUCE_SUM)}};
  dt_shape g = DT_SHAPE(7, 9, 4); /* uneven over 2, 4 and 8 */
  unsigned char *host = host_bytes(252, DT_FLOAT32, 5);
  for (size_t c = 0; c < sizeof pls / sizeof pls[0]; c++) {
    dt_tensor *t = dt_from_host(host, g, &(dt_tensor_options){
        .mesh = m24, .placements = pls[c]});
    const char *p = file("pl.safetensors");
    assert_int_equal(dt_save_safetensors(p, &t, (const char *[]){"w"}, 1), DT_OK);
    size_t n;
    unsigned char *f = slurp(p, &n);
    assert_memory_equal(data_of(f, n), host, 252 * 4);
    free(f);
    const dt_placement *to24 = DT_PLACEMENTS(DT_SHARD(1), DT_SHARD(0));
    dt_tensor *x = dt_load_safetensors(p, "w", &(dt_load_options){
        .mesh = m24, .placements = to24});
    dt_tensor *y = dt_load_safetensors(p, "w", &(dt_load_options){
        .mesh = m8, .placements = DT_PLACEMENTS(DT_SHARD(2))});
    dt_tensor *z = dt_load_safetensors(p, "w", &(dt_load_options){.device = "cpu:5"});
    dt_tensor *q = dt_load_safetensors(p, "w", &(dt_load_options){
        .mesh = m24, .placements = pls[c]});
    expect_shards(x, m24, to24, host, g, 4);
    expect_shards(y, m8, DT_PLACEMENTS(DT_SHARD(2)), host, g, 4);
    expect_host(z, host, 252 * 4, "one device");
    expect_host(q, host, 252 * 4, "the saved placements");
    TU_RELEASE(t, x, y, z, q);
  }
  free(host);
  tu_leaks_end();
}

/* Shard(1) of a row-major file: many small ranges, merged or not, and
 * Shard over both dims; the same bytes every way */
static void test_small_ranges(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_shape g = DT_SHAPE(64, 48);
  unsigned char *host = host_bytes(64 * 48, DT_FLOAT32, 9);
  dt_tensor *t = dt_from_host(host, g, NULL);
  const char *p = file("s1.safetensors");
  assert_int_equal(dt_save_safetensors(p, &t, (const char *[]){"w"}, 1), DT_OK);
  int64_t gaps[] = {0, -1, 1, 100, 1 << 20};
  int depths[] = {0, 1, 3, 128};
  for (int i = 0; i < 5; i++) {
    const dt_placement *pl = DT_PLACEMENTS(DT_SHARD(1));
    dt_tensor *x = dt_load_safetensors(p, "w", &(dt_load_options){
        .mesh = m8, .placements = pl, .merge_gap = gaps[i], .queue_depth = depths[i % 4]});
    expect_shards(x, m8, pl, host, g, 4);
    const dt_placement *pl2 = DT_PLACEMENTS(DT_SHARD(1), DT_SHARD(0));
    dt_tensor *y = dt_load_safetensors(p, "w", &(dt_load_options){
        .mesh = m24, .placements = pl2, .merge_gap = gaps[i]});
    expect_shards(y, m24, pl2, host, g, 4);
    TU_RELEASE(x, y);
  }
  TU_RELEASE(t);
  free(host);
  tu_leaks_end();
}

/* O_DIRECT reads through bounce buffers: chunks across shards, shards
 * across chunks, small ranges */
static void test_direct(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_shape g = DT_SHAPE(1001, 777); /* ~3 MiB: several 1 MiB chunks */
  unsigned char *host = host_bytes(1001 * 777, DT_FLOAT32, 3);
  dt_tensor *t = dt_from_host(host, g, NULL);
  const char *p = file("direct.safetensors");
  assert_int_equal(dt_save_safetensors(p, &t, (const char *[]){"w"}, 1), DT_OK);
  dt_tensor *x = dt_load_safetensors(p, "w", &(dt_load_options){
      .mesh = m8, .placements = DT_PLACEMENTS(DT_SHARD(0)), .direct = true});
  if (!x && strstr(dt_last_error(), "O_DIRECT is not supported")) {
    TU_RELEASE(t);
    free(host);
    skip();
  }
  expect_shards(x, m8, DT_PLACEMENTS(DT_SHARD(0)), host, g, 4);
  dt_tensor *y = dt_load_safetensors(p, "w", &(dt_load_options){
      .mesh = m8, .placements = DT_PLACEMENTS(DT_SHARD(1)), .direct = true});
  expect_shards(y, m8, DT_PLACEMENTS(DT_SHARD(1)), host, g, 4);
  dt_tensor *z = dt_load_safetensors(p, "w", &(dt_load_options){.direct = true,
                                                                 .queue_depth = 2});
  expect_host(z, host, 1001 * 777 * 4, "direct, one device");
  TU_RELEASE(t, x, y, z);
  free(host);
  tu_leaks_end();
}

/* a transposed view is saved as its values; empty and 0-d tensors */
static void test_views_and_edges(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  float v[6] = {1, 2, 3, 4, 5, 6}, vt[6] = {1, 4, 2, 5, 3, 6}, s = 7;
  dt_tensor *a = dt_from_host(v, DT_SHAPE(2, 3), NULL);
  dt_tensor *at = dt_transpose(a, 0, 1);
  dt_tensor *e = dt_zeros(DT_SHAPE(0, 4), NULL);
  dt_tensor *sc = dt_from_host(&s, DT_SHAPE(), NULL);
  dt_tensor *ed = dt_zeros(DT_SHAPE(3, 0), &(dt_tensor_options){.mesh = m8,
      .placements = DT_PLACEMENTS(DT_SHARD(0))});
  const char *p = file("edge.safetensors");
  assert_int_equal(dt_save_safetensors(p, (dt_tensor *[]){at, e, sc, ed},
      (const char *[]){"t", "empty", "scalar", "ed"}, 4), DT_OK);
  dt_tensor *lt = dt_load_safetensors(p, "t", NULL);
  expect_host(lt, vt, sizeof vt, "transposed view");
  tu_assert_dims(dt_tensor_shape(lt), DT_SHAPE(3, 2), "t");
  dt_tensor *le = dt_load_safetensors(p, "empty", &(dt_load_options){
      .mesh = m8, .placements = DT_PLACEMENTS(DT_SHARD(1))});
  tu_assert_dims(dt_tensor_shape(le), DT_SHAPE(0, 4), "empty");
  dt_tensor *ls = dt_load_safetensors(p, "scalar", NULL);
  expect_host(ls, &s, 4, "0-d");
  /* nothing at all */
  assert_int_equal(dt_save_safetensors(file("none.safetensors"), NULL, NULL, 0), DT_OK);
  dt_safetensors_info *info = dt_safetensors_index(file("none.safetensors"));
  assert_non_null(info);
  assert_int_equal(info->n, 0);
  dt_safetensors_info_free(info);
  TU_RELEASE(a, at, e, sc, ed, lt, le, ls);
  tu_leaks_end();
}

/* ---- the index */
static void test_index(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  unsigned char data[8 + 24 + 4] = {0};
  const char *p = json_file("idx.safetensors",
      "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
      "\"__metadata__\":{\"format\":\"pt\",\"by\":\"test\"},"
      "\"h\":{\"dtype\":\"I16\",\"shape\":[12],\"data_offsets\":[8,32]},"
      "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[32,36]}}   ",
      data, sizeof data);
  dt_safetensors_info *info = dt_safetensors_index(p);
  if (!info) fail_msg("%s", dt_last_error());
  assert_int_equal(info->n, 3);
  size_t hdr = 8 + strlen("{\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
      "\"__metadata__\":{\"format\":\"pt\",\"by\":\"test\"},"
      "\"h\":{\"dtype\":\"I16\",\"shape\":[12],\"data_offsets\":[8,32]},"
      "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[32,36]}}   ");
  /* data order, absolute offsets */
  assert_string_equal(info->tensors[0].name, "b");
  assert_int_equal(info->tensors[0].dtype, DT_BFLOAT16);
  assert_string_equal(info->tensors[0].dtype_name, "BF16");
  tu_assert_dims(info->tensors[0].shape, DT_SHAPE(2, 2), "b");
  assert_int_equal(info->tensors[0].offset, hdr);
  assert_int_equal(info->tensors[0].nbytes, 8);
  assert_string_equal(info->tensors[1].name, "h");
  assert_int_equal(info->tensors[1].dtype, DT_DTYPE_COUNT);
  assert_string_equal(info->tensors[1].dtype_name, "I16");
  assert_string_equal(info->tensors[2].name, "a");
  assert_int_equal(info->tensors[2].offset, hdr + 32);
  assert_int_equal(info->n_metadata, 2);
  assert_string_equal(info->metadata_keys[0], "format");
  assert_string_equal(info->metadata_values[0], "pt");
  assert_string_equal(info->metadata_values[1], "test");
  dt_safetensors_info_free(info);
  dt_safetensors_info_free(NULL);
  /* listed but not loadable */
  tu_expect_error(dt_load_safetensors(p, "h", NULL), DT_ERR_INVALID_ARGUMENT,
                  "dt_load_safetensors", p, "tensor 'h'", "dtype I16", NULL);
  tu_expect_error(dt_load_safetensors(p, "zz", NULL), DT_ERR_INVALID_ARGUMENT,
                  "no tensor named 'zz'", NULL);
  dt_tensor *a = dt_load_safetensors(p, "a", NULL);
  expect_host(a, data + 32, 4, "u8 after an I16");
  TU_RELEASE(a);
  tu_leaks_end();
}

/* Names that look like U+0000 but are not (an escaped backslash before
 * "u0000") load; names with control characters are written escaped and
 * read back whole. */
static void test_names_escaped(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  float one = 1, two = 2;
  const char *p = json_file("bs.safetensors",
      "{\"a\\\\u0000\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
      &one, 4);
  dt_safetensors_info *info = dt_safetensors_index(p);
  if (!info) fail_msg("%s", dt_last_error());
  assert_int_equal(info->n, 1);
  assert_string_equal(info->tensors[0].name, "a\\u0000");
  dt_safetensors_info_free(info);
  dt_tensor *x = dt_from_host(&one, DT_SHAPE(1), NULL), *y = dt_from_host(&two, DT_SHAPE(1), NULL);
  const char *names[2] = {"tab\there\nnew\x01line\x1f", "quote\"back\\slash"};
  p = file("ctl.safetensors");
  assert_int_equal(dt_save_safetensors(p, (dt_tensor *[]){x, y}, names, 2), DT_OK);
  size_t n;
  unsigned char *f = slurp(p, &n);
  uint64_t hn = 0;
  for (int i = 7; i >= 0; i--) hn = hn << 8 | f[i];
  assert_true(8 + hn <= n);
  for (size_t i = 8; i < 8 + hn; i++) /* the header: control bytes escaped */
    if (f[i] < 0x20) fail_msg("byte %zu of the header is 0x%02x", i, f[i]);
  free(f);
  dt_tensor *lx = dt_load_safetensors(p, names[0], NULL);
  dt_tensor *ly = dt_load_safetensors(p, names[1], NULL);
  expect_host(lx, &one, 4, "a name with control characters");
  expect_host(ly, &two, 4, "a name with a quote and a backslash");
  TU_RELEASE(x, y, lx, ly);
  tu_leaks_end();
}

/* A BOOL tensor's bytes other than 0 and 1 read as true (nonzero is
 * true, as dt_from_host takes them): stored as 1, so eq and logical_and
 * agree with the hand-computed truth, on one device and on meshes. */
static void test_bool_bytes(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  const unsigned char raw[8] = {0, 1, 2, 255, 128, 0, 7, 1};
  const unsigned char truth[8] = {0, 1, 1, 1, 1, 0, 1, 1};
  const char *p = json_file("bool.safetensors",
      "{\"b\":{\"dtype\":\"BOOL\",\"shape\":[8],\"data_offsets\":[0,8]}}", raw, 8);
  const dt_load_options where[3] = {
      {0}, {.mesh = m8, .placements = DT_PLACEMENTS(DT_SHARD(0))},
      {.mesh = m24, .placements = DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0))}};
  for (int k = 0; k < 3; k++) {
    dt_tensor *b = dt_load_safetensors(p, "b", k ? &where[k] : NULL);
    if (!b) fail_msg("load %d: %s", k, dt_last_error());
    dt_tensor_options o = {.dtype = DT_BOOL, .mesh = where[k].mesh,
                           .placements = where[k].placements};
    dt_tensor *t = dt_full(DT_SHAPE(8), 1, &o);
    dt_tensor *eq = dt_eq(b, t), *and = dt_logical_and(b, t);
    expect_host(b, truth, 8, "the loaded bytes");
    expect_host(eq, truth, 8, "eq(b, true)");
    expect_host(and, truth, 8, "logical_and(b, true)");
    TU_RELEASE(b, t, eq, and);
  }
  tu_leaks_end();
}

/* ---- bad files: status and message, from the index and the loader */
typedef struct bad_case {
  const char *hdr;        /* NULL: raw bytes below */
  int64_t claimed;        /* -1: strlen(hdr) */
  size_t data;            /* zero bytes after the header */
  const char *want, *want2;
} bad_case;

static void test_bad_files(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  static const bad_case cases[] = {
      {"", 0, 0, "header length 0 is too short", NULL},
      {"{}", 100, 0, "header length 100 runs past the end of the file", NULL},
      {"{}", 200000000, 0, "over the 100 MB limit", NULL},
      {"{\"a\":", -1, 0, "not valid JSON", NULL},
      {"[1, 2]", -1, 0, "not a JSON object", NULL},
      {"{} x", -1, 0, "bytes after its JSON object", NULL},
      {"{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4,
       "tensor 'a'", "dtype 'F33' is unknown"},
      {"{\"a\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4,
       "tensor 'a'", "dtype is missing or not a string"},
      {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", -1, 4,
       "tensor 'a'", "shape is missing"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", -1, 4,
       "tensor 'a'", "shape[0] is not a whole number"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", -1, 4,
       "tensor 'a'", "shape[0] is not a whole number"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
       -1, 4, "tensor 'a'", "shape has 9 dims"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", -1, 4,
       "tensor 'a'", "data_offsets is not [begin, end]"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", -1, 4,
       "tensor 'a'", "end before they begin"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 4,
       "tensor 'a'", "run past the data buffer (4 bytes)"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", -1, 8,
       "tensor 'a'", "hold 8 bytes, but shape [3] of F32 needs 12 bytes"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
       "\"data_offsets\":[0,8]}}", -1, 8, "tensor 'a'", "more than 2^64"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", -1, 12,
       "tensor 'b'", "overlap those of 'a'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", -1, 12,
       "tensor 'b'", "leaving a hole after byte 4"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 9,
       "the tensors cover 4 bytes of the 9-byte data buffer", NULL},
      {"{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4,
       "a tensor name is not valid UTF-8", "a\\xff"},
      {"{\"\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4,
       "not valid UTF-8", NULL},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", -1, 8,
       "tensor 'a'", "appears twice"},
      {"{\"__metadata__\":[1]}", -1, 0, "__metadata__ is not an object", NULL},
      {"{\"__metadata__\":{\"k\":1}}", -1, 0, "__metadata__ entry 'k'", NULL},
      {"{\"a\":[1]}", -1, 0, "tensor 'a'", "not an object"},
      /* U+0000 in a name (cJSON would hand back "a"), and in a string of
       * __metadata__ */
      {"{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
       -1, 4, "tensor name 'a\\u0000b' holds U+0000", NULL},
      {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"x\\u0000\\\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
       -1, 8, "tensor name 'x\\u0000\\\"y' holds U+0000", NULL},
      {"{\"__metadata__\":{\"k\":\"v\\u0000w\"}}", -1, 0,
       "the string 'v\\u0000w' at byte 22 of the header holds U+0000", NULL},
  };
  static unsigned char zeros[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const bad_case *c = &cases[i];
    uint64_t claimed = c->claimed < 0 ? strlen(c->hdr) : (uint64_t)c->claimed;
    const char *p = raw_file("bad.safetensors", claimed, c->hdr, zeros, c->data);
    if (dt_safetensors_index(p)) fail_msg("case %zu: indexed a bad file", i);
    if (dt_last_status() != DT_ERR_IO || !strstr(dt_last_error(), c->want) ||
        (c->want2 && !strstr(dt_last_error(), c->want2)) ||
        !strstr(dt_last_error(), "dt_safetensors_index: ") || !strstr(dt_last_error(), p))
      fail_msg("case %zu: %s: %s", i, dt_status_name(dt_last_status()),
               dt_last_error());
    tu_expect_error(dt_load_safetensors(p, "a", &(dt_load_options){.mesh = m8}),
                    DT_ERR_IO, "dt_load_safetensors: ", p, c->want, c->want2, NULL);
  }
  /* shorter than the length field; missing; a directory */
  const char *p = file("short.safetensors");
  FILE *f = fopen(p, "wb");
  fwrite("abc", 1, 3, f);
  fclose(f);
  tu_expect_error(dt_load_safetensors(p, "a", NULL), DT_ERR_IO,
                  "truncated: the file has 3 bytes", NULL);
  tu_expect_error(dt_load_safetensors(file("nope"), "a", NULL), DT_ERR_IO,
                  "cannot open", "No such file", NULL);
  tu_expect_error(dt_load_safetensors(dir, "a", NULL), DT_ERR_IO,
                  "not a regular file", NULL);
  tu_leaks_end();
}

static void test_bad_arguments(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  float v[4] = {1, 2, 3, 4};
  dt_tensor *a = dt_from_host(v, DT_SHAPE(4), NULL);
  const char *p = file("args.safetensors");
  assert_int_equal(dt_save_safetensors(p, &a, (const char *[]){"a"}, 1), DT_OK);
  tu_expect_error(dt_load_safetensors(NULL, "a", NULL), DT_ERR_INVALID_ARGUMENT,
                  "dt_load_safetensors: path is NULL", NULL);
  tu_expect_error(dt_load_safetensors(p, NULL, NULL), DT_ERR_INVALID_ARGUMENT,
                  "name is NULL", NULL);
  tu_expect_error(dt_load_safetensors(p, "a", &(dt_load_options){.queue_depth = 999}),
                  DT_ERR_INVALID_ARGUMENT, "options.queue_depth 999", NULL);
  tu_expect_error(dt_load_safetensors(p, "a", &(dt_load_options){.merge_gap = 1 << 21}),
                  DT_ERR_INVALID_ARGUMENT, "options.merge_gap", NULL);
  tu_expect_error(dt_load_safetensors(p, "a", &(dt_load_options){.mesh = m8,
                  .device = "cpu"}), DT_ERR_INVALID_ARGUMENT, "exclusive", NULL);
  tu_expect_error(dt_load_safetensors(p, "a", &(dt_load_options){.mesh = m8,
                  .placements = DT_PLACEMENTS(DT_SHARD(3))}), DT_ERR_PLACEMENT,
                  "dt_load_safetensors", NULL);
  tu_expect_error(dt_load_safetensors(p, "a", &(dt_load_options){.device = "cpu:99"}),
                  DT_ERR_DEVICE, "cpu:99", NULL);
  assert_null(dt_load_safetensors_async(p, "a", NULL, NULL));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "out is NULL", NULL);
  tu_expect_status(dt_save_safetensors(NULL, &a, (const char *[]){"a"}, 1),
                   DT_ERR_INVALID_ARGUMENT, "path is NULL", NULL);
  tu_expect_status(dt_save_safetensors(p, (dt_tensor *[]){a, NULL},
                   (const char *[]){"a", "b"}, 2), DT_ERR_INVALID_ARGUMENT,
                   "tensors[1] is NULL", NULL);
  tu_expect_status(dt_save_safetensors(p, (dt_tensor *[]){a, a},
                   (const char *[]){"a", "a"}, 2), DT_ERR_INVALID_ARGUMENT,
                   "names[0] and names[1] are both 'a'", NULL);
  tu_expect_status(dt_save_safetensors(p, &a, (const char *[]){"__metadata__"}, 1),
                   DT_ERR_INVALID_ARGUMENT, "reserved", NULL);
  tu_expect_status(dt_save_safetensors(p, &a, (const char *[]){"x\xfe"}, 1),
                   DT_ERR_INVALID_ARGUMENT, "names[0] is not valid UTF-8", NULL);
  tu_expect_status(dt_save_safetensors(p, &a, (const char *[]){NULL}, 1),
                   DT_ERR_INVALID_ARGUMENT, "names[0] is NULL", NULL);
  tu_expect_status(dt_save_safetensors(p, &a, (const char *[]){"a"}, -1),
                   DT_ERR_INVALID_ARGUMENT, "n -1", NULL);
  tu_expect_status(dt_save_safetensors(file("no/such/dir/x"), &a,
                   (const char *[]){"a"}, 1), DT_ERR_IO, "temporary file",
                   "No such file", NULL);
  TU_RELEASE(a);
  tu_leaks_end();
}

/* no file left but path's own; a failed save leaves path as it was */
static int count_entries(void) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strstr(e->d_name, ".tmp.")) n += 1000;
    else if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static void test_atomic_save(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  float v[4] = {1, 2, 3, 4}, w[4] = {5, 6, 7, 8};
  dt_tensor *a = dt_from_host(v, DT_SHAPE(4), NULL);
  dt_tensor *b = dt_from_host(w, DT_SHAPE(4), NULL);
  const char *p = file("atomic.safetensors");
  int before = count_entries();
  assert_int_equal(dt_save_safetensors(p, &a, (const char *[]){"x"}, 1), DT_OK);
  assert_int_equal(dt_save_safetensors(p, &b, (const char *[]){"x"}, 1), DT_OK);
  assert_int_equal(count_entries(), before + 1);
  /* a poisoned tensor: the save fails with its message, the file stays */
  int64_t bad[2] = {1, 0};
  dt_tensor *num = dt_from_host(bad, DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_INT64});
  dt_tensor *den = dt_from_host(bad, DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_INT64});
  dt_tensor *q = dt_floor_divide(num, den); /* poisoned: division by zero */
  tu_expect_status(dt_save_safetensors(p, (dt_tensor *[]){a, q},
                   (const char *[]){"x", "q"}, 2), DT_ERR_INVALID_ARGUMENT,
                   "division by zero", NULL);
  assert_int_equal(count_entries(), before + 1);
  dt_tensor *x = dt_load_safetensors(p, "x", NULL);
  expect_host(x, w, sizeof w, "the last good save");
  TU_RELEASE(a, b, num, den, q, x);
  tu_leaks_end();
}

/* ---- async: the handle at once, ops queued behind the read */
static void test_async_and_poison(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_shape g = DT_SHAPE(100, 30);
  unsigned char *host = host_bytes(3000, DT_FLOAT32, 4);
  dt_tensor *t = dt_from_host(host, g, NULL);
  char p[160], p2[160];
  snprintf(p, sizeof p, "%s", file("async.safetensors"));
  snprintf(p2, sizeof p2, "%s", file("cut.safetensors"));
  assert_int_equal(dt_save_safetensors(p, &t, (const char *[]){"w"}, 1), DT_OK);
  assert_int_equal(dt_save_safetensors(p2, &t, (const char *[]){"w"}, 1), DT_OK);
  /* hold every rank until the gate opens: the read cannot have run when
   * the op on its handle is issued */
  dt_future *gate = sched_future_new();
  for (int r = 0; r < 8; r++) assert_int_equal(dt_stream_wait_event(rt, r, gate), DT_OK);
  dt_tensor *x = NULL;
  dt_future *f = dt_load_safetensors_async(p, "w", &(dt_load_options){
      .mesh = m8, .placements = DT_PLACEMENTS(DT_SHARD(0))}, &x);
  assert_non_null(f);
  assert_non_null(x);
  dt_tensor *y = dt_mul_scalar(x, 2);
  assert_non_null(y);
  /* a second file, cut short after its header was read */
  dt_tensor *c = NULL;
  dt_future *fc = dt_load_safetensors_async(p2, "w", &(dt_load_options){
      .mesh = m8, .placements = DT_PLACEMENTS(DT_SHARD(1))}, &c);
  assert_non_null(fc);
  dt_tensor *cy = dt_add(c, c);
  assert_false(dt_future_ready(f));
  assert_int_equal(truncate(p2, 200), 0);
  sched_future_complete(gate, DT_OK, NULL);
  if (dt_future_wait(f, -1) != DT_OK) fail_msg("%s", dt_future_error(f));
  float *got = malloc(3000 * 4);
  assert_int_equal(dt_to_host(y, got, 3000 * 4), DT_OK);
  for (int i = 0; i < 3000; i++) {
    float h;
    memcpy(&h, host + 4 * i, 4);
    if (got[i] != 2 * h) fail_msg("element %d: %g, want %g", i, got[i], 2 * h);
  }
  tu_expect_status(dt_future_wait(fc, -1), DT_ERR_IO, "dt_load_safetensors_async",
                   p2, "tensor 'w'", "the file ended before byte", NULL);
  tu_expect_status(dt_to_host(cy, got, 3000 * 4), DT_ERR_IO, "the file ended", NULL);
  tu_expect_status(dt_to_host(c, got, 3000 * 4), DT_ERR_IO, "cut short", NULL);
  free(got);
  free(host);
  dt_future_release(f);
  dt_future_release(fc);
  sched_future_release(gate);
  TU_RELEASE(t, x, y, c, cy);
  tu_leaks_end();
}

/* ---- several threads, and a future callback */
typedef struct thr_arg { int failures; } thr_arg;

static void save_load(int i) {
  char name[32];
  snprintf(name, sizeof name, "thr%d.safetensors", i);
  const char *p = file(name);
  dt_shape g = DT_SHAPE(33, 17);
  unsigned char *host = host_bytes(33 * 17, DT_FLOAT32, 100 + (uint64_t)i);
  dt_tensor *t = dt_from_host(host, g, &(dt_tensor_options){.mesh = m24,
      .placements = DT_PLACEMENTS(DT_SHARD(i % 2), DT_PARTIAL(DT_REDUCE_SUM))});
  TU_CHECK(dt_save_safetensors(p, &t, (const char *[]){"w"}, 1) == DT_OK,
           "%s", dt_last_error());
  for (int k = 0; k < 3; k++) {
    dt_tensor *x = dt_load_safetensors(p, "w", &(dt_load_options){.mesh = m8,
        .placements = DT_PLACEMENTS(DT_SHARD(k % 2))});
    unsigned char got[33 * 17 * 4];
    TU_CHECK(x && dt_to_host(x, got, sizeof got) == DT_OK, "%s", dt_last_error());
    TU_CHECK(!memcmp(got, host, sizeof got), "thread %d: values differ", i);
    dt_tensor_release(x);
  }
  dt_tensor_release(t);
  free(host);
}

static void body(void *arg, int i) {
  (void)arg;
  dt_runtime_set_current(rt);
  save_load(i);
  dt_runtime_set_current(NULL);
}

static void from_callback(dt_future *f, dt_status st, void *user) {
  (void)f;
  TU_CHECK(st == DT_OK, "%s", dt_future_error(f));
  dt_runtime_set_current(rt);
  save_load(9);
  dt_runtime_set_current(NULL);
  sched_future_complete(user, DT_OK, NULL);
}

static void test_threads_and_callback(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_future *done = sched_future_new();
  dt_future *ev = dt_event_record(rt, 3);
  assert_int_equal(dt_future_then(ev, from_callback, done), DT_OK);
  tu_run_threads(4, body, NULL);
  assert_int_equal(dt_future_wait(done, 60000000000LL), DT_OK);
  TU_ASSERT_NO_THREAD_FAILURES();
  dt_future_release(ev);
  sched_future_release(done);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_dtypes),
      cmocka_unit_test(test_placements_reshard),
      cmocka_unit_test(test_small_ranges),
      cmocka_unit_test(test_direct),
      cmocka_unit_test(test_views_and_edges),
      cmocka_unit_test(test_index),
      cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_names_escaped),
      cmocka_unit_test(test_bool_bytes),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_atomic_save),
      cmocka_unit_test(test_async_and_poison),
      cmocka_unit_test(test_threads_and_callback),
  };
  tu_alarm(300);
  return cmocka_run_group_tests(tests, setup, teardown);
}
