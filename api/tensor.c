/* Public entry points: options, factories, random state, host transfer and
 * views. Each builds a boxed call and dispatches it. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "mesh/handle.h"
#include "ops/ops.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"

dt_status api_resolve_options(const dt_tensor_options *o, const char *fn,
                             api_resolved_opts *r) {
  r->dtype = DT_FLOAT32;
  r->requires_grad = false;
  r->rank = 0;
  if (o && CORE_RESERVED_ZERO(fn, "options", o) != DT_OK)
    return DT_ERR_INVALID_ARGUMENT;
  if (o && !core_dtype_valid(o->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: options.dtype %d is not a valid "
                        "dt_dtype", fn, (int)o->dtype);
  if (o && o->mesh && o->device)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: options.device \"%s\" and options.mesh are both "
                        "given; they are exclusive (a device makes a 1-rank "
                        "mesh)", fn, o->device);
  r->mesh = o ? o->mesh : NULL;
  r->placements = o ? o->placements : NULL;
  if (o && !o->mesh && o->placements)
    return core_error_set(DT_ERR_PLACEMENT,
                        "%s: options.placements given without options.mesh",
                        fn);
  if (o && o->requires_grad && !core_dtype_is_float(o->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: only floating tensors can require "
                        "grad, got %s", fn, dt_dtype_name(o->dtype));
  if (o && o->device && strncmp(o->device, "cpu", 3) != 0 &&
      strncmp(o->device, "cuda", 4) != 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: options.device \"%s\" is unknown (expected "
                        "\"cpu\", \"cpu:N\" or \"cuda\")", fn, o->device);
  if (r->mesh) {
    r->rt = r->mesh->rt;
    r->dtype = o->dtype;
    r->requires_grad = o->requires_grad;
    return DT_OK;
  }
  r->rt = runtime_for_factories(fn);
  if (!r->rt) return dt_last_status();
  /* NULL options: the default device (an SPMD rank's own) */
  dt_status st = runtime_parse_device(r->rt, o ? o->device : NULL, fn, &r->rank);
  if (st != DT_OK) return st;
  if (o) {
    r->dtype = o->dtype;
    r->requires_grad = o->requires_grad;
  }
  return DT_OK;
}

/* a DTensor made by a factory: the option's requires_grad (a leaf) */
static dt_tensor *leaf(dt_tensor *t, bool requires_grad) {
  if (t && requires_grad) {
    t->requires_grad = true;
    t->keys |= CORE_KEYSET(CORE_KEY_AUTOGRAD);
  }
  return t;
}

/* A factory on a mesh: the op's own infer validates it exactly as on one
 * device (shape, dtype, the value's range), then each rank makes its shard */
static dt_tensor *mesh_factory(core_op_id op, const char *api, dt_shape shape,
                               dt_dtype dtype, dt_mesh *mesh,
                               const dt_placement *pl, double value,
                               const void *host) {
  dt_op_call c;
  core_call_init(&c, op, api);
  if (op == CORE_OP_FROM_HOST) core_call_ptr(&c, host);
  core_call_ints(&c, shape);
  core_call_dtype(&c, dtype);
  if (op == CORE_OP_FULL) core_call_double(&c, value);
  if (op == CORE_OP_RAND || op == CORE_OP_RANDN) {
    core_call_int(&c, 0);
    core_call_int(&c, 0);
  }
  if (ops_factory_infer(&c) != DT_OK) return NULL;
  return mesh_dtensor_factory(op, shape, dtype, mesh, pl, value, host, api);
}

static dt_tensor *factory(core_op_id op, const char *api, dt_shape shape,
                          const dt_tensor_options *o, double value) {
  api_resolved_opts r;
  if (api_resolve_options(o, api, &r) != DT_OK) return NULL;
  if (r.mesh) /* a DTensor: each rank makes its shard */
    return leaf(mesh_factory(op, api, shape, r.dtype, r.mesh, r.placements, value,
                             NULL), r.requires_grad);
  dt_op_call c;
  core_call_init(&c, op, api);
  core_call_ints(&c, shape);
  core_call_dtype(&c, r.dtype);
  if (op == CORE_OP_FULL) core_call_double(&c, value);
  if (op == CORE_OP_RAND || op == CORE_OP_RANDN) {
    /* validate before drawing: a failed call must not advance the stream */
    core_call_int(&c, 0);
    core_call_int(&c, 0);
    if (ops_factory_infer(&c) != DT_OK) return NULL;
    c.nargs -= 2;
    int64_t n = 0; /* the shape is valid: infer checked it */
    core_numel_checked(shape.dims, shape.ndim, &n);
    uint64_t seed, first = core_rng_reserve((uint64_t)n, &seed);
    core_call_int(&c, (int64_t)seed);
    core_call_int(&c, (int64_t)first);
  }
  c.requires_grad = r.requires_grad;
  c.rt = r.rt;
  c.rank = r.rank;
  return dispatch_run1(&c);
}

