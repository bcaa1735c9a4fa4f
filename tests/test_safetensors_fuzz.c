/* Fuzzing the safetensors header parser (core/safetensors.c), the code
 * every load and index runs on a file's first bytes.
 *
 * A seeded mutation loop over valid files (bit flips, JSON punctuation,
 * digits, inserted and deleted bytes, cut lengths, a rewritten length
 * prefix, spliced fragments of other seeds): each input is parsed from a
 * buffer of exactly its size (ASan catches any read past it), and every
 * file the parser accepts is checked against the format's promises by an
 * independent loop (the entries tile the data buffer, byte sizes equal
 * shape x dtype, names are unique). A rejection must be DT_ERR_IO with a
 * message naming the function and the file.
 *
 * ctest runs DTORCH_FUZZ_ITERS inputs (default 200,000) from
 * DTORCH_FUZZ_SEED (default 1); scripts/fuzz-safetensors.sh runs 1M under
 * ASan+UBSan, or builds the same checks as a libFuzzer target with
 * -DDTORCH_LIBFUZZER. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "dtorch/dtorch.h"

static const char *const seeds[] = {
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}",
    "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"BF16\",\"shape\":[4],"
    "\"data_offsets\":[8,16]},\"b\":{\"dtype\":\"I64\",\"shape\":[1],"
    "\"data_offsets\":[0,8]}}  ",
    ("{\"x\":{\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[0,1]},"
     "\"y\":{\"dtype\":\"U8\",\"shape\":[0,5],\"data_offsets\":[1,1]},"
     "\"z\":{\"dtype\":\"I16\",\"shape\":[3],\"data_offsets\":[1,7]}}"),
    "{\"\xc3\xa9t\xc3\xa9\":{\"dtype\":\"F64\",\"shape\":[1,1],\"data_offsets\":[0,8]},"
    "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]}}",
    "{}",
};
#define NSEEDS (int)(sizeof seeds / sizeof seeds[0])

static uint64_t rng;
static uint64_t next(void) { /* splitmix64 */
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* a seed as a whole file: prefix, header, as many data bytes as it asks */
static size_t seed_file(int s, unsigned char *out, size_t cap) {
  size_t n = strlen(seeds[s]), data = s == 0 ? 24 : s == 1 ? 16 : s == 2 ? 7
                                     : s == 3 ? 12 : 0;
  if (8 + n + data > cap) return 0;
  for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(out + 8, seeds[s], n);
  for (size_t i = 0; i < data; i++) out[8 + n + i] = (unsigned char)next();
  return 8 + n + data;
}

static const char punct[] = "{}[]\",:0123456789-.eE \\u\xff\x80\xc3";

static size_t mutate(unsigned char *b, size_t n, size_t cap) {
  int k = 1 + (int)(next() % 4);
  for (int m = 0; m < k; m++) {
    size_t at = n ? next() % n : 0;
    switch (next() % 9) {
    case 0: if (n) b[at] ^= (unsigned char)(1u << (next() % 8)); break;
    case 1: if (n) b[at] = (unsigned char)punct[next() % (sizeof punct - 1)]; break;
    case 2: if (n < cap) { memmove(b + at + 1, b + at, n - at); b[at] = (unsigned char)next(); n++; } break;
    case 3: if (n) { memmove(b + at, b + at + 1, n - at - 1); n--; } break;
    case 4: n = n ? next() % n : 0; break; /* cut */
    case 5: if (n >= 8) { uint64_t v = next() % (n + 16); for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i)); } break;
    case 6: if (n >= 8) { b[next() % 8] = (unsigned char)next(); } break;
    case 7: { /* splice a fragment of another seed */
      const char *s = seeds[next() % NSEEDS];
      size_t sl = strlen(s), from = sl ? next() % sl : 0, len = 1 + next() % 12;
      if (from + len > sl) len = sl - from;
      if (n + len <= cap) { memmove(b + at + len, b + at, n - at); memcpy(b + at, s + from, len); n += len; }
      break;
    }
    default: if (n) b[at] = (unsigned char)('0' + next() % 10); break;
    }
  }
  return n;
}

static bool utf8_ok(const char *s) { return core_st_utf8_valid(s, strlen(s)); }

