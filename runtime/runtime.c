/* dt_runtime: creation from options and environment, the lazily created
 * default runtime, the thread's current runtime, synchronize, destroy and
 * per-rank memory queries. Environment variables are read once, when a
 * runtime is created; each has an option field. */
#include "runtime/runtime.h"
#include "sim/mpi_env.h"
#include "runtime/dry.h"
#include "runtime/spmd_run.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/gemm.h"
#include "runtime/backend.h"
#include "runtime/cuda_map.h"
#include "runtime/exec.h"
#include "runtime/offload.h"
#include "runtime/trace_session.h"
#include "sched/future.h"
#include "sim/collectives.h"

#define RUNTIME_MAX_RANKS 4096
#define RUNTIME_DEFAULT_RANKS 8
#define RUNTIME_DEFAULT_RING 1024
/* how long dt_runtime_synchronize watches the queues before it parks */
#define SYNC_WATCH_NS ((int64_t)50 * 1000)

/* What this thread holds a reference on: its current runtime, and the
 * default runtime it was last handed (see set_current / runtime_default) */
static _Thread_local struct tls_refs {
  dt_runtime *current, *seen_default;
} tls;
#define tls_current (tls.current)
static void set_current(dt_runtime *rt);
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static dt_runtime *default_rt;
static bool default_atexit;

/* The runtimes made and not yet destroyed (a list through live_next).
 * dt_runtime_destroy takes its runtime off the list before anything else,
 * comparing pointers only: a second destroy of the same pointer, even of
 * freed memory, finds it missing and fails, and of two concurrent destroys
 * exactly one proceeds. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static dt_runtime *live_head;

static void live_add(dt_runtime *rt) {
  pthread_mutex_lock(&live_lock);
  rt->live_next = live_head;
  live_head = rt;
  pthread_mutex_unlock(&live_lock);
}

/* true if rt was live: the caller now owns its destruction */
static bool live_take(const dt_runtime *rt) {
  pthread_mutex_lock(&live_lock);
  dt_runtime **p = &live_head;
  while (*p && *p != rt) p = &(*p)->live_next;
  bool found = *p != NULL;
  if (found) *p = (*p)->live_next;
  pthread_mutex_unlock(&live_lock);
  return found;
}

void runtime_ref(dt_runtime *rt) {
  /* relaxed: the caller holds a reference already */
  atomic_fetch_add_explicit(&rt->refcount, 1, memory_order_relaxed);
}

/* the fault of a rank whose message could not be copied */
static char fault_no_memory[] = "a device fault (out of host memory for its "
                                "message)";

void runtime_unref(dt_runtime *rt) {
  /* acq_rel: every use happens-before the free */
  if (atomic_fetch_sub_explicit(&rt->refcount, 1, memory_order_acq_rel) != 1)
    return;
  runtime_dry_free(rt->dry);
  for (int r = 0; r < rt->nranks; r++) {
    char *f = atomic_load_explicit(&rt->ranks[r].fault, memory_order_relaxed);
    if (f != fault_no_memory) free(f);
  }
  free(rt->ranks);
  pthread_cond_destroy(&rt->spmd_turn);
  pthread_mutex_destroy(&rt->spmd_lock);
  free(rt);
}

void runtime_rank_fault(dt_runtime *rt, int rank, const char *msg) {
  size_t n = strlen(msg) + 1;
  char *m = malloc(n), *none = NULL;
  if (m) memcpy(m, msg, n);
  else m = fault_no_memory;
  /* release: the message's bytes before the pointer; the first stays */
  if (!atomic_compare_exchange_strong_explicit(&rt->ranks[rank].fault, &none,
                                               m, memory_order_release,
                                               memory_order_relaxed) &&
      m != fault_no_memory)
    free(m);
}

const char *runtime_rank_fault_of(const dt_runtime *rt, int rank) {
  /* acquire: pairs with runtime_rank_fault's release (the bytes) */
  return atomic_load_explicit(&((dt_runtime *)rt)->ranks[rank].fault,
                              memory_order_acquire);
}

/* the CPUs this thread may run on: the rank threads it starts inherit the
 * mask and pin themselves to rank % this count (runtime/exec.c); 0 if the
 * mask cannot be read */
static int affinity_cpus(void) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 0;
  return CPU_COUNT(&allowed);
}

/* integer env var in [lo, hi]; 0 if unset; -1 + error if malformed */
static int64_t env_int(const char *name, int64_t lo, int64_t hi) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || *end || x < lo || x > hi) {
    core_error_set(DT_ERR_INVALID_ARGUMENT,
                 "dt_runtime_create: environment variable %s=\"%s\" is not "
                 "an integer in [%lld, %lld]", name, v, (long long)lo,
                 (long long)hi);
    return -1;
  }
  return x;
}

/* A runtime's settings after options, environment and defaults, each
 * validated with a message naming the option or variable and its value. */
