/* Helpers shared by the public entry points (the files of api/). */
#ifndef API_API_H
#define API_API_H

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "dispatch/dispatch.h"

/* Resolved tensor options. */
typedef struct api_resolved_opts {
  dt_dtype dtype;
  bool requires_grad;
  struct dt_runtime *rt;   /* the runtime the tensor will live on */
  int rank;                /* its rank ("cpu:N"; 0 by default) */
  dt_mesh *mesh;           /* DTensor: the mesh (borrowed) */
  const dt_placement *placements;
} api_resolved_opts;
/* Validates options (NULL = defaults) and picks the device: the thread's
 * current runtime (else the default one), rank from options.device. */
dt_status api_resolve_options(const dt_tensor_options *o, const char *fn,
                             api_resolved_opts *r);


/* One-tensor-in, one-tensor-out call helpers */
dt_tensor *api_call_t(core_op_id op, const char *api, dt_tensor *a);
dt_tensor *api_call_tt(core_op_id op, const char *api, dt_tensor *a, dt_tensor *b);
/* a tensor and nint static ints (dims, indices) */
dt_tensor *api_call_ti(core_op_id op, const char *api, dt_tensor *a,
                       int nint, const int64_t *ints);
/* a scalar form: the scalar and its kind (schema "Tsk") */
dt_tensor *api_call_ts(core_op_id op, const char *api, dt_tensor *a, double s,
                       dt_scalar_kind kind);

/* checks shared by every public entry point: a non-NULL tensor (a NULL
 * from a failed call just before keeps that call's error: core/error.h) */
#define API_CHECK_TENSOR(t, fn, name)                                       \
  do {                                                                      \
    if (!(t)) {                                                             \
      if (!core_error_chained())                                            \
        core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name); \
      return NULL;                                                          \
    }                                                                       \
  } while (0)

/* Inside an SPMD function: makes the thread's call site (dt_call_site's,
 * else its label path) the site of the collectives a public call makes
 * while it runs (a DTensor redistribute, fetch or backward), written into
 * buf; returns it, NULL outside SPMD or with none. api_scope_site_end
 * ends the scope (api/spmd.c). */
const char *api_scope_site_begin(char *buf, size_t len);
void api_scope_site_end(const char *site);
#define API_SCOPE_SITE                                                      \
  char scope_buf_[96];                                                      \
  const char *scope_site_ = api_scope_site_begin(scope_buf_, sizeof scope_buf_)
#define API_SCOPE_SITE_END() api_scope_site_end(scope_site_)

#endif
