/* Errors: the only way an error is raised is dt_error_set (SQLite's
 * sqlite3ErrorWithMsg). The status and message live in thread-local storage;
 * the public dt_last_status / dt_last_error read them. */
#ifndef DT_RUNTIME_ERROR_H
#define DT_RUNTIME_ERROR_H

#include "dtorch/dtorch.h"

/* Sets this thread's error and returns `code` so callers can write
 * `return dt_error_set(DT_ERR_SHAPE, "dt_view: ...")`. */
dt_status dt_error_set(dt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Internal invariant check, always on; reports file:line and aborts. Never
 * used for user input. */
#define DT_ASSERT(cond)                                                     \
  do {                                                                      \
    if (__builtin_expect(!(cond), 0))                                       \
      dt_assert_fail(#cond, __FILE__, __LINE__);                            \
  } while (0)
_Noreturn void dt_assert_fail(const char *expr, const char *file, int line);

/* Formats a shape as "[4, 8]" into buf (returns buf). */
char *dt_shape_str(const int64_t *dims, int ndim, char *buf, size_t len);
#define DT_SHAPE_STR_LEN 160

#endif
