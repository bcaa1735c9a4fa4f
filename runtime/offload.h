/* An offload worker: one thread that runs jobs in FIFO order off the rank
 * threads, for work that must wait on a device (a CUDA backend's copy to
 * pageable host memory waits for the stream; done here, the rank thread
 * goes on issuing). Made on the first job; runtime_offload_destroy runs
 * every queued job, then joins. Thread-safe; jobs may not push jobs. */
#ifndef RUNTIME_OFFLOAD_H
#define RUNTIME_OFFLOAD_H

#include "dtorch/dtorch.h"

typedef struct runtime_offload runtime_offload;
typedef void (*runtime_offload_fn)(void *arg);

runtime_offload *runtime_offload_create(void);
/* Queues fn(arg); DT_ERR_OUT_OF_MEMORY (nothing queued) if no job or
 * thread can be made. */
dt_status runtime_offload_push(runtime_offload *w, runtime_offload_fn fn,
                               void *arg);
/* Runs what is queued, stops and frees the worker; NULL: no-op. */
void runtime_offload_destroy(runtime_offload *w);

#endif
