/* The memory baselines (bench/bench_stream.h). */
#include "bench/bench_stream.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef struct stream_part { const bench_stream *x; int i; } stream_part;

static void *stream_part_run(void *p) {
  const stream_part *w = p;
  const bench_stream *x = w->x;
  int64_t lo = x->n * w->i / x->threads, hi = x->n * (w->i + 1) / x->threads;
  if (x->copy) {
    memcpy(x->c + lo, x->b + lo, (size_t)(hi - lo) * sizeof(float));
  } else {
    const float *restrict a = x->a, *restrict b = x->b;
    float *restrict c = x->c;
    for (int64_t i = lo; i < hi; i++) c[i] = a[i] + b[i];
  }
  __asm__ volatile("" ::"r"(x->c) : "memory"); /* keep the stores */
  return NULL;
}

void bench_stream_run(const bench_stream *x) {
  pthread_t t[64];
  stream_part w[64];
  for (int i = 0; i < x->threads; i++) {
    w[i] = (stream_part){x, i};
    if (i && pthread_create(&t[i], NULL, stream_part_run, &w[i]) != 0) {
      fprintf(stderr, "bench stream: cannot start a thread\n");
      exit(1);
    }
  }
  stream_part_run(&w[0]); /* the calling thread is thread 0 */
  for (int i = 1; i < x->threads; i++) pthread_join(t[i], NULL);
}

double bench_stream_bandwidth(int64_t n, double *copy_bps, double *add_bps) {
  size_t bytes = (size_t)n * sizeof(float);
  float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
  if (!a || !b || !c) {
    free(a);
    free(b);
    free(c);
    return 0;
  }
  for (int64_t i = 0; i < n; i++) { a[i] = 1.0f; b[i] = 2.0f; c[i] = 0.0f; }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
  bench_stream add = {a, b, c, n, threads, false}, cp = add;
  cp.copy = true;
  double t_add = 1e300, t_cpy = 1e300;
  for (int r = 0; r < 3; r++) {
    double t0 = bench_now();
    bench_stream_run(&add);
    double t1 = bench_now();
    bench_stream_run(&cp);
    double t2 = bench_now();
    if (t1 - t0 < t_add) t_add = t1 - t0;
    if (t2 - t1 < t_cpy) t_cpy = t2 - t1;
  }
  free(a);
  free(b);
  free(c);
  *copy_bps = 2.0 * (double)bytes / t_cpy;
  /* the add's plain stores read each line of c before writing it (the
   * read-for-ownership): 4 arrays of traffic; memcpy of this size streams
   * its stores (no RFO): 2 */
  *add_bps = 4.0 * (double)bytes / t_add;
  return *copy_bps > *add_bps ? *copy_bps : *add_bps;
}

/* ---- the same data movement as a collective, as plain all-core loops */
#define MIX_BLOCK 256 /* floats summed on the stack, then streamed out */

/* n floats from src to dst, streaming (4 loads, then 4 stores per line) */
static inline void store_stream(float *dst, const float *src, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  if (((uintptr_t)dst & 15) == 0)
    for (; i + 16 <= n; i += 16) {
      __m128 a = _mm_loadu_ps(src + i), b = _mm_loadu_ps(src + i + 4);
      __m128 c = _mm_loadu_ps(src + i + 8), d = _mm_loadu_ps(src + i + 12);
      _mm_stream_ps(dst + i, a);
      _mm_stream_ps(dst + i + 4, b);
      _mm_stream_ps(dst + i + 8, c);
      _mm_stream_ps(dst + i + 12, d);
    }
#endif
  if (i < n) memcpy(dst + i, src + i, (size_t)(n - i) * sizeof(float));
}

/* one input: streamed straight to every output, block by block; more:
 * summed into a stack block first */
static void mix_range(const bench_mix *t, int64_t lo, int64_t hi) {
  _Alignas(64) float acc[MIX_BLOCK];
  for (int64_t b = lo; b < hi; b += MIX_BLOCK) {
    int64_t len = hi - b < MIX_BLOCK ? hi - b : MIX_BLOCK;
    const float *src = t->in[0] + b;
    if (t->nin > 1) {
      memcpy(acc, src, (size_t)len * sizeof(float));
      for (int k = 1; k < t->nin; k++) {
        const float *x = t->in[k] + b;
        for (int64_t i = 0; i < len; i++) acc[i] += x[i];
      }
      src = acc;
    }
    for (int j = 0; j < t->nout; j++) store_stream(t->out[j] + b, src, len);
  }
}

typedef struct mix_part { const bench_mix *t; int nt, i, threads; } mix_part;

