/* The MPI job of multi-process runtimes (sim/mpi_env.h): who initialises
 * and finalises MPI, each handle's communicators, and the deadline-bounded
 * waits of the cross-process collectives. Compiled in every build; without
 * MPI only the refusing stubs remain. */
#include "sim/mpi_env.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "core/error.h"

int64_t sim_mpi_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#if !DTORCH_HAVE_MPI

sim_mpi *sim_mpi_open(const char *fn) {
  core_error_set(DT_ERR_UNSUPPORTED,
                 "%s: launcher \"mpi\": this build of dtorch has no MPI "
                 "(install libopenmpi-dev and rebuild; scripts/bootstrap.sh "
                 "installs it)", fn);
  return NULL;
}
void sim_mpi_close(sim_mpi *m) { (void)m; }
void sim_mpi_note_broken(int64_t wait_ns) { (void)wait_ns; }
int sim_mpi_size(const sim_mpi *m) { (void)m; return 1; }
int sim_mpi_rank(const sim_mpi *m) { (void)m; return 0; }
int sim_mpi_tag_ub(const sim_mpi *m) { (void)m; return 32767; }
bool sim_mpi_same_node(const sim_mpi *m, int q) { (void)m; return q == 0; }

#else

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "sim/mpi_internal.h"

struct sim_mpi {
  MPI_Comm coll, p2p;
  int size, rank, tag_ub;
  bool *same_node; /* [size] */
};

/* who owns MPI in this process (mpi_env.h): under init_lock, which also
 * serialises the collective communicator calls of concurrent opens and
 * closes (MPI forbids two threads in one collective on one communicator) */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool dtorch_initialised; /* dtorch called MPI_Init_thread */

dt_status sim_mpi_check(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return DT_OK;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) {
    snprintf(msg, sizeof msg, "MPI error code %d", rc);
  }
  return core_error_set(DT_ERR_DEVICE, "%s: %s", what, msg);
}

static const char *level_name(int level) {
  switch (level) {
  case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
  case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  default: return "an unknown thread level";
  }
}

/* the exit's bound on the barrier (sim_mpi_note_broken; 0: not broken,
 * wait as MPI_Finalize would). Relaxed: read at exit, after the runtimes'
 * threads were joined, which orders their stores before it. */
static _Atomic int64_t broken_wait_ns;
/* the exit barrier's communicator (made at MPI_Init_thread by dtorch) */
static MPI_Comm exit_comm = MPI_COMM_NULL;

