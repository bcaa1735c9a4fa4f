/* The safetensors format (docs/io.md): parsing and checking a header, and
 * writing one. Pure functions of bytes — no files, no runtime — so the
 * fuzzer (tests/test_safetensors_fuzz.c) drives exactly what the loader
 * runs. A file is: 8 bytes of header length N (u64 little-endian), N bytes
 * of UTF-8 JSON (cJSON parses it; spaces may pad it), then the data
 * buffer, covered exactly by the tensors' data_offsets (relative to the
 * buffer's start): no holes, no overlaps, nothing after the last.
 * Every error is DT_ERR_IO ("a bad file") with a message
 * "<fn>: <path>: <what>", naming the tensor and the field where one is
 * at fault. */
#ifndef CORE_SAFETENSORS_H
#define CORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "dtorch/dtorch.h"

/* the reference implementation's limit on N */
#define CORE_ST_MAX_HEADER 100000000ull

/* Checks the 8-byte length prefix (the first min(avail, 8) bytes of the
 * file) against the file's size; *n gets N. */
dt_status core_st_check_prefix(const unsigned char *prefix, size_t avail,
                               uint64_t file_size, uint64_t *n,
                               const char *fn, const char *path);
/* Parses and checks the n header bytes hdr of a file of file_size bytes
 * into *out (its entries in data order, offsets absolute). On failure
 * *out holds nothing to free. */
dt_status core_st_parse_header(const char *hdr, size_t n, uint64_t file_size,
                               dt_safetensors_info *out, const char *fn,
                               const char *path);
/* Both on a whole file in memory (the fuzzer's entry point). */
dt_status core_st_parse_bytes(const unsigned char *data, size_t size,
                              dt_safetensors_info *out, const char *fn,
                              const char *path);
/* Frees what a successful parse filled in (not info itself). */
void core_st_info_clear(dt_safetensors_info *info);
/* the index of the tensor named name in info, or -1 */
int core_st_find(const dt_safetensors_info *info, const char *name);

/* The file's dtype string of d ("F32"). */
const char *core_st_dtype_str(dt_dtype d);
/* true when s is valid UTF-8 (no overlongs, surrogates or values past
 * U+10FFFF) */
bool core_st_utf8_valid(const char *s, size_t n);

/* A header for n tensors laid out in the given order, padded with spaces
 * so that the data starts on an 8-byte boundary: the whole prefix (8-byte
 * length + JSON) in *out (malloc'd, *out_len bytes); *data_bytes gets the
 * data buffer's size. NULL names / bad dtypes are the caller's to check. */
dt_status core_st_write_header(int n, const char *const *names,
                               const dt_dtype *dtypes, const dt_shape *shapes,
                               char **out, size_t *out_len,
                               uint64_t *data_bytes, const char *fn);

#endif
