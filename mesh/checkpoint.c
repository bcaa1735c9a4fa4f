/* Loading safetensors (checkpoint.h): the header on the issuing thread, the
 * data on the ranks. The handle is returned as soon as the record is
 * published; ops on it queue behind the read in each rank's order, so
 * nothing waits unless it needs the data. A read that fails poisons the
 * rank's shard with the file, tensor and offset; every fetch of the tensor
 * then fails with that message. */
#include "mesh/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "kernels/cpu/cpu.h"
#include "mesh/handle.h"
#include "mesh/shard.h"
#include "runtime/backend.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"
#include "sched/future.h"
#include "sched/io.h"
#include "sim/mpi_env.h"

/* statistics only (mesh_st_io_bytes): relaxed, nothing is ordered by them */
static _Atomic int64_t bytes_read, bytes_written;

void mesh_st_io_bytes(int64_t *read, int64_t *written) {
  *read = atomic_load_explicit(&bytes_read, memory_order_relaxed);
  *written = atomic_load_explicit(&bytes_written, memory_order_relaxed);
}

void mesh_st_count_written(int64_t n) {
  atomic_fetch_add_explicit(&bytes_written, n, memory_order_relaxed);
}

dt_status mesh_st_agree(dt_runtime *rt, dt_status mine, uint64_t key,
                        uint64_t *keys, const char *fn, const char *path) {
  if (!rt || rt->nprocs <= 1) {
    if (keys) keys[0] = key;
    return mine;
  }
  sim_mpi_vote v = {.status = (int32_t)mine, .key = key};
  char own[1024] = "";
  if (mine != DT_OK) {
    snprintf(own, sizeof own, "%s", core_last_error());
    snprintf(v.msg, sizeof v.msg, "%s", own);
  }
  sim_mpi_vote *all = calloc((size_t)rt->nprocs, sizeof *all);
  if (!all) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host "
                                  "memory", fn);
  char what[600];
  snprintf(what, sizeof what, "%s: %s", fn, path);
  int64_t t = rt->coll_timeout_ns;
  dt_status st = sim_mpi_agree(rt->mpi, &v, all, t > 0 ? sim_mpi_now_ns() + t : 0,
                               what);
  for (int q = 0; st == DT_OK && keys && q < rt->nprocs; q++) keys[q] = all[q].key;
  if (st == DT_OK && mine != DT_OK) {
    st = core_error_set(mine, "%s", own);
  } else if (st == DT_OK) {
    for (int q = 0; q < rt->nprocs; q++) {
      if (all[q].status == DT_OK) continue;
      all[q].msg[sizeof all[q].msg - 1] = 0; /* another process's bytes */
      st = core_error_set((dt_status)all[q].status, "%s: %s: in process %d "
                          "of %d: %s", fn, path, q, rt->nprocs, all[q].msg);
      break;
    }
  }
  free(all);
  return st;
}

const char *mesh_st_strerror(int err, char *buf, size_t len) {
  return strerror_r(err, buf, len);
}

/* n bytes at off, fewer only at end of file; -errno on failure */
static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -errno;
    if (r == 0) break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

static dt_status io_error(int err, const char *what, const char *fn,
                          const char *path) {
  char b[128];
  return core_error_set(DT_ERR_IO, "%s: %s: %s: %s", fn, path, what,
                        mesh_st_strerror(err, b, sizeof b));
}

/* opens path for reading and parses its header into *info; *fd open on
 * success */
static dt_status open_header(const char *path, const char *fn, int *fd,
                             dt_safetensors_info *info) {
  *fd = open(path, O_RDONLY | O_CLOEXEC);
  if (*fd < 0) return io_error(errno, "cannot open", fn, path);
  struct stat sb;
  unsigned char pre[8];
  uint64_t n = 0;
  dt_status st;
  ssize_t got;
  if (fstat(*fd, &sb) != 0) {
    st = io_error(errno, "cannot stat", fn, path);
  } else if (!S_ISREG(sb.st_mode)) {
    st = core_error_set(DT_ERR_IO, "%s: %s: not a regular file", fn, path);
  } else if ((got = pread_full(*fd, pre, 8, 0)) < 0) {
    st = io_error((int)-got, "cannot read the header length", fn, path);
  } else {
    st = core_st_check_prefix(pre, (size_t)got, (uint64_t)sb.st_size, &n, fn, path);
  }
  char *h = st == DT_OK ? malloc((size_t)n) : NULL;
  if (st == DT_OK && !h)
    st = core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: %s: out of host memory for "
                        "a header of %llu bytes", fn, path, (unsigned long long)n);
  if (st == DT_OK && (got = pread_full(*fd, h, (size_t)n, 8)) != (ssize_t)n)
    st = got < 0 ? io_error((int)-got, "cannot read the header", fn, path)
                 : core_error_set(DT_ERR_IO, "%s: %s: truncated while reading "
                                  "the header", fn, path);
  if (st == DT_OK) st = core_st_parse_header(h, (size_t)n, (uint64_t)sb.st_size,
                                             info, fn, path);
  free(h);
  if (st != DT_OK) {
    close(*fd);
    *fd = -1;
  }
  return st;
}