typedef struct settings {
  int ranks;
  int64_t memory;        /* bytes per rank, 0 = unlimited */
  uint32_t ring;         /* records in flight per rank */
  uint32_t spin_ns;      /* 0 = the pool's default */
  int64_t timeout_ns;    /* collective watchdog, 0 = none */
  bool pin;              /* bind rank threads to CPUs */
  bool auto_redistribute; /* insert redistributions (else strict) */
  uint64_t chaos_seed;   /* 0: off */
  bool dry_run;          /* shapes only (runtime/dry.h) */
  bool no_help;          /* DTORCH_NO_HELP=1: ranks run all their records */
  bool cuda;             /* device "cuda" / "cuda:K" */
  bool host_fallback;    /* DTORCH_CUDA_FALLBACK=1 (CUDA only) */
  int *gpu;              /* CUDA: each rank's GPU (freed by the creator) */
  bool mpi;              /* launcher "mpi": one process of an MPI job */
} settings;

/* records in flight over all ranks: queue memory is reserved (not touched)
 * for this many records */
#define RUNTIME_MAX_RECORDS (1LL << 22)
#define RUNTIME_MAX_TIMEOUT_MS (1000LL * 86400 * 365) /* a year */

static dt_status check_ring(int64_t r, int ranks, const char *what) {
  if (r < 2 || r > (1 << 20) || (r & (r - 1)))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: %s "
                          "%lld is not a power of two in [2, 1048576] (records "
                          "in flight per rank)", what, (long long)r);
  if (r * ranks > RUNTIME_MAX_RECORDS)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: %s "
                          "%lld x %d ranks = %lld records in flight; at most "
                          "%lld", what, (long long)r, ranks,
                          (long long)(r * ranks), RUNTIME_MAX_RECORDS);
  return DT_OK;
}

/* pinning: options.pin_ranks, else DTORCH_PIN_RANKS, else on. Pinned
 * ranks keep a CPU each while they fit (two ranks woken by one thread
 * otherwise land on one CPU and time-slice a collective for
 * milliseconds) and spread evenly when they do not. */
static dt_status resolve_pin(const dt_runtime_options *o, bool *pin) {
  int v = o ? o->pin_ranks : 0;
  if (v < -1 || v > 1)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: "
                          "options.pin_ranks %d is not -1 (off), 0 (from "
                          "DTORCH_PIN_RANKS) or 1 (on)", v);
  if (v) {
    *pin = v > 0;
    return DT_OK;
  }
  int64_t e = env_int("DTORCH_PIN_RANKS", 0, 1);
  if (e < 0) return DT_ERR_INVALID_ARGUMENT;
  *pin = !getenv("DTORCH_PIN_RANKS") || !*getenv("DTORCH_PIN_RANKS") || e == 1;
  return DT_OK;
}

/* chaos: options.chaos_seed, else DTORCH_CHAOS; a small ring and short
 * spins unless set (more waits for a full ring, more parking) */
static dt_status resolve_chaos(const dt_runtime_options *o, settings *s) {
  s->chaos_seed = o ? o->chaos_seed : 0;
  const char *e = getenv("DTORCH_CHAOS");
  if (!s->chaos_seed && e && *e) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(e, &end, 0);
    if (errno || *end || e[0] == '-')
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: "
                            "DTORCH_CHAOS=\"%s\" is not a seed (an unsigned "
                            "integer; 0 = off)", e);
    s->chaos_seed = v;
  }
  if (!s->chaos_seed) return DT_OK;
  bool ring_set = (o && o->ring_capacity) || getenv("DTORCH_RING_CAPACITY");
  if (!ring_set) s->ring = 4u << (s->chaos_seed % 3);
  if (!s->spin_ns) s->spin_ns = 1000u * (uint32_t)(1 + s->chaos_seed % 4);
  return DT_OK;
}

static dt_status resolve_timeout(const dt_runtime_options *o, int64_t *ns) {
  int64_t ms = o ? o->collective_timeout_ms : 0;
  if (ms > RUNTIME_MAX_TIMEOUT_MS)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: "
                          "options.collective_timeout_ms %lld is more than a "
                          "year (< 0 = no watchdog)", (long long)ms);
  if (ms) {
    *ns = ms > 0 ? ms * 1000000 : 0;
    return DT_OK;
  }
  const char *e = getenv("DTORCH_COLLECTIVE_TIMEOUT"); /* seconds */
  if (!e || !*e) {
    *ns = 300 * 1000000000LL;
    return DT_OK;
  }
  char *end;
  double sec = strtod(e, &end);
  if (end == e || *end || !isfinite(sec) || sec < 0 ||
      sec > RUNTIME_MAX_TIMEOUT_MS / 1000.0 || (sec > 0 && sec < 0.001))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: "
                          "DTORCH_COLLECTIVE_TIMEOUT=\"%s\" is not 0 (no "
                          "watchdog) or a number of seconds in [0.001, "
                          "31536000]", e);
  *ns = (int64_t)(sec * 1e9);
  return DT_OK;
}

/* options.device, else DTORCH_DEVICE, else "cpu"; "cuda" / "cuda:K":
 * the CUDA backend, whose GPU map (runtime/cuda_map.h) decides the rank
 * count when neither the options nor DTORCH_NUM_RANKS do */