/* an accepted file must keep every promise; returns a reason or NULL */
static const char *check_accepted(const dt_safetensors_info *info,
                                  const unsigned char *data, size_t size) {
  uint64_t h = 0;
  for (int i = 7; i >= 0; i--) h = h << 8 | data[i];
  uint64_t at = 8 + h;
  for (int i = 0; i < info->n; i++) {
    const dt_safetensors_entry *e = &info->tensors[i];
    if (e->offset != at) return "entries do not tile the data buffer";
    uint64_t es = 0, n = 1;
    static const char *const names[] = {"BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2",
        "F8_E8M0", "F16", "BF16", "I16", "U16", "F32", "I32", "U32", "F64",
        "I64", "U64", "C64"};
    static const unsigned sizes[] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8, 8};
    for (int k = 0; k < 17; k++) if (!strcmp(names[k], e->dtype_name)) es = sizes[k];
    if (!es) return "an unknown dtype accepted";
    for (int d = 0; d < e->shape.ndim; d++) {
      if (e->shape.dims[d] < 0) return "a negative dim";
      n *= (uint64_t)e->shape.dims[d];
    }
    if (n * es != e->nbytes) return "nbytes is not shape x dtype";
    if (!utf8_ok(e->name)) return "a non-UTF-8 name accepted";
    for (int j = 0; j < i; j++)
      if (!strcmp(info->tensors[j].name, e->name)) return "a duplicate name";
    at += e->nbytes;
  }
  if (at != size) return "the data buffer is not covered exactly";
  for (int i = 0; i < info->n_metadata; i++)
    if (!utf8_ok(info->metadata_keys[i]) || !utf8_ok(info->metadata_values[i]))
      return "non-UTF-8 metadata accepted";
  return NULL;
}

/* one input, parsed from a buffer of exactly its size */
static int run_one(const unsigned char *in, size_t n) {
  unsigned char *exact = malloc(n ? n : 1);
  if (n) memcpy(exact, in, n);
  dt_safetensors_info info;
  dt_status st = core_st_parse_bytes(exact, n, &info, "fuzz", "mem");
  int bad = 0;
  if (st == DT_OK) {
    const char *why = check_accepted(&info, exact, n);
    if (why) {
      fprintf(stderr, "accepted a bad file (%zu bytes): %s\n", n, why);
      bad = 1;
    }
    core_st_info_clear(&info);
  } else if (st != DT_ERR_IO || strncmp(core_last_error(), "fuzz: mem: ", 11)) {
    fprintf(stderr, "rejected with %s: %s\n", core_status_name(st), core_last_error());
    bad = 1;
  }
  free(exact);
  return bad;
}

#ifdef DTORCH_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (run_one(data, size)) __builtin_trap();
  return 0;
}
#else
/* --seeds DIR: writes the seed files (a libFuzzer corpus) and exits */
static int write_seeds(const char *dir) {
  unsigned char buf[4096];
  for (int s = 0; s < NSEEDS; s++) {
    char p[4200];
    snprintf(p, sizeof p, "%s/seed%d", dir, s);
    FILE *f = fopen(p, "wb");
    if (!f) return 1;
    fwrite(buf, 1, seed_file(s, buf, sizeof buf), f);
    fclose(f);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--seeds")) return write_seeds(argv[2]);
  const char *it = getenv("DTORCH_FUZZ_ITERS"), *sd = getenv("DTORCH_FUZZ_SEED");
  long iters = it ? atol(it) : 200000;
  rng = sd ? strtoull(sd, NULL, 10) : 1;
  enum { CAP = 4096 };
  unsigned char buf[CAP];
  long accepted = 0, failures = 0;
  for (int s = 0; s < NSEEDS; s++) failures += run_one(buf, seed_file(s, buf, CAP));
  for (long i = 0; i < iters && failures == 0; i++) {
    size_t n = seed_file((int)(next() % NSEEDS), buf, CAP);
    n = mutate(buf, n, CAP);
    failures += run_one(buf, n);
    dt_safetensors_info info;
    if (core_st_parse_bytes(buf, n, &info, "fuzz", "mem") == DT_OK) {
      accepted++;
      core_st_info_clear(&info);
    }
  }
  printf("safetensors fuzz: %ld inputs, %ld accepted, %ld failures (seed %llu)\n",
         iters, accepted, failures, (unsigned long long)(sd ? strtoull(sd, NULL, 10) : 1));
  return failures ? 1 : 0;
}
#endif
