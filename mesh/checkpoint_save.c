/* Saving safetensors (checkpoint.h). The issuing thread checks the names,
 * reduces Partial DTensors to Replicate (one all_reduce per Partial mesh
 * dim), writes the header into a temporary file beside path and sizes it;
 * one record to every rank then has each rank write the boxes it owns
 * (coordinate 0 on every non-Shard mesh dim: a Replicate value is written
 * once) with io_uring, in parallel. The issuing thread waits, fsyncs,
 * renames over path and fsyncs the directory: a reader sees the old file
 * or the whole new one. */
#include "mesh/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "mesh/handle.h"
#include "mesh/rank_work.h"
#include "mesh/shard.h"
#include "runtime/backend.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"
#include "sched/future.h"
#include "sched/io.h"

typedef struct save_job {
  int n;
  dt_tensor **t;          /* Partial-free; single-device ones contiguous */
  const char *const *names;
  uint64_t *base;         /* tensor i's first byte in the file */
  int fd;
  dt_future *future;      /* the record's reference */
  const char *api, *path;
  _Atomic int failed;     /* the first failing rank writes st and msg */
  dt_status st;
  char msg[1024];
} save_job;

static void note(save_job *j, dt_status st, const char *msg) {
  int no = 0;
  /* acq_rel is not needed: the record's pending count orders st/msg
   * before done reads them */
  if (!atomic_compare_exchange_strong_explicit(&j->failed, &no, 1,
                                               memory_order_relaxed,
                                               memory_order_relaxed))
    return;
  j->st = st;
  snprintf(j->msg, sizeof j->msg, "%s", msg);
}

/* writes box of tensor i from mem; false once failed */
static void write_box(save_job *j, int i, const core_storage *s, void *mem,
                      const mesh_box *box, int rank) {
  const core_poison *p = core_storage_poison(s);
  if (p) return note(j, p->status, p->message);
  const dt_tensor *t = j->t[i];
  dt_shape local = core_tensor_shape(t); /* the global shape of a DTensor */
  const dt_shape *g = &local;
  sched_io_box io = {.ndim = g->ndim, .dims = g->dims, .off = box->off,
                     .len = box->len, .es = core_dtype_size(t->dtype),
                     .base = j->base[i], .mem = mem};
  sched_io_opts o = {.fd = j->fd, .write = true, .depth = 32};
  uint64_t at;
  sched_io_stats stats = {0};
  int r = sched_io_box_run(&io, &o, &stats, &at);
  mesh_st_count_written(stats.bytes);
  if (!r) return;
  char m[1024], b[128];
  snprintf(m, sizeof m, "%s: %s: tensor '%s': writing at byte %llu on rank %d "
           "failed: %s", j->api, j->path, j->names[i], (unsigned long long)at,
           rank, r == -ENODATA ? "nothing written" :
           mesh_st_strerror(-r, b, sizeof b));
  note(j, DT_ERR_IO, m);
}


static void save_on_rank(void *arg, dt_runtime *rt, int rank) {
  (void)rt;
  save_job *j = arg;
  for (int i = 0; i < j->n; i++) {
    dt_tensor *t = j->t[i];
    if (!t->spec) {
      core_storage *s = t->local.storage;
      if (!s || s->rank != rank) continue;
      mesh_box all = {.n = t->local.ndim};
      memcpy(all.len, t->local.sizes, sizeof all.len);
      write_box(j, i, s, core_tensor_data(t), &all, rank);
      continue;
    }
    const core_spec *sp = t->spec;
    int idx = rank < sp->mesh->rt_ranks ? sp->mesh->pos[rank] : -1;
    if (idx < 0 || !mesh_box_owner(sp->mesh, sp->placements, idx)) continue;
    /* made by this rank's earlier record: a plain read */
    core_storage *s = sp->storages[idx];
    mesh_box box = mesh_box_of(sp->mesh, sp->placements, &sp->shape, idx);
    write_box(j, i, s, s->data, &box, rank);
  }
}

static void save_done(void *arg) {
  save_job *j = arg;
  dt_future *f = j->future; /* the caller may free j once f completes */
  char m[sizeof j->msg];
  dt_status st = atomic_load_explicit(&j->failed, memory_order_relaxed) ? j->st
                                                                        : DT_OK;
  snprintf(m, sizeof m, "%s", st == DT_OK ? "" : j->msg);
  sched_future_complete(f, st, st == DT_OK ? NULL : m);
  sched_future_release(f);
}

