/* Inspection for people (docs/inspect.md): the implementations behind
 * dt_visualize_sharding, dt_tensor_describe and dt_memory_report. */
#ifndef MESH_INSPECT_H
#define MESH_INSPECT_H

#include <stdio.h>

#include "dtorch/dtorch.h"

/* dt_visualize_sharding / _ex (dtorch.h); o NULL = defaults; fn names the
 * public function in messages */
dt_status mesh_visualize_sharding(const dt_tensor *t, FILE *out,
                                  const dt_visualize_options *o,
                                  const char *fn);
/* dt_tensor_describe (dtorch.h); grad_fn: the op that made t or NULL (the
 * autograd layer above knows it) */
dt_status mesh_tensor_describe(const dt_tensor *t, FILE *out,
                               const char *grad_fn);
/* dt_memory_report (dtorch.h) */
dt_status mesh_memory_report(dt_runtime *rt, FILE *out);

#endif
