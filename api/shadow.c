/* Public entry points of the shadow comparison and labels
 * (dispatch/shadow.c does the work). */
#include "api/api.h"
#include "dispatch/shadow.h"

dt_status dt_shadow_begin(double tolerance) {
  return dispatch_shadow_begin(tolerance, "dt_shadow_begin");
}

dt_status dt_shadow_end(dt_shadow_report *out) {
  return dispatch_shadow_end(out, "dt_shadow_end");
}

void dt_label_push(const char *label) { dispatch_label_push(label); }
void dt_label_pop(void) { dispatch_label_pop(); }
