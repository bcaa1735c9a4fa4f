/* The runtime (the virtual world): N ranks, each a simulated device with
 * its own allocator and a worker thread of the pool; tensors of a runtime
 * hold references to it. Internal half of dt_runtime_* (dtorch.h). */
#ifndef RUNTIME_RUNTIME_H
#define RUNTIME_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "dtorch/dtorch.h"
#include "sched/pool.h"
#include "sim/collectives.h"
#include "sim/device.h"

struct core_storage;
struct runtime_backend;

typedef struct runtime_rank_slot {
  _Alignas(64) sim_device dev;                 /* owned by the rank thread */
  _Atomic(struct core_storage *) remote_free;    /* frees handed over by other
                                                  rank threads (Treiber) */
  _Atomic int64_t remote_pending; /* pushed and not yet destroyed */
  _Atomic int64_t used, peak;                  /* mirrors of dev for readers */
  /* what the rank runs now (a static name; NULL: nothing) and whether it
   * is inside an SPMD function: read by the collective watchdog's report */
  _Atomic(const char *) where;
  _Atomic bool in_spmd;
  /* a sticky device fault (runtime_rank_fault): a heap message, set once */
  _Atomic(char *) fault;
  /* the live storages of this rank (runtime/storage.c): while > 0 they
   * hold one reference on the runtime between them, so making and
   * freeing a shard touches this rank's line, not the shared refcount */
  _Alignas(64) _Atomic int64_t storages;
  void *dev_ctx;      /* the backend's per-rank state (CUDA: a cuda_rank) */
  int gpu;            /* CUDA: the rank's GPU */
} runtime_rank_slot;

struct dt_runtime {
  /* the creator, meshes, threads' current-runtime references, and one for
   * each rank with live storages (runtime_rank_slot.storages) */
  _Atomic int64_t refcount;
  _Atomic bool dead;          /* destroyed: no new work */
  int nranks;                 /* the job's ranks (every process's) */
  /* multi-process jobs (docs/multiprocess.md): nprocs processes, this one
   * process `proc`, hosting ranks [first_rank, first_rank + nlocal) as
   * its pool's threads 0 .. nlocal-1; one process: 1, 0, 0, nranks */
  int nprocs, proc, first_rank, nlocal;
  struct sim_mpi *mpi;        /* the MPI job this runtime joined, or NULL */
  int64_t device_memory;      /* per rank, bytes; 0 = unlimited */
  bool auto_redistribute;
  bool is_default;
  bool pin_ranks;             /* rank threads bind themselves to a CPU */
  sched_pool *pool;
  struct runtime_backend *backend; /* the ranks' device kind (backend.h) */
  runtime_rank_slot *ranks;
  struct sim_coll_world *coll;    /* emulated collectives between the ranks */
  sim_coll_device coll_dev;       /* CUDA ranks: how coll moves device data */
  struct runtime_nccl *nccl;      /* CUDA ranks on several GPUs: NCCL */
  struct sched_faults *faults; /* the pool's (dt_fault_inject) */
  bool dry_run;               /* shapes only (runtime/dry.c) */
  bool host_fallback;         /* DTORCH_CUDA_FALLBACK: ops without a device
                                 kernel run on host copies */
  struct runtime_dry *dry;    /* its counts and cost model, else NULL */
  struct runtime_offload *offload; /* device backends: waits off the ranks */
  _Atomic int spmd_active;    /* dt_spmd_run calls in flight (runtime/spmd_run.h) */
  /* the gate (runtime/gate.c): closing is set once, by dt_runtime_destroy,
   * before it waits for the calls inside to leave; gate_foreign counts the
   * threads inside that are inside another runtime too */
  _Atomic bool closing;
  _Atomic int64_t gate_foreign;
  struct dt_runtime *live_next; /* the live runtimes, under live_lock */
  int64_t coll_timeout_ns;    /* the collective watchdog's, 0 = none */
  /* whose turn it is to run SPMD (runtime/spmd_run.c): one run at a time,
   * the holder described for a waiter that times out */
  pthread_mutex_t spmd_lock;
  pthread_cond_t spmd_turn;   /* CLOCK_MONOTONIC */
  bool spmd_held;
  int64_t spmd_since_ns;
  char spmd_holder[320];
};

/* ---- the gate (runtime/gate.c: the algorithm and its memory orders)
 * A call that reaches rt's pool, devices, collectives or fault table from
 * a thread other than rt's rank threads does it between enter and leave;
 * dt_runtime_destroy closes the gate and waits until no call is inside
 * before it frees them. Entries nest on a thread. enter: false once rt is
 * being destroyed, with DT_ERR_DEVICE "<fn>: the runtime was destroyed"
 * (fn NULL: no error set). */
bool runtime_gate_enter(dt_runtime *rt, const char *fn);
/* once, before the first runtime is made (the gate's fence form) */
void runtime_gate_init(void);
void runtime_gate_leave(dt_runtime *rt);
/* marks the calling thread as one of rt's rank threads (their publishes
 * need no gate: the pool outlives them) */
