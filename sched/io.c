/* Box I/O with io_uring (io.h; docs/io.md).
 *
 * Buffered: each run (or up to PIECE_MAX of it) is one READ/WRITE SQE;
 * with merge_gap, runs closer than merge_gap become one READV whose
 * iovecs alternate between the destination and a scratch buffer that
 * swallows the gaps (fewer SQEs for a non-leading-dim shard, at the cost
 * of reading the gap bytes). Up to `depth` SQEs are in flight; a short
 * completion (only at end of file, or a signal) finishes synchronously.
 * Direct: aligned DIRECT_CHUNK pieces of the file are read into this
 * thread's registered bounce buffers (READ_FIXED), skipping chunks no run
 * touches, and each completed chunk is copied out into the runs it
 * covers while the others are in flight.
 *
 * The file is in a registered slot (IOSQE_FIXED_FILE) for the call, and
 * the slot is cleared after. The ring and bounce buffers belong to the
 * calling thread (a rank's thread: one record at a time), so nothing
 * here is shared between threads. */
#include "sched/io.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dtorch/dtorch.h"
#include "sched/fault_table.h"

#define PIECE_MAX (32u << 20)
#define MAX_IOV 64
#define GAP_MAX (1 << 20)
#define DIRECT_CHUNK (1u << 20)
#define DIRECT_BUFS 8

typedef struct tls_ring {
  struct io_uring ring;
  int state;         /* 1 made, -errno failed */
  bool files;        /* one registered file slot */
  char *bounce;      /* DIRECT_BUFS x DIRECT_CHUNK, aligned */
  bool bufs;         /* bounce registered */
} tls_ring;

static __thread tls_ring *tr;
static pthread_key_t tr_key;
static pthread_once_t tr_once = PTHREAD_ONCE_INIT;

static void tr_free(void *p) {
  tls_ring *r = p;
  if (r->state == 1) io_uring_queue_exit(&r->ring);
  free(r->bounce);
  free(r);
}
static void tr_key_make(void) { pthread_key_create(&tr_key, tr_free); }

/* this thread's ring, made on first use; NULL + *err when it cannot be */
static tls_ring *ring_get(int *err) {
  if (tr) {
    *err = tr->state < 0 ? tr->state : 0;
    return tr->state == 1 ? tr : NULL;
  }
  pthread_once(&tr_once, tr_key_make);
  tls_ring *r = calloc(1, sizeof *r);
  if (!r) {
    *err = -ENOMEM;
    return NULL;
  }
  r->state = io_uring_queue_init(SCHED_IO_MAX_DEPTH, &r->ring, 0);
  if (r->state == 0) {
    r->state = 1;
    r->files = io_uring_register_files_sparse(&r->ring, 1) == 0;
  }
  tr = r;
  pthread_setspecific(tr_key, r);
  *err = r->state < 0 ? r->state : 0;
  return r->state == 1 ? r : NULL;
}

static int direct_bufs(tls_ring *r) {
  if (r->bounce) return 0;
  if (posix_memalign((void **)&r->bounce, SCHED_IO_DIRECT_ALIGN,
                     (size_t)DIRECT_BUFS * DIRECT_CHUNK))
    return -ENOMEM;
  struct iovec v[DIRECT_BUFS];
  for (int i = 0; i < DIRECT_BUFS; i++)
    v[i] = (struct iovec){r->bounce + (size_t)i * DIRECT_CHUNK, DIRECT_CHUNK};
  r->bufs = io_uring_register_buffers(&r->ring, v, DIRECT_BUFS) == 0;
  return 0;
}

/* ---- the runs of a box, in file order */
typedef struct runs {
  int n;                             /* outer dims iterated */
  int64_t len[DT_MAX_DIMS], idx[DT_MAX_DIMS];
  uint64_t stride[DT_MAX_DIMS];      /* file bytes per step */
  uint64_t first, size;              /* first run's offset, bytes per run */
  int64_t count, next;
  /* the current run: file offset, memory, bytes (have: one is current) */
  bool have;
  uint64_t off;
  char *mem;
  char *mem0;
} runs;

