/* Test support shared by the cmocka suites: independent references.
 * Values are read back through dt_to_host and decoded here with this file's
 * own (simple, obvious) conversions, never the library's kernels. */
#ifndef TESTS_SUPPORT_TESTUTIL_H
#define TESTS_SUPPORT_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtorch/dtorch.h"

/* decode / encode one element (independent of the library) */
double tu_decode(const void *p, dt_dtype d);
void tu_encode(void *p, dt_dtype d, double v);

/* the full value of t as doubles (malloc'd, numel entries, row-major);
 * fails the test if dt_to_host fails */
double *tu_values(dt_tensor *t);

/* deterministic pseudo-random host data (test-local LCG) rounded to what
 * dtype d can hold; ints in [lo, hi], floats uniform in [lo, hi) */
void tu_fill_random(double *v, int64_t n, dt_dtype d, uint64_t seed,
                    double lo, double hi);
/* a tensor holding v (n = numel(shape) values) in dtype d */
dt_tensor *tu_tensor(const double *v, dt_shape s, dt_dtype d);
/* a random tensor; *values (if not NULL) receives its doubles (malloc'd) */
dt_tensor *tu_random(dt_shape s, dt_dtype d, uint64_t seed, double lo,
                     double hi, double **values);
/* the same values as t, in a non-contiguous layout: the storage is twice as
 * long in the last dim and t is its step-2 slice (or a transpose for 0/1-d
 * tensors where that is the only option) */
dt_tensor *tu_noncontig(dt_tensor *t);

/* random values for n elements (malloc'd), as tu_fill_random; flip negates
 * every third one except for uint8/bool (signs without shrinking) */
double *tu_random_values(int64_t n, dt_dtype d, uint64_t seed, double lo,
                         double hi, bool flip);
/* replaces *t by tu_noncontig(*t), releasing the old handle */
void tu_make_noncontig(dt_tensor **t);
/* tu_noncontig of a tensor holding v (shape s, dtype d) */
dt_tensor *tu_noncontig_values(const double *v, dt_shape s, dt_dtype d);
/* a tensor holding v (logical shape s, row-major) as the transpose of dims
 * i and j of a contiguous tensor of the swapped shape */
dt_tensor *tu_transposed(const double *v, dt_shape s, dt_dtype d, int i,
                         int j);

/* memory layouts of an input with the same logical values */
typedef enum tu_layout {
  TU_CONTIG,     /* row-major */
  TU_STEP2,      /* tu_noncontig: step-2 slice of the last dim */
  TU_TRANSPOSED, /* tu_transposed of dims 0 and last (ndim < 2: step-2) */
  TU_LAYOUTS
} tu_layout;
/* names of the layouts for messages */
extern const char *const tu_layout_names[TU_LAYOUTS];
/* a tensor of shape s in layout l holding tu_random_values; *vals receives
 * its logical row-major values (malloc'd) */
dt_tensor *tu_layout_input(dt_shape s, dt_dtype d, uint64_t seed, double lo,
                           double hi, bool flip, tu_layout l, double **vals);

/* true for the four floating dtypes */
bool tu_is_float(dt_dtype d);

int64_t tu_numel(dt_shape s);
/* row-major flat index of multi-index idx in shape s */
int64_t tu_ravel(const int64_t *idx, dt_shape s);
/* flat index into a contiguous `in` array for element out_idx of the
 * broadcast output shape `out` (numpy rules) */
int64_t tu_bcast_index(int64_t out_idx, dt_shape out, dt_shape in);
/* row-major multi-index of flat index i */
void tu_unravel(int64_t i, dt_shape s, int64_t *idx);

/* "[2, 3]" into buf */
void tu_shape_str(dt_shape s, char *buf, size_t len);
/* got must equal want (a shape or strides); fails with `what` and both */
void tu_assert_dims(dt_shape got, dt_shape want, const char *what);
/* t's shape must be want */
void tu_assert_shape(dt_tensor *t, dt_shape want, const char *what);
/* t must be a tensor (NULL: fails with dt_last_error) of dtype d, shape s */
void tu_assert_meta(dt_tensor *t, dt_dtype d, dt_shape s, const char *what);

/* |got - want| <= atol + rtol * |want| for all i (NaN matches NaN);
 * prints the first mismatch with `what` and fails */
void tu_assert_close(const double *got, const double *want, int64_t n,
                     double rtol, double atol, const char *what);
/* default tolerance for results stored in dtype d */
double tu_rtol(dt_dtype d);
/* rounds v to dtype d (what storing it would keep) */
double tu_round(double v, dt_dtype d);

/* an op must fail: checks NULL result, status, and that the message holds
 * each of the given substrings (NULL-terminated list) */
void tu_expect_error(dt_tensor *got, dt_status want, ...);
void tu_expect_status(dt_status got, dt_status want, ...);

/* waits until every op issued on this thread's runtime has run (and
 * dropped its references): live counts are exact after it */
void tu_settle(void);
/* "cpu:N", or "cuda:N" when DTORCH_DEVICE names cuda (the suites that run
 * on emulated CUDA ranks too); one of 8 rotating per-thread buffers */
const char *tu_dev(int rank);
/* leak accounting: live tensor handles at begin == at end */
void tu_leaks_begin(void);
void tu_leaks_end(void);
/* dt_clear_error, then tu_leaks_begin */
void tu_leaks_begin_clear(void);

/* releases the n tensors ts[0..n) (NULL entries allowed) */
void tu_release_n(dt_tensor *const *ts, size_t n);
/* releases every tensor named: TU_RELEASE(a, b, c) */
#define TU_RELEASE(...)                                     \
  tu_release_n((dt_tensor *const[]){__VA_ARGS__},           \
               sizeof((dt_tensor *const[]){__VA_ARGS__}) /  \
                   sizeof(dt_tensor *))

extern const dt_dtype tu_all_dtypes[8];
extern const dt_dtype tu_float_dtypes[4];

#endif