dt_safetensors_info *mesh_st_index(const char *path, const char *fn) {
  if (!path) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: path is NULL", fn);
    return NULL;
  }
  dt_safetensors_info *info = calloc(1, sizeof *info);
  if (!info) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return NULL;
  }
  int fd;
  if (open_header(path, fn, &fd, info) != DT_OK) {
    free(info);
    return NULL;
  }
  close(fd);
  return info;
}

/* ---- the ranks' side */
typedef struct load_job {
  dt_tensor *t;
  int fd;               /* buffered, or opened with O_DIRECT */
  uint64_t base;        /* the tensor's first byte in the file */
  dt_shape shape;
  sched_io_opts io;
  dt_future *future;    /* NULL unless asked for */
  const char *api;
  char *path, *name;    /* for messages */
} load_job;

static void read_box(load_job *j, core_storage *st, void *mem,
                     const mesh_box *box, int rank) {
  sched_io_box io = {.ndim = j->shape.ndim, .dims = j->shape.dims,
                     .off = box->off, .len = box->len,
                     .es = core_dtype_size(j->t->dtype), .base = j->base,
                     .mem = mem};
  uint64_t at;
  sched_io_stats stats = {0};
  int r = sched_io_box_run(&io, &j->io, &stats, &at);
  atomic_fetch_add_explicit(&bytes_read, stats.bytes, memory_order_relaxed);
  if (!r) { /* a BOOL tensor's bytes are the file's: nonzero is true */
    if (j->t->dtype == DT_BOOL) core_bool_normalise(mem, (size_t)mesh_box_numel(box));
    return;
  }
  char m[1024], b[128];
  if (r == -ENODATA)
    snprintf(m, sizeof m, "%s: %s: tensor '%s': the file ended before byte "
             "%llu (cut short after its header was read)", j->api, j->path,
             j->name, (unsigned long long)at);
  else
    snprintf(m, sizeof m, "%s: %s: tensor '%s': reading at byte %llu on rank "
             "%d failed: %s", j->api, j->path, j->name, (unsigned long long)at,
             rank, mesh_st_strerror(-r, b, sizeof b));
  core_storage_set_poison(st, DT_ERR_IO, m);
}

static void load_local(load_job *j, dt_runtime *rt, int rank) {
  core_storage *s = j->t->local.storage;
  const char *err;
  s->data = rt->backend->alloc(rt, rank, s->nbytes, &err);
  runtime_note_memory(rt, rank);
  if (!s->data) {
    char m[512];
    snprintf(m, sizeof m, "%s: %s", j->api, err);
    core_storage_set_poison(s, DT_ERR_OUT_OF_MEMORY, m);
    return;
  }
  mesh_box all = mesh_box_all(&j->shape);
  read_box(j, s, s->data, &all, rank);
}

static void load_on_rank(void *arg, dt_runtime *rt, int rank) {
  load_job *j = arg;
  if (!j->t->spec) return load_local(j, rt, rank);
  const core_spec *s = j->t->spec;
  int idx = rank < s->mesh->rt_ranks ? s->mesh->pos[rank] : -1;
  if (idx < 0) return;
  mesh_rank_mem rm;
  mesh_rank_mem_init(&rm, rt, rank, j->api);
  core_storage *st = mesh_rank_storage(&rm, j->t, idx);
  mesh_buf b = mesh_rank_alloc(&rm, st->nbytes);
  mesh_rank_finish(&rm, st, b);
  if (rm.st != DT_OK) return;
  mesh_box box = mesh_box_of(s->mesh, s->placements, &s->shape, idx);
  double v;
  if (mesh_partial_identity(s->mesh, s->placements, idx, &v))
    cpu_fill(b.p, j->t->dtype, mesh_box_numel(&box), v);
  else
    read_box(j, st, b.p, &box, rank);
}