static bool runs_next(runs *r) {
  if (r->next == r->count) return r->have = false;
  uint64_t off = r->first;
  for (int i = 0; i < r->n; i++) off += (uint64_t)r->idx[i] * r->stride[i];
  r->off = off;
  r->mem = r->mem0 + (uint64_t)r->next * r->size;
  for (int i = r->n - 1; i >= 0 && ++r->idx[i] == r->len[i]; i--) r->idx[i] = 0;
  r->next++;
  return r->have = true;
}

static void runs_init(runs *r, const sched_io_box *b) {
  memset(r, 0, sizeof *r);
  uint64_t gs[DT_MAX_DIMS], s = b->es;
  for (int i = b->ndim - 1; i >= 0; i--) {
    gs[i] = s;
    s *= (uint64_t)b->dims[i];
  }
  int k = b->ndim - 1;
  while (k >= 0 && b->len[k] == b->dims[k]) k--;
  /* dims after k span the global dims: one run covers dim k's box */
  r->size = k >= 0 ? (uint64_t)b->len[k] * gs[k] : s;
  r->first = b->base;
  r->count = 1;
  for (int i = 0; i < b->ndim; i++) {
    r->first += (uint64_t)b->off[i] * gs[i];
    if (b->len[i] == 0) r->count = 0;
  }
  r->n = k > 0 ? k : 0;
  for (int i = 0; i < r->n; i++) {
    r->len[i] = b->len[i];
    r->stride[i] = gs[i];
    r->count *= b->len[i];
  }
  if (r->size == 0) r->count = 0;
  r->mem0 = b->mem;
  runs_next(r);
}

int64_t sched_io_box_runs(const sched_io_box *b) {
  runs r;
  runs_init(&r, b);
  return r.count;
}

/* ---- the rest of a short transfer, synchronously */
static int finish_sync(int fd, bool write, struct iovec *iov, int niov,
                       uint64_t off, uint64_t done) {
  int i = 0;
  off += done;
  for (; i < niov && done >= iov[i].iov_len; i++) done -= iov[i].iov_len;
  if (i < niov) {
    iov[i].iov_base = (char *)iov[i].iov_base + done;
    iov[i].iov_len -= done;
  }
  while (i < niov) {
    ssize_t n = write ? pwritev(fd, iov + i, niov - i, (off_t)off)
                      : preadv(fd, iov + i, niov - i, (off_t)off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) return -ENODATA;
    off += (uint64_t)n;
    for (; i < niov && (size_t)n >= iov[i].iov_len; i++) n -= (ssize_t)iov[i].iov_len;
    if (i < niov) {
      iov[i].iov_base = (char *)iov[i].iov_base + n;
      iov[i].iov_len -= (size_t)n;
    }
  }
  return 0;
}

/* ---- an in-flight piece */
typedef struct slot {
  uint64_t off, bytes;
  int niov;
  struct iovec iov[MAX_IOV];
  /* direct: the chunk's first run and how far the chunk's runs reach */
  runs at;
  uint64_t need_end;
} slot;

typedef struct engine {
  tls_ring *r;
  const sched_io_opts *o;
  int fd;          /* for SQEs: the fixed slot 0, or the fd */
  slot *slots;
  int *free_ids, nfree, inflight, depth;
  char *scratch;
  int err;
  uint64_t fail_off;
  sched_io_stats st;
} engine;

static void fail(engine *e, int err, uint64_t off) {
  if (e->err) return;
  e->err = err;
  e->fail_off = off;
}

static void add_iov(slot *s, void *p, uint64_t n) {
  s->iov[s->niov++] = (struct iovec){p, (size_t)n};
  s->bytes += n;
}

/* a buffered piece: the current run (or PIECE_MAX of it), then more runs
 * across gaps while merging allows */
