/* Public entry points: errors and dtypes (core/error.c, core/dtype.c).
 * Each forwards to the layer that implements it; the messages those
 * raise name the public function. */
#include "core/dtype.h"
#include "core/error.h"

dt_status dt_last_status(void) {
  return core_last_status();
}

const char *dt_last_error(void) {
  return core_last_error();
}

void dt_clear_error(void) {
  core_clear_error();
}

const char *dt_status_name(dt_status s) {
  return core_status_name(s);
}

const char *dt_dtype_name(dt_dtype d) {
  return core_dtype_name(d);
}

size_t dt_dtype_size(dt_dtype d) {
  return core_dtype_size(d);
}