/* ---- the issuing side */
static dt_status check_names(const char *const *names, int n, const char *fn) {
  for (int i = 0; i < n; i++) {
    if (!names[i])
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: names[%d] is NULL", fn, i);
    if (!core_st_utf8_valid(names[i], strlen(names[i])))
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: names[%d] is not "
                            "valid UTF-8", fn, i);
    if (!strcmp(names[i], "__metadata__"))
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: names[%d] is "
                            "\"__metadata__\", the format's reserved key", fn, i);
    for (int k = 0; k < i; k++)
      if (!strcmp(names[k], names[i]))
        return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: names[%d] and "
                              "names[%d] are both '%s'", fn, k, i, names[i]);
  }
  return DT_OK;
}

static dt_runtime *runtime_of(const dt_tensor *t) {
  return t->spec ? t->spec->mesh->rt : t->local.storage ? t->local.storage->rt : NULL;
}

/* t itself, or its Partial dims reduced to Replicate (a new reference) */
static dt_tensor *without_partial(dt_tensor *t, const char *fn) {
  if (!t->spec) return core_tensor_retain(t);
  dt_placement pl[DT_MAX_DIMS];
  bool partial = false;
  for (int d = 0; d < t->spec->mesh->ndim; d++) {
    pl[d] = t->spec->placements[d];
    if (pl[d].kind == DT_PLACEMENT_PARTIAL) {
      pl[d] = DT_REPLICATE;
      partial = true;
    }
  }
  if (!partial) return core_tensor_retain(t);
  return mesh_redistribute_to(t, t->spec->mesh, pl, false, fn);
}

static dt_status check_tensors(dt_tensor *const *ts, int n, dt_runtime **rt,
                               const char *fn) {
  *rt = NULL;
  for (int i = 0; i < n; i++) {
    if (!ts[i])
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: tensors[%d] is NULL", fn, i);
    dt_runtime *r = runtime_of(ts[i]);
    if (r && *rt && r != *rt)
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: tensors[%d] lives on "
                            "another runtime than the tensors before it", fn, i);
    if (r) *rt = r;
    if (r && atomic_load_explicit(&r->dead, memory_order_acquire))
      return core_error_set(DT_ERR_DEVICE, "%s: tensors[%d]'s runtime was "
                            "destroyed", fn, i);
    const core_poison *p = mesh_tensor_poison(ts[i]);
    if (p) return core_error_set(p->status, "%s", p->message);
  }
  return DT_OK;
}

/* the temporary's name: path.tmp.PID.N, PID and N those of the process
 * that made it (process 0 in a multi-process job): token = PID << 32 | N */
static void temp_name(const char *path, uint64_t token, char *tmp, size_t len) {
  snprintf(tmp, len, "%s.tmp.%d.%u", path, (int)(token >> 32),
           (unsigned)(token & 0xffffffffu));
}

/* a temporary name beside path, opened O_EXCL; *token names it */
static int open_temp(const char *path, char *tmp, size_t len, uint64_t *token,
                     const char *fn) {
  static _Atomic unsigned counter;
  for (int tries = 0; tries < 100; tries++) {
    unsigned c = atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
    *token = (uint64_t)(uint32_t)getpid() << 32 | c;
    temp_name(path, *token, tmp, len);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) {
      if (fd < 0) {
        char b[128];
        core_error_set(DT_ERR_IO, "%s: %s: cannot create the temporary file "
                       "%s: %s", fn, path, tmp, mesh_st_strerror(errno, b, sizeof b));
      }
      return fd;
    }
  }
  core_error_set(DT_ERR_IO, "%s: %s: no free temporary name", fn, path);
  return -1;
}

static dt_status sys_fail(const char *what, const char *fn, const char *path) {
  char b[128];
  return core_error_set(DT_ERR_IO, "%s: %s: %s failed: %s", fn, path, what,
                        mesh_st_strerror(errno, b, sizeof b));
}

/* the tensors' offsets, and (fd >= 0: the process that makes the file)
 * the header and the file's full size (the ranks fill the data) */