static dt_status resolve_device(const dt_runtime_options *o, settings *s,
                                int64_t *n) {
  const char *dev = o && o->device ? o->device : getenv("DTORCH_DEVICE");
  const char *what = o && o->device ? "options.device" : "DTORCH_DEVICE";
  const char *const *rd = o ? o->rank_devices : NULL;
  if (!dev || !*dev || strcmp(dev, "cpu") == 0) {
    if (rd)
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: "
                            "options.rank_devices needs device \"cuda\"");
    if (!*n) *n = RUNTIME_DEFAULT_RANKS;
    return DT_OK;
  }
  if (runtime_cuda_device_index(dev) == -2)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: %s "
                          "\"%s\" is unknown (expected \"cpu\", \"cuda\" or "
                          "\"cuda:K\")", what, dev);
  if (rd && !(o && o->num_ranks))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: "
                          "options.rank_devices needs options.num_ranks (its "
                          "length)");
  int64_t fallback = env_int("DTORCH_CUDA_FALLBACK", 0, 1);
  if (fallback < 0) return DT_ERR_INVALID_ARGUMENT;
  /* the emulation has no kernels: every op runs on the host */
  s->host_fallback = fallback == 1 || runtime_cuda_emulated();
  bool same;
  int same_ranks;
  dt_status st = runtime_cuda_parse_env(
      getenv("DTORCH_DTENSOR_IN_SAME_DEVICE"),
      getenv("DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE"),
      RUNTIME_MAX_RANKS, &same, &same_ranks);
  if (st != DT_OK) return st;
  int k = (int)*n;
  st = runtime_cuda_emulated()
           ? runtime_emu_prepare(&k, same, same_ranks, &s->gpu)
           : runtime_cuda_prepare(dev, &k, same, same_ranks, rd, &s->gpu);
  if (st != DT_OK) return st;
  s->cuda = true;
  *n = k;
  return DT_OK;
}

/* options.launcher, else DTORCH_LAUNCHER: NULL / "" / "none" one process,
 * "mpi" an MPI job's */
static dt_status resolve_launcher(const dt_runtime_options *o, settings *s) {
  const char *l = o && o->launcher ? o->launcher : getenv("DTORCH_LAUNCHER");
  const char *what = o && o->launcher ? "options.launcher" : "DTORCH_LAUNCHER";
  if (!l || !*l || strcmp(l, "none") == 0) return DT_OK;
  if (strcmp(l, "mpi") == 0) {
    s->mpi = true;
    return DT_OK;
  }
  return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: %s "
                        "\"%s\" is unknown (expected \"mpi\", or NULL / "
                        "\"none\" for one process)", what, l);
}

static dt_status resolve(const dt_runtime_options *o, settings *s) {
  memset(s, 0, sizeof *s);
  dt_status lst = resolve_launcher(o, s);
  if (lst != DT_OK) return lst;
  if (o && (o->num_ranks < 0 || o->num_ranks > RUNTIME_MAX_RANKS))
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_runtime_create: options.num_ranks %d is outside "
                        "[0, %d] (0 = DTORCH_NUM_RANKS or %d)", o->num_ranks,
                        RUNTIME_MAX_RANKS, RUNTIME_DEFAULT_RANKS);
  int64_t n = o && o->num_ranks ? o->num_ranks
                                : env_int("DTORCH_NUM_RANKS", 1, RUNTIME_MAX_RANKS);
  if (n < 0) return DT_ERR_INVALID_ARGUMENT;
  dt_status st = resolve_device(o, s, &n);
  if (st != DT_OK) return st;
  s->ranks = (int)n;
  s->memory = o ? o->device_memory : 0;
  if (s->memory < 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_runtime_create: options.device_memory %lld is "
                        "negative", (long long)s->memory);
  const char *mem = getenv("DTORCH_DEVICE_MEMORY");
  if (!s->memory && mem && *mem) {
    s->memory = sim_parse_bytes(mem);
    if (s->memory < 0)
      return core_error_set(DT_ERR_INVALID_ARGUMENT,
                          "dt_runtime_create: DTORCH_DEVICE_MEMORY=\"%s\" is "
                          "not a whole number of bytes (e.g. 80G, 512M, "
                          "1048576; 0 = unlimited)", mem);
  }
  if (o && o->ring_capacity) {
    if ((st = check_ring(o->ring_capacity, s->ranks,
                         "options.ring_capacity")) != DT_OK)
      return st;
    s->ring = (uint32_t)o->ring_capacity;
  } else {
    int64_t r = env_int("DTORCH_RING_CAPACITY", 2, 1 << 20);
    if (r < 0) return DT_ERR_INVALID_ARGUMENT;
    if (!r) r = RUNTIME_DEFAULT_RING;
    while (!getenv("DTORCH_RING_CAPACITY") && r > 16 &&
           r * s->ranks > RUNTIME_MAX_RECORDS)
      r /= 2; /* the default shrinks for thousands of ranks */
    if ((st = check_ring(r, s->ranks, "DTORCH_RING_CAPACITY")) != DT_OK)
      return st;
    s->ring = (uint32_t)r;
  }
  if (o && (o->spin_us < 0 || o->spin_us > 1000000))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: "
                          "options.spin_us %d is outside [0, 1000000]",
                          o->spin_us);
  s->spin_ns = o ? (uint32_t)o->spin_us * 1000u : 0;
  if ((st = resolve_pin(o, &s->pin)) != DT_OK) return st;
  if ((st = resolve_chaos(o, s)) != DT_OK) return st;
  int64_t dry = env_int("DTORCH_DRY_RUN", 0, 1);
  if (dry < 0) return DT_ERR_INVALID_ARGUMENT;
  s->dry_run = (o && o->dry_run) || dry == 1;
  if (s->dry_run) { /* nothing runs on the ranks: no ring to speak of */
    s->ring = 2;
    s->pin = false;
  }
  /* helping (sched/help.h) on unless DTORCH_NO_HELP=1 */
  int64_t nh = env_int("DTORCH_NO_HELP", 0, 1);
  if (nh < 0) return DT_ERR_INVALID_ARGUMENT;
  s->no_help = nh == 1;
  /* auto redistribution: the option, else DTORCH_AUTO_REDISTRIBUTE=1 */
  int64_t a = env_int("DTORCH_AUTO_REDISTRIBUTE", 0, 1);
  if (a < 0) return DT_ERR_INVALID_ARGUMENT;
  s->auto_redistribute = (o && o->auto_redistribute) || a == 1;
  if (s->mpi && s->cuda)
    return core_error_set(DT_ERR_UNSUPPORTED, "dt_runtime_create: device "
                          "\"cuda\" with launcher \"mpi\" is not supported "
                          "yet (docs/multiprocess.md); run CUDA ranks in one "
                          "process");
  if (s->mpi && s->dry_run)
    return core_error_set(DT_ERR_UNSUPPORTED, "dt_runtime_create: a dry run "
                          "is one process's (it moves no data): launcher "
                          "\"mpi\" and dry_run cannot be combined");
  return resolve_timeout(o, &s->timeout_ns);
}

