/* Backends: the device half of the engine as one function table per
 * device kind (ggml's backend interface is the model). A runtime holds the
 * table of its device (rt->backend); the rank threads allocate, copy,
 * order and run kernels only through it, and the dispatcher's backend key
 * (CORE_KEY_CPU, CORE_KEY_CUDA) picks the table whose kernels a call runs,
 * so nothing above the engine knows which backend executes.
 *
 * The CPU backend (runtime/backend_cpu.c) is the first implementation:
 * simulated devices (sim/device.h) for memory, memcpy for copies, the
 * rank's in-order ring as its stream (a kernel has finished when it
 * returns, so an event is complete once recorded) and the emulated
 * collectives of sim/. The CUDA backend (runtime/backend_cuda.c) is its
 * second (docs/cuda.md).
 *
 * Kernels are ops/' business and ops/ sits above the engine: each op
 * layer registers its table with runtime_backend_set_kernels when the
 * library loads (ops/registry.c), and a backend without a table (a build
 * without CUDA) has kernels == NULL. Entries marked (optional) may be NULL.
 * Every entry except the registration runs on the rank's own thread. */
#ifndef RUNTIME_BACKEND_H
#define RUNTIME_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "core/call.h"
#include "kernels/cpu/cpu.h"
#include "sim/collectives.h"

typedef enum runtime_copy_kind {
  RUNTIME_COPY_H2D, RUNTIME_COPY_D2H, RUNTIME_COPY_D2D
} runtime_copy_kind;

/* The collectives of one backend over a group of the runtime's ranks
 * (sim/collectives.h gives the semantics: rendezvous per group and
 * sequence number, member order, the watchdog); buffers are device
 * memory of the calling rank. */
typedef struct runtime_backend_coll {
  dt_status (*all_reduce)(sim_coll_group *g, int member, const void *in,
                          void *out, int64_t count, dt_dtype dtype,
                          dt_reduce_op op);
  dt_status (*all_gather)(sim_coll_group *g, int member, const void *in,
                          void *out, const int64_t *counts, dt_dtype dtype);
  dt_status (*reduce_scatter)(sim_coll_group *g, int member, const void *in,
                              void *out, const int64_t *counts,
                              dt_dtype dtype, dt_reduce_op op);
  dt_status (*all_to_all)(sim_coll_group *g, int member, const void *in,
                          const int64_t *send, void *out, const int64_t *recv,
                          dt_dtype dtype);
  dt_status (*broadcast)(sim_coll_group *g, int member, void *buf,
                         int64_t count, dt_dtype dtype, int root);
  dt_status (*barrier)(sim_coll_group *g, int member);
} runtime_backend_coll;

typedef struct runtime_backend {
  const char *name;       /* "cpu", "cuda": the device string's kind */
  core_key key;           /* its dispatch key */
  /* a rank's device comes up / goes away (the rank's thread, at pool
   * start and before it exits) (optional) */
  dt_status (*rank_init)(dt_runtime *rt, int rank);
  void (*rank_fini)(dt_runtime *rt, int rank);
  /* device memory of `rank`: NULL + *err (a static message naming the
   * rank, the request and its usage) when it does not fit */
  void *(*alloc)(dt_runtime *rt, int rank, size_t bytes, const char **err);
  void (*free)(dt_runtime *rt, int rank, void *p);
  void (*trim)(dt_runtime *rt, int rank);              /* (optional) */
  /* what a block holds, for the memory report (optional) */
  void (*tag)(void *p, const char *op, int dtype, int ndim,
              const int64_t *dims);
  /* copies in the rank's stream order */
  dt_status (*copy)(dt_runtime *rt, int rank, void *dst, const void *src,
                    size_t bytes, runtime_copy_kind kind);
  /* in the rank's stream order: dst = src elementwise, both strided
   * views of the rank's device memory (dtypes may differ: a cast), and
   * data[0..n) = value */
  dt_status (*copy_view)(dt_runtime *rt, int rank, const cpu_view *dst,
                         const cpu_view *src);
  dt_status (*fill)(dt_runtime *rt, int rank, void *data, dt_dtype dtype,
                    int64_t n, double value);
  /* events on the rank's stream: record returns a handle (NULL + error),
   * wait makes the stream wait for another rank's event, done polls */
  void *(*event_record)(dt_runtime *rt, int rank);
  dt_status (*event_wait)(dt_runtime *rt, int rank, void *ev);
  bool (*event_done)(void *ev);
  void (*event_destroy)(void *ev);
  /* the rank's stream has run everything issued to it */
  dt_status (*stream_sync)(dt_runtime *rt, int rank);
  /* (optional) copies dense tensor t (bytes of it) to host dst and
   * completes f when done, without making the rank thread wait; takes a
   * reference of its own on t and f. NULL: the engine copies on the rank
   * thread with copy + stream_sync. */
  dt_status (*to_host)(dt_runtime *rt, int rank, dt_tensor *t, void *dst,
                       size_t bytes, struct dt_future *f);
  /* (optional) runs fn(arg) off the rank thread once the work issued to
   * the rank's stream so far is done (barriers, events). NULL: the work is
   * done when the rank thread reaches this point (the CPU) */
  dt_status (*when_done)(dt_runtime *rt, int rank, void (*fn)(void *),
                         void *arg);
  /* per op id: what a rank runs (c->kernel); NULL entries are ops the
   * backend lacks */
  const core_kernel_fn *kernels;
  /* (optional) what runs an op whose kernel entry is NULL on a runtime
   * made with DTORCH_CUDA_FALLBACK=1: the CPU kernel on host copies
   * (ops/host_fallback.c) */
  core_kernel_fn host_fallback;
  const runtime_backend_coll *coll;
} runtime_backend;

