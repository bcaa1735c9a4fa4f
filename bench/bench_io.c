/* `dtorch bench io`: safetensors checkpoints and io_uring completions, one
 * JSON object per figure, each against a baseline measured in the same run
 * (docs/io.md):
 *   io_warm_load   a float32 tensor (1 GiB by default) sharded Shard(0)
 *                  over 8 ranks, the file in the page cache, from the call
 *                  until the future completes; against 8 threads each
 *                  pread-ing its shard's range into memory already touched,
 *                  and against an all-core copy of the same bytes
 *                  (bench_stream_bandwidth: a load moves the bytes once
 *                  from the page cache into memory, as a copy does);
 *   io_cold_load   the same with O_DIRECT (options.direct) against 8
 *                  threads doing pread on an O_DIRECT fd into aligned
 *                  bounce buffers and copying out;
 *   io_small_ranges  Shard(1) of a [16384, 1024] float32 file: 512 B runs
 *                  3.5 KiB apart, merged into READVs (merge_gap 4096)
 *                  against one SQE per run (merge_gap -1);
 *   io_save        dt_save_safetensors of the tensor (8 ranks writing,
 *                  fsync and rename included);
 *   notify_ring    a future's completion on one thread until a server
 *                  thread blocked in io_uring_wait_cqe sees the CQE
 *                  (dt_future_notify_ring), against an eventfd write
 *                  until the server blocked in read() sees it.
 * Usage: dtorch bench io [--bytes N[K|M|G]] [--reps N] [--dir DIR]. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_stream.h"
#include "dtorch/dtorch.h"
#include "sched/future.h"

#define RANKS 8
#define COLS 1024

typedef struct cfg { int64_t bytes; int reps; const char *dir; } cfg;

static float pattern(int64_t i) { return (float)(i % 1000003); }

/* ---- the baselines: 8 threads, each its shard's byte range */
typedef struct pr_arg {
  const char *path;
  uint64_t off, len;
  char *dst;
  bool direct;
  int err;
} pr_arg;

static void *pread_range(void *p) {
  pr_arg *a = p;
  int fd = open(a->path, O_RDONLY | (a->direct ? O_DIRECT : 0));
  char *bounce = NULL;
  if (fd < 0 || (a->direct && posix_memalign((void **)&bounce, 4096, 1 << 20))) {
    a->err = errno ? errno : ENOMEM;
    if (fd >= 0) close(fd);
    return NULL;
  }
  uint64_t done = 0;
  while (done < a->len) {
    uint64_t at = a->off + done;
    if (!a->direct) {
      size_t n = a->len - done < (4u << 20) ? a->len - done : (4u << 20);
      ssize_t r = pread(fd, a->dst + done, n, (off_t)at);
      if (r <= 0) { a->err = r < 0 ? errno : ENODATA; break; }
      done += (uint64_t)r;
      continue;
    }
    uint64_t start = at & ~4095ull, skip = at - start;
    ssize_t r = pread(fd, bounce, 1 << 20, (off_t)start);
    if (r <= (ssize_t)skip) { a->err = r < 0 ? errno : ENODATA; break; }
    uint64_t n = (uint64_t)r - skip;
    if (n > a->len - done) n = a->len - done;
    memcpy(a->dst + done, bounce + skip, n);
    done += n;
  }
  free(bounce);
  close(fd);
  return NULL;
}

static double pread_all(const char *path, uint64_t base, uint64_t bytes,
                        char **dst, bool direct) {
  pthread_t th[RANKS];
  pr_arg a[RANKS];
  double t0 = bench_now();
  for (int r = 0; r < RANKS; r++) {
    a[r] = (pr_arg){path, base + bytes / RANKS * (uint64_t)r, bytes / RANKS,
                    dst[r], direct, 0};
    pthread_create(&th[r], NULL, pread_range, &a[r]);
  }
  for (int r = 0; r < RANKS; r++) pthread_join(th[r], NULL);
  double t = bench_now() - t0;
  for (int r = 0; r < RANKS; r++)
    if (a[r].err) {
      fprintf(stderr, "bench io: pread baseline: %s\n", strerror(a[r].err));
      return -1;
    }
  return t;
}