static void job_free(load_job *j) {
  if (j->fd >= 0) close(j->fd);
  core_tensor_release(j->t);
  free(j->path);
  free(j->name);
  free(j);
}

static void load_done(void *arg) {
  load_job *j = arg;
  if (j->future) {
    const core_poison *p = mesh_tensor_poison(j->t);
    sched_future_complete(j->future, p ? p->status : DT_OK,
                          p ? p->message : NULL);
    sched_future_release(j->future);
  }
  job_free(j);
}

/* ---- the issuing side */
static dt_status check_options(const dt_load_options *o, sched_io_opts *io,
                               const char *fn) {
  int depth = o ? o->queue_depth : 0;
  int64_t gap = o ? o->merge_gap : 0;
  if (depth < 0 || depth > SCHED_IO_MAX_DEPTH)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: options.queue_depth %d "
                          "is outside 0..%d", fn, depth, SCHED_IO_MAX_DEPTH);
  if (gap > (1 << 20))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: options.merge_gap %lld "
                          "is over 1048576 bytes", fn, (long long)gap);
  io->depth = depth ? depth : 32;
  io->merge_gap = gap == 0 ? 4096 : gap < 0 ? 0 : gap;
  io->direct = o && o->direct;
  io->write = false;
  return DT_OK;
}

/* the entry named name, loadable */
static dt_status pick(const dt_safetensors_info *info, const char *name,
                      const char *fn, const char *path, int *at) {
  *at = core_st_find(info, name);
  if (*at < 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s: no tensor named "
                          "'%s' in the file (%d tensors)", fn, path, name,
                          info->n);
  const dt_safetensors_entry *e = &info->tensors[*at];
  if (e->dtype == DT_DTYPE_COUNT)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s: tensor '%s': dtype "
                          "%s has no dtorch dtype", fn, path, name,
                          e->dtype_name);
  return DT_OK;
}

static dt_tensor *make_handle(const dt_safetensors_entry *e,
                              const mesh_st_target *tg, const char *fn) {
  if (!tg->mesh)
    return runtime_tensor_alloc(e->dtype, e->shape.ndim, e->shape.dims, tg->rt,
                                tg->rank, fn);
  dt_placement norm[DT_MAX_DIMS];
  if (mesh_dtensor_check_placements(tg->mesh, tg->placements, &e->shape, norm,
                                    fn) != DT_OK)
    return NULL;
  return mesh_dtensor_make(tg->mesh, norm, e->shape, e->dtype, fn);
}

static load_job *new_job(const char *path, const char *name, int fd,
                         const sched_io_opts *io, const char *fn) {
  load_job *j = calloc(1, sizeof *j);
  char *p = strdup(path), *n = strdup(name);
  if (!j || !p || !n) {
    free(j);
    free(p);
    free(n);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return NULL;
  }
  j->path = p;
  j->name = n;
  j->fd = fd;
  j->io = *io;
  j->api = fn;
  return j;
}

/* the fd the ranks read: the header's, or one opened with O_DIRECT */
static int data_fd(const char *path, int fd, bool direct, const char *fn) {
  if (!direct) return fd;
  int d = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
  int err = errno;
  close(fd);
  if (d >= 0) return d;
  if (err == EINVAL)
    core_error_set(DT_ERR_IO, "%s: %s: O_DIRECT is not supported by its file "
                   "system (options.direct)", fn, path);
  else
    io_error(err, "cannot open with O_DIRECT", fn, path);
  return -1;
}

/* publishes the job; the record owns j from here */
static dt_tensor *publish(load_job *j, const mesh_st_target *tg,
                          dt_future **future, const char *fn) {
  dt_tensor *t = j->t;
  if (future && !(j->future = sched_future_new())) {
    job_free(j);
    return NULL;
  }
  dt_future *f = future ? sched_future_retain(j->future) : NULL;
  core_tensor_retain(t); /* the caller's, before the record may drop j's */
  if (runtime_publish_named_call(tg->rt, tg->mesh ? -1 : tg->rank,
                                 "load_safetensors", load_on_rank, load_done,
                                 j) != DT_OK) {
    sched_future_release(j->future);
    sched_future_release(f);
    j->future = NULL;
    job_free(j);
    core_tensor_release(t);
    runtime_publish_failed(fn);
    return NULL;
  }
  if (future) *future = f;
  core_error_succeeded();
  return t;
}