/* The kernel rt's ranks run for op: the backend's, else its host fallback
 * when rt allows it, else NULL (the op is unsupported there). */
core_kernel_fn runtime_kernel_of(const dt_runtime *rt, core_op_id op);
/* "op matmul has no cuda kernel yet (DTORCH_CUDA_FALLBACK=1 runs it on the
 * host)": sets the error, returns DT_ERR_UNSUPPORTED */
dt_status runtime_no_kernel(const dt_runtime *rt, const char *api,
                            core_op_id op);

/* The emulated collectives of a runtime whose ranks share one GPU move
 * their data on the ranks' streams (sim_coll_world_set_device): true when
 * rt->coll was made a device world, false for CPU runtimes; a CUDA
 * runtime over several GPUs gets a device world whose collectives go
 * through NCCL (runtime_nccl_call below). */
bool runtime_cuda_coll_attach(dt_runtime *rt);
/* NCCL for runtimes over several GPUs (runtime/coll_nccl.c): the
 * communicators' registry (open), a device world's whole-collective hook
 * (call: one communicator per group, made by its members on first use),
 * and their teardown (close, after the ranks stopped issuing) */
dt_status runtime_nccl_open(dt_runtime *rt);
dt_status runtime_nccl_call(void *rt, int rank, const sim_coll_call *k);
void runtime_nccl_close(dt_runtime *rt);

/* The backend of a dispatch key: NULL when it is not built in. */
runtime_backend *runtime_backend_of_key(core_key key);
/* Registers the kernel table of `key` (the ops layer, at load time). */
void runtime_backend_set_kernels(core_key key, const core_kernel_fn *kernels);
void runtime_backend_set_fallback(core_key key, core_kernel_fn fallback);

/* the emulated collectives of sim/ (both backends: a CUDA runtime's world
 * moves device data, runtime_cuda_coll_attach) */
extern const runtime_backend_coll runtime_sim_coll;
/* The emulated CUDA backend (runtime/backend_emu.c): with
 * DTORCH_CUDA_EMULATE=1 (read once), "cuda" runtimes are host memory
 * behind the CUDA dispatch key, with no kernels (every op through the host
 * fallback) and a synchronous device world: the CUDA path's plumbing on a
 * machine without a GPU. */
extern runtime_backend runtime_backend_emu;
bool runtime_cuda_emulated(void);
dt_status runtime_emu_prepare(int *nranks, bool same_device,
                              int same_device_ranks, int **gpu);
void runtime_emu_coll_attach(dt_runtime *rt);
/* the built-in tables: the CPU's, and the CUDA one (NULL in a build
 * without CUDA; runtime/backend_cuda.c) */
extern runtime_backend runtime_backend_cpu;
runtime_backend *runtime_backend_cuda_table(void);

/* ---- CUDA runtimes (runtime/backend_cuda.c)
 * What a "cuda" runtime needs before its ranks start: the GPU count, the
 * rank -> GPU map (runtime/cuda_map.h) and cuBLAS. *nranks is the ranks
 * asked for (0: one per GPU, or the same-device count); gpu gets one
 * entry per rank (caller frees). Without a CUDA build, driver or GPU:
 * DT_ERR_DEVICE saying which. */
dt_status runtime_cuda_prepare(const char *device, int *nranks,
                               bool same_device, int same_device_ranks,
                               const char *const *rank_devices, int **gpu);
/* makes / frees rank `rank`'s stream and pool (the creating thread) */
dt_status runtime_cuda_rank_open(dt_runtime *rt, int rank);
void runtime_cuda_rank_close(dt_runtime *rt, int rank);

#endif
