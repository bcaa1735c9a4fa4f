/* Test support shared by the cmocka suites: independent references.
 * Values are read back through dt_to_host and decoded here with this file's
 * own (slow, obvious) conversions, never the library's kernels. */
#ifndef DT_TESTS_TESTUTIL_H
#define DT_TESTS_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
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

int64_t tu_numel(dt_shape s);
/* flat index into a contiguous `in` array for element out_idx of the
 * broadcast output shape `out` (numpy rules) */
int64_t tu_bcast_index(int64_t out_idx, dt_shape out, dt_shape in);
/* row-major multi-index of flat index i */
void tu_unravel(int64_t i, dt_shape s, int64_t *idx);

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

/* leak accounting: live tensor handles at begin == at end */
void tu_leaks_begin(void);
void tu_leaks_end(void);

extern const dt_dtype tu_all_dtypes[8];
extern const dt_dtype tu_float_dtypes[4];

#endif
