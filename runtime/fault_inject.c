/* dt_fault_inject (dtorch.h; sched/fault_table.h has the mechanism). */
#include <stdint.h>

#include "core/error.h"
#include "runtime/runtime.h"
#include "sched/fault_table.h"

/* dt_fault_kind bit -> the table's kind */
static const struct { unsigned bit; sched_fault_kind kind; } kinds[] = {
  {DT_FAULT_OOM, SCHED_FAULT_OOM}, {DT_FAULT_STALL, SCHED_FAULT_STALL},
  {DT_FAULT_RANK_FAIL, SCHED_FAULT_RANK_FAIL},
  {DT_FAULT_COLLECTIVE_FAIL, SCHED_FAULT_COLLECTIVE}, {DT_FAULT_IO, SCHED_FAULT_IO}};
#define ALL_KINDS (DT_FAULT_OOM | DT_FAULT_STALL | DT_FAULT_RANK_FAIL | \
                   DT_FAULT_COLLECTIVE_FAIL | DT_FAULT_IO)

static dt_status check(const dt_runtime *rt, const char *fn) {
  if (!rt) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rt is NULL", fn);
  if (atomic_load_explicit(&((dt_runtime *)rt)->dead, memory_order_acquire))
    return core_error_set(DT_ERR_DEVICE, "%s: the runtime was destroyed", fn);
  return DT_OK;
}

dt_status runtime_fault_inject(dt_runtime *rt, const dt_fault *f) {
  const char *fn = "dt_fault_inject";
  dt_status st = check(rt, fn);
  if (st != DT_OK) return st;
  if (!f) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: f is NULL", fn);
  if (!f->kind || (f->kind & ~(unsigned)ALL_KINDS))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: f->kind 0x%x is not a "
                          "set of DT_FAULT_* bits", fn, f->kind);
  if (f->rank < -1 || f->rank >= rt->nranks)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: f->rank %d is not -1 "
                          "(every rank) or in [0, %d)", fn, f->rank, rt->nranks);
  if (f->after < 0 || f->stall_ms < 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: f->%s %lld is negative",
                          fn, f->after < 0 ? "after" : "stall_ms",
                          (long long)(f->after < 0 ? f->after : f->stall_ms));
  int64_t after = f->after ? f->after : 1;
  int64_t stall = (f->stall_ms ? f->stall_ms : 1000) * 1000000;
  /* the table lives in the pool: inside the gate (runtime.h) */
  if (!runtime_gate_enter(rt, fn)) return DT_ERR_DEVICE;
  for (int r = f->rank < 0 ? 0 : f->rank; r < (f->rank < 0 ? rt->nranks : f->rank + 1); r++)
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
      if (f->kind & kinds[k].bit) sched_fault_arm(rt->faults, r, kinds[k].kind, after, stall);
  runtime_gate_leave(rt);
  return DT_OK;
}

dt_status runtime_fault_clear(dt_runtime *rt) {
  dt_status st = check(rt, "dt_fault_clear");
  if (st != DT_OK) return st;
  if (!runtime_gate_enter(rt, "dt_fault_clear")) return DT_ERR_DEVICE;
  sched_fault_clear(rt->faults);
  runtime_gate_leave(rt);
  return DT_OK;
}

int64_t runtime_fault_count(const dt_runtime *rt) {
  /* a destroyed runtime's table is gone: 0 */
  dt_runtime *w = (dt_runtime *)rt;
  if (!rt || !runtime_gate_enter(w, NULL)) return 0;
  int64_t n = sched_fault_fired(rt->faults);
  runtime_gate_leave(w);
  return n;
}