/* CUDA: every rank's stream and pool, made before the threads start */
static dt_status open_cuda_ranks(dt_runtime *rt, const int *gpu) {
  if (runtime_cuda_emulated()) { /* host memory: nothing to open */
    rt->backend = &runtime_backend_emu;
    for (int i = 0; i < rt->nranks; i++) rt->ranks[i].gpu = gpu[i];
    return DT_OK;
  }
  rt->backend = runtime_backend_cuda_table();
  if (!(rt->offload = runtime_offload_create()))
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_runtime_create: out of "
                          "host memory");
  for (int i = 0; i < rt->nranks; i++) {
    rt->ranks[i].gpu = gpu[i];
    dt_status st = runtime_cuda_rank_open(rt, i);
    if (st != DT_OK) {
      while (i-- > 0) runtime_cuda_rank_close(rt, i);
      runtime_offload_destroy(rt->offload);
      rt->offload = NULL;
      return st;
    }
  }
  return DT_OK;
}

static void close_cuda_ranks(dt_runtime *rt) {
  runtime_offload_destroy(rt->offload); /* its jobs use the streams */
  rt->offload = NULL;
  if (rt->backend != runtime_backend_cuda_table()) return;
  runtime_nccl_close(rt); /* before the streams its communicators use */
  for (int i = 0; i < rt->nranks; i++) runtime_cuda_rank_close(rt, i);
}

static dt_runtime *create(const dt_runtime_options *o, settings *set);

/* launcher "mpi": joins the MPI job and takes this process's block of the
 * job's ranks (process p of P hosts ranks p*N/P .. (p+1)*N/P - 1) */
static dt_status join_processes(dt_runtime *rt) {
  static const char *fn = "dt_runtime_create";
  if (!(rt->mpi = sim_mpi_open(fn))) return core_last_status();
  int np = sim_mpi_size(rt->mpi), me = sim_mpi_rank(rt->mpi);
  if (rt->nranks % np != 0) {
    sim_mpi_close(rt->mpi);
    rt->mpi = NULL;
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: %d ranks (num_ranks "
                          "or DTORCH_NUM_RANKS) cannot be split evenly over the "
                          "MPI job's %d processes: make the ranks a multiple of "
                          "%d", fn, rt->nranks, np, np);
  }
  rt->nprocs = np;
  rt->proc = me;
  rt->nlocal = rt->nranks / np;
  rt->first_rank = me * rt->nlocal;
  return DT_OK;
}

dt_runtime *runtime_create(const dt_runtime_options *o) {
  settings set;
  if (resolve(o, &set) != DT_OK) {
    free(set.gpu);
    if (core_last_status() == DT_OK) /* never fail without a message */
      core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: invalid "
                     "options");
    return NULL;
  }
  dt_runtime *rt = create(o, &set);
  free(set.gpu);
  return rt;
}

