/* The CUDA backend (runtime/backend.h; docs/cuda.md): each rank owns a
 * non-blocking stream and a stream-ordered memory pool on its GPU
 * (kernels/cuda/device.c) with the rank's capacity, so out-of-memory is
 * per rank as on a cluster; copies and kernels are asynchronous on the
 * rank's stream; frees are stream-ordered (cudaFreeAsync). Without a CUDA
 * build, runtime_cuda_prepare says so and nothing else here exists. */
#include "runtime/backend.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/tensor.h"
#include "runtime/cuda_map.h"
#include "runtime/offload.h"
#include "runtime/runtime.h"
#include "sched/future.h"

#if !DTORCH_HAVE_CUDA

runtime_backend *runtime_backend_cuda_table(void) { return NULL; }

dt_status runtime_cuda_prepare(const char *device, int *nranks,
                               bool same_device, int same_device_ranks,
                               const char *const *rank_devices, int **gpu) {
  (void)nranks, (void)same_device, (void)same_device_ranks, (void)rank_devices;
  *gpu = NULL;
  return core_error_set(DT_ERR_DEVICE, "dt_runtime_create: device \"%s\" is "
                        "unavailable: this dtorch was built without the CUDA "
                        "backend (DTORCH_CUDA=off, or no nvcc at build time)",
                        device);
}
dt_status runtime_cuda_rank_open(dt_runtime *rt, int rank) {
  (void)rt, (void)rank;
  return DT_ERR_DEVICE;
}
void runtime_cuda_rank_close(dt_runtime *rt, int rank) { (void)rt, (void)rank; }
bool runtime_cuda_coll_attach(dt_runtime *rt) {
  (void)rt;
  return false;
}

#else

#include "kernels/cuda/cuda.h"

#define WHY 384
static _Thread_local char why_buf[WHY];

static cuda_rank *rank_of(dt_runtime *rt, int rank) {
  return rt->ranks[rank].dev_ctx;
}

static void *cu_alloc(dt_runtime *rt, int rank, size_t bytes,
                      const char **err) {
  cuda_rank *r = rank_of(rt, rank);
  void *p = cuda_rank_alloc(r, bytes, why_buf, sizeof why_buf);
  if (!p) {
    *err = why_buf;
    return NULL;
  }
  /* the simulated device's counters feed dt_runtime_memory */
  sim_device *d = &rt->ranks[rank].dev;
  d->used = cuda_rank_used(r);
  if (d->used > d->peak) d->peak = d->used;
  d->allocs++;
  return p;
}

static void cu_free(dt_runtime *rt, int rank, void *p) {
  cuda_rank *r = rank_of(rt, rank);
  cuda_rank_free(r, p);
  rt->ranks[rank].dev.used = cuda_rank_used(r);
  rt->ranks[rank].dev.frees++;
}

static dt_status cu_fail(dt_runtime *rt, int rank, const char *what) {
  return core_error_set(DT_ERR_DEVICE, "cuda:%d (rank %d): %s: %s",
                        rt->ranks[rank].gpu, rank, what, why_buf);
}

static dt_status cu_copy(dt_runtime *rt, int rank, void *dst, const void *src,
                         size_t bytes, runtime_copy_kind kind) {
  static const cuda_copy_kind kinds[] = {[RUNTIME_COPY_H2D] = CUDA_COPY_H2D,
                                         [RUNTIME_COPY_D2H] = CUDA_COPY_D2H,
                                         [RUNTIME_COPY_D2D] = CUDA_COPY_D2D};
  if (!bytes) return DT_OK;
  if (cuda_rank_copy(rank_of(rt, rank), dst, src, bytes, kinds[kind], why_buf,
                     sizeof why_buf))
    return cu_fail(rt, rank, "copy");
  return DT_OK;
}

static void *cu_event_record(dt_runtime *rt, int rank) {
  void *ev = cuda_event_record(rank_of(rt, rank), why_buf, sizeof why_buf);
  if (!ev) cu_fail(rt, rank, "event record");
  return ev;
}

static dt_status cu_event_wait(dt_runtime *rt, int rank, void *ev) {
  if (cuda_event_wait(rank_of(rt, rank), ev, why_buf, sizeof why_buf))
    return cu_fail(rt, rank, "event wait");
  return DT_OK;
}

