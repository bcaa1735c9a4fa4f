/* NCCL for collectives between ranks on different GPUs (docs/cuda.md),
 * opened with dlopen as cuBLAS is (kernels/cuda/libs.c): the library
 * loads without NCCL, and a runtime over several GPUs says why NCCL is
 * missing. Plain C entry points over opaque communicators; dtypes and
 * reduce ops are dtorch's values (dt_dtype, dt_reduce_op as int).
 *
 * Communicators are non-blocking (config.blocking = 0): init, a call
 * outside a group and a group's end may return ncclInProgress, and the
 * communicator's state (ncclCommGetAsyncError) is polled until it leaves
 * ncclInProgress, bounded by the collective timeout and a cancel flag (a
 * member of the group failed), so no rank thread waits forever inside
 * NCCL for a member that never comes; the caller then aborts. */
#include "kernels/cuda/rank.h"

#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct cuda_nccl_comm {
  ncclComm_t comm;
  int device;
  int64_t timeout_ns; /* each wait for NCCL's progress; <= 0: none */
  const int *cancel;  /* nonzero (acquire): stop waiting */
  bool grouped;       /* between cuda_nccl_group(true) and (false) */
};

#define STR2(x) #x
#define STR(x) STR2(x)

/* the functions, with the header's own types */
static struct {
  pthread_once_t once;
  char why[256];
  void *h;
  __typeof__(&ncclGetUniqueId) unique_id;
  __typeof__(&ncclCommInitRankConfig) init_config;
  __typeof__(&ncclCommFinalize) finalize;
  __typeof__(&ncclCommDestroy) destroy;
  __typeof__(&ncclCommAbort) abort;
  __typeof__(&ncclCommGetAsyncError) async_error;
  __typeof__(&ncclGetErrorString) error_string;
  __typeof__(&ncclAllReduce) all_reduce;
  __typeof__(&ncclBroadcast) broadcast;
  __typeof__(&ncclReduce) reduce;
  __typeof__(&ncclAllGather) all_gather;
  __typeof__(&ncclReduceScatter) reduce_scatter;
  __typeof__(&ncclSend) send;
  __typeof__(&ncclRecv) recv;
  __typeof__(&ncclGroupStart) group_start;
  __typeof__(&ncclGroupEnd) group_end;
} nc = {.once = PTHREAD_ONCE_INIT};

#define LOAD(field, name)                                                    \
  do {                                                                       \
    nc.field = (__typeof__(nc.field))dlsym(nc.h, name);                      \
    if (!nc.field && !nc.why[0])                                             \
      snprintf(nc.why, sizeof nc.why, "dlsym(%s): %s", name, dlerror());     \
  } while (0)

static void open_nccl(void) {
  nc.h = dlopen("libnccl.so." STR(NCCL_MAJOR), RTLD_NOW | RTLD_LOCAL);
  if (!nc.h) nc.h = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
  if (!nc.h) {
    snprintf(nc.why, sizeof nc.why, "dlopen(libnccl.so.%d): %s", NCCL_MAJOR,
             dlerror());
    return;
  }
  LOAD(unique_id, "ncclGetUniqueId");
  LOAD(init_config, "ncclCommInitRankConfig");
  LOAD(finalize, "ncclCommFinalize");
  LOAD(destroy, "ncclCommDestroy");
  LOAD(abort, "ncclCommAbort");
  LOAD(async_error, "ncclCommGetAsyncError");
  LOAD(error_string, "ncclGetErrorString");
  LOAD(all_reduce, "ncclAllReduce");
  LOAD(broadcast, "ncclBroadcast");
  LOAD(reduce, "ncclReduce");
  LOAD(all_gather, "ncclAllGather");
  LOAD(reduce_scatter, "ncclReduceScatter");
  LOAD(send, "ncclSend");
  LOAD(recv, "ncclRecv");
  LOAD(group_start, "ncclGroupStart");
  LOAD(group_end, "ncclGroupEnd");
}

static int opened(char *why, size_t n) {
  pthread_once(&nc.once, open_nccl);
  if (!nc.why[0]) return 0;
  snprintf(why, n, "NCCL: %s", nc.why);
  return -1;
}

static int nccl_fail(ncclResult_t r, const char *what, char *why, size_t n) {
  snprintf(why, n, "%s: %s (ncclResult %d)", what,
           nc.error_string ? nc.error_string(r) : "?", (int)r);
  return -1;
}

