/* Host glue of the CUDA backend over the CUDA runtime API: the device
 * probe, one rank's non-blocking stream and stream-ordered memory pool,
 * copies, events and host callbacks. cudart is linked statically and
 * opens the driver (libcuda.so.1) itself on the first call, so on a
 * machine without a driver every entry point here returns an error with
 * cudart's message instead of failing to load. */
#include "kernels/cuda/rank.h"

#include <dlfcn.h>
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
  if (e == cudaErrorInsufficientDriver) {
    /* cudart says "insufficient driver" when there is none at all: tell
     * the two apart */
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
      char what[160];
      snprintf(what, sizeof what, "no CUDA driver (libcuda.so.1 cannot be "
               "loaded), cudaGetDeviceCount");
      return cuda_fail(e, what, why, n);
    }
    dlclose(h);
  }
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

static size_t slot_of(const cuda_rank *r, const void *p) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ULL;
  return (size_t)(h >> 20) & (r->live_cap - 1);
}

static bool live_put(cuda_rank *r, void *p, size_t n) {
  if (2 * (r->live_count + 1) > r->live_cap) { /* grow: keep load <= 1/2 */
    size_t cap = r->live_cap ? 2 * r->live_cap : 1024;
    struct cuda_live *old = r->live;
    size_t ocap = r->live_cap;
    struct cuda_live *nl = calloc(cap, sizeof *nl);
    if (!nl) return false;
    r->live = nl;
    r->live_cap = cap;
    r->live_count = 0;
    for (size_t i = 0; i < ocap; i++)
      if (old[i].p) live_put(r, old[i].p, old[i].n);
    free(old);
  }
  size_t i = slot_of(r, p);
  while (r->live[i].p) i = (i + 1) & (r->live_cap - 1);
  r->live[i].p = p;
  r->live[i].n = n;
  r->live_count++;
  return true;
}

static size_t live_take(cuda_rank *r, const void *p) {
  if (!r->live_cap) return 0;
  size_t mask = r->live_cap - 1, i = slot_of(r, p);
  while (r->live[i].p && r->live[i].p != p) i = (i + 1) & mask;
  if (!r->live[i].p) return 0;
  size_t n = r->live[i].n;
  r->live[i].p = NULL;
  r->live_count--;
  /* backward shift: move later entries of the run into the hole */
  for (size_t j = (i + 1) & mask; r->live[j].p; j = (j + 1) & mask) {
    size_t h = slot_of(r, r->live[j].p);
    if (((j - h) & mask) >= ((j - i) & mask)) {
      r->live[i] = r->live[j];
      r->live[j].p = NULL;
      i = j;
    }
  }
  return n;
}

void cuda_rank_destroy(cuda_rank *r) {
  if (!r) return;
  cudaSetDevice(r->device);
  cudaStreamSynchronize(r->stream);
  cuda_gemm_release(r);
  cudaStreamDestroy(r->stream);
  cudaMemPoolDestroy(r->pool); /* frees what tensors still held */
  free(r->live);
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
  if (!live_put(r, p, bytes)) {
    cudaFreeAsync(p, r->stream);
    snprintf(why, n, "out of host memory for the block list of cuda:%d",
             r->device);
    return NULL;
  }
  r->used += (int64_t)bytes;
  return p;
}

void cuda_rank_free(cuda_rank *r, void *p) {
  if (!p) return;
  cudaSetDevice(r->device);
  cudaFreeAsync(p, r->stream); /* stream order: after the work using p */
  r->used -= (int64_t)live_take(r, p);
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

int cuda_event_sync(void *ev, char *why, size_t n) {
  cudaError_t e = cudaEventSynchronize((cudaEvent_t)ev);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaEventSynchronize", why, n);
}

int cuda_copy_to_host(int device, void *dst, const void *src, size_t bytes,
                      char *why, size_t n) {
  cudaSetDevice(device);
  /* the legacy stream does not wait for the ranks' non-blocking streams */
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaMemcpy (to host)", why, n);
}

int cuda_rank_sync(cuda_rank *r, char *why, size_t n) {
  cudaSetDevice(r->device);
  cudaError_t e = cudaStreamSynchronize(r->stream);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaStreamSynchronize", why, n);
}

int cuda_rank_bind(cuda_rank *r, char *why, size_t n) {
  cudaError_t e = cudaSetDevice(r->device);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaSetDevice", why, n);
}
