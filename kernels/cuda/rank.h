/* One rank's CUDA state, shared by the host glue files of kernels/cuda
 * (not part of the layer's interface, kernels/cuda/cuda.h). */
#ifndef KERNELS_CUDA_RANK_H
#define KERNELS_CUDA_RANK_H

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda.h"

struct cuda_rank {
  int device;
  cudaStream_t stream;    /* non-blocking: never syncs with stream 0 */
  cudaMemPool_t pool;     /* this rank's own pool: OOM is per rank */
  int64_t capacity;       /* bytes; 0 = the device's memory */
  int64_t used;           /* live bytes (rank thread only) */
  /* sizes of the live blocks, for the usage count at free: open
   * addressing, linear probing, backward-shift deletion (rank thread) */
  struct cuda_live { void *p; size_t n; } *live;
  size_t live_cap, live_count;
  void *blas;             /* cublasHandle_t, made on first GEMM */
};

/* "what: cudaErrorX (message)" into why; returns -1 */
int cuda_fail(cudaError_t e, const char *what, char *why, size_t n);
/* destroys r's cuBLAS handle, if any (kernels/cuda/libs.c) */
void cuda_gemm_release(cuda_rank *r);

#endif