static dt_status write_header(int fd, save_job *j, const char *path,
                              const char *fn) {
  dt_dtype dts[j->n ? j->n : 1];
  dt_shape shs[j->n ? j->n : 1];
  for (int i = 0; i < j->n; i++) {
    dts[i] = j->t[i]->dtype;
    shs[i] = core_tensor_shape(j->t[i]);
  }
  char *h;
  size_t hl;
  uint64_t data;
  dt_status st = core_st_write_header(j->n, j->names, dts, shs, &h, &hl, &data, fn);
  if (st != DT_OK) return st;
  uint64_t at = hl;
  for (int i = 0; i < j->n; i++) {
    j->base[i] = at;
    at += (uint64_t)core_numel(j->t[i]) * core_dtype_size(j->t[i]->dtype);
  }
  size_t done = 0;
  while (fd >= 0 && done < hl) {
    ssize_t w = pwrite(fd, h + done, hl - done, (off_t)done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += (size_t)w;
  }
  free(h);
  if (fd < 0) return DT_OK;
  if (done < hl) return sys_fail("writing the header", fn, path);
  if (ftruncate(fd, (off_t)(hl + data)) != 0) return sys_fail("ftruncate", fn, path);
  return DT_OK;
}

/* runs the record and waits for it */
static dt_status run_ranks(save_job *j, dt_runtime *rt, const char *fn) {
  if (!rt) return DT_OK; /* no tensor holds data */
  dt_future *f = sched_future_new();
  if (!f) return core_last_status();
  j->future = sched_future_retain(f);
  if (runtime_publish_named_call(rt, -1, "save_safetensors", save_on_rank,
                                 save_done, j) != DT_OK) {
    sched_future_release(j->future);
    sched_future_release(f);
    return runtime_publish_failed(fn);
  }
  dt_status st = sched_future_wait(f, -1);
  sched_future_release(f);
  return st;
}

static dt_status sync_dir(const char *path, const char *fn) {
  char *copy = strdup(path);
  if (!copy) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  int d = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  dt_status st = DT_OK;
  if (d < 0 || fsync(d) != 0) st = sys_fail("fsync of the directory", fn, path);
  if (d >= 0) close(d);
  free(copy);
  return st;
}

/* step 1 of a multi-process save: process 0 voted its temporary's token,
 * every process gets it (one process: its own) */
static dt_status agree_token(dt_runtime *rt, dt_status st, uint64_t *token,
                             const char *fn, const char *path) {
  int n = rt ? rt->nprocs : 1;
  uint64_t one, *keys = n > 1 ? calloc((size_t)n, sizeof *keys) : &one;
  if (!keys)
    st = core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  st = mesh_st_agree(rt, st, *token, keys, fn, path); /* keys NULL: failed */
  if (st == DT_OK) *token = keys[0];
  if (keys != &one) free(keys);
  return st;
}

/* this process's ranks' bytes into the temporary (process 0's fd, or the
 * file it made, opened by name), fsync'd and closed */
static dt_status write_own(save_job *j, dt_runtime *rt, int fd, const char *tmp,
                           const char *path, const char *fn) {
  dt_status st = DT_OK;
  if (fd < 0 && (fd = open(tmp, O_WRONLY | O_CLOEXEC)) < 0) {
    char b[128];
    return core_error_set(DT_ERR_IO, "%s: %s: cannot open the temporary file "
                          "%s made by process 0: %s", fn, path, tmp,
                          mesh_st_strerror(errno, b, sizeof b));
  }
  j->fd = fd;
  st = run_ranks(j, rt, fn);
  if (st == DT_OK && fsync(fd) != 0) st = sys_fail("fsync", fn, path);
  if (close(fd) != 0 && st == DT_OK) st = sys_fail("close", fn, path);
  return st;
}

/* header, ranks, fsync, rename. In a multi-process job (docs/io.md) one
 * file is written by all: process 0 makes the temporary (header, full
 * size); agreed (step 1, which also hands out its name), every process
 * writes its own ranks' boxes and fsyncs; agreed (step 2), process 0
 * renames and fsyncs the directory (or, on any failure, unlinks the
 * temporary); agreed (step 3), every process returns the same outcome
 * with the file in place or the temporary gone. Every process takes every
 * step up to the first failed one, and step 3 whenever it took step 2,
 * whatever failed where. */
static dt_status write_file(save_job *j, dt_runtime *rt, dt_runtime *job,
                            dt_status st, const char *path, const char *fn) {
  char tmp[4096 + 64];
  bool lead = !job || job->proc == 0;
  uint64_t token = 0;
  int fd = -1;
  if (st == DT_OK && strlen(path) > 4096)
    st = core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: path is longer than "
                        "4096 bytes", fn);
  if (st == DT_OK && lead && (fd = open_temp(path, tmp, sizeof tmp, &token, fn)) < 0)
    st = core_last_status();
  bool made = fd >= 0;
  if (st == DT_OK) st = write_header(fd, j, path, fn);
  st = agree_token(job, st, &token, fn, path);
  if (st == DT_OK) {
    if (!lead) temp_name(path, token, tmp, sizeof tmp);
    st = write_own(j, rt, fd, tmp, path, fn); /* closes fd */
    fd = -1;
    st = mesh_st_agree(job, st, 0, NULL, fn, path);
    if (st == DT_OK && lead && rename(tmp, path) != 0)
      st = sys_fail("rename", fn, path);
    if (st == DT_OK && lead) {
      made = false; /* renamed: nothing to unlink */
      st = sync_dir(path, fn);
    }
    if (made && st != DT_OK) unlink(tmp);
    made = false;
    /* step 3, after the unlink too: no process returns while a
     * temporary of this save is still there */
    st = mesh_st_agree(job, st, 0, NULL, fn, path);
  }
  if (fd >= 0) close(fd);
  if (made && st != DT_OK) unlink(tmp);
  return st;
}