/* ---- dtorch */
static double load_once(const char *path, const dt_load_options *o,
                        dt_tensor **keep) {
  double t0 = bench_now();
  dt_tensor *t = NULL;
  dt_future *f = dt_load_safetensors_async(path, "w", o, &t);
  if (!f || dt_future_wait(f, -1) != DT_OK) {
    fprintf(stderr, "bench io: load: %s\n", f ? dt_future_error(f) : dt_last_error());
    exit(1);
  }
  double t1 = bench_now() - t0;
  dt_future_release(f);
  if (keep) *keep = t;
  else dt_tensor_release(t);
  return t1;
}

/* rank r's shard of a Shard(0) load equals the pattern (first, middle,
 * last rows) */
static bool check_shards(dt_tensor *t, int64_t rows) {
  int64_t per = rows / RANKS * COLS;
  float *buf = malloc((size_t)per * 4);
  bool ok = buf != NULL;
  for (int r = 0; r < RANKS && ok; r++) {
    ok = dt_local_to_host(t, r, buf, (size_t)per * 4) == DT_OK;
    for (int64_t i = 0; ok && i < per; i += per / 7 + 1)
      ok = buf[i] == pattern(per * r + i);
    ok = ok && buf[per - 1] == pattern(per * (r + 1) - 1);
  }
  free(buf);
  return ok;
}

static double best(double a, double b) { return a < b ? a : b; }

static void fig_warm(const cfg *c, const char *path, dt_mesh *m, int64_t rows,
                     uint64_t base, char **dst) {
  const dt_load_options o = {.mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))};
  double tl = 1e300, tp = 1e300;
  dt_tensor *last = NULL;
  load_once(path, &o, NULL); /* the ranks' allocators warm */
  for (int r = 0; r < c->reps; r++) {
    tl = best(tl, load_once(path, &o, r == c->reps - 1 ? &last : NULL));
    tp = best(tp, pread_all(path, base, (uint64_t)c->bytes, dst, false));
  }
  bool ok = check_shards(last, rows);
  dt_tensor_release(last);
  double copy_bps, add_bps;
  bench_stream_bandwidth(c->bytes / 4 / 4 > (1 << 20) ? c->bytes / 4 / 4 : (1 << 20),
                         &copy_bps, &add_bps);
  double tc = 2.0 * (double)c->bytes / copy_bps;
  printf("{\"bench\":\"io_warm_load\",\"ranks\":%d,\"bytes\":%lld,\"load_ms\":%.2f,"
         "\"load_gbs\":%.2f,\"pread_ms\":%.2f,\"vs_pread\":%.3f,\"copy_ms\":%.2f,"
         "\"vs_copy\":%.3f,\"ok\":%s}\n", RANKS, (long long)c->bytes, tl * 1e3,
         (double)c->bytes / tl / 1e9, tp * 1e3, tp / tl, tc * 1e3, tc / tl,
         ok ? "true" : "false");
  if (!ok) exit(1);
}

static void fig_cold(const cfg *c, const char *path, dt_mesh *m, int64_t rows,
                     uint64_t base, char **dst) {
  const dt_load_options o = {.mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0)),
                             .direct = true};
  double tl = 1e300, tp = 1e300;
  dt_tensor *last = NULL;
  for (int r = 0; r < c->reps; r++) {
    tl = best(tl, load_once(path, &o, r == c->reps - 1 ? &last : NULL));
    double p = pread_all(path, base, (uint64_t)c->bytes, dst, true);
    if (p < 0) exit(1);
    tp = best(tp, p);
  }
  bool ok = check_shards(last, rows);
  dt_tensor_release(last);
  printf("{\"bench\":\"io_cold_load\",\"direct\":true,\"ranks\":%d,\"bytes\":%lld,"
         "\"load_ms\":%.2f,\"load_gbs\":%.2f,\"baseline_ms\":%.2f,"
         "\"vs_baseline\":%.3f,\"ok\":%s}\n", RANKS, (long long)c->bytes,
         tl * 1e3, (double)c->bytes / tl / 1e9, tp * 1e3, tp / tl,
         ok ? "true" : "false");
  if (!ok) exit(1);
}