static void build_piece(engine *e, runs *r, slot *s, uint64_t *left) {
  s->niov = 0;
  s->bytes = 0;
  s->off = r->off + (r->size - *left);
  for (;;) {
    uint64_t take = *left < PIECE_MAX - s->bytes ? *left : PIECE_MAX - s->bytes;
    add_iov(s, r->mem + (r->size - *left), take);
    *left -= take;
    if (*left) return; /* the piece is full */
    uint64_t end = s->off + s->bytes;
    if (!runs_next(r)) return;
    *left = r->size;
    uint64_t gap = r->off - end;
    if (!e->scratch || gap > (uint64_t)e->o->merge_gap || s->niov + 2 > MAX_IOV ||
        s->bytes + gap + r->size > PIECE_MAX)
      return;
    if (gap) add_iov(s, e->scratch, gap);
  }
}

static int take_slot(engine *e) { return e->free_ids[--e->nfree]; }

static void submit_piece(engine *e, int id) {
  slot *s = &e->slots[id];
  struct io_uring_sqe *q = io_uring_get_sqe(&e->r->ring);
  if (e->o->direct) {
    void *buf = e->r->bounce + (size_t)id * DIRECT_CHUNK;
    if (e->r->bufs)
      io_uring_prep_read_fixed(q, e->fd, buf, (unsigned)s->bytes, s->off, id);
    else
      io_uring_prep_read(q, e->fd, buf, (unsigned)s->bytes, s->off);
  } else if (s->niov == 1 && e->o->write) {
    io_uring_prep_write(q, e->fd, s->iov[0].iov_base, (unsigned)s->bytes, s->off);
  } else if (s->niov == 1) {
    io_uring_prep_read(q, e->fd, s->iov[0].iov_base, (unsigned)s->bytes, s->off);
  } else {
    io_uring_prep_readv(q, e->fd, s->iov, (unsigned)s->niov, s->off);
  }
  if (e->r->files) q->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data64(q, (uint64_t)id);
  e->inflight++;
  e->st.sqes++;
  e->st.bytes += (int64_t)s->bytes;
}

/* a completed direct chunk: copy it into the runs it covers */
static int copy_chunk(engine *e, slot *s, uint64_t got) {
  if (s->off + got < s->need_end) return -ENODATA;
  const char *buf = e->r->bounce + (size_t)(s - e->slots) * DIRECT_CHUNK;
  uint64_t cend = s->off + s->bytes;
  runs *r = &s->at;
  while (r->have && r->off < cend) {
    uint64_t a = r->off > s->off ? r->off : s->off;
    uint64_t b = r->off + r->size < s->need_end ? r->off + r->size : s->need_end;
    if (a < b) memcpy(r->mem + (a - r->off), buf + (a - s->off), b - a);
    if (r->off + r->size > cend) break;
    runs_next(r);
  }
  return 0;
}

static void on_cqe(engine *e, int id, int res) {
  slot *s = &e->slots[id];
  e->inflight--;
  e->free_ids[e->nfree++] = id;
  if (res < 0) return fail(e, res, s->off);
  if (e->o->direct) {
    int r = copy_chunk(e, s, (uint64_t)res);
    if (r) fail(e, r, s->off + (uint64_t)res);
    return;
  }
  if ((uint64_t)res < s->bytes) {
    int r = finish_sync(e->o->fd, e->o->write, s->iov, s->niov, s->off,
                        (uint64_t)res);
    if (r) fail(e, r, s->off + (uint64_t)res);
  }
}

/* submits what is queued and waits for one completion, then reaps all */
static void pump(engine *e) {
  int r;
  do r = io_uring_submit_and_wait(&e->r->ring, 1);
  while (r == -EINTR);
  if (r < 0 && r != -EBUSY && r != -EAGAIN) {
    /* nothing was submitted: give the queued pieces back as failed */
    fail(e, r, 0);
  }
  struct io_uring_cqe *c;
  unsigned head, n = 0;
  io_uring_for_each_cqe(&e->r->ring, head, c) {
    on_cqe(e, (int)io_uring_cqe_get_data64(c), c->res);
    n++;
  }
  io_uring_cq_advance(&e->r->ring, n);
}