static dt_runtime *create(const dt_runtime_options *o, settings *setp) {
  settings set = *setp;
  runtime_gate_init();
  int n = set.ranks;
  int64_t memory = set.memory;
  dt_runtime *rt = calloc(1, sizeof *rt);
  runtime_rank_slot *slots = aligned_alloc(64, sizeof *slots * (size_t)n);
  if (!rt || !slots) {
    free(rt);
    free(slots);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_runtime_create: out of memory for "
                 "%d ranks", n);
    return NULL;
  }
  memset(slots, 0, sizeof *slots * (size_t)n);
  atomic_init(&rt->refcount, 1);
  pthread_mutex_init(&rt->spmd_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&rt->spmd_turn, &ca);
  pthread_condattr_destroy(&ca);
  rt->coll_timeout_ns = set.timeout_ns;
  rt->nranks = n;
  rt->nprocs = 1;
  rt->nlocal = n;
  rt->backend = &runtime_backend_cpu;
  rt->device_memory = memory;
  rt->auto_redistribute = set.auto_redistribute;
  rt->pin_ranks = set.pin;
  rt->dry_run = set.dry_run;
  rt->host_fallback = set.host_fallback;
  if (set.dry_run && !(rt->dry = runtime_dry_new(o, n))) {
    free(rt);
    free(slots);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_runtime_create: out of memory");
    return NULL;
  }
  rt->ranks = slots;
  for (int i = 0; i < n; i++) sim_device_init(&slots[i].dev, i, memory);
  if (set.mpi && join_processes(rt) != DT_OK) {
    runtime_dry_free(rt->dry);
    free(slots);
    free(rt);
    return NULL;
  }
  if (set.cuda && open_cuda_ranks(rt, set.gpu) != DT_OK) {
    sim_mpi_close(rt->mpi);
    runtime_dry_free(rt->dry);
    free(slots);
    free(rt);
    return NULL;
  }
  /* ranks are the parallelism: BLAS single-threaded (process-wide), and
   * elementwise kernels split into chunks idle ranks steal */
  cpu_blas_set_threads(1);
  cpu_set_parallel(sched_parallel_for);
  cpu_set_parallel_steps(sched_parallel_steps);
  sched_pool_config cfg = {.ranks = rt->nlocal, .queue_capacity = set.ring,
                           .record_size = runtime_exec_record_size(),
                           .exec = runtime_exec_record, .init = runtime_exec_rank_init,
                           .pending = runtime_exec_pending, .idle = runtime_exec_idle,
                           .helpable = set.no_help ? NULL : runtime_exec_helpable,
                           .ctx = rt, .spin_ns = set.spin_ns,
                           .chaos_seed = set.chaos_seed,
                           .rank_base = rt->first_rank, .fault_ranks = n,
                           .pin_cpus = set.pin ? affinity_cpus() : 0};
  rt->coll = sim_coll_world_create(n, set.timeout_ns);
  if (rt->coll) sim_coll_world_set_where(rt->coll, runtime_rank_where, rt);
  if (rt->coll && rt->mpi) sim_coll_world_set_procs(rt->coll, rt->mpi);
  if (rt->coll && set.cuda) {
    if (runtime_cuda_emulated()) runtime_emu_coll_attach(rt);
    else runtime_cuda_coll_attach(rt);
  }
  if (!rt->coll) {
    close_cuda_ranks(rt);
    sim_mpi_close(rt->mpi);
    runtime_dry_free(rt->dry);
    free(slots);
    free(rt);
    return NULL;
  }
  const char *why;
  rt->pool = sched_pool_create(&cfg, &why);
  if (!rt->pool) {
    core_error_set(DT_ERR_DEVICE, "dt_runtime_create: %s (%d ranks)", why, n);
    sim_coll_world_destroy(rt->coll);
    close_cuda_ranks(rt);
    sim_mpi_close(rt->mpi);
    runtime_dry_free(rt->dry);
    free(slots);
    free(rt);
    return NULL;
  }
  rt->faults = sched_pool_faults(rt->pool);
  /* before any record: the first publish orders these for the ranks */
  for (int i = 0; i < n; i++) slots[i].dev.faults = rt->faults;
  sim_coll_world_set_faults(rt->coll, rt->faults);
  runtime_trace_from_env(rt);
  live_add(rt);
  return rt;
}

static void teardown(dt_runtime *rt) {
  runtime_trace_at_destroy(rt); /* DTORCH_TRACE or a trace never ended */
  sched_pool_destroy(rt->pool); /* runs every published record, joins */
  rt->pool = NULL;
  atomic_store_explicit(&rt->dead, true, memory_order_release);
  /* a device backend's fetches still queued finish now; the tensors they
   * release find the runtime dead and free only their structs */
  runtime_offload_destroy(rt->offload);
  rt->offload = NULL;
  for (int i = 0; i < rt->nranks; i++) {
    /* storages other ranks handed over: structs only, data goes below */
    core_storage *s = atomic_exchange_explicit(&rt->ranks[i].remote_free, NULL,
                                             memory_order_acquire);
    while (s) {
      core_storage *next = s->next_free;
      runtime_storage_destroy_dead(s);
      s = next;
    }
    sim_device_teardown(&rt->ranks[i].dev);
  }
  close_cuda_ranks(rt); /* the pools free what tensors still held */
  sim_coll_world_destroy(rt->coll);
  rt->coll = NULL;
  sim_mpi_close(rt->mpi); /* after the world: its groups' messages are done */
  rt->mpi = NULL;
}

