/* Philox 4x32-10, the same counter-based generator as the CPU backend
 * (kernels/cpu/random.c, Salmon et al., SC'11), written once for the host
 * and the device: nvcc compiles it into the kernels as __device__ code and
 * into cuda_philox4x32_host (kernels/cuda/random.cu) as host code, which
 * tests/test_cuda_host.c compares with cpu_philox4x32 on a machine without
 * a GPU. Element i of the stream keyed by seed uses counter (lo32(i),
 * hi32(i), 0, 0) and key (lo32(seed), hi32(seed)), as on the CPU, so a
 * tensor's values do not depend on the backend. */
#ifndef KERNELS_CUDA_PHILOX_H
#define KERNELS_CUDA_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define CUDA_HD __host__ __device__ __forceinline__
#else
#define CUDA_HD static inline
#endif

typedef struct cuda_philox_out {
  uint32_t v[4];
} cuda_philox_out;

/* 32 x 32 -> 64-bit products split in halves: __umulhi on the device */
CUDA_HD uint32_t cuda_mulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return (uint32_t)(((uint64_t)a * b) >> 32);
#endif
}

CUDA_HD cuda_philox_out cuda_philox4x32_10(uint32_t c0, uint32_t c1,
                                           uint32_t c2, uint32_t c3,
                                           uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; r++) {
    uint32_t hi0 = cuda_mulhi32(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    uint32_t hi1 = cuda_mulhi32(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  cuda_philox_out o = {{c0, c1, c2, c3}};
  return o;
}

/* element `index` of the stream keyed by seed */
CUDA_HD cuda_philox_out cuda_philox_at(uint64_t seed, uint64_t index) {
  return cuda_philox4x32_10((uint32_t)index, (uint32_t)(index >> 32), 0, 0,
                            (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* 53 random bits to a double in [0, 1): the CPU backend's to_unit */
CUDA_HD double cuda_philox_unit(uint32_t hi, uint32_t lo) {
  uint64_t bits = ((uint64_t)hi << 21) ^ (lo >> 11);
  return (double)(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

#endif