/* the multi-process job a save belongs to: rt when a DTensor spans its
 * processes (every process issues the save), else NULL (a save of this
 * process's single-device tensors is its own). A job's save takes
 * DTensors only: a single-device tensor exists in one process, so the
 * processes' lists would differ (*st set; voted at step 0). */
static dt_runtime *job_of(dt_tensor *const *ts, int n, dt_runtime *rt,
                          dt_status *st, const char *fn) {
  if (rt->nprocs == 1) return NULL;
  int dtensor = -1, single = -1;
  for (int i = 0; i < n; i++) {
    if (ts[i] && ts[i]->spec && dtensor < 0) dtensor = i;
    if (ts[i] && !ts[i]->spec && single < 0) single = i;
  }
  if (dtensor < 0) return NULL;
  if (single >= 0 && *st == DT_OK)
    *st = core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: tensors[%d] is a "
                         "single-device tensor and tensors[%d] a DTensor of "
                         "a %d-process job: a job's save takes DTensors only "
                         "(every process passes the same tensors)", fn,
                         single, dtensor, rt->nprocs);
  return rt;
}

dt_status mesh_st_save(const char *path, dt_tensor *const *tensors,
                       const char *const *names, int n, const char *fn) {
  if (!path) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: path is NULL", fn);
  if (n < 0) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: n %d < 0", fn, n);
  if (n && (!tensors || !names))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                          tensors ? "names" : "tensors");
  dt_runtime *rt = NULL;
  dt_status st = check_names(names, n, fn);
  if (st == DT_OK) st = check_tensors(tensors, n, &rt, fn);
  if (st == DT_OK && rt && rt->backend->key != CORE_KEY_CPU)
    st = core_error_set(DT_ERR_UNSUPPORTED, "%s: saving from a \"%s\" "
                        "runtime is not supported yet (docs/cuda.md)", fn,
                        rt->backend->name);
  /* step 0 of a multi-process save: a poisoned shard is seen only where
   * it lives, and no process may reduce Partials (collectives) alone */
  dt_runtime *job = NULL;
  if (rt && !atomic_load_explicit(&rt->dead, memory_order_acquire))
    job = job_of(tensors, n, rt, &st, fn);
  if (job) st = mesh_st_agree(job, st, 0, NULL, fn, path);
  if (st != DT_OK) return st;
  save_job *j = calloc(1, sizeof *j);
  dt_tensor **ts = calloc((size_t)n + 1, sizeof *ts);
  uint64_t *base = calloc((size_t)n + 1, sizeof *base);
  if (!j || !ts || !base) st = core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of "
                                              "host memory", fn);
  for (int i = 0; i < n && st == DT_OK; i++)
    if (!(ts[i] = without_partial(tensors[i], fn))) st = core_last_status();
  if (st == DT_OK) {
    j->n = n;
    j->t = ts;
    j->names = names;
    j->base = base;
    j->fd = -1;
    j->api = fn;
    j->path = path;
  }
  if (j && ts && base) st = write_file(j, rt, job, st, path, fn);
  for (int i = 0; i < n && ts; i++) core_tensor_release(ts[i]);
  free(ts);
  free(base);
  free(j);
  return st;
}