dt_tensor *dt_empty(dt_shape s, const dt_tensor_options *o) {
  return factory(CORE_OP_EMPTY, "dt_empty", s, o, 0);
}
dt_tensor *dt_zeros(dt_shape s, const dt_tensor_options *o) {
  return factory(CORE_OP_FULL, "dt_zeros", s, o, 0);
}
dt_tensor *dt_ones(dt_shape s, const dt_tensor_options *o) {
  return factory(CORE_OP_FULL, "dt_ones", s, o, 1);
}
dt_tensor *dt_full(dt_shape s, double v, const dt_tensor_options *o) {
  return factory(CORE_OP_FULL, "dt_full", s, o, v);
}
dt_tensor *dt_rand(dt_shape s, const dt_tensor_options *o) {
  return factory(CORE_OP_RAND, "dt_rand", s, o, 0);
}
dt_tensor *dt_randn(dt_shape s, const dt_tensor_options *o) {
  return factory(CORE_OP_RANDN, "dt_randn", s, o, 0);
}

/* arange on a mesh: the values made here, then distributed */
static dt_tensor *mesh_arange(double start, double end, double step,
                              const api_resolved_opts *r) {
  dt_op_call c;
  core_call_init(&c, CORE_OP_ARANGE, "dt_arange");
  core_call_double(&c, start);
  core_call_double(&c, end);
  core_call_double(&c, step);
  core_call_dtype(&c, r->dtype);
  if (ops_arange_infer(&c) != DT_OK) return NULL; /* validates */
  int64_t n = c.meta[0].sizes[0];
  size_t es = dt_dtype_size(r->dtype);
  char *buf = malloc((size_t)n * es + 1);
  if (!buf) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_arange: out of host memory");
    return NULL;
  }
  for (int64_t i = 0; i < n; i++)
    core_store_double(buf + (size_t)i * es, r->dtype, start + (double)i * step);
  dt_tensor *t = mesh_dtensor_factory(CORE_OP_FROM_HOST, DT_SHAPE(n), r->dtype, r->mesh,
                                 r->placements, 0, buf, "dt_arange");
  free(buf);
  return t;
}

dt_tensor *dt_arange(double start, double end, double step,
                     const dt_tensor_options *o) {
  api_resolved_opts r;
  if (api_resolve_options(o, "dt_arange", &r) != DT_OK) return NULL;
  if (r.mesh) return leaf(mesh_arange(start, end, step, &r), r.requires_grad);
  dt_op_call c;
  core_call_init(&c, CORE_OP_ARANGE, "dt_arange");
  core_call_double(&c, start);
  core_call_double(&c, end);
  core_call_double(&c, step);
  core_call_dtype(&c, r.dtype);
  c.requires_grad = r.requires_grad;
  c.rt = r.rt;
  c.rank = r.rank;
  return dispatch_run1(&c);
}

static dt_tensor *like(const dt_tensor *t, double v, const char *api) {
  API_CHECK_TENSOR(t, api, "t");
  if (t->spec) /* same mesh and placements */
    return mesh_factory(CORE_OP_FULL, api, t->spec->shape, t->dtype,
                        t->spec->mesh, t->spec->placements, v, NULL);
  dt_op_call c;
  core_call_init(&c, CORE_OP_FULL, api);
  core_call_ints(&c, dt_tensor_shape(t));
  core_call_dtype(&c, t->dtype);
  core_call_double(&c, v);
  c.rt = t->local.storage->rt; /* on t's device */
  c.rank = t->local.storage->rank;
  return dispatch_run1(&c);
}
dt_tensor *dt_zeros_like(const dt_tensor *t) { return like(t, 0, "dt_zeros_like"); }
dt_tensor *dt_ones_like(const dt_tensor *t) { return like(t, 1, "dt_ones_like"); }
dt_tensor *dt_full_like(const dt_tensor *t, double v) {
  return like(t, v, "dt_full_like");
}

/* the bytes dt_from_host hands on: data itself, or for a bool tensor
 * holding bytes other than 0 and 1 a copy with each nonzero byte made 1
 * (core_bool_other); *copy is what the caller frees after the call. An
 * invalid shape is left to the factory's checks. */