static dt_status cu_stream_sync(dt_runtime *rt, int rank) {
  if (cuda_rank_sync(rank_of(rt, rank), why_buf, sizeof why_buf))
    return cu_fail(rt, rank, "stream synchronize");
  return DT_OK;
}

/* A fetch: the rank records an event after the work that makes t and
 * hands the wait and the copy to the runtime's offload thread, which
 * completes the future; the rank thread goes on. The job holds t, so its
 * memory lives until the copy is done. */
typedef struct fetch_job {
  dt_tensor *t;
  void *dst, *ev;
  size_t bytes;
  int gpu, rank;
  dt_runtime *rt; /* held through t's storage */
  struct dt_future *f;
} fetch_job;

static void fetch_run(void *p) {
  fetch_job *j = p;
  char why[WHY];
  dt_status st = DT_OK;
  const char *fault = NULL;
  if (cuda_event_sync(j->ev, why, sizeof why) ||
      (j->bytes && cuda_copy_to_host(j->gpu, j->dst, core_tensor_data(j->t),
                                     j->bytes, why, sizeof why)))
    st = core_error_set(DT_ERR_DEVICE, "dt_to_host: cuda:%d: %s", j->gpu, why);
  /* a fault marked while the stream ran (its work cut short): checked
   * after the event, which such a cut ends */
  else if ((fault = runtime_rank_fault_of(j->rt, j->rank)))
    st = core_error_set(DT_ERR_DEVICE, "%s", fault);
  sched_future_complete(j->f, st, st == DT_OK ? NULL : core_last_error());
  sched_future_release(j->f);
  cuda_event_destroy(j->ev);
  core_tensor_release(j->t);
  free(j);
}

static dt_status cu_to_host(dt_runtime *rt, int rank, dt_tensor *t, void *dst,
                            size_t bytes, struct dt_future *f) {
  fetch_job *j = malloc(sizeof *j);
  if (!j)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_to_host: out of host "
                          "memory");
  j->ev = cu_event_record(rt, rank);
  if (!j->ev) {
    free(j);
    return core_last_status();
  }
  j->t = core_tensor_retain(t);
  j->dst = dst;
  j->bytes = bytes;
  j->gpu = rt->ranks[rank].gpu;
  j->rank = rank;
  j->rt = rt;
  j->f = sched_future_retain(f);
  dt_status st = runtime_offload_push(rt->offload, fetch_run, j);
  if (st != DT_OK) {
    sched_future_release(j->f);
    core_tensor_release(j->t);
    cuda_event_destroy(j->ev);
    free(j);
  }
  return st;
}

/* fn(arg) once the stream's work so far is done: an event, waited for on
 * the offload thread (barriers: dt_runtime_synchronize, dt_event_record) */
typedef struct done_job {
  void *ev;
  void (*fn)(void *);
  void *arg;
} done_job;

static void done_run(void *p) {
  done_job *j = p;
  char why[WHY];
  cuda_event_sync(j->ev, why, sizeof why); /* an error: the stream is dead;
                                              later fetches report it */
  cuda_event_destroy(j->ev);
  j->fn(j->arg);
  free(j);
}

static dt_status cu_when_done(dt_runtime *rt, int rank, void (*fn)(void *),
                              void *arg) {
  done_job *j = malloc(sizeof *j);
  if (!j)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "barrier: out of host memory");
  if (!(j->ev = cu_event_record(rt, rank))) {
    free(j);
    return core_last_status();
  }
  j->fn = fn;
  j->arg = arg;
  dt_status st = runtime_offload_push(rt->offload, done_run, j);
  if (st != DT_OK) {
    cuda_event_destroy(j->ev);
    free(j);
  }
  return st;
}

/* a strided view as the kernels' operand (strides in elements) */
static cuda_operand operand(const cpu_view *v) {
  cuda_operand o = {.data = v->data};
  for (int d = 0; d < v->ndim; d++) o.strides[d] = v->strides[d];
  return o;
}