static void *mix_part_run(void *p) {
  const mix_part *w = p;
  for (int k = 0; k < w->nt; k++) {
    int64_t n = w->t[k].len;
    int64_t lo = n * w->i / w->threads / 16 * 16;
    int64_t hi = w->i + 1 == w->threads ? n : n * (w->i + 1) / w->threads / 16 * 16;
    if (lo < hi) mix_range(&w->t[k], lo, hi);
  }
#if defined(__SSE2__)
  _mm_sfence();
#endif
  return NULL;
}

double bench_stream_mix(const bench_mix *tasks, int ntasks) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
  pthread_t t[64];
  mix_part w[64];
  double t0 = bench_now();
  for (int i = 0; i < threads; i++) {
    w[i] = (mix_part){tasks, ntasks, i, threads};
    if (i && pthread_create(&t[i], NULL, mix_part_run, &w[i]) != 0) {
      fprintf(stderr, "bench stream: cannot start a thread\n");
      exit(1);
    }
  }
  mix_part_run(&w[0]);
  for (int i = 1; i < threads; i++) pthread_join(t[i], NULL);
  return bench_now() - t0;
}

double bench_plain_best(bench_coll k, int n, const float *const *ins,
                        float *const *outs, int64_t len, int reps) {
  bench_mix t[BENCH_PLAIN_MAX];
  int nt = 1;
  if (n < 1 || n > BENCH_PLAIN_MAX) {
    fprintf(stderr, "bench_plain_best: n %d is not in 1..%d\n", n, BENCH_PLAIN_MAX);
    exit(1);
  }
  switch (k) {
  case BENCH_ALL_REDUCE: t[0] = (bench_mix){ins, n, outs, n, len}; break;
  case BENCH_ALL_GATHER: t[0] = (bench_mix){ins, 1, outs, n, len}; break;
  case BENCH_REDUCE_SCATTER: t[0] = (bench_mix){ins, n, outs, 1, len}; break;
  default:
    nt = n;
    for (int j = 0; j < n; j++) t[j] = (bench_mix){ins + j, 1, outs + j, 1, len};
  }
  double best = 1e300;
  for (int r = 0; r < reps; r++) {
    double sec = bench_stream_mix(t, nt);
    if (sec < best) best = sec;
  }
  return best;
}

/* ---- read and streaming-write bandwidth */
typedef struct rw_part {
  float *data;
  int64_t lo, hi;      /* floats, multiples of 16 */
  bool write;
  float sum;           /* the read's result, kept */
} rw_part;

static void *rw_part_run(void *p) {
  rw_part *w = p;
  float *d = w->data;
  if (w->write) {
#if defined(__SSE2__)
    __m128 x = _mm_set1_ps(1.0f);
    for (int64_t i = w->lo; i < w->hi; i += 4) _mm_stream_ps(d + i, x);
    _mm_sfence();
#else
    for (int64_t i = w->lo; i < w->hi; i++) d[i] = 1.0f;
#endif
    return NULL;
  }
  float s[16] = {0}; /* 16 independent sums: the loads, not the adds, bound it */
  for (int64_t i = w->lo; i < w->hi; i += 16)
    for (int k = 0; k < 16; k++) s[k] += d[i + k];
  for (int k = 1; k < 16; k++) s[0] += s[k];
  w->sum = s[0];
  return NULL;
}

static double rw_pass(float *data, int64_t n, int threads, bool write) {
  pthread_t t[64];
  rw_part w[64];
  for (int i = 0; i < threads; i++)
    w[i] = (rw_part){data, n * i / threads / 16 * 16,
                     n * (i + 1) / threads / 16 * 16, write, 0};
  double t0 = bench_now();
  for (int i = 1; i < threads; i++)
    if (pthread_create(&t[i], NULL, rw_part_run, &w[i]) != 0) {
      fprintf(stderr, "bench stream: cannot start a thread\n");
      exit(1);
    }
  rw_part_run(&w[0]);
  for (int i = 1; i < threads; i++) pthread_join(t[i], NULL);
  double dt = bench_now() - t0;
  float total = 0;
  for (int i = 0; i < threads; i++) total += w[i].sum;
  __asm__ volatile("" ::"r"(total)); /* keep the loads */
  return dt;
}

bool bench_stream_read_write(int64_t n, bench_membw *out) {
  n = n / 16 * 16;
  float *a = aligned_alloc(64, (size_t)n * sizeof(float));
  if (!a) return false;
  for (int64_t i = 0; i < n; i++) a[i] = 1.0f; /* fault every page in */
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
  double tr = 1e300, tw = 1e300;
  for (int r = 0; r < 10; r++) { /* noise only ever lowers a bandwidth */
    double t = rw_pass(a, n, threads, false);
    if (t < tr) tr = t;
    t = rw_pass(a, n, threads, true);
    if (t < tw) tw = t;
  }
  free(a);
  out->read_bps = (double)n * sizeof(float) / tr;
  out->write_bps = (double)n * sizeof(float) / tw;
  return true;
}
