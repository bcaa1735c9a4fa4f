/* Public entry points: safetensors checkpoints (mesh/checkpoint.h,
 * docs/io.md). The options are resolved as a factory's (the thread's
 * runtime, "cpu:N", a mesh); single-device views are made contiguous
 * here before a save. */
#include <stdlib.h>

#include "api/api.h"
#include "core/safetensors.h"
#include "mesh/checkpoint.h"

static dt_status target(const dt_load_options *o, const char *fn,
                        mesh_st_target *tg) {
  dt_tensor_options to = {.dtype = DT_FLOAT32};
  if (o && CORE_RESERVED_ZERO(fn, "options", o) != DT_OK)
    return DT_ERR_INVALID_ARGUMENT;
  if (o) {
    to.mesh = o->mesh;
    to.placements = o->placements;
    to.device = o->device;
  }
  api_resolved_opts r;
  dt_status st = api_resolve_options(&to, fn, &r);
  if (st != DT_OK) return st;
  *tg = (mesh_st_target){.rt = r.rt, .rank = r.rank, .mesh = r.mesh,
                         .placements = r.placements};
  return DT_OK;
}

dt_tensor *dt_load_safetensors(const char *path, const char *name,
                               const dt_load_options *opts) {
  static const char *fn = "dt_load_safetensors";
  mesh_st_target tg;
  if (target(opts, fn, &tg) != DT_OK) return NULL;
  return mesh_st_load(path, name, opts, &tg, NULL, fn);
}

dt_future *dt_load_safetensors_async(const char *path, const char *name,
                                     const dt_load_options *opts,
                                     dt_tensor **out) {
  static const char *fn = "dt_load_safetensors_async";
  if (!out) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    return NULL;
  }
  *out = NULL;
  mesh_st_target tg;
  if (target(opts, fn, &tg) != DT_OK) return NULL;
  dt_future *f = NULL;
  *out = mesh_st_load(path, name, opts, &tg, &f, fn);
  return f;
}

dt_status dt_save_safetensors(const char *path, dt_tensor *const *tensors,
                              const char *const *names, int n) {
  static const char *fn = "dt_save_safetensors";
  if (n <= 0 || !tensors) return mesh_st_save(path, tensors, names, n, fn);
  dt_tensor **ts = calloc((size_t)n, sizeof *ts);
  if (!ts) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  dt_status st = DT_OK;
  for (int i = 0; i < n && st == DT_OK; i++) {
    dt_tensor *t = tensors[i];
    /* a single-device view is written as its values: a contiguous copy */
    if (t && !t->spec && !core_tensor_is_contiguous(t) && !(t = dt_contiguous(t)))
      st = dt_last_status();
    else if (t == tensors[i] && t)
      dt_tensor_retain(t);
    ts[i] = t;
  }
  if (st == DT_OK) st = mesh_st_save(path, ts, names, n, fn);
  for (int i = 0; i < n; i++) dt_tensor_release(ts[i]);
  free(ts);
  return st;
}

dt_safetensors_info *dt_safetensors_index(const char *path) {
  return mesh_st_index(path, "dt_safetensors_index");
}

void dt_safetensors_info_free(dt_safetensors_info *info) {
  if (!info) return;
  core_st_info_clear(info);
  free(info);
}