/* the next direct chunk from the cursor: aligned, at or after `from` */
static void build_chunk(runs *r, slot *s, uint64_t *from) {
  uint64_t cs = r->off & ~(uint64_t)(SCHED_IO_DIRECT_ALIGN - 1);
  if (cs < *from) cs = *from;
  uint64_t ce = cs + DIRECT_CHUNK, need = cs;
  s->at = *r;
  s->off = cs;
  while (r->have && r->off < ce) {
    uint64_t end = r->off + r->size;
    need = end < ce ? end : ce;
    if (end > ce) break; /* continues in the next chunk */
    runs_next(r);
  }
  s->need_end = need;
  s->bytes = (need - cs + SCHED_IO_DIRECT_ALIGN - 1) &
             ~(uint64_t)(SCHED_IO_DIRECT_ALIGN - 1);
  *from = cs + s->bytes;
}

static void loop(engine *e, runs *r) {
  uint64_t left = r->size, from = 0;
  while (!e->err && (r->have || e->inflight)) {
    while (!e->err && r->have && e->inflight < e->depth) {
      int id = take_slot(e);
      if (e->o->direct) build_chunk(r, &e->slots[id], &from);
      else build_piece(e, r, &e->slots[id], &left);
      submit_piece(e, id);
    }
    pump(e);
  }
  while (e->inflight) pump(e); /* buffers stay ours until the kernel is done */
}

static int engine_init(engine *e, const sched_io_opts *o) {
  int err;
  memset(e, 0, sizeof *e);
  e->o = o;
  e->r = ring_get(&err);
  if (!e->r) return err;
  if (o->direct && (err = direct_bufs(e->r)) != 0) return err;
  e->depth = o->depth < 1 ? 1 : o->depth > SCHED_IO_MAX_DEPTH ? SCHED_IO_MAX_DEPTH
                                                              : o->depth;
  if (o->direct && e->depth > DIRECT_BUFS) e->depth = DIRECT_BUFS;
  e->slots = malloc(sizeof(slot) * (size_t)e->depth);
  e->free_ids = malloc(sizeof(int) * (size_t)e->depth);
  int64_t gap = o->merge_gap > GAP_MAX ? GAP_MAX : o->merge_gap;
  if (gap > 0 && !o->write && !o->direct) e->scratch = malloc((size_t)gap);
  if (!e->slots || !e->free_ids || (gap > 0 && !o->write && !o->direct && !e->scratch))
    return -ENOMEM;
  for (int i = 0; i < e->depth; i++) e->free_ids[e->nfree++] = e->depth - 1 - i;
  e->fd = o->fd;
  if (e->r->files) {
    if (io_uring_register_files_update(&e->r->ring, 0, &e->fd, 1) == 1) e->fd = 0;
    else e->r->files = false; /* plain fds from now on */
  }
  return 0;
}

int sched_io_box_run(const sched_io_box *b, const sched_io_opts *o,
                     sched_io_stats *stats, uint64_t *fail_off) {
  *fail_off = 0;
  char why[128];
  if (sched_fault_take(SCHED_FAULT_IO, why, sizeof why)) return -EIO;
  runs r;
  runs_init(&r, b);
  engine e;
  int err = engine_init(&e, o);
  e.st.runs = r.count;
  if (!err && r.count) {
    loop(&e, &r);
    err = e.err;
    *fail_off = e.fail_off;
  }
  if (e.r && e.r->files && e.fd == 0) {
    int none = -1;
    io_uring_register_files_update(&e.r->ring, 0, &none, 1);
  }
  free(e.slots);
  free(e.free_ids);
  free(e.scratch);
  if (stats) *stats = e.st;
  return err;
}
