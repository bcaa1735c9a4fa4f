/* Streaming (non-temporal) stores for large outputs (kernels/cpu/cpu.h).
 *
 * A 64-byte store writes a whole line: the write-combining buffer goes to
 * memory at once. Narrower ones fill the line in pieces: layer_norm
 * [4096, 1024] float32 took 0.89-0.99 ms with 64-byte stores, 0.98-1.09
 * with 16-byte ones, 1.04-1.18 with plain stores (two CPUs, alternating
 * runs). The widest the machine has is picked once, by an ifunc resolver
 * (as the kernels' target_clones are; not under ThreadSanitizer, whose
 * runtime is not up while resolvers run: SSE2 there). */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

/* Where the last-level cache is large, an output of a few times 8 MiB
 * stays in it for the op that reads it next, and plain stores win: on a
 * VM reporting 480 MiB of L3, layer_norm [4096, 1024] (16 MiB out) took
 * 0.76-0.79 ms with plain stores and 0.85-0.93 streamed, [8192, 1024] 1.69
 * against 1.92, while from 64 MiB out streaming won (4.1 against 7.0 ms):
 * the cache it keeps is smaller than it reports, hence an eighth. On the
 * Zen 4 VMs (32 MiB of L3) it is 8 MiB, as before. Asked once (glibc reads
 * it from cpuid); a race only computes the same value twice. */
static _Atomic int64_t min_bytes, min_override; /* override: tests */

void cpu_stream_set_min_bytes(int64_t bytes) {
  atomic_store_explicit(&min_override, bytes > 0 ? bytes : 0, memory_order_relaxed);
}

int64_t cpu_stream_min_bytes(void) {
  int64_t v = atomic_load_explicit(&min_override, memory_order_relaxed);
  if (v > 0) return v;
  v = atomic_load_explicit(&min_bytes, memory_order_relaxed);
  if (v > 0) return v;
  v = CPU_STREAM_MIN_BYTES;
#if defined(_SC_LEVEL3_CACHE_SIZE)
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0 && (int64_t)l3 / 8 > v) v = (int64_t)l3 / 8;
#endif
  atomic_store_explicit(&min_bytes, v, memory_order_relaxed);
  return v;
}

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
