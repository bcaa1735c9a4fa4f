/* dt_tensor_local_data: the address of a single-device tensor's memory on
 * its rank, for zero-copy views (numpy's __array_interface__ and DLPack in
 * the Python package). The rank thread allocates and fills the storage;
 * a barrier record on that rank, waited for, orders those writes before
 * the caller reads the pointer and the data (runtime/exec.h). */
#include "core/error.h"
#include "core/tensor.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"
#include "sched/future.h"

dt_status dt_tensor_local_data(dt_tensor *t, void **data) {
  const char *fn = "dt_tensor_local_data";
  if (!data) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: data is NULL", fn);
  *data = NULL;
  if (!t) { /* NULL from a failed op: keep that op's error */
    if (core_error_chained()) return core_last_status();
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: t is NULL", fn);
  }
  if (t->spec)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: t is a DTensor (its data "
                          "is one shard per rank); fetch it with dt_to_host or "
                          "a shard with dt_local_to_host", fn);
  core_storage *s = t->local.storage;
  if (!s || core_tensor_numel(t) == 0) return DT_OK; /* no elements */
  if (atomic_load_explicit(&s->rt->dead, memory_order_acquire))
    return core_error_set(DT_ERR_DEVICE, "%s: the tensor's runtime was "
                          "destroyed", fn);
  if (s->rt->dry_run)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: a dry run's tensors hold "
                          "no data", fn);
  if (s->key != CORE_KEY_CPU) /* the host must not read device memory */
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: t is in GPU memory of "
                          "rank %d (a \"cuda\" runtime); fetch it with "
                          "dt_to_host", fn, s->rank);
  dt_future *f = runtime_publish_barrier(s->rt, s->rank);
  if (!f) return core_last_status();
  dt_status st = sched_future_wait(f, -1);
  sched_future_release(f);
  if (st != DT_OK) return st;
  const core_poison *p = core_storage_poison(s);
  if (p) return core_error_set(p->status, "%s", p->message);
  *data = core_tensor_data(t);
  return DT_OK;
}