int cuda_nccl_unique_id(void *id, char *why, size_t n) {
  if (opened(why, n)) return -1;
  ncclResult_t r = nc.unique_id((ncclUniqueId *)id);
  return r == ncclSuccess ? 0 : nccl_fail(r, "ncclGetUniqueId", why, n);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* r from a call on c: an error, or done once c's state leaves
 * ncclInProgress (polled: yields first, then 50 µs sleeps), within c's
 * timeout and until its cancel flag is set */
static int settle(cuda_nccl_comm *c, ncclResult_t r, const char *what,
                  char *why, size_t n) {
  if (r != ncclSuccess && r != ncclInProgress) return nccl_fail(r, what, why, n);
  int64_t t0 = now_ns();
  ncclResult_t state = ncclInProgress;
  for (int i = 0;; i++) {
    ncclResult_t q = nc.async_error(c->comm, &state);
    if (q != ncclSuccess) return nccl_fail(q, "ncclCommGetAsyncError", why, n);
    if (state != ncclInProgress) break;
    if (c->cancel && __atomic_load_n(c->cancel, __ATOMIC_ACQUIRE)) {
      snprintf(why, n, "%s: given up, another member of the group failed",
               what);
      return -1;
    }
    if (c->timeout_ns > 0 && now_ns() - t0 > c->timeout_ns) {
      snprintf(why, n, "%s: not done after %.3g s (DTORCH_COLLECTIVE_TIMEOUT"
               "; did every member of the group take part?)", what,
               (double)c->timeout_ns / 1e9);
      return -1;
    }
    if (i < 64) {
      sched_yield();
    } else {
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    }
  }
  return state == ncclSuccess ? 0 : nccl_fail(state, what, why, n);
}

int cuda_nccl_comm_init(cuda_nccl_comm **out, int nranks, const void *id,
                        int member, int device, int64_t timeout_ns,
                        const int *cancel, char *why, size_t n) {
  *out = NULL;
  if (opened(why, n)) return -1;
  cuda_nccl_comm *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(why, n, "ncclCommInitRankConfig: out of host memory");
    return -1;
  }
  c->device = device;
  c->timeout_ns = timeout_ns;
  c->cancel = cancel;
  cudaSetDevice(device);
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t r = nc.init_config(&c->comm, nranks, uid, member, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (c->comm) nc.abort(c->comm); /* a non-blocking init may have made it */
    free(c);
    return nccl_fail(r, "ncclCommInitRankConfig", why, n);
  }
  if (settle(c, r, "ncclCommInitRankConfig", why, n)) {
    nc.abort(c->comm);
    free(c);
    return -1;
  }
  *out = c;
  return 0;
}

/* NCCL's abort and destroy switch to the communicator's GPU and back
 * themselves: the calling thread (a rank thread, bound to its own GPU)
 * keeps its device */
void cuda_nccl_comm_abort(cuda_nccl_comm *c) {
  if (!c) return;
  nc.abort(c->comm);
  free(c);
}

/* the longest a close waits for a communicator's work to finish */
#define FINALIZE_NS ((int64_t)10 * 1000000000)

void cuda_nccl_comm_destroy(cuda_nccl_comm *c) {
  if (!c) return;
  ncclResult_t async = ncclSuccess;
  char why[256];
  c->cancel = NULL;
  if (c->timeout_ns <= 0 || c->timeout_ns > FINALIZE_NS)
    c->timeout_ns = FINALIZE_NS;
  nc.async_error(c->comm, &async);
  /* a communicator in error, or one whose work does not finish, cannot be
   * destroyed: abort it */
  if (async != ncclSuccess ||
      settle(c, nc.finalize(c->comm), "ncclCommFinalize", why, sizeof why)) {
    nc.abort(c->comm);
  } else {
    nc.destroy(c->comm);
  }
  free(c);
}

int cuda_nccl_check(cuda_nccl_comm *c, char *why, size_t n) {
  ncclResult_t async = ncclSuccess;
  ncclResult_t r = nc.async_error(c->comm, &async);
  if (r != ncclSuccess) return nccl_fail(r, "ncclCommGetAsyncError", why, n);
  return async == ncclSuccess ? 0 : nccl_fail(async, "NCCL (asynchronous)", why, n);
}