static const void *bool_bytes(const void *data, dt_shape shape, dt_dtype d,
                              void **copy) {
  *copy = NULL;
  int64_t n = 0;
  if (d != DT_BOOL || !data || shape.ndim < 0 || shape.ndim > DT_MAX_DIMS ||
      !core_numel_checked(shape.dims, shape.ndim, &n) ||
      core_bool_other(data, (size_t)n) == (size_t)n)
    return data;
  if (!(*copy = malloc((size_t)n))) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_from_host: out of host memory "
                   "for a copy of %lld bool bytes", (long long)n);
    return NULL;
  }
  memcpy(*copy, data, (size_t)n);
  core_bool_normalise(*copy, (size_t)n);
  return *copy;
}

static dt_tensor *from_host(const void *data, dt_shape shape,
                            const api_resolved_opts *r) {
  if (r->mesh) {
    int64_t n = 0;
    if (!data && shape.ndim >= 0 && shape.ndim <= DT_MAX_DIMS &&
        (!core_numel_checked(shape.dims, shape.ndim, &n) || n != 0)) {
      core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_from_host: data is NULL");
      return NULL;
    }
    return leaf(mesh_factory(CORE_OP_FROM_HOST, "dt_from_host", shape, r->dtype,
                             r->mesh, r->placements, 0, data), r->requires_grad);
  }
  int64_t n = 1;
  if (!data && shape.ndim >= 0 && shape.ndim <= DT_MAX_DIMS &&
      (!core_numel_checked(shape.dims, shape.ndim, &n) || n != 0)) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_from_host: data is NULL");
    return NULL;
  }
  dt_op_call c;
  core_call_init(&c, CORE_OP_FROM_HOST, "dt_from_host");
  core_call_ptr(&c, data);
  core_call_ints(&c, shape);
  core_call_dtype(&c, r->dtype);
  c.requires_grad = r->requires_grad;
  c.rt = r->rt;
  c.rank = r->rank;
  return dispatch_run1(&c);
}

dt_tensor *dt_from_host(const void *data, dt_shape shape,
                        const dt_tensor_options *o) {
  api_resolved_opts r;
  if (api_resolve_options(o, "dt_from_host", &r) != DT_OK) return NULL;
  void *copy;
  const void *bytes = bool_bytes(data, shape, r.dtype, &copy);
  if (data && !bytes) return NULL;
  /* both paths copy the bytes before they return (the record's or the
   * fill job's staging), so the copy can go at once */
  dt_tensor *t = from_host(bytes, shape, &r);
  free(copy);
  return t;
}

static dt_status check_fetch(dt_tensor *t, void *dst, size_t dst_bytes,
                             const char *fn) {
  if (!t) { /* NULL from a failed op: keep that op's error */
    if (core_error_chained()) return core_last_status();
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: t is NULL", fn);
  }
  size_t need;
  return runtime_host_buffer(t, dst, dst_bytes, fn, &need);
}

dt_future *dt_to_host_async(dt_tensor *t, void *dst, size_t dst_bytes) {
  if (check_fetch(t, dst, dst_bytes, "dt_to_host_async") != DT_OK) return NULL;
  if (t->spec) {
    dt_future *f = NULL;
    mesh_dtensor_to_host(t, dst, dst_bytes, false, &f, "dt_to_host_async");
    return f;
  }
  dt_future *f = NULL;
  runtime_to_host(t, dst, (size_t)core_numel(t) * dt_dtype_size(t->dtype), /* checked */
                  false, &f, "dt_to_host_async");
  return f;
}

dt_status dt_to_host(dt_tensor *t, void *dst, size_t dst_bytes) {
  dt_status st = check_fetch(t, dst, dst_bytes, "dt_to_host");
  if (st != DT_OK) return st;
  if (t->spec) { /* inside an SPMD function a collective: the caller's site */
    API_SCOPE_SITE;
    st = mesh_dtensor_to_host(t, dst, dst_bytes, true, NULL, "dt_to_host");
    API_SCOPE_SITE_END();
    return st;
  }
  return runtime_to_host(t, dst, (size_t)core_numel(t) * dt_dtype_size(t->dtype), /* checked */
                         true, NULL, "dt_to_host");
}

/* ---- generic call helpers */
dt_tensor *api_call_t(core_op_id op, const char *api, dt_tensor *a) {
  API_CHECK_TENSOR(a, api, "a");
  dt_op_call c;
  core_call_init(&c, op, api);
  core_call_tensor(&c, a);
  return dispatch_run1(&c);
}

dt_tensor *api_call_tt(core_op_id op, const char *api, dt_tensor *a, dt_tensor *b) {
  API_CHECK_TENSOR(a, api, "a");
  API_CHECK_TENSOR(b, api, "b");
  dt_op_call c;
  core_call_init(&c, op, api);
  core_call_tensor(&c, a);
  core_call_tensor(&c, b);
  return dispatch_run1(&c);
}

