/* Communication debugging: collectives per (labels, function, kind, mesh
 * dim) on this thread (comm_debug.c). */
#ifndef DISPATCH_COMM_DEBUG_H
#define DISPATCH_COMM_DEBUG_H

#include <stdio.h>

#include "core/call.h"

dt_status dispatch_comm_debug_begin(void);
/* stops and writes the report: a table to `table`, JSON to `json` (either
 * may be NULL) */
dt_status dispatch_comm_debug_end(FILE *table, FILE *json, const char *api);

#endif
