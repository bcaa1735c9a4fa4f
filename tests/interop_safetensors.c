/* Interop with the safetensors Python package (run by
 * scripts/interop-safetensors.sh, which sets DTORCH_PYTHON to a venv with
 * safetensors + numpy and DTORCH_INTEROP_SCRIPT to
 * scripts/safetensors_interop.py; without them: skipped, exit 77).
 *
 * 1. Python writes one file per dtype with safetensors.numpy.save_file
 *    (bfloat16 through its bit pattern) and the raw bytes it holds; dtorch
 *    loads each tensor on one device and sharded on a 2 x 4 mesh and
 *    must read the same bytes.
 * 2. dtorch saves one file per dtype from DTensors (Shard, Replicate,
 *    Partial) and single-device tensors, and the bytes it meant; Python
 *    loads them with safetensors.numpy.load_file and compares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtorch/dtorch.h"

static const char *kinds[] = {"float32", "float64", "float16", "bfloat16",
                              "int32", "int64", "uint8", "bool"};
static const dt_dtype dtypes[] = {DT_FLOAT32, DT_FLOAT64, DT_FLOAT16,
                                  DT_BFLOAT16, DT_INT32, DT_INT64, DT_UINT8,
                                  DT_BOOL};
static const char *names[] = {"t", "s", "e"};
static const int64_t counts[] = {60, 1, 0};
static dt_shape shape_of(int i) {
  return i == 0 ? DT_SHAPE(6, 10) : i == 1 ? DT_SHAPE() : DT_SHAPE(0, 3);
}

static int failures;
#define CHECK(c, ...)                                                       \
  do {                                                                      \
    if (!(c)) {                                                             \
      fprintf(stderr, "interop: " __VA_ARGS__);                             \
      fprintf(stderr, " (%s)\n", dt_last_error());                          \
      failures++;                                                           \
    }                                                                       \
  } while (0)

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(*n + 1);
  if (fread(b, 1, *n, f) != *n) *n = 0;
  fclose(f);
  return b;
}

static int run(const char *py, const char *script, const char *verb,
               const char *dir) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s'", py, script, verb, dir);
  return system(cmd);
}

/* t holds bytes want */
static void expect(dt_tensor *t, const unsigned char *want, size_t n,
                   const char *what, const char *kind) {
  CHECK(t, "%s %s: no tensor", kind, what);
  if (!t) return;
  unsigned char *got = malloc(n + 1);
  CHECK(dt_to_host(t, got, n) == DT_OK && !memcmp(got, want, n),
        "%s %s: bytes differ", kind, what);
  free(got);
}

static void load_numpy_files(const char *dir, dt_mesh *m) {
  char p[512], b[512];
  for (int k = 0; k < 8; k++) {
    snprintf(p, sizeof p, "%s/np_%s.safetensors", dir, kinds[k]);
    snprintf(b, sizeof b, "%s/np_%s.bin", dir, kinds[k]);
    size_t n;
    unsigned char *raw = slurp(b, &n);
    CHECK(raw, "%s: no file", b);
    if (!raw) continue;
    size_t es = dt_dtype_size(dtypes[k]), at = 0;
    for (int i = 0; i < 3; i++) {
      size_t bytes = (size_t)counts[i] * es;
      dt_tensor *one = dt_load_safetensors(p, names[i], NULL);
      const dt_placement *pl = i == 0 ? DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1))
                                      : DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE);
      dt_tensor *sh = dt_load_safetensors(p, names[i], &(dt_load_options){
          .mesh = m, .placements = pl});
      CHECK(one && dt_tensor_dtype(one) == dtypes[k], "%s: dtype", kinds[k]);
      expect(one, raw + at, bytes, names[i], kinds[k]);
      expect(sh, raw + at, bytes, names[i], kinds[k]);
      dt_tensor_release(one);
      dt_tensor_release(sh);
      at += bytes;
    }
    free(raw);
  }
}

/* deterministic bytes of n elements of d (valid bools) */
static void fill(unsigned char *p, int64_t n, dt_dtype d, unsigned seed) {
  size_t es = dt_dtype_size(d);
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n * (int64_t)es; i++) {
    x = x * 1103515245u + 12345u;
    p[i] = (unsigned char)(x >> 16);
  }
  for (int64_t i = 0; i < n; i++) {
    if (d == DT_BOOL) p[i] &= 1;
    if (d == DT_FLOAT16 || d == DT_BFLOAT16) p[2 * i + 1] &= 0x3f; /* finite */
    if (d == DT_FLOAT32) p[4 * i + 3] &= 0x3f;
    if (d == DT_FLOAT64) p[8 * i + 7] &= 0x3f;
  }
}

static void save_dtorch_files(const char *dir, dt_mesh *m) {
  char p[512], b[512];
  for (int k = 0; k < 8; k++) {
    dt_dtype d = dtypes[k];
    size_t es = dt_dtype_size(d);
    unsigned char raw[61 * 8];
    fill(raw, 61, d, (unsigned)k);
    bool partial = d != DT_BOOL; /* a Partial(sum) t: reduced when saved */
    dt_tensor *t = dt_from_host(raw, shape_of(0), &(dt_tensor_options){
        .dtype = d, .mesh = m, .placements = partial
            ? DT_PLACEMENTS(DT_SHARD(1), DT_PARTIAL(DT_REDUCE_SUM))
            : DT_PLACEMENTS(DT_SHARD(1), DT_REPLICATE)});
    dt_tensor *s = dt_from_host(raw + 60 * es, shape_of(1),
                                &(dt_tensor_options){.dtype = d});
    dt_tensor *e = dt_zeros(shape_of(2), &(dt_tensor_options){.dtype = d,
        .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)});
    snprintf(p, sizeof p, "%s/dt_%s.safetensors", dir, kinds[k]);
    CHECK(dt_save_safetensors(p, (dt_tensor *[]){t, s, e}, names, 3) == DT_OK,
          "saving %s", kinds[k]);
    snprintf(b, sizeof b, "%s/dt_%s.bin", dir, kinds[k]);
    FILE *f = fopen(b, "wb");
    fwrite(raw, 1, 61 * es, f);
    fclose(f);
    dt_tensor_release(t);
    dt_tensor_release(s);
    dt_tensor_release(e);
  }
}

int main(void) {
  const char *py = getenv("DTORCH_PYTHON"), *script = getenv("DTORCH_INTEROP_SCRIPT");
  if (!py || !script) {
    printf("safetensors interop: skipped: run it through "
           "scripts/interop-safetensors.sh (DTORCH_PYTHON unset)\n");
    return 77;
  }
  char dir[] = "/tmp/dt_interop_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  int rc = 1;
  if (run(py, script, "write", dir) != 0) {
    fprintf(stderr, "interop: the Python writer failed\n");
    goto out;
  }
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 8});
  dt_runtime_set_current(rt);
  dt_mesh *m = dt_mesh_init(rt, "cpu", DT_SHAPE(2, 4), NULL);
  load_numpy_files(dir, m);
  save_dtorch_files(dir, m);
  dt_mesh_release(m);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  if (failures == 0 && run(py, script, "check", dir) != 0) failures++;
  if (failures == 0)
    printf("safetensors interop: 8 files by safetensors.numpy loaded with the "
           "same bytes, 8 dtorch files read back equal\n");
  rc = failures ? 1 : 0;
out:;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) rc = 1;
  return rc;
}