dt_tensor *api_call_ts(core_op_id op, const char *api, dt_tensor *a, double s,
                       dt_scalar_kind kind) {
  API_CHECK_TENSOR(a, api, "a");
  dt_op_call c;
  core_call_init(&c, op, api);
  core_call_tensor(&c, a);
  core_call_double(&c, s);
  core_call_int(&c, (int)kind); /* signed: a bad kind prints as passed */
  return dispatch_run1(&c);
}

/* ---- views */
dt_tensor *api_call_ti(core_op_id op, const char *api, dt_tensor *a,
                       int nint, const int64_t *ints) {
  API_CHECK_TENSOR(a, api, "a");
  dt_op_call c;
  core_call_init(&c, op, api);
  core_call_tensor(&c, a);
  for (int i = 0; i < nint; i++) core_call_int(&c, ints[i]);
  return dispatch_run1(&c);
}
static dt_tensor *call_tshape(core_op_id op, const char *api, dt_tensor *a,
                              dt_shape s) {
  API_CHECK_TENSOR(a, api, "a");
  dt_op_call c;
  core_call_init(&c, op, api);
  core_call_tensor(&c, a);
  core_call_ints(&c, s);
  return dispatch_run1(&c);
}

dt_tensor *dt_view(dt_tensor *a, dt_shape s) {
  return call_tshape(CORE_OP_VIEW, "dt_view", a, s);
}
dt_tensor *dt_reshape(dt_tensor *a, dt_shape s) {
  return call_tshape(CORE_OP_RESHAPE, "dt_reshape", a, s);
}
dt_tensor *dt_expand(dt_tensor *a, dt_shape s) {
  return call_tshape(CORE_OP_EXPAND, "dt_expand", a, s);
}
dt_tensor *dt_permute(dt_tensor *a, const int *dims, int ndims) {
  if (ndims < 0 || ndims > DT_MAX_DIMS || (!dims && ndims > 0)) {
    core_error_set(DT_ERR_INVALID_ARGUMENT,
                 "dt_permute: dims %s with ndims %d (expected 0..%d entries)",
                 dims ? "given" : "NULL", ndims, DT_MAX_DIMS);
    return NULL;
  }
  dt_shape s = {.ndim = ndims};
  for (int i = 0; i < ndims; i++) s.dims[i] = dims[i];
  return call_tshape(CORE_OP_PERMUTE, "dt_permute", a, s);
}
dt_tensor *dt_transpose(dt_tensor *a, int d0, int d1) {
  return api_call_ti(CORE_OP_TRANSPOSE, "dt_transpose", a, 2, (int64_t[]){d0, d1});
}
dt_tensor *dt_slice(dt_tensor *a, int dim, int64_t start, int64_t end,
                    int64_t step) {
  return api_call_ti(CORE_OP_SLICE, "dt_slice", a, 4,
                 (int64_t[]){dim, start, end, step});
}
dt_tensor *dt_narrow(dt_tensor *a, int dim, int64_t start, int64_t length) {
  return api_call_ti(CORE_OP_NARROW, "dt_narrow", a, 3,
                 (int64_t[]){dim, start, length});
}
dt_tensor *dt_select(dt_tensor *a, int dim, int64_t index) {
  return api_call_ti(CORE_OP_SELECT, "dt_select", a, 2, (int64_t[]){dim, index});
}
dt_tensor *dt_squeeze(dt_tensor *a, int dim) {
  return api_call_ti(CORE_OP_SQUEEZE, "dt_squeeze", a, 1, (int64_t[]){dim});
}
dt_tensor *dt_squeeze_all(dt_tensor *a) {
  return api_call_t(CORE_OP_SQUEEZE_ALL, "dt_squeeze_all", a);
}
dt_tensor *dt_unsqueeze(dt_tensor *a, int dim) {
  return api_call_ti(CORE_OP_UNSQUEEZE, "dt_unsqueeze", a, 1, (int64_t[]){dim});
}
dt_tensor *dt_flatten(dt_tensor *a, int s, int e) {
  return api_call_ti(CORE_OP_FLATTEN, "dt_flatten", a, 2, (int64_t[]){s, e});
}
dt_tensor *dt_contiguous(dt_tensor *a) {
  return api_call_t(CORE_OP_CONTIGUOUS, "dt_contiguous", a);
}
dt_tensor *dt_clone(dt_tensor *a) { return api_call_t(CORE_OP_CLONE, "dt_clone", a); }