static dt_status cu_copy_view(dt_runtime *rt, int rank, const cpu_view *dst,
                              const cpu_view *src) {
  if (!core_numel_of(dst->sizes, dst->ndim)) return DT_OK;
  cuda_operand o = operand(dst), a = operand(src);
  if (cuda_copy_strided(cuda_rank_stream(rank_of(rt, rank)), (int)dst->dtype,
                        (int)src->dtype, dst->ndim, dst->sizes, &o, &a))
    return core_error_set(DT_ERR_DEVICE, "cuda:%d (rank %d): strided copy "
                          "of %s to %s: the kernel did not launch",
                          rt->ranks[rank].gpu, rank,
                          core_dtype_name(src->dtype),
                          core_dtype_name(dst->dtype));
  return DT_OK;
}

static dt_status cu_fill_n(dt_runtime *rt, int rank, void *data,
                           dt_dtype dtype, int64_t n, double value) {
  if (n && cuda_fill(cuda_rank_stream(rank_of(rt, rank)), (int)dtype, n, data,
                     value))
    return core_error_set(DT_ERR_DEVICE, "cuda:%d (rank %d): fill of %lld "
                          "%s: the kernel did not launch", rt->ranks[rank].gpu,
                          rank, (long long)n, core_dtype_name(dtype));
  return DT_OK;
}

/* ---- the emulated collectives on one GPU (sim/coll_device.c): events
 * between the ranks' streams, each member's share as copies and
 * reductions over the members' buffers (kernels/cuda/coll.cu) */
static void *cd_record(void *ctx, int rank) {
  return cu_event_record(ctx, rank);
}
static dt_status cd_wait(void *ctx, int rank, void *ev) {
  return cu_event_wait(ctx, rank, ev);
}
static void cd_release(void *ctx, void *ev) {
  (void)ctx;
  cuda_event_destroy(ev);
}

static dt_status cd_reduce(void *ctx, int rank, const void *const *in,
                           int nin, void *const *out, int nout, int64_t count,
                           dt_dtype d, dt_reduce_op op) {
  dt_runtime *rt = ctx;
  if (nin > CUDA_COLL_MAX || nout > CUDA_COLL_MAX)
    return core_error_set(DT_ERR_UNSUPPORTED, "rank %d (cuda:%d): a reducing "
                          "collective of %d members: at most %d on one GPU",
                          rank, rt->ranks[rank].gpu, nin, CUDA_COLL_MAX);
  if (!core_dtype_is_float(d))
    return core_error_set(DT_ERR_UNSUPPORTED, "rank %d (cuda:%d): reducing "
                          "collectives of %s between CUDA ranks are not built "
                          "yet (float dtypes only)", rank, rt->ranks[rank].gpu,
                          core_dtype_name(d));
  if (cuda_reduce_ptrs(cuda_rank_stream(rank_of(rt, rank)), (int)op, (int)d,
                       nin, in, nout, out, 0, count))
    return core_error_set(DT_ERR_DEVICE, "rank %d (cuda:%d): the collective's "
                          "reduction kernel did not launch", rank,
                          rt->ranks[rank].gpu);
  return DT_OK;
}

/* what the one-GPU data movement takes, refused before the rendezvous so
 * that every member fails the round alike */
static dt_status cd_check(void *ctx, int rank, int kind, dt_dtype d,
                          dt_reduce_op op, int n) {
  dt_runtime *rt = ctx;
  (void)op;
  bool reducing = kind == SIM_COLL_KIND_ALL_REDUCE ||
                  kind == SIM_COLL_KIND_REDUCE_SCATTER;
  if (reducing && !core_dtype_is_float(d))
    return core_error_set(DT_ERR_UNSUPPORTED, "rank %d (cuda:%d): reducing "
                          "collectives of %s between CUDA ranks are not built "
                          "yet (float dtypes only)", rank, rt->ranks[rank].gpu,
                          core_dtype_name(d));
  if (reducing && n > CUDA_COLL_MAX)
    return core_error_set(DT_ERR_UNSUPPORTED, "rank %d (cuda:%d): a reducing "
                          "collective of %d members: at most %d on one GPU",
                          rank, rt->ranks[rank].gpu, n, CUDA_COLL_MAX);
  return DT_OK;
}

static dt_status cd_copy(void *ctx, int rank, void *dst, const void *src,
                         int64_t bytes) {
  return cu_copy(ctx, rank, dst, src, (size_t)bytes, RUNTIME_COPY_D2D);
}