/* dt_dtype -> NCCL's; bool travels as uint8 */
static int nccl_type(int dtype, ncclDataType_t *t) {
  static const ncclDataType_t map[] = {ncclFloat32, ncclFloat64, ncclFloat16,
                                       ncclBfloat16, ncclInt32, ncclInt64,
                                       ncclUint8, ncclUint8};
  if (dtype < 0 || dtype > 7) return -1;
  *t = map[dtype];
  return 0;
}

/* dt_reduce_op -> NCCL's; on bool, sum is or (max) and prod is and (min) */
static ncclRedOp_t nccl_op(int op, int dtype) {
  static const ncclRedOp_t map[] = {ncclSum, ncclAvg, ncclMax, ncclMin,
                                    ncclProd};
  if (dtype == 7 && op == 0) return ncclMax;
  if (dtype == 7 && op == 4) return ncclMin;
  return map[op];
}

#define PREP(what)                                                           \
  ncclDataType_t t;                                                          \
  if (nccl_type(dtype, &t)) {                                                \
    snprintf(why, n, "%s: dtype %d", what, dtype);                           \
    return -1;                                                               \
  }                                                                          \
  cudaSetDevice(c->device);                                                  \
  cudaStream_t s = (cudaStream_t)stream

/* inside a group a call only queues (ncclGroupEnd settles it) */
static int done(cuda_nccl_comm *c, ncclResult_t r, const char *what,
                char *why, size_t n) {
  if (c->grouped)
    return r == ncclSuccess || r == ncclInProgress ? 0
                                                   : nccl_fail(r, what, why, n);
  return settle(c, r, what, why, n);
}
#define DONE(r, what) done(c, (r), what, why, n)

int cuda_nccl_all_reduce(cuda_nccl_comm *c, void *stream, const void *in,
                         void *out, int64_t count, int dtype, int op,
                         char *why, size_t n) {
  PREP("ncclAllReduce");
  return DONE(nc.all_reduce(in, out, (size_t)count, t, nccl_op(op, dtype),
                            c->comm, s), "ncclAllReduce");
}

int cuda_nccl_broadcast(cuda_nccl_comm *c, void *stream, const void *in,
                        void *out, int64_t count, int dtype, int root,
                        char *why, size_t n) {
  PREP("ncclBroadcast");
  return DONE(nc.broadcast(in, out, (size_t)count, t, root, c->comm, s),
              "ncclBroadcast");
}

int cuda_nccl_reduce(cuda_nccl_comm *c, void *stream, const void *in,
                     void *out, int64_t count, int dtype, int op, int root,
                     char *why, size_t n) {
  PREP("ncclReduce");
  return DONE(nc.reduce(in, out, (size_t)count, t, nccl_op(op, dtype), root,
                        c->comm, s), "ncclReduce");
}

int cuda_nccl_all_gather(cuda_nccl_comm *c, void *stream, const void *in,
                         void *out, int64_t each, int dtype, char *why,
                         size_t n) {
  PREP("ncclAllGather");
  return DONE(nc.all_gather(in, out, (size_t)each, t, c->comm, s),
              "ncclAllGather");
}

int cuda_nccl_reduce_scatter(cuda_nccl_comm *c, void *stream, const void *in,
                             void *out, int64_t each, int dtype, int op,
                             char *why, size_t n) {
  PREP("ncclReduceScatter");
  return DONE(nc.reduce_scatter(in, out, (size_t)each, t, nccl_op(op, dtype),
                                c->comm, s), "ncclReduceScatter");
}

int cuda_nccl_send(cuda_nccl_comm *c, void *stream, const void *buf,
                   int64_t count, int dtype, int peer, char *why, size_t n) {
  PREP("ncclSend");
  return DONE(nc.send(buf, (size_t)count, t, peer, c->comm, s), "ncclSend");
}

int cuda_nccl_recv(cuda_nccl_comm *c, void *stream, void *buf, int64_t count,
                   int dtype, int peer, char *why, size_t n) {
  PREP("ncclRecv");
  return DONE(nc.recv(buf, (size_t)count, t, peer, c->comm, s), "ncclRecv");
}

int cuda_nccl_group(cuda_nccl_comm *c, bool start, char *why, size_t n) {
  if (start) {
    ncclResult_t r = nc.group_start();
    if (r != ncclSuccess) return nccl_fail(r, "ncclGroupStart", why, n);
    c->grouped = true;
    return 0;
  }
  c->grouped = false;
  return settle(c, nc.group_end(), "ncclGroupEnd", why, n);
}