void runtime_gate_mark_own(const dt_runtime *rt);
/* the calling thread is one of rt's rank threads */
bool runtime_gate_is_own(const dt_runtime *rt);
/* the calling thread is inside rt's gate (a callback run inline there) */
bool runtime_gate_inside(const dt_runtime *rt);
/* sets closing and waits until no call is inside */
void runtime_gate_close(dt_runtime *rt);
/* the destroying thread passes the gate of rt while it tears it down */
void runtime_gate_begin_teardown(const dt_runtime *rt);
void runtime_gate_end_teardown(void);

void runtime_ref(dt_runtime *rt);
void runtime_unref(dt_runtime *rt);
/* the runtime factories use on this thread: current, else the default
 * (created on first use); NULL + error if it cannot be made */
dt_runtime *runtime_for_factories(const char *fn);
/* mirrors rank's device counters for runtime_memory (rank thread) */
void runtime_note_memory(dt_runtime *rt, int rank);
/* Marks rank's device state as faulty (the first message stays): work
 * already issued to its stream may have been cut short (an NCCL
 * communicator aborted under it), so every later fetch of the rank's data
 * and every dt_runtime_synchronize fails with msg, as a CUDA sticky error
 * does. Any thread; never cleared. */
void runtime_rank_fault(dt_runtime *rt, int rank, const char *msg);
/* the fault's message, or NULL */
const char *runtime_rank_fault_of(const dt_runtime *rt, int rank);
/* dt_runtime_synchronize without the faults' report: everything issued so
 * far has run (the status of the wait itself) */
dt_status runtime_drain(dt_runtime *rt);
/* the device string "cpu" / "cpu:N" of opts → rank; error names fn */
dt_status runtime_parse_device(dt_runtime *rt, const char *device,
                                  const char *fn, int *rank);

/* storage of rank `rank` of rt (runtime/storage.c): the struct now, the
 * data when the rank runs the op that makes it */
struct core_storage *runtime_storage_new(dt_runtime *rt, int rank, size_t nbytes,
                                  const char *fn);
/* rank thread of s only: frees the data and the struct */
void runtime_storage_destroy_on_rank(struct core_storage *s, dt_runtime *rt,
                                int rank);
/* the runtime is destroyed (its memory is gone): frees the struct */
void runtime_storage_destroy_dead(struct core_storage *s);
/* A new contiguous tensor whose storage (data not yet allocated) belongs
 * to `rank` of rt. */
dt_tensor *runtime_tensor_alloc(dt_dtype dtype, int ndim, const int64_t *sizes,
                           dt_runtime *rt, int rank, const char *fn);

/* ---- the implementations behind public entry points (api/) */
/* dt_runtime_empty_cache (dtorch.h) */
dt_status runtime_empty_cache(dt_runtime *rt);
/* dt_runtime_create (dtorch.h) */
dt_runtime *runtime_create(const dt_runtime_options *opts);
/* dt_runtime_destroy (dtorch.h) */
void runtime_destroy(dt_runtime *rt);
/* dt_runtime_num_ranks (dtorch.h) */
int runtime_num_ranks(const dt_runtime *rt);
/* dt_runtime_num_processes, dt_runtime_process_index (dtorch.h) */
static inline int runtime_num_processes(const dt_runtime *rt) { return rt->nprocs; }
static inline int runtime_process_index(const dt_runtime *rt) { return rt->proc; }
/* whether global rank r's thread runs in this process */
static inline bool runtime_rank_is_local(const dt_runtime *rt, int r) {
  return r >= rt->first_rank && r < rt->first_rank + rt->nlocal;
}
/* DT_ERR_DEVICE "fn: rank R runs in process Q (ranks a..b), not in this
 * one (...)" for a rank of another process */
dt_status runtime_not_local(const dt_runtime *rt, int rank, const char *fn);
/* dt_runtime_synchronize (dtorch.h) */
dt_status runtime_synchronize(dt_runtime *rt);
/* dt_runtime_default (dtorch.h) */
dt_runtime *runtime_default(void);
/* dt_runtime_set_current (dtorch.h) */
dt_status runtime_set_current(dt_runtime *rt);
/* dt_runtime_current (dtorch.h) */
dt_runtime *runtime_current(void);
/* dt_event_record (dtorch.h) */
dt_future *runtime_event_record(dt_runtime *rt, int rank);
/* dt_stream_wait_event (dtorch.h) */
dt_status runtime_stream_wait_event(dt_runtime *rt, int rank, dt_future *ev);
/* dt_fault_inject, dt_fault_clear, dt_fault_count (dtorch.h) */
dt_status runtime_fault_inject(dt_runtime *rt, const dt_fault *f);
dt_status runtime_fault_clear(dt_runtime *rt);
int64_t runtime_fault_count(const dt_runtime *rt);
/* dt_runtime_memory (dtorch.h) */
dt_status runtime_memory(const dt_runtime *rt, int rank, dt_memory_stats *out);
/* dt_runtime_queue_depth (dtorch.h) */
int64_t runtime_queue_depth(const dt_runtime *rt, int rank);

#endif
