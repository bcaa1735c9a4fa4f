/* Streaming (non-temporal) stores for large outputs (kernels/cpu/cpu.h).
 *
 * A 64-byte store writes a whole line: the write-combining buffer goes to
 * memory at once. Narrower ones fill the line in pieces: layer_norm
 * [4096, 1024] float32 took 0.89-0.99 ms with 64-byte stores, 0.98-1.09
 * with 16-byte ones, 1.04-1.18 with plain stores (two CPUs, alternating
 * runs). The widest the machine has is picked once, by an ifunc resolver
 * (as the kernels' target_clones are; not under ThreadSanitizer, whose
 * runtime is not up while resolvers run: SSE2 there). */
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

#if defined(__x86_64__) && defined(__SSE2__)
#include <immintrin.h>

static void stream16(void *dst, const void *src, size_t bytes) {
  __m128i *d = dst;
  const char *s = src;
  for (size_t k = 0; k < bytes / 16; k++)
    _mm_stream_si128(d + k, _mm_loadu_si128((const __m128i *)(const void *)(s + 16 * k)));
}

#if CPU_HAVE_CLONES
__attribute__((target("avx"))) static void stream32(void *dst, const void *src,
                                                    size_t bytes) {
  __m256i *d = dst;
  const char *s = src;
  for (size_t k = 0; k < bytes / 32; k++)
    _mm256_stream_si256(d + k, _mm256_loadu_si256((const __m256i *)(const void *)(s + 32 * k)));
}

__attribute__((target("avx512f"))) static void stream64(void *dst, const void *src,
                                                        size_t bytes) {
  __m512i *d = dst;
  const char *s = src;
  for (size_t k = 0; k < bytes / 64; k++)
    _mm512_stream_si512(d + k, _mm512_loadu_si512(s + 64 * k));
}

typedef void (*stream_fn)(void *, const void *, size_t);
/* the ifunc resolver: runs once, at relocation */
CPU_RESOLVER static stream_fn resolve_lines(void) {
  __builtin_cpu_init();
  if (CPU_HAS_AVX512F()) return stream64;
  if (__builtin_cpu_supports("avx")) return stream32;
  return stream16;
}
/* whole 64-byte lines: dst 64-byte aligned, bytes a multiple of 64 */
static void stream_lines(void *dst, const void *src, size_t bytes)
    __attribute__((ifunc("resolve_lines")));
#else
static void stream_lines(void *dst, const void *src, size_t bytes) {
  stream16(dst, src, bytes);
}
#endif

void cpu_stream_copy(void *dst, const void *src, size_t bytes) {
  uintptr_t a = (uintptr_t)dst;
  if (!(a & 63) && !(bytes & 63)) stream_lines(dst, src, bytes);
  else if (!(a & 15) && !(bytes & 15)) stream16(dst, src, bytes);
  else memcpy(dst, src, bytes);
}

void cpu_stream_fence(void) { _mm_sfence(); }

#else /* not x86-64: plain stores */
void cpu_stream_copy(void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
}
void cpu_stream_fence(void) {}
#endif