void sim_mpi_note_broken(int64_t wait_ns) {
  /* at least 30 s: live processes reach their exits apart by what they
   * still do after the failure (other timeouts, cleanup) */
  const int64_t floor_ns = (int64_t)30 * 1000000000;
  if (wait_ns < floor_ns) wait_ns = floor_ns;
  int64_t was = atomic_load_explicit(&broken_wait_ns, memory_order_relaxed);
  while (was < wait_ns &&
         !atomic_compare_exchange_weak_explicit(&broken_wait_ns, &was, wait_ns,
                                                memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

/* the exit barrier: true when every process came (within the bound when
 * this process noted a break) */
static bool exit_barrier(void) {
  if (exit_comm == MPI_COMM_NULL) return true;
  int64_t wait = atomic_load_explicit(&broken_wait_ns, memory_order_relaxed);
  MPI_Request r;
  if (MPI_Ibarrier(exit_comm, &r) != MPI_SUCCESS) return false;
  int done = 0;
  int64_t deadline = sim_mpi_now_ns() + wait;
  while (!done && (wait == 0 || sim_mpi_now_ns() < deadline)) {
    if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (!done) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
  if (!done) return false; /* the request stays: MPI is left as it is */
  MPI_Comm_free(&exit_comm);
  return true;
}

/* at exit, after every runtime is gone (the handlers of a program's
 * earlier atexit calls run after this one): MPI_Finalize is collective,
 * and a process that initialised MPI and exits without it fails the job;
 * one whose peer stopped answering (sim_mpi_note_broken) must not wait
 * for it in MPI_Finalize */
static void finalize_at_exit(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || !exit_barrier()) return;
  MPI_Finalize();
}

static dt_status dup_world(MPI_Comm *out, const char *fn);

/* MPI initialised, at MPI_THREAD_MULTIPLE, by the program or by us; under
 * init_lock */
static dt_status ensure_init(const char *fn) {
  int inited = 0, finalized = 0, level = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: launcher \"mpi\": MPI was "
                          "already finalised in this process (MPI cannot be "
                          "initialised twice)", fn);
  }
  MPI_Initialized(&inited);
  if (!inited) {
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &level);
    if (rc != MPI_SUCCESS) {
      char what[160];
      snprintf(what, sizeof what, "%s: launcher \"mpi\": MPI_Init_thread", fn);
      return sim_mpi_check(rc, what);
    }
    dtorch_initialised = true;
    /* collective, as the init: every process has its exit barrier */
    if (dup_world(&exit_comm, fn) != DT_OK) exit_comm = MPI_COMM_NULL;
    atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&level);
  }
  if (level < MPI_THREAD_MULTIPLE) {
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: launcher \"mpi\": MPI "
                          "provides %s, dtorch needs MPI_THREAD_MULTIPLE (its "
                          "rank threads call MPI at once)%s", fn,
                          level_name(level), dtorch_initialised ? "" :
                          ": initialise MPI with MPI_Init_thread("
                          "MPI_THREAD_MULTIPLE) or let dtorch initialise it");
  }
  return DT_OK;
}

/* a duplicate of MPI_COMM_WORLD that returns errors; under init_lock */
static dt_status dup_world(MPI_Comm *out, const char *fn) {
  char what[160];
  snprintf(what, sizeof what, "%s: launcher \"mpi\": MPI_Comm_dup", fn);
  dt_status st = sim_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, out), what);
  if (st != DT_OK) return st;
  snprintf(what, sizeof what, "%s: launcher \"mpi\": MPI_Comm_set_errhandler", fn);
  st = sim_mpi_check(MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN), what);
  if (st != DT_OK) MPI_Comm_free(out);
  return st;
}

/* m->same_node from the node-local communicator's members, translated to
 * ranks of m->coll (= MPI_COMM_WORLD's); under init_lock */
static dt_status find_node(sim_mpi *m, const char *fn) {
  char what[160];
  snprintf(what, sizeof what, "%s: launcher \"mpi\": MPI_Comm_split_type", fn);
  MPI_Comm node;
  dt_status st = sim_mpi_check(MPI_Comm_split_type(m->coll,
      MPI_COMM_TYPE_SHARED, m->rank, MPI_INFO_NULL, &node), what);
  if (st != DT_OK) return st;
  int nn = 0;
  MPI_Comm_size(node, &nn);
  int *local = malloc(sizeof(int) * 2 * (size_t)nn);
  if (!local) {
    MPI_Comm_free(&node);
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: launcher \"mpi\": "
                          "%d node ranks", fn, nn);
  }
  int *world = local + nn;
  for (int i = 0; i < nn; i++) local[i] = i;
  MPI_Group gn, gw;
  MPI_Comm_group(node, &gn);
  MPI_Comm_group(m->coll, &gw);
  snprintf(what, sizeof what, "%s: launcher \"mpi\": MPI_Group_translate_ranks", fn);
  st = sim_mpi_check(MPI_Group_translate_ranks(gn, nn, local, gw, world), what);
  for (int i = 0; st == DT_OK && i < nn; i++) {
    if (world[i] >= 0 && world[i] < m->size) m->same_node[world[i]] = true;
  }
  MPI_Group_free(&gn);
  MPI_Group_free(&gw);
  MPI_Comm_free(&node);
  free(local);
  return st;
}

