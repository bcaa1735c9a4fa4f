/* cuBLAS and NCCL, opened with dlopen when a "cuda" runtime is created
 * rather than linked: libdtorch then loads on machines without them (or
 * without a GPU), and CPU-only processes do not pay ~150 ms to map 570 MB
 * of cuBLAS/cuBLASLt. The function pointers have the headers' own types
 * (__typeof__), so a signature mismatch is a compile error. */
#include "kernels/cuda/rank.h"

#include <cublas_v2.h>
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct {
  pthread_once_t once;
  char blas_why[256];
  void *blas;
  __typeof__(&cublasCreate_v2) create;
  __typeof__(&cublasDestroy_v2) destroy;
  __typeof__(&cublasSetStream_v2) set_stream;
  __typeof__(&cublasGemmStridedBatchedEx) gemm;
  pthread_once_t nccl_once;
  char nccl_why[256];
  void *nccl;
  __typeof__(&ncclGetVersion) nccl_version;
} libs = {PTHREAD_ONCE_INIT, "", NULL, NULL, NULL, NULL, NULL,
          PTHREAD_ONCE_INIT, "", NULL, NULL};

/* the soname of the toolkit built against, then the unversioned name */
static void *open_lib(const char *versioned, const char *plain, char *why,
                      size_t n) {
  void *h = dlopen(versioned, RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen(plain, RTLD_NOW | RTLD_LOCAL);
  if (!h) snprintf(why, n, "dlopen(%s): %s", versioned, dlerror());
  return h;
}

static void *sym(void *h, const char *name, char *why, size_t n) {
  void *p = dlsym(h, name);
  if (!p && !*why) snprintf(why, n, "dlsym(%s): %s", name, dlerror());
  return p;
}

#define STR2(x) #x
#define STR(x) STR2(x)

static void open_blas(void) {
  char *w = libs.blas_why;
  size_t n = sizeof libs.blas_why;
  libs.blas = open_lib("libcublas.so." STR(CUBLAS_VER_MAJOR), "libcublas.so",
                       w, n);
  if (!libs.blas) return;
  libs.create = (__typeof__(libs.create))sym(libs.blas, "cublasCreate_v2", w, n);
  libs.destroy = (__typeof__(libs.destroy))sym(libs.blas, "cublasDestroy_v2", w, n);
  libs.set_stream =
      (__typeof__(libs.set_stream))sym(libs.blas, "cublasSetStream_v2", w, n);
  libs.gemm = (__typeof__(libs.gemm))sym(libs.blas, "cublasGemmStridedBatchedEx",
                                         w, n);
}

static void open_nccl(void) {
  char *w = libs.nccl_why;
  size_t n = sizeof libs.nccl_why;
  libs.nccl = open_lib("libnccl.so." STR(NCCL_MAJOR), "libnccl.so", w, n);
  if (libs.nccl)
    libs.nccl_version = (__typeof__(libs.nccl_version))sym(libs.nccl,
                                                           "ncclGetVersion", w, n);
}

int cuda_libs_open(bool nccl, char *why, size_t n) {
  pthread_once(&libs.once, open_blas);
  if (libs.blas_why[0]) {
    snprintf(why, n, "cuBLAS: %s", libs.blas_why);
    return -1;
  }
  if (!nccl) return 0;
  pthread_once(&libs.nccl_once, open_nccl);
  if (libs.nccl_why[0]) {
    snprintf(why, n, "NCCL: %s", libs.nccl_why);
    return -1;
  }
  return 0;
}

void cuda_gemm_release(cuda_rank *r) {
  if (r->blas && libs.destroy) libs.destroy((cublasHandle_t)r->blas);
  r->blas = NULL;
}

static int blas_fail(cublasStatus_t s, const char *what, char *why, size_t n) {
  snprintf(why, n, "%s: cuBLAS status %d", what, (int)s);
  return -1;
}

static int gemm(cuda_rank *r, int dtype, int64_t batch, int64_t m, int64_t n,
                int64_t k, const void *a, const void *b, void *c, bool nt,
                char *why, size_t nwhy);

/* dt_dtype values (dtorch.h): 0 float32, 1 float64, 2 float16, 3 bfloat16 */
int cuda_gemm(cuda_rank *r, int dtype, int64_t batch, int64_t m, int64_t n,
              int64_t k, const void *a, const void *b, void *c, char *why,
              size_t nwhy) {
  return gemm(r, dtype, batch, m, n, k, a, b, c, false, why, nwhy);
}

int cuda_gemm_nt(cuda_rank *r, int dtype, int64_t m, int64_t n, int64_t k,
                 const void *a, const void *b, void *c, char *why,
                 size_t nwhy) {
  return gemm(r, dtype, 1, m, n, k, a, b, c, true, why, nwhy);
}

/* nt: b is [n, k] (C = A B^T) */
static int gemm(cuda_rank *r, int dtype, int64_t batch, int64_t m, int64_t n,
                int64_t k, const void *a, const void *b, void *c, bool nt,
                char *why, size_t nwhy) {
  if (cuda_libs_open(false, why, nwhy)) return -1;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batch > INT32_MAX) {
    snprintf(why, nwhy, "cuda_gemm: [%lld, %lld] x [%lld, %lld] passes "
             "cuBLAS's int dims", (long long)m, (long long)k, (long long)k,
             (long long)n);
    return -1;
  }
  cudaDataType t;
  cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
  switch (dtype) {
  case 0: t = CUDA_R_32F; break;
  case 1: t = CUDA_R_64F; ct = CUBLAS_COMPUTE_64F; break;
  case 2: t = CUDA_R_16F; break;
  case 3: t = CUDA_R_16BF; break;
  default:
    snprintf(why, nwhy, "cuda_gemm: dtype %d has no cuBLAS GEMM", dtype);
    return -1;
  }
  cudaSetDevice(r->device);
  cublasStatus_t s;
  if (!r->blas) {
    cublasHandle_t h;
    if ((s = libs.create(&h)) != CUBLAS_STATUS_SUCCESS)
      return blas_fail(s, "cublasCreate", why, nwhy);
    r->blas = h;
  }
  cublasHandle_t h = (cublasHandle_t)r->blas;
  if ((s = libs.set_stream(h, r->stream)) != CUBLAS_STATUS_SUCCESS)
    return blas_fail(s, "cublasSetStream", why, nwhy);
  float one = 1, zero = 0;
  double one64 = 1, zero64 = 0;
  const void *alpha = dtype == 1 ? (const void *)&one64 : (const void *)&one;
  const void *beta = dtype == 1 ? (const void *)&zero64 : (const void *)&zero;
  /* row-major C = A B is column-major C^T = B^T A^T: swap the operands;
   * a row-major B [n, k] is the column-major B^T [k, n]: transposed again */
  s = libs.gemm(h, nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m,
                (int)k, alpha, b, t, nt ? (int)k : (int)n, (long long)(k * n),
                a, t, (int)k, (long long)(m * k), beta, c, t, (int)n,
                (long long)(m * n), (int)batch, ct, CUBLAS_GEMM_DEFAULT);
  return s == CUBLAS_STATUS_SUCCESS ? 0
                                    : blas_fail(s, "cublasGemmStridedBatchedEx",
                                                why, nwhy);
}