/* what every process must have read of the entry: dtype, shape and
 * offset (FNV-1a) */
static uint64_t entry_key(const dt_safetensors_entry *e) {
  uint64_t h = 1469598103934665603ULL;
  int64_t w[DT_MAX_DIMS + 3] = {e->dtype, e->shape.ndim, (int64_t)e->offset};
  for (int d = 0; d < e->shape.ndim; d++) w[3 + d] = e->shape.dims[d];
  const unsigned char *b = (const unsigned char *)w;
  for (size_t i = 0; i < sizeof w; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

/* the header step of a load, agreed by every process of rt (rt NULL or
 * one process: st): each read the same entry, or the load fails
 * everywhere */
static dt_status agree_header(dt_runtime *rt, dt_status st, uint64_t key,
                              const char *fn, const char *path,
                              const char *name) {
  if (!rt || rt->nprocs == 1) return st;
  uint64_t one, *keys = calloc((size_t)rt->nprocs, sizeof *keys);
  if (!keys) st = core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host "
                                 "memory", fn);
  st = mesh_st_agree(rt, st, key, keys, fn, path); /* keys NULL: failed */
  for (int q = 1; st == DT_OK && keys && q < rt->nprocs; q++)
    if (keys[q] != keys[0])
      st = core_error_set(DT_ERR_IO, "%s: %s: tensor '%s': process %d read "
                          "another dtype, shape or offset than process 0 (the "
                          "processes do not see one shared file)", fn, path,
                          name, q);
  if (keys != &one) free(keys);
  return st;
}

dt_tensor *mesh_st_load(const char *path, const char *name,
                        const dt_load_options *o, const mesh_st_target *tg,
                        dt_future **future, const char *fn) {
  if (!path || !name) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                   path ? "name" : "path");
    return NULL;
  }
  if (atomic_load_explicit(&tg->rt->dead, memory_order_acquire)) {
    core_error_set(DT_ERR_DEVICE, "%s: the runtime was destroyed", fn);
    return NULL;
  }
  if (tg->rt->backend->key != CORE_KEY_CPU) { /* reads land in host memory */
    core_error_set(DT_ERR_UNSUPPORTED, "%s: loading into a \"%s\" runtime "
                   "is not supported yet (docs/cuda.md)", fn,
                   tg->rt->backend->name);
    return NULL;
  }
  /* from here every failure is voted on: in a multi-process job the
   * others must not go on with a tensor this process has not */
  sched_io_opts io;
  dt_safetensors_info info = {0};
  int fd = -1, at = -1;
  load_job *j = NULL;
  dt_tensor *t = NULL;
  dt_status st = check_options(o, &io, fn);
  if (st == DT_OK) st = open_header(path, fn, &fd, &info);
  if (st == DT_OK) st = pick(&info, name, fn, path, &at);
  if (st == DT_OK && !(t = make_handle(&info.tensors[at], tg, fn)))
    st = core_last_status();
  if (st == DT_OK) {
    io.fd = data_fd(path, fd, io.direct, fn); /* takes fd */
    fd = -1;
    if (io.fd >= 0 && !(j = new_job(path, name, io.fd, &io, fn))) close(io.fd);
    if (j) {
      j->t = t; /* the job's reference */
      t = NULL;
      j->base = info.tensors[at].offset;
      j->shape = info.tensors[at].shape;
    } else {
      st = core_last_status();
    }
  }
  uint64_t key = j ? entry_key(&info.tensors[at]) : 0;
  core_st_info_clear(&info);
  if (fd >= 0) close(fd);
  core_tensor_release(t);
  /* a DTensor's load is the job's (every process issues it); a
   * single-device tensor lives in its rank's process alone */
  st = agree_header(tg->mesh ? tg->rt : NULL, st, key, fn, path, name);
  if (st != DT_OK) {
    if (j) job_free(j);
    return NULL;
  }
  return publish(j, tg, future, fn);
}