static void fig_small_ranges(const cfg *c, dt_mesh *m) {
  char path[512];
  snprintf(path, sizeof path, "%s/dtorch_bench_io_s1.safetensors", c->dir);
  int64_t rows = c->bytes >= (64 << 20) ? 16384 : 1024;
  dt_tensor *t = dt_full(DT_SHAPE(rows, COLS), 1.5, &(dt_tensor_options){
      .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  if (dt_save_safetensors(path, &t, (const char *[]){"w"}, 1) != DT_OK) {
    fprintf(stderr, "bench io: %s\n", dt_last_error());
    exit(1);
  }
  dt_tensor_release(t);
  dt_load_options merged = {.mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(1))};
  dt_load_options single = merged;
  single.merge_gap = -1;
  double tm = 1e300, ts = 1e300;
  for (int r = 0; r < c->reps; r++) {
    tm = best(tm, load_once(path, &merged, NULL));
    ts = best(ts, load_once(path, &single, NULL));
  }
  printf("{\"bench\":\"io_small_ranges\",\"shape\":[%lld,%d],\"placement\":\"S(1)\","
         "\"ranks\":%d,\"run_bytes\":%d,\"merged_ms\":%.2f,\"one_sqe_per_run_ms\":%.2f,"
         "\"vs_one_sqe_per_run\":%.3f}\n", (long long)rows, COLS, RANKS,
         COLS / RANKS * 4, tm * 1e3, ts * 1e3, ts / tm);
  unlink(path);
}

/* ---- notify_ring against an eventfd */
typedef struct lat {
  struct io_uring ring;
  int efd;
  bool ring_mode;
  _Atomic int64_t sent_ns;  /* the completer's timestamp */
  double *samples;
  int n;
} lat;

static int64_t now_ns(void) { return (int64_t)(bench_now() * 1e9); }

static void *server(void *p) {
  lat *l = p;
  for (int i = 0; i < l->n; i++) {
    if (l->ring_mode) {
      struct io_uring_cqe *cqe;
      io_uring_wait_cqe(&l->ring, &cqe);
      io_uring_cqe_seen(&l->ring, cqe);
    } else {
      uint64_t v;
      if (read(l->efd, &v, sizeof v) != sizeof v) break;
    }
    l->samples[i] = (double)(now_ns() - atomic_load(&l->sent_ns)) / 1e3;
  }
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* median and p90 in µs of n completions */
static void latency(lat *l, bool ring_mode, double *med, double *p90) {
  l->ring_mode = ring_mode;
  pthread_t th;
  pthread_create(&th, NULL, server, l);
  for (int i = 0; i < l->n; i++) {
    dt_future *f = ring_mode ? sched_future_new() : NULL;
    if (f) dt_future_notify_ring(f, l->ring.ring_fd, (uint64_t)i);
    usleep(200); /* the server is asleep in its wait */
    atomic_store(&l->sent_ns, now_ns());
    if (f) sched_future_complete(f, DT_OK, NULL);
    else if (write(l->efd, &(uint64_t){1}, 8) != 8) break;
    while (l->samples[i] == 0) usleep(10);
    dt_future_release(f);
  }
  pthread_join(th, NULL);
  qsort(l->samples, (size_t)l->n, sizeof *l->samples, cmp);
  *med = l->samples[l->n / 2];
  *p90 = l->samples[l->n * 9 / 10];
  memset(l->samples, 0, sizeof(double) * (size_t)l->n);
}

static void fig_notify(const cfg *c) {
  lat l = {.n = 200 * c->reps};
  l.samples = calloc((size_t)l.n, sizeof(double));
  l.efd = eventfd(0, 0);
  if (io_uring_queue_init(64, &l.ring, 0) < 0 || l.efd < 0 || !l.samples) {
    fprintf(stderr, "bench io: no io_uring or eventfd here\n");
    exit(1);
  }
  double rm, rp, em, ep;
  latency(&l, true, &rm, &rp);
  latency(&l, false, &em, &ep);
  printf("{\"bench\":\"notify_ring\",\"samples\":%d,\"median_us\":%.2f,"
         "\"p90_us\":%.2f,\"eventfd_median_us\":%.2f,\"eventfd_p90_us\":%.2f,"
         "\"ratio\":%.3f}\n", l.n, rm, rp, em, ep, rm / em);
  io_uring_queue_exit(&l.ring);
  close(l.efd);
  free(l.samples);
}

/* ---- the file and the run */
static int64_t parse_bytes(const char *s) {
  char *e;
  double v = strtod(s, &e);
  int64_t k = *e == 'K' ? 1 << 10 : *e == 'M' ? 1 << 20 : *e == 'G' ? 1 << 30 : 1;
  return (int64_t)(v * (double)k);
}

static int usage(void) {
  fprintf(stderr, "dtorch bench io [--bytes N[K|M|G]] [--reps N] [--dir DIR]\n");
  return 2;
}

int bench_io(int argc, char **argv) {
  cfg c = {.bytes = 1ll << 30, .reps = 5, .dir = "/tmp"};
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--bytes") && i + 1 < argc) c.bytes = parse_bytes(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) c.reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc) c.dir = argv[++i];
    else return usage();
  }
  int64_t unit = (int64_t)RANKS * COLS * 4;
  if (c.reps < 1 || c.bytes < unit) return usage();
  int64_t rows = c.bytes / unit * RANKS;
  c.bytes = rows * COLS * 4;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = RANKS});
  dt_runtime_set_current(rt);
  dt_mesh *m = dt_mesh_init(rt, "cpu", DT_SHAPE(RANKS), NULL);
  char path[512];
  snprintf(path, sizeof path, "%s/dtorch_bench_io.safetensors", c.dir);
  float *host = malloc((size_t)c.bytes);
  char *dst[RANKS];
  for (int r = 0; r < RANKS; r++) {
    dst[r] = malloc((size_t)c.bytes / RANKS);
    if (dst[r]) memset(dst[r], 0, (size_t)c.bytes / RANKS);
  }
  for (int64_t i = 0; i < rows * COLS; i++) host[i] = pattern(i);
  dt_tensor *t = dt_from_host(host, DT_SHAPE(rows, COLS), &(dt_tensor_options){
      .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  free(host);
  double ts = 1e300;
  for (int r = 0; r < (c.reps < 3 ? c.reps : 3); r++) {
    dt_runtime_synchronize(rt);
    double t0 = bench_now();
    if (dt_save_safetensors(path, &t, (const char *[]){"w"}, 1) != DT_OK) {
      fprintf(stderr, "bench io: %s\n", dt_last_error());
      return 1;
    }
    ts = best(ts, bench_now() - t0);
  }
  dt_tensor_release(t);
  printf("{\"bench\":\"io_save\",\"ranks\":%d,\"bytes\":%lld,\"save_ms\":%.2f,"
         "\"save_gbs\":%.2f}\n", RANKS, (long long)c.bytes, ts * 1e3,
         (double)c.bytes / ts / 1e9);
  dt_safetensors_info *info = dt_safetensors_index(path);
  uint64_t base = info ? info->tensors[0].offset : 0;
  dt_safetensors_info_free(info);
  fig_warm(&c, path, m, rows, base, dst);
  fig_cold(&c, path, m, rows, base, dst);
  fig_small_ranges(&c, m);
  fig_notify(&c);
  for (int r = 0; r < RANKS; r++) free(dst[r]);
  unlink(path);
  dt_mesh_release(m);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  return 0;
}
