/* Public entry points of the shadow comparison, labels and communication
 * debugging (dispatch/shadow.c, dispatch/comm_debug.c do the work). */
#include "api/api.h"
#include "dispatch/comm_debug.h"
#include "dispatch/shadow.h"

dt_status dt_shadow_begin(double tolerance) {
  return dispatch_shadow_begin(tolerance, "dt_shadow_begin");
}

dt_status dt_shadow_end(dt_shadow_report *out) {
  return dispatch_shadow_end(out, "dt_shadow_end");
}

void dt_label_push(const char *label) {
  if (!label) {  /* void: nothing pushed, the misuse reported */
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_label_push: label is NULL");
    return;
  }
  dispatch_label_push(label);
}
void dt_label_pop(void) { dispatch_label_pop(); }

dt_status dt_comm_debug_begin(void) { return dispatch_comm_debug_begin(); }

dt_status dt_comm_debug_end(FILE *table, FILE *json) {
  return dispatch_comm_debug_end(table, json, "dt_comm_debug_end");
}

void dt_comm_debug_label_push(const char *label) {
  if (!label) {
    core_error_set(DT_ERR_INVALID_ARGUMENT,
                   "dt_comm_debug_label_push: label is NULL");
    return;
  }
  dispatch_label_push(label);
}
void dt_comm_debug_label_pop(void) { dispatch_label_pop(); }
