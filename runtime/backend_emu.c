/* The emulated CUDA backend (DTORCH_CUDA_EMULATE=1; docs/cuda.md): a
 * "cuda" runtime whose ranks are host memory, so every device path above
 * the kernels runs on a machine without a GPU — tensors carry the CUDA
 * dispatch key, meshes and DTensors take their device branches (shards
 * staged to and from the host, fills and copies through the backend), the
 * collectives run in a device world, and every op runs through the host
 * fallback (this backend has no kernels). Memory comes from the ranks'
 * simulated devices, copies are memmove, the streams are the rank threads
 * themselves (an event is complete once recorded). It checks the plumbing
 * of the CUDA path, not CUDA: the kernels and the stream ordering are
 * tested elsewhere (test_cuda_*, test_coll_device). */
#include "runtime/backend.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor.h"
#include "runtime/cuda_map.h"
#include "runtime/runtime.h"
#include "sim/coll_reduce.h"

bool runtime_cuda_emulated(void) {
  static _Atomic int cached = -1; /* the variable is read once */
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v < 0) {
    const char *e = getenv("DTORCH_CUDA_EMULATE");
    v = e && (strcmp(e, "1") == 0 || strcmp(e, "true") == 0);
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return v;
}

/* the device world's events: complete when recorded (one token) */
static char emu_event;

runtime_backend runtime_backend_emu = {
    .name = "cuda",
    .key = CORE_KEY_CUDA,
    .kernels = NULL, /* every op through the host fallback */
    .coll = &runtime_sim_coll,
};

/* the CPU backend's memory, copies, fills, events and stream (set once, before
 * the first emulated runtime; pthread_once orders it for every creator) */
static pthread_once_t emu_once = PTHREAD_ONCE_INIT;
static void emu_fill_table(void) {
  runtime_backend *b = &runtime_backend_emu;
  const runtime_backend *c = &runtime_backend_cpu;
  b->alloc = c->alloc;
  b->free = c->free;
  b->trim = c->trim;
  b->tag = c->tag;
  b->copy = c->copy;
  b->copy_view = c->copy_view;
  b->fill = c->fill;
  b->stream_sync = c->stream_sync;
  b->event_record = c->event_record;
  b->event_wait = c->event_wait;
  b->event_done = c->event_done;
  b->event_destroy = c->event_destroy;
}

dt_status runtime_emu_prepare(int *nranks, bool same_device,
                              int same_device_ranks, int **gpu) {
  pthread_once(&emu_once, emu_fill_table);
  /* one emulated GPU, as a machine with one: the same rank counts */
  int n = runtime_cuda_rank_count(*nranks, same_device, same_device_ranks, 1);
  int *g = calloc((size_t)n, sizeof *g); /* every rank on "GPU 0" */
  if (!g)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_runtime_create: out of "
                          "host memory");
  *nranks = n;
  *gpu = g;
  return DT_OK;
}

/* ---- its device world: synchronous on the rank thread */
static void *ed_record(void *ctx, int rank) {
  (void)ctx, (void)rank;
  return &emu_event;
}
static dt_status ed_wait(void *ctx, int rank, void *ev) {
  (void)ctx, (void)rank, (void)ev;
  return DT_OK;
}
static void ed_release(void *ctx, void *ev) { (void)ctx, (void)ev; }
static dt_status ed_reduce(void *ctx, int rank, const void *const *in,
                           int nin, void *const *out, int nout, int64_t count,
                           dt_dtype d, dt_reduce_op op) {
  (void)ctx, (void)rank;
  sim_coll_reduce(in, nin, out, nout, count, d, op);
  sim_coll_store_fence();
  return DT_OK;
}
static dt_status ed_copy(void *ctx, int rank, void *dst, const void *src,
                         int64_t bytes) {
  (void)ctx, (void)rank;
  memmove(dst, src, (size_t)bytes);
  return DT_OK;
}
static const sim_coll_device emu_device = {
    .record = ed_record, .wait = ed_wait, .release = ed_release,
    .reduce = ed_reduce, .copy = ed_copy};

void runtime_emu_coll_attach(dt_runtime *rt) {
  sim_coll_world_set_device(rt->coll, &emu_device);
}
