/* Same-dtype copies whose input walks memory across the output's rows
 * (x.transpose(0, 1).contiguous(), permutes): the iterator's two innermost
 * dims are copied in T x T tiles. Output order alone reads one element per
 * cache line of the input and touches a new page every few elements
 * ([4096, 1024] took 17 ms); inside a tile both sides stay in L1. A chunk
 * (what idle ranks steal) is a B x B block of tiles: B rows on either side,
 * so its pages fit the TLB (a band of T rows across a 4096-row input
 * touched 4096 pages and ran at 4 GB/s). Every element is copied once,
 * whoever copies it. */
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

#define T 8   /* a tile: 8 x 8 elements */
#define B 256 /* a chunk: B x B elements (CPU_GRAIN), tiles in its rows */

typedef struct tr_job {
  const cpu_iter *it;
  size_t es;
  int64_t nb0, nb1;   /* blocks along dims 0 and 1 per outer index */
} tr_job;

/* One tile: rows [r0, r1) of dim 1 and [c0, c1) of dim 0, element by
 * element (edges, and element sizes other than 4) */
#define TILE_LOOP(W)                                                        \
  for (int64_t r = r0; r < r1; r++)                                         \
    for (int64_t c = c0; c < c1; c++)                                       \
      memcpy(o + r * os1 + c * os0, a + r * as1 + c * as0, W);              \
  break

static void tile(char *o, const char *a, int64_t os0, int64_t os1,
                 int64_t as0, int64_t as1, int64_t r0, int64_t r1,
                 int64_t c0, int64_t c1, size_t es) {
  switch (es) {
  case 1: TILE_LOOP(1);
  case 2: TILE_LOOP(2);
  case 4: TILE_LOOP(4);
  default: TILE_LOOP(8);
  }
}
#undef TILE_LOOP

/* An 8 x 8 tile of 4-byte elements, both sides unit-stride along their
 * own rows: the eight input rows of 8 are loaded as vectors, transposed by
 * three rounds of shuffles (pairs of rows interleaved by element, then by
 * pairs, then by halves: 24 shuffles, vunpck/vshufps/vperm2 on AVX2) and
 * stored as eight output rows, so each cache line is touched in full runs
 * and an element costs no scalar load (the scalar version: 64 loads and
 * 48 inserts per tile). Bits are copied, whatever the 4-byte type. */
typedef uint32_t v8u __attribute__((vector_size(32)));
#if defined(__clang__) /* the same shuffle, spelt with constant indices */
#define SHUF(x, y, ...) __builtin_shufflevector((x), (y), __VA_ARGS__)
#else
#define SHUF(x, y, ...) __builtin_shuffle((x), (y), (v8u){__VA_ARGS__})
#endif
static inline __attribute__((always_inline)) void
micro8_4(char *restrict o, const char *restrict a, int64_t os1, int64_t as0) {
  v8u r[8], t[8], s[8];
  for (int c = 0; c < 8; c++) memcpy(&r[c], a + c * as0, sizeof r[c]);
  for (int k = 0; k < 8; k += 2) { /* rows k, k+1 interleaved */
    t[k] = SHUF(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[k + 1] = SHUF(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int k = 0; k < 8; k += 4) /* pairs of pairs */
    for (int h = 0; h < 2; h++) {
      s[k + 2 * h] = SHUF(t[k + h], t[k + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      s[k + 2 * h + 1] = SHUF(t[k + h], t[k + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int c = 0; c < 4; c++) { /* halves: output rows c and c + 4 */
    v8u lo = SHUF(s[c], s[c + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    v8u hi = SHUF(s[c], s[c + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    memcpy(o + c * os1, &lo, sizeof lo);
    memcpy(o + (c + 4) * os1, &hi, sizeof hi);
  }
}
#undef SHUF

CPU_CLONES static void tr_range(int64_t begin, int64_t end, void *arg) {
  const tr_job *j = arg;
  const cpu_iter *it = j->it;
  int64_t s0 = it->sizes[0], s1 = it->sizes[1];
  for (int64_t u = begin; u < end; u++) {
    int64_t blocks = j->nb0 * j->nb1, outer = u / blocks;
    int64_t b1 = (u % blocks) / j->nb0 * B, b0 = (u % blocks) % j->nb0 * B;
    char *o = it->base[0];
    const char *a = it->base[1];
    for (int d = 2; d < it->ndim; d++) { /* the outer multi-index */
      int64_t i = outer % it->sizes[d];
      outer /= it->sizes[d];
      o += i * it->strides[0][d];
      a += i * it->strides[1][d];
    }
    int64_t e1 = b1 + B < s1 ? b1 + B : s1, e0 = b0 + B < s0 ? b0 + B : s0;
    int64_t os1 = it->strides[0][1], as0 = it->strides[1][0];
    bool fast = j->es == 4 && it->strides[1][1] == 4;
    for (int64_t r0 = b1; r0 < e1; r0 += T)
      for (int64_t c0 = b0; c0 < e0; c0 += T) {
        int64_t r1 = r0 + T < e1 ? r0 + T : e1, c1 = c0 + T < e0 ? c0 + T : e0;
        if (fast && r1 - r0 == T && c1 - c0 == T) {
          micro8_4(o + r0 * os1 + c0 * 4, a + r0 * 4 + c0 * as0, os1, as0);
          continue;
        }
        tile(o, a, it->strides[0][0], os1, as0, it->strides[1][1], r0, r1,
             c0, c1, j->es);
      }
  }
}

bool cpu_copy_transposed(const cpu_iter *it, size_t es) {
  /* worth it when the output runs along dim 0 and the input does not, but
   * does along dim 1 (the input's rows cross the output's) */
  if (it->nops != 2 || it->ndim < 2 || it->numel < T * T) return false;
  int64_t e = (int64_t)es;
  if (it->strides[0][0] != e || it->strides[1][0] == e ||
      (it->strides[1][1] != e && it->strides[1][1] != -e))
    return false;
  tr_job j = {it, es, (it->sizes[0] + B - 1) / B, (it->sizes[1] + B - 1) / B};
  int64_t units = it->numel / (it->sizes[0] * it->sizes[1]) * j.nb0 * j.nb1;
  cpu_parallel_for(units, 1, tr_range, &j);
  return true;
}