/* No call enters any more, the calls inside have left, the SPMD runs
 * waiting for a turn are told; then nothing of rt is reachable but what
 * the teardown itself runs (this thread passes the gate meanwhile). */
static void close_gate(dt_runtime *rt) {
  runtime_gate_close(rt);
  runtime_spmd_wake_waiters(rt);
}
static void close_and_teardown(dt_runtime *rt) {
  runtime_gate_begin_teardown(rt);
  teardown(rt);
  runtime_gate_end_teardown();
}

void runtime_destroy(dt_runtime *rt) {
  const char *fn = "dt_runtime_destroy";
  if (!rt) return;
  /* its own threads: the teardown joins them (pointer compares only) */
  if (runtime_gate_is_own(rt)) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: called on rank %d's thread "
                   "of this runtime (inside dt_spmd_run's function or a "
                   "rank's work), which the destroy would have to join; "
                   "destroy it from another thread once the run returned",
                   fn, sched_current_rank() + rt->first_rank);
    return;
  }
  if (runtime_gate_inside(rt)) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: called from inside a call "
                   "on this runtime (a callback it ran on this thread), "
                   "which the destroy would wait for", fn);
    return;
  }
  if (!live_take(rt)) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rt (%p) is not a live "
                   "runtime (destroyed already, or being destroyed by "
                   "another thread)", fn, (void *)rt);
    return;
  }
  pthread_mutex_lock(&default_lock);
  if (rt == default_rt) default_rt = NULL;
  pthread_mutex_unlock(&default_lock);
  close_gate(rt);
  /* a run in progress ends before the teardown joins its ranks; one that
   * never ends (it joins a thread that destroys) would hang the join: the
   * wait is bounded, and a timeout leaves rt closed but alive, for a
   * later dt_runtime_destroy to finish */
  if (runtime_spmd_take_turn(rt, fn, NULL) != DT_OK) {
    live_add(rt);
    return;
  }
  close_and_teardown(rt);
  runtime_spmd_give_turn(rt);
  /* a thread whose current runtime this was (this one too) keeps it, and
   * its factories fail with "destroyed" until it sets another */
  core_error_succeeded();
  core_clear_error();
  runtime_unref(rt);
}

int runtime_num_ranks(const dt_runtime *rt) { return rt ? rt->nranks : -1; }

static void destroy_default_at_exit(void) {
  pthread_mutex_lock(&default_lock);
  dt_runtime *rt = default_rt;
  default_rt = NULL;
  pthread_mutex_unlock(&default_lock);
  if (rt && live_take(rt)) {
    close_gate(rt);
    close_and_teardown(rt);
    runtime_unref(rt);
  }
  if (tls.seen_default) { /* the exiting thread's own reference */
    runtime_unref(tls.seen_default);
    tls.seen_default = NULL;
  }
}

/* The thread's references (tls) are dropped when it exits, through a
 * pthread key whose value is the address of its tls block. */
static pthread_key_t refs_key;
static pthread_once_t refs_once = PTHREAD_ONCE_INIT;
static void refs_at_thread_exit(void *p) {
  struct tls_refs *r = p;
  if (r->current) runtime_unref(r->current);
  if (r->seen_default) runtime_unref(r->seen_default);
  r->current = r->seen_default = NULL;
}
static void refs_key_make(void) {
  pthread_key_create(&refs_key, refs_at_thread_exit);
}
static void hold_refs(void) {
  pthread_once(&refs_once, refs_key_make);
  pthread_setspecific(refs_key, &tls);
}

/* The default runtime, made on first use. The calling thread keeps a
 * reference on the one it was handed (taken under the lock, dropped when
 * it is handed another or exits), so a pointer from dt_runtime_default
 * stays valid memory on this thread even if another thread destroys the
 * default meanwhile: it is then a dead runtime whose calls fail with "the
 * runtime was destroyed", and the next call here makes a new default. */
dt_runtime *runtime_default(void) {
  pthread_mutex_lock(&default_lock);
  if (!default_rt) {
    default_rt = runtime_create(NULL);
    if (default_rt) default_rt->is_default = true;
    if (default_rt && !default_atexit) {
      atexit(destroy_default_at_exit);
      default_atexit = true;
    }
  }
  dt_runtime *rt = default_rt, *old = tls.seen_default;
  if (rt != old) {
    if (rt) runtime_ref(rt);
    tls.seen_default = rt;
  }
  pthread_mutex_unlock(&default_lock);
  if (rt != old) {
    hold_refs();
    if (old) runtime_unref(old);
  }
  return rt;
}

/* The thread's current runtime holds a reference, so another thread's
 * dt_runtime_destroy leaves it a dead runtime (ops then fail with "the
 * runtime was destroyed"), never freed memory; the reference is dropped
 * when the thread picks another runtime or exits. */
static void set_current(dt_runtime *rt) {
  dt_runtime *old = tls_current;
  if (rt) runtime_ref(rt);
  tls_current = rt;
  hold_refs();
  if (old) runtime_unref(old);
}

dt_status runtime_set_current(dt_runtime *rt) {
  if (rt && atomic_load_explicit(&rt->closing, memory_order_acquire))
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_runtime_set_current: the runtime was destroyed");
  set_current(rt);
  return DT_OK;
}

