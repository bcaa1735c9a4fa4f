/* The CPU backend (runtime/backend.h): each rank is a simulated device in
 * host memory. Kernels run to completion on the rank thread, so the rank's
 * ring is its stream and an event is complete as soon as it is recorded;
 * copies are memcpy; collectives are the emulated ones of sim/. */
#include "runtime/backend.h"

#include <string.h>

#include "core/error.h"
#include "core/tensor.h"
#include "runtime/runtime.h"

static void *cpu_alloc(dt_runtime *rt, int rank, size_t bytes,
                       const char **err) {
  return sim_device_alloc(&rt->ranks[rank].dev, bytes, err);
}

static void cpu_free(dt_runtime *rt, int rank, void *p) {
  sim_device_free(&rt->ranks[rank].dev, p);
}

static void cpu_trim(dt_runtime *rt, int rank) {
  sim_device_trim(&rt->ranks[rank].dev);
}

static void cpu_tag(void *p, const char *op, int dtype, int ndim,
                    const int64_t *dims) {
  sim_device_tag(p, op, dtype, ndim, dims, NULL, 0);
}

static dt_status cpu_copy(dt_runtime *rt, int rank, void *dst, const void *src,
                          size_t bytes, runtime_copy_kind kind) {
  (void)rt, (void)rank, (void)kind;
  if (bytes) memmove(dst, src, bytes);
  return DT_OK;
}

static dt_status cpu_copy_view(dt_runtime *rt, int rank, const cpu_view *dst,
                               const cpu_view *src) {
  (void)rt, (void)rank;
  if (core_numel_of(dst->sizes, dst->ndim))
    cpu_unary(CPU_COPY, cpu_compute_type(src->dtype), dst, src);
  return DT_OK;
}

static dt_status cpu_fill_n(dt_runtime *rt, int rank, void *data,
                            dt_dtype dtype, int64_t n, double value) {
  (void)rt, (void)rank;
  if (n) cpu_fill(data, dtype, n, value);
  return DT_OK;
}

/* every event of a CPU rank is complete when recorded: one shared token */
static char cpu_event_token;
static void *cpu_event_record(dt_runtime *rt, int rank) {
  (void)rt, (void)rank;
  return &cpu_event_token;
}
static dt_status cpu_event_wait(dt_runtime *rt, int rank, void *ev) {
  (void)rt, (void)rank, (void)ev;
  return DT_OK;
}
static bool cpu_event_done(void *ev) { return ev == &cpu_event_token; }
static void cpu_event_destroy(void *ev) { (void)ev; }
static dt_status cpu_stream_sync(dt_runtime *rt, int rank) {
  (void)rt, (void)rank;
  return DT_OK;
}

const runtime_backend_coll runtime_sim_coll = {
    .all_reduce = sim_coll_all_reduce,
    .all_gather = sim_coll_all_gather,
    .reduce_scatter = sim_coll_reduce_scatter,
    .all_to_all = sim_coll_all_to_all,
    .broadcast = sim_coll_broadcast,
    .barrier = sim_coll_barrier,
};

runtime_backend runtime_backend_cpu = {
    .name = "cpu",
    .key = CORE_KEY_CPU,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .trim = cpu_trim,
    .tag = cpu_tag,
    .copy = cpu_copy,
    .copy_view = cpu_copy_view,
    .fill = cpu_fill_n,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_done = cpu_event_done,
    .event_destroy = cpu_event_destroy,
    .stream_sync = cpu_stream_sync,
    .kernels = NULL, /* ops/registry.c registers them at load time */
    .coll = &runtime_sim_coll,
};


runtime_backend *runtime_backend_of_key(core_key key) {
  switch (key) {
  case CORE_KEY_CPU: return &runtime_backend_cpu;
  case CORE_KEY_CUDA:
    return runtime_cuda_emulated() ? &runtime_backend_emu
                                   : runtime_backend_cuda_table();
  default: return NULL;
  }
}

void runtime_backend_set_kernels(core_key key, const core_kernel_fn *kernels) {
  /* the CUDA kernels are the real backend's, never the emulation's */
  runtime_backend *b = key == CORE_KEY_CUDA ? runtime_backend_cuda_table()
                                            : runtime_backend_of_key(key);
  if (b) b->kernels = kernels;
}

void runtime_backend_set_fallback(core_key key, core_kernel_fn fallback) {
  runtime_backend *b = key == CORE_KEY_CUDA ? runtime_backend_cuda_table()
                                            : runtime_backend_of_key(key);
  if (b) b->host_fallback = fallback;
  if (key == CORE_KEY_CUDA) runtime_backend_emu.host_fallback = fallback;
}

core_kernel_fn runtime_kernel_of(const dt_runtime *rt, core_op_id op) {
  const runtime_backend *be = rt->backend;
  core_kernel_fn k = be->kernels ? be->kernels[op] : NULL;
  if (!k && rt->host_fallback) k = be->host_fallback;
  return k;
}

dt_status runtime_no_kernel(const dt_runtime *rt, const char *api,
                            core_op_id op) {
  const runtime_backend *be = rt->backend;
  return core_error_set(DT_ERR_UNSUPPORTED, "%s: op %s has no %s kernel yet%s",
                        api, core_op_name(op), be->name,
                        be->host_fallback ? " (DTORCH_CUDA_FALLBACK=1 runs it "
                        "on the host: slow, bitwise the CPU's)" : "");
}
