/* Errors: the only way an error is raised is core_error_set (SQLite's
 * sqlite3ErrorWithMsg). The status and message live in thread-local storage;
 * the public core_last_status / core_last_error read them. */
#ifndef CORE_ERROR_H
#define CORE_ERROR_H

#include <stdbool.h>

#include "dtorch/dtorch.h"

/* Sets this thread's error and returns `code` so callers can write
 * `return core_error_set(DT_ERR_SHAPE, "dt_view: ...")`. */
dt_status core_error_set(dt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Chaining, so that dt_relu(dt_add(a, b)) reports the add's error: a NULL
 * tensor argument keeps the thread's error only while the last call that
 * makes a tensor on this thread failed (core_error_set marks it; the
 * dispatcher and the mesh layer's makers clear it on success). Otherwise
 * the NULL is this call's own argument error, never an old failure's. */
bool core_error_chained(void);
void core_error_succeeded(void);

/* A public struct's reserved words (dtorch.h's conventions, docs/abi.md)
 * must be zero: a non-zero word is a field of a newer header this library
 * does not know (or an uninitialised struct), refused rather than
 * ignored. `what` names the struct ("dt_tensor_options"). Returns DT_OK or
 * DT_ERR_INVALID_ARGUMENT with "fn: what.reserved[i] is 0x...". */
dt_status core_reserved_zero(const char *fn, const char *what,
                             const uint64_t *reserved, size_t n);
#define CORE_RESERVED_ZERO(fn, what, s)                                     \
  core_reserved_zero(fn, what, (s)->reserved,                             \
                     sizeof (s)->reserved / sizeof (s)->reserved[0])

/* This thread's error, saved and put back around work done on another
 * rank's behalf (sched/help.c), so a helped record's error stays its own. */
typedef struct core_error_state {
  dt_status status;
  bool failed;
  char message[1024];
} core_error_state;
void core_error_save(core_error_state *s);
void core_error_restore(const core_error_state *s);

/* Internal invariant check, always on; reports file:line and aborts. Never
 * used for user input. */
#define CORE_ASSERT(cond)                                                     \
  do {                                                                      \
    if (__builtin_expect(!(cond), 0))                                       \
      core_assert_fail(#cond, __FILE__, __LINE__);                            \
  } while (0)
_Noreturn void core_assert_fail(const char *expr, const char *file, int line);

/* Formats a shape as "[4, 8]" into buf (returns buf). */
char *core_shape_str(const int64_t *dims, int ndim, char *buf, size_t len);
#define CORE_SHAPE_STR_LEN 160

/* ---- the implementations behind public entry points (api/) */
/* dt_last_status (dtorch.h) */
dt_status core_last_status(void);
/* dt_last_error (dtorch.h) */
const char *core_last_error(void);
/* dt_clear_error (dtorch.h) */
void core_clear_error(void);
/* dt_status_name (dtorch.h) */
const char *core_status_name(dt_status s);

#endif
