/* Public entry points: interception hooks, op calls, the op printer and the
 * op counter (dispatch/intercept.c).
 * Each forwards to the layer that implements it; the messages those
 * raise name the public function. */
#include "core/error.h"
#include "dispatch/intercept.h"

/* A NULL call or counter: the failed result of the query's kind
 * (dtorch.h's conventions) with the error set. */
static bool null_arg(const void *p, const char *fn, const char *arg) {
  if (p) return false;
  core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, arg);
  return true;
}

dt_status dt_intercept_push(dt_intercept_fn fn, void *user) {
  return dispatch_intercept_push(fn, user);
}

dt_status dt_intercept_pop(void) {
  return dispatch_intercept_pop();
}

dt_status dt_op_call_run(dt_op_call *call) {
  return dispatch_op_call_run(call);
}

const char *dt_op_call_name(const dt_op_call *call) {
  if (null_arg(call, "dt_op_call_name", "call")) return NULL;
  return dispatch_op_call_name(call);
}

int dt_op_call_num_inputs(const dt_op_call *call) {
  if (null_arg(call, "dt_op_call_num_inputs", "call")) return -1;
  return dispatch_op_call_num_inputs(call);
}

dt_tensor *dt_op_call_input(const dt_op_call *call, int i) {
  if (null_arg(call, "dt_op_call_input", "call")) return NULL;
  return dispatch_op_call_input(call, i);
}

int dt_op_call_num_outputs(const dt_op_call *call) {
  if (null_arg(call, "dt_op_call_num_outputs", "call")) return -1;
  return dispatch_op_call_num_outputs(call);
}

dt_tensor *dt_op_call_output(const dt_op_call *call, int i) {
  if (null_arg(call, "dt_op_call_output", "call")) return NULL;
  return dispatch_op_call_output(call, i);
}

int dt_op_call_format(const dt_op_call *call, char *buf, size_t len) {
  if (null_arg(call, "dt_op_call_format", "call")) return -1;
  return dispatch_op_call_format(call, buf, len);
}

dt_status dt_op_printer_push(FILE *out) {
  return dispatch_op_printer_push(out);
}

dt_op_counter *dt_op_counter_push(void) {
  return dispatch_op_counter_push();
}

dt_status dt_op_counter_pop(dt_op_counter *c) {
  return dispatch_op_counter_pop(c);
}

int64_t dt_op_counter_get(const dt_op_counter *c, const char *op) {
  if (null_arg(c, "dt_op_counter_get", "c")) return -1;
  return dispatch_op_counter_get(c, op);
}

int64_t dt_op_counter_total(const dt_op_counter *c) {
  if (null_arg(c, "dt_op_counter_total", "c")) return -1;
  return dispatch_op_counter_total(c);
}

int dt_op_counter_format(const dt_op_counter *c, char *buf, size_t len) {
  if (null_arg(c, "dt_op_counter_format", "c")) return -1;
  return dispatch_op_counter_format(c, buf, len);
}

void dt_op_counter_free(dt_op_counter *c) {
  dispatch_op_counter_free(c);
}