dt_runtime *runtime_current(void) {
  return tls_current ? tls_current : runtime_default();
}

/* A current runtime that was destroyed (by this thread or another) stays
 * current: factories fail until the thread sets another one, so no
 * thread's tensors move to a fresh default unseen. (The default runtime,
 * when no current one is set, is replaced on first use instead.) */
dt_runtime *runtime_for_factories(const char *fn) {
  dt_runtime *rt = runtime_current();
  if (!rt && core_last_status() == DT_OK)
    core_error_set(DT_ERR_DEVICE, "%s: no runtime could be created", fn);
  /* acquire: pairs with runtime_gate_close's store; an early answer
   * (the gate decides for anything that reaches the pool) */
  if (rt && atomic_load_explicit(&rt->closing, memory_order_acquire)) {
    core_error_set(DT_ERR_DEVICE, "%s: this thread's current runtime was "
                   "destroyed (dt_runtime_set_current another one, or NULL "
                   "for the default)", fn);
    return NULL;
  }
  return rt;
}

dt_status runtime_parse_device(dt_runtime *rt, const char *device,
                                  const char *fn, int *rank) {
  int me = runtime_spmd_rank(rt);
  /* an SPMD rank's tensors default to its own, others to this process's
   * first rank */
  *rank = me >= 0 ? me : rt->first_rank;
  if (device && strncmp(device, "cpu", 3) == 0 &&
      rt->backend->key != CORE_KEY_CPU)
    return core_error_set(DT_ERR_DEVICE, "%s: options.device \"%s\": the "
                          "runtime's ranks are %s devices", fn, device,
                          rt->backend->name);
  if (!device || strcmp(device, "cpu") == 0) return DT_OK;
  if (strncmp(device, "cpu:", 4) == 0) {
    char *end;
    errno = 0;
    long r = strtol(device + 4, &end, 10);
    if (!errno && !*end && end != device + 4 && r >= 0 && r < rt->nranks) {
      *rank = (int)r;
      return runtime_rank_is_local(rt, *rank) ? DT_OK
                                             : runtime_not_local(rt, *rank, fn);
    }
    return core_error_set(DT_ERR_DEVICE, "%s: options.device \"%s\": the "
                        "runtime has ranks cpu:0 .. cpu:%d", fn, device,
                        rt->nranks - 1);
  }
  int k = runtime_cuda_device_index(device);
  if (k != -2 && rt->backend->key != CORE_KEY_CUDA)
    return core_error_set(DT_ERR_DEVICE, "%s: options.device \"%s\": the "
                          "runtime's ranks are %s devices (a CUDA tensor "
                          "needs a runtime made with device \"cuda\")", fn,
                          device, rt->backend->name);
  if (k != -2) {
    if (k < rt->nranks) {
      *rank = k < 0 ? *rank : k;
      return runtime_rank_is_local(rt, *rank) ? DT_OK
                                             : runtime_not_local(rt, *rank, fn);
    }
    return core_error_set(DT_ERR_DEVICE, "%s: options.device \"%s\": the "
                          "runtime has ranks cuda:0 .. cuda:%d", fn, device,
                          rt->nranks - 1);
  }
  return core_error_set(DT_ERR_INVALID_ARGUMENT,
                      "%s: options.device \"%s\" is unknown (expected "
                      "\"cpu\", \"cpu:N\" or \"cuda\")", fn, device);
}

static dt_status drain_inside(dt_runtime *rt);

dt_status runtime_drain(dt_runtime *rt) {
  if (!rt)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_runtime_synchronize: rt is NULL");
  if (runtime_spmd_rank(rt) >= 0) return DT_OK; /* its work runs inline */
  /* inside the gate: the queues and the barrier's pool stay */
  if (!runtime_gate_enter(rt, "dt_runtime_synchronize")) return DT_ERR_DEVICE;
  dt_status st = drain_inside(rt);
  runtime_gate_leave(rt);
  return st;
}

static dt_status drain_inside(dt_runtime *rt) {
  /* the fast way: watch the queues drain (no record, no wake-up); then
   * a barrier record every rank runs, whose future parks this thread */
  dt_status st = DT_OK;
  /* a device backend's queues drain before its streams do: always the
   * barrier there (its records sync the rank's stream) */
  bool cpu = rt->backend->key == CORE_KEY_CPU;
  if (!cpu || !sched_pool_try_drain(rt->pool, SYNC_WATCH_NS)) {
    dt_future *f = runtime_publish_barrier(rt, -1);
    if (!f) return core_last_status();
    st = sched_future_wait(f, -1);
    sched_future_release(f);
  }
  /* and the frees a rank's last records handed to other ranks */
  runtime_wait_remote_frees(rt);
  return st;
}

dt_status runtime_synchronize(dt_runtime *rt) {
  dt_status st = runtime_drain(rt);
  for (int r = 0; st == DT_OK && r < rt->nranks; r++) {
    const char *fault = runtime_rank_fault_of(rt, r);
    if (fault)
      st = core_error_set(DT_ERR_DEVICE, "dt_runtime_synchronize: rank %d: %s",
                          r, fault);
  }
  return st;
}

