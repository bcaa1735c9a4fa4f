/* Shadow comparison of DTensor ops with the single-device run, and the
 * caller's labels (shadow.c; docs/debugging.md). */
#ifndef DISPATCH_SHADOW_H
#define DISPATCH_SHADOW_H

#include <stdbool.h>
#include <stddef.h>

#include "core/call.h"

/* shadowing is on in this thread (and not inside its own check): one
 * predictable branch on the op path */
bool dispatch_shadow_active(void);
/* compares the DTensor op c, which just made c->out, with the same op on
 * one device; records the first divergence */
void dispatch_shadow_check(const dt_op_call *c);
/* inside an SPMD function: checks the placements DTensor t (just made by
 * dt_dtensor_from_local) claims — each Replicate mesh dim's copies equal
 * within the tolerance; counts as one op of the report */
void dispatch_shadow_check_claims(dt_tensor *t);
dt_status dispatch_shadow_begin(double tolerance, const char *api);
dt_status dispatch_shadow_end(dt_shadow_report *out, const char *api);

/* this thread's label stack (dt_label_push / dt_label_pop) and its path
 * "layer1.mlp" into buf (returns its length) */
void dispatch_label_push(const char *label);
void dispatch_label_pop(void);
size_t dispatch_label_path(char *buf, size_t n);

#endif
