/* Public entry points: tensor handles, their queries and the random seed
 * (core/tensor.c, core/rng.c).
 * Each forwards to the layer that implements it; the messages those
 * raise name the public function. */
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"

/* A query's NULL tensor: the failed result of its kind (dtorch.h's
 * conventions) with the error set, or kept when the NULL came from a
 * failed call just before (dt_tensor_ndim(dt_add(a, b))). */
static bool null_tensor(const dt_tensor *t, const char *fn, const char *arg) {
  if (t) return false;
  if (!core_error_chained())
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, arg);
  return true;
}

void dt_manual_seed(uint64_t seed) {
  core_manual_seed(seed);
}

dt_shape dt_tensor_shape(const dt_tensor *t) {
  null_tensor(t, "dt_tensor_shape", "t");
  return core_tensor_shape(t);
}

dt_dtype dt_tensor_dtype(const dt_tensor *t) {
  null_tensor(t, "dt_tensor_dtype", "t");
  return core_tensor_dtype(t);
}

int64_t dt_tensor_numel(const dt_tensor *t) {
  null_tensor(t, "dt_tensor_numel", "t");
  return core_tensor_numel(t);
}

int dt_tensor_ndim(const dt_tensor *t) {
  null_tensor(t, "dt_tensor_ndim", "t");
  return core_tensor_ndim(t);
}

dt_shape dt_tensor_strides(const dt_tensor *t) {
  null_tensor(t, "dt_tensor_strides", "t");
  return core_tensor_strides(t);
}

int64_t dt_tensor_storage_offset(const dt_tensor *t) {
  null_tensor(t, "dt_tensor_storage_offset", "t");
  return core_tensor_storage_offset(t);
}

bool dt_tensor_is_contiguous(const dt_tensor *t) {
  null_tensor(t, "dt_tensor_is_contiguous", "t");
  return core_tensor_is_contiguous(t);
}

bool dt_tensor_shares_storage(const dt_tensor *a, const dt_tensor *b) {
  null_tensor(a, "dt_tensor_shares_storage", "a");
  null_tensor(b, "dt_tensor_shares_storage", "b");
  return core_tensor_shares_storage(a, b);
}

bool dt_tensor_requires_grad(const dt_tensor *t) {
  null_tensor(t, "dt_tensor_requires_grad", "t");
  return core_tensor_requires_grad(t);
}

dt_mesh *dt_tensor_mesh(const dt_tensor *t) {
  null_tensor(t, "dt_tensor_mesh", "t");
  return core_tensor_mesh(t);
}

dt_tensor *dt_tensor_retain(dt_tensor *t) {
  return core_tensor_retain(t);
}

void dt_tensor_release(dt_tensor *t) {
  core_tensor_release(t);
}

int64_t dt_live_tensors(void) {
  return core_live_tensors();
}

int64_t dt_live_storage_bytes(void) {
  return core_live_storage_bytes();
}