void runtime_note_memory(dt_runtime *rt, int rank) {
  runtime_rank_slot *s = &rt->ranks[rank];
  atomic_store_explicit(&s->used, s->dev.used, memory_order_relaxed);
  atomic_store_explicit(&s->peak, s->dev.peak, memory_order_relaxed);
}

dt_status runtime_memory(const dt_runtime *rt, int rank,
                            dt_memory_stats *out) {
  if (!rt || !out)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_runtime_memory: %s is NULL", rt ? "out" : "rt");
  if (rank < 0 || rank >= rt->nranks)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_runtime_memory: rank %d is outside [0, %d)", rank,
                        rt->nranks);
  if (!runtime_rank_is_local(rt, rank))
    return runtime_not_local(rt, rank, "dt_runtime_memory");
  const runtime_rank_slot *s = &rt->ranks[rank];
  out->used = atomic_load_explicit(&s->used, memory_order_relaxed);
  out->peak = atomic_load_explicit(&s->peak, memory_order_relaxed);
  out->capacity = rt->device_memory;
  return DT_OK;
}

int64_t runtime_queue_depth(const dt_runtime *rt, int rank) {
  if (!rt) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_queue_depth: rt is NULL");
    return -1;
  }
  if (rank < 0 || rank >= rt->nranks) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_queue_depth: rank %d is "
                   "outside [0, %d)", rank, rt->nranks);
    return -1;
  }
  if (!runtime_rank_is_local(rt, rank)) {
    runtime_not_local(rt, rank, "dt_runtime_queue_depth");
    return -1;
  }
  dt_runtime *w = (dt_runtime *)rt; /* the gate's marks, not rt's state */
  if (!runtime_gate_enter(w, "dt_runtime_queue_depth")) return -1;
  int64_t n = (int64_t)sched_pool_queue_depth(rt->pool, rank - rt->first_rank);
  runtime_gate_leave(w);
  return n;
}

/* ---- streams and events */
static dt_status check_rank(const dt_runtime *rt, int rank, const char *fn) {
  if (!rt) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rt is NULL", fn);
  if (rank < 0 || rank >= rt->nranks)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rank %d is outside "
                        "[0, %d)", fn, rank, rt->nranks);
  if (atomic_load_explicit(&rt->dead, memory_order_acquire))
    return core_error_set(DT_ERR_DEVICE, "%s: the runtime was destroyed", fn);
  return DT_OK;
}

dt_status runtime_not_local(const dt_runtime *rt, int rank, const char *fn) {
  int per = rt->nranks / rt->nprocs, q = rank / per;
  return core_error_set(DT_ERR_DEVICE, "%s: rank %d runs in process %d (ranks "
                        "%d..%d), not in this one (process %d, ranks %d..%d)",
                        fn, rank, q, q * per, q * per + per - 1, rt->proc,
                        rt->first_rank, rt->first_rank + rt->nlocal - 1);
}

dt_future *runtime_event_record(dt_runtime *rt, int rank) {
  if (check_rank(rt, rank, "dt_event_record") != DT_OK) return NULL;
  return runtime_publish_event(rt, rank);
}

/* runs on the waiting rank. A device rank waits (on the host) only until
 * the recording rank's thread has recorded the event, then makes its
 * stream wait for it on the device (cudaStreamWaitEvent) and goes on; a
 * CPU rank, or a future without an event of this backend (a fetch's,
 * another backend's), stalls the rank until the future completes. */
static void wait_event(void *arg, dt_runtime *rt, int rank) {
  const runtime_backend *b = rt->backend;
  if (b->key != CORE_KEY_CPU) {
    void *ev = sched_future_wait_event(arg, b);
    if (ev && b->event_wait(rt, rank, ev) == DT_OK) return;
  }
  sched_future_wait(arg, -1);
}
static void wait_event_done(void *arg) { sched_future_release(arg); }

static void empty_cache(void *arg, dt_runtime *rt, int rank) {
  (void)arg;
  if (rt->backend->trim) rt->backend->trim(rt, rank);
}

dt_status runtime_empty_cache(dt_runtime *rt) {
  if (!rt)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                          "dt_runtime_empty_cache: rt is NULL");
  if (atomic_load_explicit(&rt->dead, memory_order_acquire))
    return core_error_set(DT_ERR_DEVICE, "dt_runtime_empty_cache: the "
                          "runtime was destroyed");
  dt_status st = runtime_publish_call(rt, -1, empty_cache, NULL, NULL);
  if (st != DT_OK) return st;
  return runtime_drain(rt); /* a rank's fault is not the cache's */
}

dt_status runtime_stream_wait_event(dt_runtime *rt, int rank, dt_future *ev) {
  dt_status st = check_rank(rt, rank, "dt_stream_wait_event");
  if (st != DT_OK) return st;
  if (!ev)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_stream_wait_event: ev is NULL");
  /* one rank: fails only when rt is being destroyed */
  st = runtime_publish_named_call(rt, rank, "dt_stream_wait_event", wait_event,
                                  wait_event_done, sched_future_retain(ev));
  if (st != DT_OK) sched_future_release(ev);
  return st;
}
