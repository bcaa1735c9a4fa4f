/* Host glue of the CUDA backend over the CUDA runtime API: the device
 * probe, one rank's non-blocking stream and stream-ordered memory pool,
 * copies, events and host callbacks. cudart is linked statically and
 * opens the driver (libcuda.so.1) itself on the first call, so on a
 * machine without a driver every entry point here returns an error with
 * cudart's message instead of failing to load. */
#include "kernels/cuda/rank.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cuda_fail(cudaError_t e, const char *what, char *why, size_t n) {
  if (why && n)
    snprintf(why, n, "%s: %s (%s)", what, cudaGetErrorString(e),
             cudaGetErrorName(e));
  cudaGetLastError(); /* clear a sticky non-fatal error */
  return -1;
}

int cuda_device_count(char *why, size_t n) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return cuda_fail(e, "cudaGetDeviceCount", why, n);
  if (count == 0) {
    snprintf(why, n, "cudaGetDeviceCount: no CUDA device");
    return -1;
  }
  return count;
}

int cuda_rank_create(cuda_rank **out, int device, int64_t capacity, char *why,
                     size_t n) {
  *out = NULL;
  cuda_rank *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(why, n, "out of host memory");
    return -1;
  }
  r->device = device;
  r->capacity = capacity;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess)
    e = cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    free(r);
    return cuda_fail(e, "cudaStreamCreateWithFlags", why, n);
  }
  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  e = cudaMemPoolCreate(&r->pool, &props);
  if (e == cudaSuccess) {
    /* freed blocks stay in the pool (a caching allocator) up to the
     * rank's capacity instead of going back to the driver at each sync */
    uint64_t keep = capacity > 0 ? (uint64_t)capacity : UINT64_MAX;
    e = cudaMemPoolSetAttribute(r->pool, cudaMemPoolAttrReleaseThreshold,
                                &keep);
  }
  if (e != cudaSuccess) {
    cudaStreamDestroy(r->stream);
    free(r);
    return cuda_fail(e, "cudaMemPoolCreate", why, n);
  }
  *out = r;
  return 0;
}

void cuda_rank_destroy(cuda_rank *r) {
  if (!r) return;
  cudaSetDevice(r->device);
  cudaStreamSynchronize(r->stream);
  cuda_gemm_release(r);
  cudaStreamDestroy(r->stream);
  cudaMemPoolDestroy(r->pool);
  free(r);
}

void *cuda_rank_stream(cuda_rank *r) { return r->stream; }
int cuda_rank_device(const cuda_rank *r) { return r->device; }
int64_t cuda_rank_used(const cuda_rank *r) { return r->used; }

void *cuda_rank_alloc(cuda_rank *r, size_t bytes, char *why, size_t n) {
  if (r->capacity > 0 && r->used + (int64_t)bytes > r->capacity) {
    snprintf(why, n, "CUDA out of memory on cuda:%d: %zu bytes requested, "
             "%lld of the rank's %lld in use", r->device, bytes,
             (long long)r->used, (long long)r->capacity);
    return NULL;
  }
  void *p = NULL;
  cudaSetDevice(r->device);
  cudaError_t e = cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, r->pool,
                                          r->stream);
  if (e != cudaSuccess) {
    char what[96];
    snprintf(what, sizeof what, "cudaMallocFromPoolAsync(%zu bytes, cuda:%d)",
             bytes, r->device);
    cuda_fail(e, what, why, n);
    return NULL;
  }
  r->used += (int64_t)bytes;
  return p;
}

void cuda_rank_free(cuda_rank *r, void *p, size_t bytes) {
  if (!p) return;
  cudaSetDevice(r->device);
  cudaFreeAsync(p, r->stream); /* stream order: after the work using p */
  r->used -= (int64_t)bytes;
}

int cuda_rank_copy(cuda_rank *r, void *dst, const void *src, size_t bytes,
                   cuda_copy_kind kind, char *why, size_t n) {
  static const enum cudaMemcpyKind kinds[] = {
      [CUDA_COPY_H2D] = cudaMemcpyHostToDevice,
      [CUDA_COPY_D2H] = cudaMemcpyDeviceToHost,
      [CUDA_COPY_D2D] = cudaMemcpyDeviceToDevice};
  cudaSetDevice(r->device);
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kinds[kind], r->stream);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaMemcpyAsync", why, n);
}

int cuda_rank_host_fn(cuda_rank *r, void (*fn)(void *), void *arg, char *why,
                      size_t n) {
  cudaSetDevice(r->device);
  cudaError_t e = cudaLaunchHostFunc(r->stream, fn, arg);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaLaunchHostFunc", why, n);
}

void *cuda_event_record(cuda_rank *r, char *why, size_t n) {
  cudaEvent_t ev;
  cudaSetDevice(r->device);
  cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e == cudaSuccess) {
    e = cudaEventRecord(ev, r->stream);
    if (e != cudaSuccess) cudaEventDestroy(ev);
  }
  if (e != cudaSuccess) {
    cuda_fail(e, "cudaEventRecord", why, n);
    return NULL;
  }
  return ev;
}

int cuda_event_wait(cuda_rank *r, void *ev, char *why, size_t n) {
  cudaSetDevice(r->device);
  cudaError_t e = cudaStreamWaitEvent(r->stream, (cudaEvent_t)ev, 0);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaStreamWaitEvent", why, n);
}

bool cuda_event_done(void *ev) {
  return cudaEventQuery((cudaEvent_t)ev) == cudaSuccess;
}

void cuda_event_destroy(void *ev) {
  if (ev) cudaEventDestroy((cudaEvent_t)ev);
}

int cuda_rank_sync(cuda_rank *r, char *why, size_t n) {
  cudaSetDevice(r->device);
  cudaError_t e = cudaStreamSynchronize(r->stream);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaStreamSynchronize", why, n);
}
