/* The strided iterator: broadcast, dim coalescing and range iteration. */
#include <stdatomic.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

size_t cpu_dtype_size(dt_dtype d) {
  static const size_t sizes[] = {4, 8, 2, 2, 4, 8, 1, 1};
  _Static_assert(sizeof sizes / sizeof *sizes == DT_DTYPE_COUNT, "sizes");
  return (unsigned)d < DT_DTYPE_COUNT ? sizes[d] : 0;
}

cpu_view cpu_view_broadcast(const cpu_view *v, int ndim, const int64_t *sizes) {
  cpu_view r = *v;
  int shift = ndim - v->ndim;
  r.ndim = ndim;
  for (int i = ndim - 1; i >= 0; i--) {
    int j = i - shift;
    r.sizes[i] = sizes[i];
    if (j < 0 || v->sizes[j] != sizes[i])
      r.strides[i] = 0; /* a missing or size-1 dim is broadcast */
    else
      r.strides[i] = v->strides[j];
  }
  return r;
}

void cpu_iter_init(cpu_iter *it, const cpu_view *ops, int nops) {
  const cpu_view *out = &ops[0];
  it->nops = nops;
  it->numel = 1;
  for (int k = 0; k < nops; k++) it->base[k] = ops[k].data;
  /* innermost first, dropping size-1 dims */
  int nd = 0;
  for (int i = out->ndim - 1; i >= 0; i--) {
    it->numel *= out->sizes[i];
    if (out->sizes[i] == 1) continue;
    it->sizes[nd] = out->sizes[i];
    for (int k = 0; k < nops; k++)
      it->strides[k][nd] =
          ops[k].strides[i] * (int64_t)cpu_dtype_size(ops[k].dtype);
    nd++;
  }
  /* coalesce dim d+1 into d when every operand steps through it evenly */
  int w = 0;
  for (int d = 1; d < nd; d++) {
    bool can = true;
    for (int k = 0; k < nops && can; k++)
      can = it->strides[k][w] * it->sizes[w] == it->strides[k][d];
    if (can) {
      it->sizes[w] *= it->sizes[d];
    } else {
      w++;
      it->sizes[w] = it->sizes[d];
      for (int k = 0; k < nops; k++) it->strides[k][w] = it->strides[k][d];
    }
  }
  it->ndim = nd ? w + 1 : 0;
  if (it->ndim == 0) { /* a scalar: one element */
    it->ndim = 1;
    it->sizes[0] = 1;
    for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
  }
}

void cpu_iter_run(const cpu_iter *it, int64_t begin, int64_t end,
                  cpu_inner_fn fn, void *ctx) {
  if (begin >= end || it->numel == 0) return;
  int64_t idx[DT_MAX_DIMS];
  char *ptrs[CPU_ITER_MAX_OPS];
  int64_t inner_strides[CPU_ITER_MAX_OPS];
  int64_t rem = begin;
  for (int d = 0; d < it->ndim; d++) {
    idx[d] = rem % it->sizes[d];
    rem /= it->sizes[d];
  }
  for (int k = 0; k < it->nops; k++) {
    ptrs[k] = it->base[k];
    for (int d = 0; d < it->ndim; d++) ptrs[k] += idx[d] * it->strides[k][d];
    inner_strides[k] = it->strides[k][0];
  }
  int64_t left = end - begin;
  while (left > 0) {
    int64_t n = it->sizes[0] - idx[0];
    if (n > left) n = left;
    fn(ptrs, inner_strides, n, ctx);
    left -= n;
    if (left == 0) break;
    /* advance: inner dim wraps, carry outwards */
    for (int k = 0; k < it->nops; k++) ptrs[k] += n * it->strides[k][0];
    idx[0] += n;
    for (int d = 0; d < it->ndim && idx[d] == it->sizes[d]; d++) {
      idx[d] = 0;
      for (int k = 0; k < it->nops; k++)
        ptrs[k] -= it->sizes[d] * it->strides[k][d];
      if (d + 1 < it->ndim) {
        idx[d + 1]++;
        for (int k = 0; k < it->nops; k++) ptrs[k] += it->strides[k][d + 1];
      }
    }
  }
}

/* ---- parallel chunks (the runtime installs the implementation) */
static _Atomic(cpu_parallel_fn) parallel_impl, steps_impl;

void cpu_set_parallel(cpu_parallel_fn impl) {
  /* release: the implementation's code and data are ready; pairs with
   * the acquire in run_parallel */
  atomic_store_explicit(&parallel_impl, impl, memory_order_release);
}

void cpu_set_parallel_steps(cpu_parallel_fn impl) {
  /* release: as cpu_set_parallel */
  atomic_store_explicit(&steps_impl, impl, memory_order_release);
}

static bool run_parallel(_Atomic(cpu_parallel_fn) *slot, int64_t n, int64_t grain,
                         cpu_range_fn fn, void *ctx) {
  /* acquire: pairs with the installer's release */
  cpu_parallel_fn impl = atomic_load_explicit(slot, memory_order_acquire);
  if (!impl) impl = atomic_load_explicit(&parallel_impl, memory_order_acquire);
  /* n <= grain too: the implementation reports a cancellation */
  if (impl) return impl(n, grain, fn, ctx);
  if (n > 0) fn(0, n, ctx);
  return true;
}

bool cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void *ctx) {
  return run_parallel(&parallel_impl, n, grain, fn, ctx);
}

bool cpu_parallel_steps(int64_t n, int64_t grain, cpu_range_fn fn, void *ctx) {
  return run_parallel(&steps_impl, n, grain, fn, ctx);
}

typedef struct iter_job { const cpu_iter *it; cpu_inner_fn fn; void *ctx; } iter_job;
static void iter_range(int64_t begin, int64_t end, void *arg) {
  const iter_job *j = arg;
  cpu_iter_run(j->it, begin, end, j->fn, j->ctx);
}

void cpu_iter_run_parallel(const cpu_iter *it, cpu_inner_fn fn, void *ctx) {
  iter_job j = {it, fn, ctx};
  cpu_parallel_for(it->numel, CPU_GRAIN, iter_range, &j);
}
