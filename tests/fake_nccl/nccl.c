/* A stand-in for NCCL (libnccl.so.2) for test_nccl_host: the host side of
 * NCCL's non-blocking communicators without a GPU, so that the runtime's
 * NCCL path (runtime/coll_nccl.c, kernels/cuda/nccl.c) can be driven on
 * any machine. Loaded through LD_LIBRARY_PATH in place of the real one.
 *
 * A communicator's init returns ncclInProgress and its state
 * (ncclCommGetAsyncError) stays ncclInProgress until every member of its
 * id called init; collectives only count themselves; ncclCommFinalize
 * leaves the state in progress once, then done. fake_nccl_set makes one
 * member's init or one member's calls fail; fake_nccl_counts reports what
 * was called, so the test can check that every communicator made was
 * destroyed or aborted exactly once. */
#include <nccl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct ncclComm {
  unsigned key;
  int n, rank, finalize_polls;
};

enum { KEYS = 64 };
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned next_key;
static int arrived[KEYS];
static int fail_init = -1, fail_call = -1;
static int counts[6]; /* inits, calls, aborts, finalizes, destroys, live */

/* the test's controls (looked up with dlsym) */
void fake_nccl_set(int init_rank, int call_rank) {
  pthread_mutex_lock(&mu);
  fail_init = init_rank;
  fail_call = call_rank;
  pthread_mutex_unlock(&mu);
}
void fake_nccl_counts(int *out) {
  pthread_mutex_lock(&mu);
  memcpy(out, counts, sizeof counts);
  pthread_mutex_unlock(&mu);
}

static void count(int i, int d) {
  pthread_mutex_lock(&mu);
  counts[i] += d;
  pthread_mutex_unlock(&mu);
}

const char *ncclGetErrorString(ncclResult_t r) {
  return r == ncclInternalError ? "fake internal error" : "fake error";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 0, sizeof *id);
  pthread_mutex_lock(&mu);
  unsigned k = next_key++ % KEYS;
  arrived[k] = 0;
  pthread_mutex_unlock(&mu);
  memcpy(id->internal, &k, sizeof k);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int n, ncclUniqueId id,
                                    int rank, ncclConfig_t *cfg) {
  if (!cfg || cfg->blocking != 0) return ncclInvalidArgument;
  pthread_mutex_lock(&mu);
  bool fail = rank == fail_init;
  pthread_mutex_unlock(&mu);
  if (fail) return ncclInternalError;
  struct ncclComm *c = calloc(1, sizeof *c);
  if (!c) return ncclSystemError;
  memcpy(&c->key, id.internal, sizeof c->key);
  c->n = n;
  c->rank = rank;
  pthread_mutex_lock(&mu);
  arrived[c->key % KEYS]++;
  counts[0]++;
  counts[5]++;
  pthread_mutex_unlock(&mu);
  *comm = c;
  return ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *state) {
  pthread_mutex_lock(&mu);
  bool all = arrived[c->key % KEYS] >= c->n;
  pthread_mutex_unlock(&mu);
  *state = all ? ncclSuccess : ncclInProgress;
  if (all && c->finalize_polls > 0) {
    c->finalize_polls--;
    *state = ncclInProgress;
  }
  return ncclSuccess;
}

static ncclResult_t freed(ncclComm_t c, int what) {
  count(what, 1);
  count(5, -1);
  free(c);
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c) { return freed(c, 2); }
ncclResult_t ncclCommDestroy(ncclComm_t c) { return freed(c, 4); }
ncclResult_t ncclCommFinalize(ncclComm_t c) {
  count(3, 1);
  c->finalize_polls = 1;
  return ncclInProgress;
}

static ncclResult_t call(ncclComm_t c) {
  pthread_mutex_lock(&mu);
  bool fail = c->rank == fail_call;
  counts[1]++;
  pthread_mutex_unlock(&mu);
  return fail ? ncclInternalError : ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  (void)s, (void)r, (void)n, (void)t, (void)op, (void)st;
  return call(c);
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t,
                           int root, ncclComm_t c, cudaStream_t st) {
  (void)s, (void)r, (void)n, (void)t, (void)root, (void)st;
  return call(c);
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, ncclDataType_t t,
                        ncclRedOp_t op, int root, ncclComm_t c,
                        cudaStream_t st) {
  (void)s, (void)r, (void)n, (void)t, (void)op, (void)root, (void)st;
  return call(c);
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t,
                           ncclComm_t c, cudaStream_t st) {
  (void)s, (void)r, (void)n, (void)t, (void)st;
  return call(c);
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n,
                               ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t st) {
  (void)s, (void)r, (void)n, (void)t, (void)op, (void)st;
  return call(c);
}
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer,
                      ncclComm_t c, cudaStream_t st) {
  (void)s, (void)n, (void)t, (void)peer, (void)st;
  return call(c);
}
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer,
                      ncclComm_t c, cudaStream_t st) {
  (void)r, (void)n, (void)t, (void)peer, (void)st;
  return call(c);
}
ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclInProgress; }