static void free_handle(sim_mpi *m) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    if (m->coll != MPI_COMM_NULL) MPI_Comm_free(&m->coll);
    if (m->p2p != MPI_COMM_NULL) MPI_Comm_free(&m->p2p);
  }
  free(m->same_node);
  free(m);
}

/* the handle's communicators and facts; under init_lock */
static dt_status fill_handle(sim_mpi *m, const char *fn) {
  dt_status st = dup_world(&m->coll, fn);
  if (st == DT_OK) st = dup_world(&m->p2p, fn);
  if (st != DT_OK) return st;
  MPI_Comm_size(m->coll, &m->size);
  MPI_Comm_rank(m->coll, &m->rank);
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(m->p2p, MPI_TAG_UB, &ub, &flag);
  m->tag_ub = flag && ub ? *ub : 32767;
  m->same_node = calloc((size_t)m->size, sizeof(bool));
  if (!m->same_node) {
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: launcher \"mpi\": "
                          "%d processes", fn, m->size);
  }
  return find_node(m, fn);
}

sim_mpi *sim_mpi_open(const char *fn) {
  sim_mpi *m = calloc(1, sizeof *m);
  if (!m) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: launcher \"mpi\": out of memory", fn);
    return NULL;
  }
  m->coll = m->p2p = MPI_COMM_NULL;
  pthread_mutex_lock(&init_lock);
  dt_status st = ensure_init(fn);
  if (st == DT_OK) st = fill_handle(m, fn);
  if (st != DT_OK) {
    free_handle(m);
    m = NULL;
  }
  pthread_mutex_unlock(&init_lock);
  return m;
}

void sim_mpi_close(sim_mpi *m) {
  if (!m) return;
  pthread_mutex_lock(&init_lock);
  free_handle(m);
  pthread_mutex_unlock(&init_lock);
}

int sim_mpi_size(const sim_mpi *m) { return m ? m->size : 1; }
int sim_mpi_rank(const sim_mpi *m) { return m ? m->rank : 0; }
int sim_mpi_tag_ub(const sim_mpi *m) { return m ? m->tag_ub : 32767; }
bool sim_mpi_same_node(const sim_mpi *m, int q) {
  if (!m) return q == 0;
  return q >= 0 && q < m->size && m->same_node[q];
}
MPI_Comm sim_mpi_coll_comm(const sim_mpi *m) { return m->coll; }
MPI_Comm sim_mpi_p2p_comm(const sim_mpi *m) { return m->p2p; }

/* sim_mpi_wait after a timeout or an error: cancels every active request,
 * gives the cancels SIM_MPI_CANCEL_GRACE_NS to take effect, frees what is
 * still active; returns how many were active */
static int cancel_pending(MPI_Request *reqs, int n, sim_mpi_req_state *state) {
  int active = 0, left = 0;
  for (int i = 0; i < n; i++) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&reqs[i]);
    active++;
  }
  left = active;
  const struct timespec nap = {0, 20000};
  int64_t grace = sim_mpi_now_ns() + SIM_MPI_CANCEL_GRACE_NS;
  while (left > 0 && sim_mpi_now_ns() < grace) {
    for (int i = 0; i < n; i++) {
      if (reqs[i] == MPI_REQUEST_NULL) continue;
      int flag = 0, cancelled = 0;
      MPI_Status st;
      if (MPI_Test(&reqs[i], &flag, &st) != MPI_SUCCESS || !flag) continue;
      MPI_Test_cancelled(&st, &cancelled);
      if (state) state[i] = cancelled ? SIM_MPI_REQ_CANCELLED : SIM_MPI_REQ_DONE;
      left--;
    }
    if (left > 0) nanosleep(&nap, NULL);
  }
  for (int i = 0; i < n; i++) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    MPI_Request_free(&reqs[i]);
    if (state) state[i] = SIM_MPI_REQ_ABANDONED;
  }
  return active;
}