/* one GPU: the emulated collectives (sim/coll_device.c); several: NCCL
 * runs each collective whole (runtime/coll_nccl.c); barriers order the
 * streams with events either way (cross-GPU waits are allowed) */
bool runtime_cuda_coll_attach(dt_runtime *rt) {
  bool one_gpu = true;
  for (int i = 1; i < rt->nranks; i++)
    one_gpu = one_gpu && rt->ranks[i].gpu == rt->ranks[0].gpu;
  rt->coll_dev = (sim_coll_device){
      .ctx = rt, .record = cd_record, .wait = cd_wait,
      .release = cd_release, .reduce = cd_reduce, .copy = cd_copy,
      .check = one_gpu ? cd_check : NULL,
      .call = one_gpu ? NULL : runtime_nccl_call};
  /* without memory for its registry, NCCL calls fail naming it */
  if (!one_gpu) (void)runtime_nccl_open(rt);
  sim_coll_world_set_device(rt->coll, &rt->coll_dev);
  return true;
}

/* the rank thread's current device is its GPU: kernels launch on it */
static dt_status cu_rank_init(dt_runtime *rt, int rank) {
  if (cuda_rank_bind(rank_of(rt, rank), why_buf, sizeof why_buf))
    return cu_fail(rt, rank, "binding the rank thread");
  return DT_OK;
}

static runtime_backend cuda_backend = {
    .name = "cuda",
    .key = CORE_KEY_CUDA,
    .rank_init = cu_rank_init,
    .alloc = cu_alloc,
    .free = cu_free,
    .copy = cu_copy,
    .copy_view = cu_copy_view,
    .fill = cu_fill_n,
    .event_record = cu_event_record,
    .event_wait = cu_event_wait,
    .event_done = cuda_event_done,
    .event_destroy = cuda_event_destroy,
    .stream_sync = cu_stream_sync,
    .to_host = cu_to_host,
    .when_done = cu_when_done,
    .kernels = NULL, /* ops/cuda_ops.c registers them at load time */
    /* the emulated collectives over device memory (runtime_cuda_coll_attach) */
    .coll = &runtime_sim_coll,
};

runtime_backend *runtime_backend_cuda_table(void) { return &cuda_backend; }

dt_status runtime_cuda_prepare(const char *device, int *nranks,
                               bool same_device, int same_device_ranks,
                               const char *const *rank_devices, int **gpu) {
  *gpu = NULL;
  char why[WHY];
  int ngpus = cuda_device_count(why, sizeof why);
  if (ngpus < 0)
    return core_error_set(DT_ERR_DEVICE, "dt_runtime_create: device \"%s\" "
                          "is unavailable: %s", device, why);
  int n = runtime_cuda_rank_count(*nranks, same_device, same_device_ranks,
                                  ngpus);
  int *g = malloc(sizeof *g * (size_t)n);
  if (!g)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_runtime_create: out of "
                          "host memory");
  bool same;
  dt_status st = runtime_cuda_map("dt_runtime_create", device, n, ngpus,
                                  same_device, rank_devices, g, &same);
  if (st == DT_OK && cuda_libs_open(!same && n > 1, why, sizeof why))
    st = core_error_set(DT_ERR_DEVICE, "dt_runtime_create: device \"%s\": "
                        "%s", device, why);
  if (st != DT_OK) {
    free(g);
    return st;
  }
  *nranks = n;
  *gpu = g;
  return DT_OK;
}

dt_status runtime_cuda_rank_open(dt_runtime *rt, int rank) {
  cuda_rank *r;
  if (cuda_rank_create(&r, rt->ranks[rank].gpu, rt->device_memory, why_buf,
                       sizeof why_buf))
    return core_error_set(DT_ERR_DEVICE, "dt_runtime_create: rank %d on "
                          "cuda:%d: %s", rank, rt->ranks[rank].gpu, why_buf);
  rt->ranks[rank].dev_ctx = r;
  return DT_OK;
}

void runtime_cuda_rank_close(dt_runtime *rt, int rank) {
  cuda_rank_destroy(rt->ranks[rank].dev_ctx);
  rt->ranks[rank].dev_ctx = NULL;
}

#endif
