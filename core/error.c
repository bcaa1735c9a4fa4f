/* Thread-local last error and the status names. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stdbool.h>
#include <stdlib.h>

static _Thread_local dt_status tls_status = DT_OK;
static _Thread_local char tls_message[1024];
/* the last tensor-making call on this thread failed (core/error.h) */
static _Thread_local bool tls_failed;

dt_status core_error_set(dt_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tls_message, sizeof tls_message, fmt, ap);
  va_end(ap);
  tls_status = code;
  tls_failed = true;
  return code;
}

bool core_error_chained(void) { return tls_failed; }
void core_error_succeeded(void) { tls_failed = false; }

dt_status core_reserved_zero(const char *fn, const char *what,
                             const uint64_t *reserved, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (reserved[i])
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s.reserved[%zu] is "
                            "0x%llx, not 0 (a field of a newer dtorch than "
                            "%d.%d.%d, or a struct not zero-initialised)",
                            fn, what, i, (unsigned long long)reserved[i],
                            DT_VERSION_MAJOR, DT_VERSION_MINOR,
                            DT_VERSION_PATCH);
  return DT_OK;
}

dt_status core_last_status(void) { return tls_status; }
const char *core_last_error(void) { return tls_message; }

void core_error_save(core_error_state *s) {
  _Static_assert(sizeof s->message == sizeof tls_message, "message size");
  s->status = tls_status;
  s->failed = tls_failed;
  size_t n = strnlen(tls_message, sizeof tls_message - 1);
  memcpy(s->message, tls_message, n);
  s->message[n] = '\0';
}

void core_error_restore(const core_error_state *s) {
  tls_status = s->status;
  tls_failed = s->failed;
  size_t n = strnlen(s->message, sizeof s->message - 1);
  memcpy(tls_message, s->message, n);
  tls_message[n] = '\0';
}

void core_clear_error(void) {
  tls_status = DT_OK;
  tls_failed = false;
  tls_message[0] = '\0';
}

const char *core_status_name(dt_status s) {
  static const char *const names[] = {
      "DT_OK",          "DT_ERR_INVALID_ARGUMENT", "DT_ERR_SHAPE",
      "DT_ERR_DTYPE",   "DT_ERR_PLACEMENT",        "DT_ERR_MESH",
      "DT_ERR_OUT_OF_MEMORY", "DT_ERR_DEVICE",     "DT_ERR_IO",
      "DT_ERR_TIMEOUT", "DT_ERR_DESYNC",           "DT_ERR_FAULT",
      "DT_ERR_UNSUPPORTED", "DT_ERR_INTERNAL"};
  _Static_assert(sizeof names / sizeof *names == DT_ERR_INTERNAL + 1,
                 "status name table out of date");
  if ((unsigned)s > DT_ERR_INTERNAL) return "DT_ERR_?";
  return names[s];
}

void core_assert_fail(const char *expr, const char *file, int line) {
  fprintf(stderr, "dtorch: internal invariant failed: %s (%s:%d)\n", expr,
          file, line);
  abort();
}

char *core_shape_str(const int64_t *dims, int ndim, char *buf, size_t len) {
  size_t n = 0;
  n += (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < ndim && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, i ? ", %lld" : "%lld",
                          (long long)dims[i]);
  if (n < len) snprintf(buf + n, len - n, "]");
  return buf;
}