/* the first failed request of an MPI_ERR_IN_STATUS answer (freeing the
 * failed ones MPI left allocated), as the thread's error */
static dt_status in_status_error(MPI_Request *reqs, int out, const int *idx,
                                 const MPI_Status *sts, const char *what) {
  int bad = -1, code = MPI_ERR_OTHER;
  for (int k = 0; k < out; k++) {
    if (sts[k].MPI_ERROR == MPI_SUCCESS) continue;
    if (bad < 0) { bad = idx[k]; code = sts[k].MPI_ERROR; }
    if (reqs[idx[k]] != MPI_REQUEST_NULL) MPI_Request_free(&reqs[idx[k]]);
  }
  char w[200];
  snprintf(w, sizeof w, "%s: request %d", what, bad);
  return sim_mpi_check(code, w);
}

/* one MPI_Testsome pass: 1 all done, 0 some pending, -1 error (set) */
static int test_some(MPI_Request *reqs, int n, int *idx, MPI_Status *sts,
                     const char *what) {
  int out = 0;
  int rc = MPI_Testsome(n, reqs, &out, idx, sts);
  if (rc == MPI_ERR_IN_STATUS) {
    in_status_error(reqs, out, idx, sts, what);
    return -1;
  }
  if (rc != MPI_SUCCESS) {
    sim_mpi_check(rc, what);
    return -1;
  }
  return out == MPI_UNDEFINED;
}

dt_status sim_mpi_wait(sim_mpi *m, MPI_Request *reqs, int n,
                       int64_t deadline_ns, sim_mpi_req_state *state,
                       const char *what) {
  (void)m;
  if (n < 0 || (n > 0 && !reqs)) {
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: sim_mpi_wait: n is "
                          "%d, reqs %p", what, n, (void *)reqs);
  }
  for (int i = 0; state && i < n; i++) state[i] = SIM_MPI_REQ_DONE;
  int idx_small[64];
  MPI_Status sts_small[64];
  int *idx = idx_small;
  MPI_Status *sts = sts_small;
  if (n > 64) {
    idx = malloc(sizeof(int) * (size_t)n);
    sts = malloc(sizeof(MPI_Status) * (size_t)n);
    if (!idx || !sts) {
      free(idx);
      free(sts);
      cancel_pending(reqs, n, state);
      return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: sim_mpi_wait: %d "
                            "requests", what, n);
    }
  }
  /* spin ~20 us (a reply from a process on another core is ~1 us away),
   * then yield for up to 5 ms (a peer process sharing this core runs at
   * once, and an answer arriving meanwhile is seen within a yield: a
   * sleep would add its whole length to every small collective's
   * latency, ~500 us measured with 20-50 us sleeps), then sleep 50 us
   * growing to 1 ms between tests (a peer that is slow, or stopped) */
  int64_t start = sim_mpi_now_ns();
  int64_t spin_until = start + 20000, yield_until = start + 5000000;
  long nap_ns = 50000;
  dt_status st = DT_OK;
  for (;;) {
    int r = test_some(reqs, n, idx, sts, what);
    if (r == 1) break;
    if (r < 0) {
      st = DT_ERR_DEVICE;
      cancel_pending(reqs, n, state);
      break;
    }
    int64_t now = sim_mpi_now_ns();
    if (deadline_ns > 0 && now >= deadline_ns) {
      int k = cancel_pending(reqs, n, state);
      st = core_error_set(DT_ERR_TIMEOUT, "%s: timed out with %d of %d MPI "
                          "requests pending", what, k, n);
      break;
    }
    if (now < spin_until) continue;
    if (now < yield_until) {
      sched_yield();
      continue;
    }
    struct timespec nap = {0, nap_ns};
    nanosleep(&nap, NULL);
    if (nap_ns < 1000000) nap_ns += nap_ns / 2;
  }
  if (idx != idx_small) {
    free(idx);
    free(sts);
  }
  return st;
}

#endif
