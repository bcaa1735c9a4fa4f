/*
 * dtorch.h — the whole public C API of dtorch.
 *
 * A worked example (single device; later the same calls take a mesh):
 *
 *   #include <dtorch/dtorch.h>
 *
 *   int main(void) {
 *     dt_manual_seed(0);
 *     dt_tensor *x = dt_randn(DT_SHAPE(4, 8), NULL);       // float32 [4, 8]
 *     dt_tensor *w = dt_randn(DT_SHAPE(16, 8), NULL);      // [out, in]
 *     dt_tensor *h = dt_relu(dt_linear(x, w, NULL));       // [4, 16]
 *     dt_tensor *p = dt_softmax(h, 1);
 *     float host[64];
 *     if (dt_to_host(p, host, sizeof host) != DT_OK) {
 *       fprintf(stderr, "%s\n", dt_last_error());          // names the call
 *       return 1;
 *     }
 *     dt_tensor_release(p); dt_tensor_release(h);
 *     dt_tensor_release(w); dt_tensor_release(x);
 *     return 0;
 *   }
 *
 * Conventions (every function below follows them; docs/abi.md says why):
 * - Names. dt_<object>_<verb> for functions, dt_ types, DT_ macros and enum
 *   values. A maker is dt_<object>_create[_<what differs>] (dt_mesh_create
 *   takes explicit ranks, dt_mesh_create_range ranks 0..n-1); op and
 *   factory names follow PyTorch (dt_add, dt_zeros). Names kept only for
 *   older programs are marked "alias" and stay exported, as they are.
 * - Destructors. Refcounted handles (those with a _retain: dt_tensor,
 *   dt_mesh, dt_future) are dropped with _release; owned objects with one
 *   owner (dt_optimizer, dt_op_counter, dt_safetensors_info) with _free;
 *   the runtime, which runs threads, with dt_runtime_destroy (waits for its
 *   work, then frees). _release / _free / _destroy of NULL are no-ops, and
 *   _retain(NULL) returns NULL (keeping an earlier call's error).
 * - Ownership. Functions that make an object return a NEW reference (or
 *   owned object) and BORROW their arguments; a "borrowed" result (e.g.
 *   dt_tensor_mesh) is valid while its source is held. A NULL tensor
 *   argument returns NULL and keeps the first error, so
 *   dt_relu(dt_add(a, b)) reports the add's error — but the intermediate
 *   must still be released when it is not NULL; chain only where a leak
 *   does not matter or release explicitly.
 * - Errors, one rule per kind of result; each failure sets this thread's
 *   last error (dt_last_status / dt_last_error: a message naming the
 *   function, the argument and the values); success leaves it alone:
 *     a pointer (handle, tensor, string)    NULL
 *     dt_status                             the status (DT_OK: success)
 *     a count, size, index or length        -1 (int or int64_t)
 *     bool                                  false
 *     dt_shape                              ndim == -1
 *     dt_dtype                              DT_DTYPE_COUNT
 *     dt_placement                          kind == DT_PLACEMENT_INVALID
 *     void                                  nothing; a NULL handle or string
 *                                           it needs sets the error (a pop
 *                                           with nothing pushed is a no-op)
 *   Where NULL, false or -1 is also an ordinary answer (dt_tensor_mesh of
 *   a single-device tensor, dt_mesh_dim_name of an unnamed dim, a leaf's
 *   dt_tensor_grad_fn), a failure is told apart by the last error: call
 *   dt_clear_error first. dt_version, dt_last_error, functions of a value
 *   (dt_dtype_name, dt_dtype_size, dt_status_name: "?" / 0 for a value
 *   outside the enum) and this thread's counters and mode
 *   (dt_comm_count_end, dt_sharding_cache_stats, dt_redistribute_mode_get)
 *   cannot fail.
 * - Structs. dt_shape and dt_placement are fixed value types. Every other
 *   struct ends in `uint64_t reserved[N]`: write it with designated
 *   initialisers or {0} (the reserved words must be zero: a non-zero one
 *   is an error, DT_ERR_INVALID_ARGUMENT), and later 1.x releases carve new
 *   fields out of that space whose 0 means today's behaviour, so the
 *   struct's size and every offset stay the same (docs/abi.md).
 * - Values. Every op makes a new tensor; views share storage with their
 *   base, as in PyTorch. A tensor's shape, dtype, strides and placements
 *   never change; its values change only through dt_copy_ (section
 *   "in-place", docs/inplace.md), which writes the storage in stream
 *   order, so every view of it sees the write and every op issued before
 *   it still reads the old values. (Op arguments are not const all the
 *   same: adding it would break callers' tables of function pointers.)
 * - Thread safety: every function may be called from any thread; a tensor
 *   may be read by several threads at once. The last error is per thread.
 * - Headers: this one declares everything; it includes
 *   <dtorch/autograd.h> (gradients, in-place writes, optimisers),
 *   <dtorch/debug.h> (shadow checks, communication debugging, inspection,
 *   traces),
 *   <dtorch/sim.h> (dry runs, fault injection) and <dtorch/spmd.h> (the
 *   per-rank model), each of which may also be included on its own.
 */
#ifndef DTORCH_DTORCH_H
#define DTORCH_DTORCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DTORCH_BUILDING)
#define DT_API __attribute__((visibility("default")))
#else
#define DT_API
#endif

/* ----------------------------------------------------------------- version
 * The version of these headers (the same as the project's, checked at
 * build time); dt_version() is the library's ("1.0.0"), so a program can
 * see whether it runs on the library it was compiled against. Static
 * storage; any thread. docs/abi.md: what a version change may break. */
#define DT_VERSION_MAJOR 1
#define DT_VERSION_MINOR 0
#define DT_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, for #if */
#define DT_VERSION_NUMBER                                                   \
  (DT_VERSION_MAJOR * 10000 + DT_VERSION_MINOR * 100 + DT_VERSION_PATCH)
DT_API const char *dt_version(void);

/* ------------------------------------------------------------------ errors */
typedef enum dt_status {
  DT_OK = 0, DT_ERR_INVALID_ARGUMENT, DT_ERR_SHAPE, DT_ERR_DTYPE,
  DT_ERR_PLACEMENT, DT_ERR_MESH, DT_ERR_OUT_OF_MEMORY, DT_ERR_DEVICE,
  DT_ERR_IO, DT_ERR_TIMEOUT, DT_ERR_DESYNC, DT_ERR_FAULT, DT_ERR_UNSUPPORTED,
  DT_ERR_INTERNAL /* grow at the end */
} dt_status;

/* This thread's last failure status and message ("" / DT_OK if none).
 * A successful call does not clear them; dt_clear_error does. */
DT_API dt_status   dt_last_status(void);
DT_API const char *dt_last_error(void);
DT_API void        dt_clear_error(void);
DT_API const char *dt_status_name(dt_status s);   /* "DT_ERR_SHAPE" */

/* ------------------------------------------------------------ value types */
typedef enum dt_dtype {
  DT_FLOAT32, DT_FLOAT64, DT_FLOAT16, DT_BFLOAT16, DT_INT32, DT_INT64,
  DT_UINT8, DT_BOOL, DT_DTYPE_COUNT
} dt_dtype;
DT_API const char *dt_dtype_name(dt_dtype d);   /* "float32"; "?" if bad */
DT_API size_t      dt_dtype_size(dt_dtype d);   /* bytes; 0 if bad */

#define DT_MAX_DIMS 8
typedef struct dt_shape { int ndim; int64_t dims[DT_MAX_DIMS]; } dt_shape;
/* DT_SHAPE() is a 0-d (scalar) shape; DT_SHAPE(4, 128) a 2-d one. */
#define DT_SHAPE(...)                                                       \
  ((dt_shape){ .ndim = (int)(sizeof((int64_t[]){0, ##__VA_ARGS__}) /        \
                             sizeof(int64_t)) - 1,                          \
               .dims = { __VA_ARGS__ } })

typedef enum dt_reduce_op { DT_REDUCE_SUM, DT_REDUCE_AVG, DT_REDUCE_MAX,
  DT_REDUCE_MIN, DT_REDUCE_PROD } dt_reduce_op;
typedef enum dt_placement_kind { DT_PLACEMENT_REPLICATE, DT_PLACEMENT_SHARD,
  DT_PLACEMENT_PARTIAL } dt_placement_kind;
typedef struct dt_placement { dt_placement_kind kind; int dim;
  dt_reduce_op reduce; } dt_placement;
#define DT_REPLICATE ((dt_placement){ DT_PLACEMENT_REPLICATE, 0, DT_REDUCE_SUM })
#define DT_SHARD(d) ((dt_placement){ DT_PLACEMENT_SHARD, (d), DT_REDUCE_SUM })
#define DT_PARTIAL(op) ((dt_placement){ DT_PLACEMENT_PARTIAL, 0, (op) })
#define DT_PLACEMENTS(...) ((const dt_placement[]){ __VA_ARGS__ })
/* The kind dt_tensor_placement returns when it fails (not a placement). */
#define DT_PLACEMENT_INVALID ((dt_placement_kind)-1)

/* Size checks for the structs' reserved space (docs/abi.md): a layout
 * that changes by mistake fails to compile here. */
#if defined(__cplusplus)
#define DT_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define DT_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

typedef struct dt_runtime dt_runtime;   /* the virtual world: N ranks */
typedef struct dt_future dt_future;     /* completion of async work */
typedef struct dt_mesh dt_mesh;         /* device mesh */
typedef struct dt_tensor dt_tensor;     /* a (global) tensor handle */

/* ----------------------------------------------------------------- runtime
 * A runtime is N virtual ranks, each a simulated device with its own memory
 * and worker thread. Ops are validated on the caller's thread and run on
 * the rank that holds their inputs, in issue order; calls return at once
 * and data comes back with dt_to_host / dt_to_host_async. Code that never
 * makes a runtime uses the default one (created on first use, destroyed at
 * exit). NULL options = defaults + environment (DTORCH_NUM_RANKS,
 * DTORCH_DEVICE_MEMORY, DTORCH_RING_CAPACITY; README). */
typedef struct dt_runtime_options { const char *device; /* "cpu" | "cuda" */
  int num_ranks; /* 0 = from env, else 8 */ bool auto_redistribute;
  /* auto_redistribute: ops on DTensors insert the redistributions their
     inputs need (counted by dt_comm_count); false = DTORCH_AUTO_REDISTRIBUTE
     (1) or strict: an op that would need a collective fails with
     DT_ERR_PLACEMENT and a message naming the cheapest fix */
  int64_t device_memory;  /* bytes per rank; 0 = DTORCH_DEVICE_MEMORY or
                             unlimited */
  int ring_capacity;      /* op records in flight (power of two); 0 = 1024 */
  int spin_us;            /* an idle rank spins this long before it parks;
                             0 = 20 */
  int64_t collective_timeout_ms; /* watchdog; 0 = DTORCH_COLLECTIVE_TIMEOUT
                                    (seconds) or 300 s; < 0 = none */
  int pin_ranks;          /* rank threads bound round-robin to the CPUs the
                             process may use: 1 on, -1 off, 0 =
                             DTORCH_PIN_RANKS (0 or 1) or on */
  uint64_t chaos_seed;    /* != 0: chaos scheduling (docs/spmd.md): seeded
                             yields, delays and failed steals at the
                             scheduling points, a small ring (4-16 records
                             unless ring_capacity is set) and short spins;
                             results stay bitwise the same. 0 =
                             DTORCH_CHAOS (a seed) or off */
  bool dry_run;           /* shapes only (docs/spmd.md "Dry runs"): ops
                             propagate placements, plan redistributions and
                             count collectives and per-rank memory, but
                             allocate no data and compute nothing; values
                             cannot be fetched (DT_ERR_UNSUPPORTED); false =
                             DTORCH_DRY_RUN (0 or 1) */
  double dry_link_gbps;   /* dry-run cost model: link bandwidth per rank,
                             GB/s (0 = 100) */
  double dry_link_latency_us; /* per collective step (0 = 5) */
  double dry_mem_gbps;    /* device memory bandwidth, GB/s (0 = 2000) */
  double dry_tflops;      /* matmul throughput, TFLOP/s (0 = 400) */
  const char *const *rank_devices; /* device "cuda" only: NULL, or
                             num_ranks strings "cuda:K", rank i on GPU K
                             (distinct GPUs, or all one GPU); docs/cuda.md */
  const char *launcher;   /* NULL = one process (or DTORCH_LAUNCHER);
                             "mpi": this process is one of the MPI job's,
                             hosting its block of num_ranks (the job's
                             total) as rank threads (docs/multiprocess.md) */
  uint64_t reserved[15];  /* zero; later fields are carved from here, size
                             unchanged */
} dt_runtime_options;
#if UINTPTR_MAX == UINT64_MAX
DT_STATIC_ASSERT(sizeof(dt_runtime_options) == 232,
                 "dt_runtime_options: 1.x layout");
#endif
/* Returns: a new runtime (its threads running). Errors: bad options or
 * environment, no memory, threads that cannot start. Ownership: destroy it.
 * Thread safety: any thread; any number of runtimes may coexist. */
DT_API dt_runtime *dt_runtime_create(const dt_runtime_options *opts);
/* Waits for all issued work, joins the threads and frees the devices.
 * Tensors still held stay valid handles, but ops and fetches on them fail
 * with DT_ERR_DEVICE. NULL is a no-op. Errors (dt_last_status; DT_OK when
 * destroyed): rt not a live runtime (destroyed already, even if freed,
 * or by another thread now) or called on one of rt's rank threads
 * (inside a dt_spmd_run function): DT_ERR_INVALID_ARGUMENT, nothing done;
 * a dt_spmd_run in progress did not end within the collective timeout:
 * DT_ERR_TIMEOUT, rt closed to new work but not freed (destroy it again).
 * Thread safety: any thread, while others use rt through a reference
 * (rt current on them, their tensors): their calls complete or fail with
 * DT_ERR_DEVICE, waits on its futures complete. A destroyed runtime
 * stays current where it was: factories there fail with DT_ERR_DEVICE
 * until dt_runtime_set_current picks another (docs/engine.md). */
DT_API void        dt_runtime_destroy(dt_runtime *rt);
DT_API int         dt_runtime_num_ranks(const dt_runtime *rt);
/* Multi-process jobs (launcher "mpi", docs/multiprocess.md): the job's
 * processes, this one's index, and whether a global rank's thread runs in
 * this process (process p hosts ranks p*N/P .. (p+1)*N/P - 1). A
 * one-process runtime: 1, 0, every rank. Errors: rt NULL (-1 / false),
 * rank out of range (false); each sets the last error. */
DT_API int         dt_runtime_num_processes(const dt_runtime *rt);
DT_API int         dt_runtime_process_index(const dt_runtime *rt);
DT_API bool        dt_runtime_rank_is_local(const dt_runtime *rt, int rank);
/* Blocks until every op issued to rt before the call has run on every
 * rank. */
DT_API dt_status   dt_runtime_synchronize(dt_runtime *rt);
/* The default runtime (made on first use); NULL + error if it cannot be. */
DT_API dt_runtime *dt_runtime_default(void);
/* This thread's runtime for factories (NULL = back to the default); it
 * holds a reference, so another thread's destroy leaves calls here
 * failing with DT_ERR_DEVICE, never reading freed memory. */
DT_API dt_status   dt_runtime_set_current(dt_runtime *rt);
DT_API dt_runtime *dt_runtime_current(void);
/* Streams and events. Each rank runs what is issued to it in order (its
 * compute stream). An event is a marker in a rank's stream: the returned
 * future completes when everything issued to that rank before it has run.
 * dt_stream_wait_event makes `rank` run nothing issued after the call
 * until `ev` completes (PyTorch's stream.wait_event). */
DT_API dt_future  *dt_event_record(dt_runtime *rt, int rank);
DT_API dt_status   dt_stream_wait_event(dt_runtime *rt, int rank,
                                        dt_future *ev);
/* One rank's device memory: bytes in use, the peak, the capacity (0 =
 * unlimited). A snapshot; updated as the rank runs. */
typedef struct dt_memory_stats { int64_t used, peak, capacity;
  uint64_t reserved[5]; /* zeroed by the library; later counters */
} dt_memory_stats;
/* Returns every rank's cached device blocks to the system (the caching
 * allocator keeps freed blocks of 256 KiB and more for reuse; like
 * torch.cuda.empty_cache). Waits until every rank has done it, after the
 * work issued before. Errors: rt NULL or destroyed. Thread safety: any
 * thread but a rank's. */
DT_API dt_status   dt_runtime_empty_cache(dt_runtime *rt);
DT_API dt_status   dt_runtime_memory(const dt_runtime *rt, int rank,
                                     dt_memory_stats *out);
/* Cancels the single-device ops issued to rt before the call that have
 * not finished: pending ones do not run, running CPU kernels stop at
 * their next chunk (a float sum over 2^62 elements within milliseconds);
 * each one's outputs are poisoned with DT_ERR_TIMEOUT and "<op>:
 * cancelled by dt_runtime_cancel", which fetches and later ops on them
 * report. Ops issued after the call run normally. Not stopped: in-place
 * ops, ops on DTensors, frees, collectives, fetches, events, a kernel
 * that runs as one piece, one already running on a GPU.
 * Returns: DT_OK. Errors: rt NULL (DT_ERR_INVALID_ARGUMENT) or destroyed
 * (DT_ERR_DEVICE). Ownership: none. Thread safety: any thread, also while
 * another waits for the ops (docs/engine.md, "Cancelling"). */
DT_API dt_status   dt_runtime_cancel(dt_runtime *rt);
/* Records issued to `rank` and not yet run (its own stream and the
 * all-rank records it has not reached): a gauge for a server's metrics,
 * exact only while nothing is being issued. Returns: the count, or -1
 * with the error set (rt NULL, rank out of range, rt destroyed:
 * DT_ERR_DEVICE). Thread safety: any thread. */
DT_API int64_t     dt_runtime_queue_depth(const dt_runtime *rt, int rank);

/* ------------------------------------------------------------------ meshes
 * An n-D arrangement of a runtime's ranks, row-major, with optional dim
 * names (PyTorch's DeviceMesh). rt NULL = this thread's runtime;
 * device_type NULL, or the kind of the runtime's ranks: "cpu", or "cuda"
 * for a runtime made with device "cuda" (another kind: DT_ERR_DEVICE).
 * Returns: a new mesh, or NULL. Ownership: refcounted, release what you
 * make. Thread safety: any thread. */
/* explicit ranks (runtime rank ids, row-major), e.g. [[0, 1], [2, 3]]
 * (PyTorch's DeviceMesh(device_type, mesh)) */
DT_API dt_mesh *dt_mesh_create(dt_runtime *rt, const char *device_type,
                               dt_shape shape, const int *ranks,
                               const char *const *dim_names);
/* ranks 0..n-1 (n = the shape's product) in row-major order */
DT_API dt_mesh *dt_mesh_create_range(dt_runtime *rt, const char *device_type,
                                     dt_shape shape,
                                     const char *const *dim_names);
/* alias of dt_mesh_create_range (PyTorch's init_device_mesh name; errors
 * name dt_mesh_init) */
DT_API dt_mesh *dt_mesh_init(dt_runtime *rt, const char *device_type,
                             dt_shape shape, const char *const *dim_names);
DT_API int      dt_mesh_ndim(const dt_mesh *m);
DT_API dt_shape dt_mesh_shape(const dt_mesh *m);
DT_API void     dt_mesh_release(dt_mesh *m);          /* NULL no-op */
DT_API dt_mesh *dt_mesh_retain(dt_mesh *m);
DT_API int      dt_mesh_size(const dt_mesh *m);       /* number of ranks */
DT_API dt_runtime *dt_mesh_runtime(const dt_mesh *m);  /* borrowed */
/* the runtime rank at coordinates coords[ndim]; -1 + error if out of range */
DT_API int      dt_mesh_rank(const dt_mesh *m, const int64_t *coords);
/* the coordinates of a runtime rank; error if the rank is not in m */
DT_API dt_status dt_mesh_coords(const dt_mesh *m, int rank, int64_t *coords);
DT_API const char *dt_mesh_dim_name(const dt_mesh *m, int dim); /* or NULL */
DT_API int      dt_mesh_dim_index(const dt_mesh *m, const char *name);
/* The sub-mesh over the named dims (in m's order) that contains runtime
 * rank `rank` (PyTorch's mesh["tp"] seen from that rank). */
DT_API dt_mesh *dt_mesh_sub(const dt_mesh *m, const char *const *names,
                            int n, int rank);
/* m with the named dims (adjacent, in order) merged into one named
 * new_name (NULL: the names joined with "_"). */
DT_API dt_mesh *dt_mesh_flatten(const dt_mesh *m, const char *const *names,
                                int n, const char *new_name);
/* "DeviceMesh('cpu', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))" */
DT_API int      dt_mesh_format(const dt_mesh *m, char *buf, size_t len);

/* ----------------------------------------------------------------- tensors */
/* NULL options = float32, single device, no grad. `device` and `mesh` are
 * exclusive. device: NULL or "cpu" (rank 0 of this thread's
 * runtime), or "cpu:N" (rank N). */
typedef struct dt_tensor_options { dt_dtype dtype; dt_mesh *mesh;
  const dt_placement *placements; /* NULL = all Replicate */
  const char *device; /* exclusive with mesh */ bool requires_grad;
  uint64_t reserved[8]; /* zero; later fields are carved from here */
} dt_tensor_options;

/* Factories. Returns: a new tensor. Errors: negative dims, bad dtype,
 * device+mesh. Ownership: caller releases. Thread safety: any thread. */
DT_API dt_tensor *dt_empty(dt_shape shape, const dt_tensor_options *o);
DT_API dt_tensor *dt_zeros(dt_shape shape, const dt_tensor_options *o);
DT_API dt_tensor *dt_ones(dt_shape shape, const dt_tensor_options *o);
DT_API dt_tensor *dt_full(dt_shape shape, double value,
                          const dt_tensor_options *o);
/* [start, end) by step; length ceil((end - start) / step). */
DT_API dt_tensor *dt_arange(double start, double end, double step,
                            const dt_tensor_options *o);
/* Random: counter-based Philox 4x32-10 keyed by (seed, offset, element
 * index). Each call advances this process's offset by the numel drawn, so
 * element i of a tensor gets the same value whatever later splits it. */
DT_API dt_tensor *dt_rand(dt_shape shape, const dt_tensor_options *o);
DT_API dt_tensor *dt_randn(dt_shape shape, const dt_tensor_options *o);
DT_API void       dt_manual_seed(uint64_t seed);  /* resets the offset too */
DT_API dt_tensor *dt_zeros_like(const dt_tensor *t);
DT_API dt_tensor *dt_ones_like(const dt_tensor *t);
DT_API dt_tensor *dt_full_like(const dt_tensor *t, double value);

/* data = the full global value, contiguous, row-major, of o->dtype;
 * placements say how it is spread. data is copied before the call
 * returns. A bool element is one byte: nonzero is true and is stored as
 * 1 (C's conversion to _Bool, numpy's astype(bool)), so bytes such as 2
 * or 255 act as true in every op; data itself is not written. */
DT_API dt_tensor *dt_from_host(const void *data, dt_shape shape,
                               const dt_tensor_options *o);
/* The full value, contiguous row-major in t's dtype; dst_bytes must be at
 * least numel * dtype size. Partial placements are reduced. */
DT_API dt_status  dt_to_host(dt_tensor *t, void *dst, size_t dst_bytes);
/* The same without waiting: dst must stay valid until the future
 * completes. NULL + error on bad arguments; an execution error of t (an
 * op it came from failed) completes the future with that error, whether
 * it is known at the call or later. */
DT_API dt_future *dt_to_host_async(dt_tensor *t, void *dst, size_t dst_bytes);

/* Zero-copy access to a single-device tensor's memory on its rank (the
 * Python package's numpy and DLPack views). Waits until every op issued
 * to t's rank before the call has run, then *data = the address of t's
 * first element (NULL for no elements); read t's elements through
 * dt_tensor_strides / dt_tensor_storage_offset's layout (already applied
 * to *data). Do not write through it (views share the memory; write with
 * dt_copy_); a dt_copy_ issued later changes what it shows once it ran
 * (dt_runtime_synchronize before reading again). Valid while a reference to t (or a view of it) is held and
 * its runtime lives. Errors: t or data NULL, t a DTensor
 * (DT_ERR_UNSUPPORTED), a dry run, t's runtime destroyed, an op t came
 * from failed (its status and message). Thread safety: any thread but a
 * rank's. */
DT_API dt_status  dt_tensor_local_data(dt_tensor *t, void **data);

/* rank = the runtime's rank id; error if the rank is not in t's mesh (a
 * single-device tensor: its own rank). The shard, contiguous. */
DT_API dt_status  dt_local_to_host(dt_tensor *t, int rank, void *dst,
                                   size_t dst_bytes);
DT_API dt_shape   dt_tensor_local_shape(const dt_tensor *t, int rank);
DT_API dt_shape   dt_tensor_shape(const dt_tensor *t);
DT_API dt_dtype   dt_tensor_dtype(const dt_tensor *t);
DT_API int64_t    dt_tensor_numel(const dt_tensor *t);
DT_API int        dt_tensor_ndim(const dt_tensor *t);
/* Local strides in elements (a dt_shape used as an int64 vector). */
DT_API dt_shape   dt_tensor_strides(const dt_tensor *t);
DT_API int64_t    dt_tensor_storage_offset(const dt_tensor *t);
DT_API bool       dt_tensor_is_contiguous(const dt_tensor *t);
/* true when both views read the same storage. */
DT_API bool       dt_tensor_shares_storage(const dt_tensor *a,
                                           const dt_tensor *b);
DT_API bool       dt_tensor_requires_grad(const dt_tensor *t);
/* borrowed; NULL for a single-device tensor */
DT_API dt_mesh   *dt_tensor_mesh(const dt_tensor *t);
/* Replicate for a single-device tensor; kind DT_PLACEMENT_INVALID + error
 * for t NULL or mesh_dim outside t's mesh */
DT_API dt_placement dt_tensor_placement(const dt_tensor *t, int mesh_dim);
DT_API dt_tensor *dt_tensor_retain(dt_tensor *t);
DT_API void       dt_tensor_release(dt_tensor *t);      /* NULL no-op */
/* Live tensor handles and storage bytes in this process (leak checks). */
DT_API int64_t    dt_live_tensors(void);
DT_API int64_t    dt_live_storage_bytes(void);

/* ------------------------------------------------------------------- views
 * O(1): the result shares storage with `a` (except where noted). */
DT_API dt_tensor *dt_view(dt_tensor *a, dt_shape shape);   /* -1 infers */
DT_API dt_tensor *dt_reshape(dt_tensor *a, dt_shape shape);/* copies only when
                                                     strides forbid a view */
DT_API dt_tensor *dt_transpose(dt_tensor *a, int d0, int d1);
DT_API dt_tensor *dt_permute(dt_tensor *a, const int *dims, int ndims);
/* Python a[start:end:step] along dim; step >= 1; start/end clamp like
 * Python and may be negative. */
DT_API dt_tensor *dt_slice(dt_tensor *a, int dim, int64_t start, int64_t end,
                           int64_t step);
DT_API dt_tensor *dt_narrow(dt_tensor *a, int dim, int64_t start,
                            int64_t length);
DT_API dt_tensor *dt_select(dt_tensor *a, int dim, int64_t index);
DT_API dt_tensor *dt_expand(dt_tensor *a, dt_shape shape); /* -1 keeps */
DT_API dt_tensor *dt_squeeze(dt_tensor *a, int dim);  /* no-op if size != 1 */
DT_API dt_tensor *dt_squeeze_all(dt_tensor *a);
DT_API dt_tensor *dt_unsqueeze(dt_tensor *a, int dim);
DT_API dt_tensor *dt_flatten(dt_tensor *a, int start_dim, int end_dim);
DT_API dt_tensor *dt_contiguous(dt_tensor *a);  /* copy unless contiguous */
DT_API dt_tensor *dt_clone(dt_tensor *a);       /* always a copy */

/* --------------------------------------------------------------- pointwise
 * Binary ops broadcast and promote types as PyTorch does. Scalar forms
 * take the scalar as a double; PyTorch decides the result dtype by the
 * scalar's Python type, which a double cannot say (1 and 1.0 are the same
 * double), so each scalar form has a _typed twin that takes the kind too:
 *   DT_SCALAR_INT    a Python int: an integer tensor keeps its dtype, a
 *                    bool tensor becomes int64 (int32 + 1 → int32)
 *   DT_SCALAR_FLOAT  a Python float: an integer or bool tensor becomes
 *                    float32 (int32 + 1.0 → float32)
 *   DT_SCALAR_BOOL   a Python bool: every tensor keeps its dtype (bool +
 *                    True → bool, int32 + True → int32)
 *   DT_SCALAR_AUTO   (0) the untyped forms' rule: INT when the value is
 *                    integral (and below 9.2e18 in magnitude), FLOAT
 *                    otherwise
 * A floating tensor keeps its dtype for every kind; true division
 * (dt_div_scalar*) always gives a floating result. The value must fit the
 * kind: INT an integer of magnitude below 2^63 (exact up to 2^53, a
 * double's integers), BOOL 0 or 1; else DT_ERR_INVALID_ARGUMENT, as is a
 * kind outside the enum. An INT or BOOL scalar meeting a uint8 / int32
 * result is converted to it modulo 2^8 / 2^32, as PyTorch does (int32 +
 * 2^32 adds 0, uint8 + -1 adds 255; so int32 // 2^32 is a division by
 * zero). The kind decides the dtype through the op's checks, which run on
 * every call, and the sharding cache keys on their result
 * (docs/sharding.md): int32 + 1 and int32 + 1.0 never share an entry. */
DT_API dt_tensor *dt_add(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_sub(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_mul(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_div(dt_tensor *a, dt_tensor *b);   /* true division */
DT_API dt_tensor *dt_pow(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_maximum(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_minimum(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_add_scalar(dt_tensor *a, double s);
DT_API dt_tensor *dt_sub_scalar(dt_tensor *a, double s);
DT_API dt_tensor *dt_mul_scalar(dt_tensor *a, double s);
DT_API dt_tensor *dt_div_scalar(dt_tensor *a, double s);
DT_API dt_tensor *dt_pow_scalar(dt_tensor *a, double s);
/* PyTorch's floor_divide and remainder: the quotient rounds toward -inf,
 * the remainder takes the divisor's sign (7 // -2 = -4, 7 % -2 = -1);
 * integer division by zero fails (DT_ERR_INVALID_ARGUMENT: at the call for
 * a scalar, at the fetch for a tensor divisor); floats follow IEEE
 * (x // 0 = ±inf, x % 0 = NaN). Not for two bool tensors. */
DT_API dt_tensor *dt_floor_divide(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_remainder(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_floor_divide_scalar(dt_tensor *a, double s);
DT_API dt_tensor *dt_remainder_scalar(dt_tensor *a, double s);
typedef enum dt_scalar_kind { DT_SCALAR_AUTO = 0, DT_SCALAR_INT,
  DT_SCALAR_FLOAT, DT_SCALAR_BOOL } dt_scalar_kind;
DT_API dt_tensor *dt_add_scalar_typed(dt_tensor *a, double s,
                                      dt_scalar_kind kind);
DT_API dt_tensor *dt_sub_scalar_typed(dt_tensor *a, double s,
                                      dt_scalar_kind kind);
DT_API dt_tensor *dt_mul_scalar_typed(dt_tensor *a, double s,
                                      dt_scalar_kind kind);
DT_API dt_tensor *dt_div_scalar_typed(dt_tensor *a, double s,
                                      dt_scalar_kind kind);
DT_API dt_tensor *dt_pow_scalar_typed(dt_tensor *a, double s,
                                      dt_scalar_kind kind);
DT_API dt_tensor *dt_floor_divide_scalar_typed(dt_tensor *a, double s,
                                               dt_scalar_kind kind);
DT_API dt_tensor *dt_remainder_scalar_typed(dt_tensor *a, double s,
                                            dt_scalar_kind kind);
/* Unary: float results for integer inputs where PyTorch gives them
 * (exp, log, sqrt, ... on int → float32); neg/abs/relu keep the dtype. */
DT_API dt_tensor *dt_neg(dt_tensor *a);
DT_API dt_tensor *dt_abs(dt_tensor *a);
DT_API dt_tensor *dt_exp(dt_tensor *a);
DT_API dt_tensor *dt_log(dt_tensor *a);
DT_API dt_tensor *dt_sqrt(dt_tensor *a);
DT_API dt_tensor *dt_rsqrt(dt_tensor *a);
DT_API dt_tensor *dt_sin(dt_tensor *a);
DT_API dt_tensor *dt_cos(dt_tensor *a);
DT_API dt_tensor *dt_tanh(dt_tensor *a);
DT_API dt_tensor *dt_sigmoid(dt_tensor *a);
DT_API dt_tensor *dt_relu(dt_tensor *a);
DT_API dt_tensor *dt_silu(dt_tensor *a);
DT_API dt_tensor *dt_gelu(dt_tensor *a);        /* exact (erf) form */
DT_API dt_tensor *dt_gelu_tanh(dt_tensor *a);   /* approximate="tanh" */
DT_API dt_tensor *dt_clamp(dt_tensor *a, double min, double max);
/* clamp with each bound's kind (dt_add_scalar_typed): the result dtype
 * promotes the tensor with both bounds (int32 with min 1.0 → float32,
 * bool with max 1 → int64; bool with two BOOL bounds fails, as PyTorch
 * has no bool clamp). ±inf is no bound; an INT or BOOL bound may be ±inf
 * (a caller with one bound passes the other as ±inf of the same kind,
 * which changes no dtype). dt_clamp is dt_clamp_typed with two
 * DT_SCALAR_AUTO kinds, for which an integral bound of any size or an
 * infinite one counts as INT. A floating result checks finite bounds for
 * overflow as PyTorch does (float16 with min 70000 fails). (masked_fill and
 * full_like keep the tensor's dtype for every kind in PyTorch: they need
 * no typed form.) */
DT_API dt_tensor *dt_clamp_typed(dt_tensor *a, double min,
                                 dt_scalar_kind min_kind, double max,
                                 dt_scalar_kind max_kind);
DT_API dt_tensor *dt_where(dt_tensor *cond, dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_masked_fill(dt_tensor *a, dt_tensor *mask, double value);
DT_API dt_tensor *dt_eq(dt_tensor *a, dt_tensor *b);   /* → bool */
DT_API dt_tensor *dt_ne(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_lt(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_le(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_gt(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_ge(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_logical_and(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_logical_or(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_logical_not(dt_tensor *a);
DT_API dt_tensor *dt_cast(dt_tensor *a, dt_dtype dtype);

/* -------------------------------------------------------------- reductions
 * dims: ndims entries (negative counts from the end); ndims 0 = all dims.
 * sum/prod of integers and bools give int64; mean/var need a float dtype. */
DT_API dt_tensor *dt_sum(dt_tensor *a, const int *dims, int ndims,
                         bool keepdim);
DT_API dt_tensor *dt_mean(dt_tensor *a, const int *dims, int ndims,
                          bool keepdim);
DT_API dt_tensor *dt_amax(dt_tensor *a, const int *dims, int ndims,
                          bool keepdim);
DT_API dt_tensor *dt_amin(dt_tensor *a, const int *dims, int ndims,
                          bool keepdim);
DT_API dt_tensor *dt_prod(dt_tensor *a, const int *dims, int ndims,
                          bool keepdim);
/* int64 index of the first extreme element within the reduced dims, counted
 * row-major over those dims (ndims 0 = flat index, as torch.argmax). */
DT_API dt_tensor *dt_argmax(dt_tensor *a, const int *dims, int ndims,
                            bool keepdim);
DT_API dt_tensor *dt_argmin(dt_tensor *a, const int *dims, int ndims,
                            bool keepdim);
DT_API dt_tensor *dt_var(dt_tensor *a, const int *dims, int ndims,
                         bool unbiased, bool keepdim);

/* ------------------------------------------------------------ redistribute
 * Move a DTensor to other placements (and/or another mesh of the same
 * runtime), running the collectives each change needs (docs/mesh.md):
 * S->R all_gather, P->R all_reduce, P->S reduce_scatter, S(i)->S(j)
 * all_to_all, R->S / R->P local, S->P an error; one step per mesh dim that
 * changes. mesh NULL = the same mesh. A single-device tensor can be
 * distributed onto a mesh. Same placements return t itself (a new ref). */
typedef enum dt_default_placement { DT_DEFAULT_RAISE_ERROR,
  DT_DEFAULT_REPLICATE, DT_DEFAULT_KEEP } dt_default_placement;
DT_API dt_tensor *dt_redistribute(dt_tensor *t, dt_mesh *mesh,
                                  const dt_placement *placements);
DT_API dt_tensor *dt_redistribute_like(dt_tensor *t, const dt_tensor *like);
/* placements by mesh dim name; unnamed mesh dims per mode */
DT_API dt_tensor *dt_redistribute_by_dict(dt_tensor *t, dt_mesh *mesh,
    const char *const *dim_names, const dt_placement *placements, int n,
    dt_default_placement mode);

/* A DTensor of global `shape` and `placements` over t's own shards: no
 * data moves and no collective runs. Valid when every rank's shard holds
 * the same elements in the same order under both layouts (each is one
 * contiguous range of the row-major order, the same range; Partial mesh
 * dims stay Partial with the same op): it is then t.reshape(shape), held
 * where t is held. [4096, 1024] as [R, S(0)] on a 2 x 4 mesh gives
 * [4, 1048576] as [R, S(0)], each rank's 1024 rows one row. Else
 * DT_ERR_SHAPE / DT_ERR_PLACEMENT naming the first rank whose shard would
 * move (dt_reshape copies). The result shares t's storage: a later
 * in-place write into t shows through it, in-place writes into it are
 * refused, and it does not require grad (not differentiable). */
DT_API dt_tensor *dt_view_shards(dt_tensor *t, dt_shape shape,
                                 const dt_placement *placements);

/* This thread's redistribution mode, over the runtime's auto_redistribute
 * option, for the ops this thread issues on DTensors whose placements
 * need a collective (docs/sharding.md "Strict and auto"):
 *   DT_REDISTRIBUTE_DEFAULT   (0, every thread's start) the runtime's mode
 *   DT_REDISTRIBUTE_AUTO      insert the cheapest redistribution, as
 *                             auto_redistribute does
 *   DT_REDISTRIBUTE_EXPLICIT  refuse it (DT_ERR_PLACEMENT naming the fix),
 *                             as strict mode does, even on an auto runtime:
 *                             PyTorch's ExplicitRedistributionContext
 * Redistributions needing no collective happen in every mode, and
 * dt_backward's own ops redistribute whatever the mode (a gradient's
 * placements are the rules' choice). _set returns DT_ERR_INVALID_ARGUMENT
 * for a value outside the enum, leaving the mode as it was. Callers that
 * change it for a scope read it first with _get and set it back. */
typedef enum dt_redistribute_mode { DT_REDISTRIBUTE_DEFAULT = 0,
  DT_REDISTRIBUTE_AUTO, DT_REDISTRIBUTE_EXPLICIT } dt_redistribute_mode;
DT_API dt_status dt_redistribute_mode_set(dt_redistribute_mode mode);
DT_API dt_redistribute_mode dt_redistribute_mode_get(void);

/* Communication counting on the calling thread (CommDebugMode): one count
 * per logical collective over one mesh dim; bytes = what the participating
 * ranks feed into the collectives, summed. `other` counts cross-mesh
 * transfers. Counted when the call issues them (as PyTorch's CommDebugMode
 * counts at dispatch), so the counts of a program do not depend on timing;
 * a collective that later fails (a timeout) is still counted. */
typedef struct dt_comm_counts { int64_t all_reduce, all_gather,
  reduce_scatter, all_to_all, broadcast, other; int64_t bytes;
  uint64_t reserved[9]; /* zeroed; later collective kinds */
} dt_comm_counts;
DT_API void           dt_comm_count_begin(void);
DT_API dt_comm_counts dt_comm_count_end(void);

/* This thread's sharding cache (docs/sharding.md): every thread that
 * issues ops on DTensors keeps its own table of propagation results, keyed
 * by (op, input specs, the arguments that decide sharding; for an op with
 * a scalar argument also the output dtype and shape its checks, run on
 * every call, decide), bounded (4,096 entries: 1,024 sets of 4) with
 * eviction. A hit gives exactly what a miss would. Counts since the thread's first DTensor op or
 * the last dt_sharding_cache_clear. */
typedef struct dt_cache_stats { int64_t hits, misses, entries;
  int64_t evictions;    /* entries evicted to make room */
  uint64_t reserved[4]; /* zeroed; later counters */
} dt_cache_stats;
DT_API dt_cache_stats dt_sharding_cache_stats(void);
/* stats.evictions alone (from before dt_cache_stats had room for it) */
DT_API int64_t dt_sharding_cache_evictions(void);
/* empties this thread's cache and zeroes its counts */
DT_API void dt_sharding_cache_clear(void);

/* ---------------------------------------------------------------- nn / math */
DT_API dt_tensor *dt_softmax(dt_tensor *a, int dim);
DT_API dt_tensor *dt_log_softmax(dt_tensor *a, int dim);
/* Over the last dim; weight and bias may be NULL (no affine). */
DT_API dt_tensor *dt_layer_norm(dt_tensor *x, dt_tensor *weight,
                                dt_tensor *bias, double eps);
DT_API dt_tensor *dt_rms_norm(dt_tensor *x, dt_tensor *weight, double eps);
/* 1-D·1-D dot, 2-D mm, batched with broadcast batch dims (torch.matmul). */
DT_API dt_tensor *dt_matmul(dt_tensor *a, dt_tensor *b);
/* x [..., in] · weight [out, in]ᵀ + bias [out] (bias may be NULL). */
DT_API dt_tensor *dt_linear(dt_tensor *x, dt_tensor *weight, dt_tensor *bias);
/* indices (int32/int64, any shape) into weight [num, dim] → [..., dim]. */
DT_API dt_tensor *dt_embedding(dt_tensor *indices, dt_tensor *weight);
DT_API dt_tensor *dt_index_select(dt_tensor *a, int dim, dt_tensor *index);
typedef enum dt_reduction { DT_REDUCTION_MEAN, DT_REDUCTION_SUM,
  DT_REDUCTION_NONE } dt_reduction;
/* As PyTorch's F.cross_entropy: logits [N, C, d1, ...] or [C]; target
 * either int64/int32 class indices of the logits' shape without dim 1
 * ([N, d1, ...]; [] or [1] for [C] logits) — targets equal to
 * ignore_index contribute nothing and mean divides by the others — or
 * float class probabilities of the logits' shape (mean divides by the
 * number of positions). NONE returns one loss per position. */
DT_API dt_tensor *dt_cross_entropy(dt_tensor *logits, dt_tensor *target,
                                   dt_reduction reduction,
                                   int64_t ignore_index);
/* The same with label_smoothing in [0, 1] (PyTorch's definition: the
 * target mixed with the uniform distribution over the C classes). */
DT_API dt_tensor *dt_cross_entropy_smoothed(dt_tensor *logits,
                                            dt_tensor *target,
                                            dt_reduction reduction,
                                            int64_t ignore_index,
                                            double label_smoothing);
/* Seeded: the mask comes from the Philox stream like dt_rand. train=false
 * or p=0 returns a copy. Kept values are scaled by 1/(1-p). */
DT_API dt_tensor *dt_dropout(dt_tensor *a, double p, bool train);

/* ---------------------------------------------------------- joining/splitting */
DT_API dt_tensor *dt_cat(dt_tensor *const *tensors, int n, int dim);
DT_API dt_tensor *dt_stack(dt_tensor *const *tensors, int n, int dim);
/* Views of `a` in pieces of split_size along dim (the last may be smaller).
 * Writes up to max_out new references into out; returns how many pieces
 * there are, or -1 on error (out then holds nothing to release). */
DT_API int dt_split(dt_tensor *a, int64_t split_size, int dim,
                    dt_tensor **out, int max_out);
/* torch.chunk: pieces of ceil(n / chunks); may return fewer than chunks. */
DT_API int dt_chunk(dt_tensor *a, int chunks, int dim, dt_tensor **out,
                    int max_out);

/* ------------------------------------------------------------ interception
 * The C form of TorchDispatchMode. A hook sees every op called on this
 * thread while it is pushed (innermost hook first), with its boxed args,
 * and must run it with dt_op_call_run (or fail it by returning an error).
 * Ops called from inside a hook are seen by the hooks below it only. */
typedef struct dt_op_call dt_op_call;
typedef dt_status (*dt_intercept_fn)(dt_op_call *call, void *user);
DT_API dt_status   dt_intercept_push(dt_intercept_fn fn, void *user);
DT_API dt_status   dt_intercept_pop(void);       /* error if none pushed */
DT_API dt_status   dt_op_call_run(dt_op_call *call);   /* redispatch below */
DT_API const char *dt_op_call_name(const dt_op_call *call);     /* "add" */
DT_API int         dt_op_call_num_inputs(const dt_op_call *call);
/* the i-th tensor input (NULL for an optional tensor not given) */
DT_API dt_tensor  *dt_op_call_input(const dt_op_call *call, int i);
DT_API int         dt_op_call_num_outputs(const dt_op_call *call);
DT_API dt_tensor  *dt_op_call_output(const dt_op_call *call, int i);
/* "add(float32[4, 8], float32[4, 8]) -> float32[4, 8]" into buf. */
DT_API int         dt_op_call_format(const dt_op_call *call, char *buf,
                                     size_t len);

/* Op printer: prints each op to `out`. */
DT_API dt_status dt_op_printer_push(FILE *out);
/* Op counter: counts ops by name while pushed. */
typedef struct dt_op_counter dt_op_counter;
DT_API dt_op_counter *dt_op_counter_push(void);
/* pops the counter's hook (it must be the innermost hook) */
DT_API dt_status dt_op_counter_pop(dt_op_counter *c);
DT_API int64_t   dt_op_counter_get(const dt_op_counter *c, const char *op);
DT_API int64_t   dt_op_counter_total(const dt_op_counter *c);
/* "  20 matmul\n  17 relu\n..." most frequent first */
DT_API int       dt_op_counter_format(const dt_op_counter *c, char *buf,
                                      size_t len);
DT_API void      dt_op_counter_free(dt_op_counter *c);

/* ----------------------------------------------------------------- futures
 * The completion of asynchronous work (dt_to_host_async, ...). */
/* Waits up to timeout_ns (< 0: forever). Returns DT_ERR_TIMEOUT if still
 * pending (the future stays valid), else the future's own status, with
 * this thread's last error set to its message when it failed. */
DT_API dt_status dt_future_wait(dt_future *f, int64_t timeout_ns);
DT_API bool      dt_future_ready(const dt_future *f);
/* An eventfd that becomes readable once f completes (for the caller's own
 * epoll / io_uring loop); owned by f, closed by dt_future_release. -1 and
 * an error if it cannot be made. */
DT_API int       dt_future_fd(dt_future *f);
DT_API void      dt_future_release(dt_future *f);   /* NULL no-op */
DT_API dt_future *dt_future_retain(dt_future *f);   /* another reference */
/* The outcome: DT_OK, the error, or DT_ERR_TIMEOUT while pending; and its
 * message ("" if none). */
DT_API dt_status   dt_future_status(const dt_future *f);
DT_API const char *dt_future_error(const dt_future *f);
/* Runs cb exactly once when f completes: on dtorch's completion thread
 * (one per process, never a rank thread), or at once on this thread if f
 * is already complete. cb may call any dtorch function, blocking ones
 * included (dt_to_host, dt_runtime_synchronize, dt_runtime_destroy); while
 * it blocks, later callbacks wait. */
typedef void (*dt_future_callback)(dt_future *f, dt_status status, void *user);
DT_API dt_status dt_future_then(dt_future *f, dt_future_callback cb,
                                void *user);
/* When f completes, a CQE {user_data, res} appears in the io_uring whose
 * fd is ring_fd (res 0, or -status on failure), sent with
 * IORING_OP_MSG_RING from a ring dtorch owns: a server built on liburing
 * waits for sockets, files and tensors in one io_uring_wait_cqe. Works
 * for every future. The ring must outlive f's completion; a delivery the
 * kernel refuses then (the ring closed, its CQ full) is reported on
 * stderr. When the CQE arrives, f is complete: dt_future_wait(f, 0)
 * returns at once and orders your reads of its data after the ranks'
 * writes (the kernel orders them in practice; ThreadSanitizer cannot see
 * that). Errors now: f NULL, ring_fd < 0, no io_uring MSG_RING here
 * (DT_ERR_UNSUPPORTED). */
DT_API dt_status dt_future_notify_ring(dt_future *f, int ring_fd,
                                       uint64_t user_data);

/* ------------------------------------------------------------- safetensors
 * Checkpoints in the safetensors format (docs/io.md): 8 bytes of header
 * length N (little-endian), N bytes of UTF-8 JSON naming each tensor's
 * dtype, shape and data_offsets, then the raw little-endian data in C
 * order. Each rank reads only its shard's byte ranges straight into its
 * own memory with io_uring (batched reads, merged ranges), so any file
 * loads into any mesh and placements (saved on 2 x 4, loaded on 8 ranks
 * or on 1). Errors name the function, the file, the tensor and the
 * field: a bad file (truncated, header length past the end, bad JSON,
 * offsets overlapping / out of range / not matching shape x dtype, an
 * unknown dtype, a non-UTF-8 name, duplicate names, a header over 100 MB)
 * is DT_ERR_IO; a bad argument (a name not in the file, a dtype dtorch
 * does not hold, bad options) is DT_ERR_INVALID_ARGUMENT. */
typedef struct dt_load_options {
  dt_mesh *mesh;                  /* NULL: a single-device tensor */
  const dt_placement *placements; /* with mesh; NULL = all Replicate */
  const char *device;             /* without mesh: NULL / "cpu" (rank 0 of
                                     this thread's runtime) or "cpu:N" */
  bool direct;        /* O_DIRECT reads through aligned bounce buffers (a
                         file not in the page cache); the file system must
                         support it */
  int queue_depth;    /* reads in flight per rank; 0 = 32, at most 128 */
  int64_t merge_gap;  /* two ranges of a rank less than this many bytes
                         apart are read as one (the gap into scratch);
                         0 = 4096, < 0 = never */
  uint64_t reserved[8]; /* zero; later fields are carved from here */
} dt_load_options;
/* Loads tensor `name` of the safetensors file at path: a DTensor on
 * opts->mesh with opts->placements, or a single-device tensor (opts NULL:
 * rank 0 of this thread's runtime). The header is read and checked now;
 * the data is read by the ranks: the handle is returned at once, and ops
 * and fetches on it wait for the data (they run after the read in each
 * rank's order). A Partial placement puts the value on coordinate 0 and
 * the identity elsewhere (as dt_from_host). Returns: a new tensor.
 * Errors: now — path or name NULL, the file cannot be opened or read,
 * a bad header, name not in the file, dtype not in dtorch, bad options;
 * later, as the tensor's poison (a fetch or future on it fails with the
 * original message) — a read that fails or ends early. Ownership: caller
 * releases; path and name are copied. Thread safety: any thread, any
 * number at once, also from future callbacks. A multi-process job
 * (launcher "mpi"): every process calls it alike, in the same order, on
 * a file they share; each reads only its ranks' byte ranges; an error in
 * any process fails the call in every process (docs/io.md). */
DT_API dt_tensor *dt_load_safetensors(const char *path, const char *name,
                                      const dt_load_options *opts);
/* The same, and a future that completes when every rank has read its
 * part (with the read's error, if any). *out gets the tensor (NULL on an
 * error now). Returns: a new future, or NULL with the error set.
 * Ownership: caller releases both. Thread safety: any thread. */
DT_API dt_future *dt_load_safetensors_async(const char *path, const char *name,
                                            const dt_load_options *opts,
                                            dt_tensor **out);
/* Writes n tensors under names[i] to path: the global values whatever
 * the placements (Partial reduced first, Replicate written once, each
 * rank writing its own ranges in parallel with io_uring); single-device
 * views are written as their values. Atomic: a temporary file in path's
 * directory is written, fsync'd and renamed over path, then the
 * directory is fsync'd; on failure path is untouched and the temporary
 * removed. Waits until done. Returns: DT_OK. Errors: a NULL or poisoned
 * tensor, NULL, duplicate, "__metadata__" or non-UTF-8 names, n < 0
 * (DT_ERR_INVALID_ARGUMENT, or the poison's status), a write or fsync
 * that fails (DT_ERR_IO, naming path and the reason). Ownership: borrows
 * everything. Thread safety: any thread but a rank's; two saves to one
 * path: the last rename wins, both files whole. A multi-process job
 * (launcher "mpi"): every process calls it alike, in the same order, and
 * they write one file on a shared file system together, each only its
 * ranks' ranges (process 0 creates and renames); an error in any process
 * fails the call in every process (docs/io.md). */
DT_API dt_status dt_save_safetensors(const char *path,
                                     dt_tensor *const *tensors,
                                     const char *const *names, int n);
/* One tensor of a file's header. */
typedef struct dt_safetensors_entry {
  const char *name;        /* UTF-8 */
  const char *dtype_name;  /* as in the file: "F32", "BF16", "I16", ... */
  dt_dtype dtype;          /* DT_DTYPE_COUNT for a safetensors dtype dtorch
                              does not hold (I8, I16, U16, U32, U64, F8_*,
                              C64): listed, not loadable */
  dt_shape shape;
  uint64_t offset;         /* the first data byte, from the file's start */
  uint64_t nbytes;
  uint64_t reserved[4];    /* zeroed by the library */
} dt_safetensors_entry;
typedef struct dt_safetensors_info {
  int n;                          /* tensors, in data order */
  dt_safetensors_entry *tensors;
  int n_metadata;                 /* the "__metadata__" string pairs */
  const char **metadata_keys, **metadata_values;
  uint64_t reserved[4];           /* zeroed by the library */
} dt_safetensors_info;
/* Reads and checks a file's header, not its data. Returns: a new info.
 * Errors: as dt_load_safetensors' errors now. Ownership: free it with
 * dt_safetensors_info_free (NULL no-op). Thread safety: any thread. */
DT_API dt_safetensors_info *dt_safetensors_index(const char *path);
DT_API void dt_safetensors_info_free(dt_safetensors_info *info);

/* ---------------------------------------------------------------- threads
 * OpenBLAS must run single-threaded inside rank threads (they are the
 * parallelism). dt_blas_set_threads is that hook; the runtime calls it. */
DT_API void dt_blas_set_threads(int n);

/* --------------------------------------------------------- backward kernels
 * What autograd's formulas need that the ops above cannot compose; usable
 * directly (PyTorch's aten *_backward ops). Each returns a new tensor, or
 * NULL with the error set; borrows its arguments; any thread. */
/* grad · d/dx gelu(x) for the exact gelu x·Φ(x): grad · (Φ(x) + x·φ(x));
 * grad and x floating, broadcast and promoted as dt_mul. */
DT_API dt_tensor *dt_gelu_backward(dt_tensor *grad, dt_tensor *x);
/* torch.slice_scatter on zeros: a tensor of `shape` (src's dtype), zero
 * except out[..., start:end:step, ...] along dim = src; start/end as
 * dt_slice (negatives from the end, clamped), step >= 1, the slice's
 * length must be src's size at dim and every other dim must match. */
DT_API dt_tensor *dt_slice_scatter(dt_tensor *src, dt_shape shape, int dim,
                                   int64_t start, int64_t end, int64_t step);
/* The gradient of dt_index_select(a, dim, index) for a of size `size` at
 * dim: zeros of grad's shape with `size` at dim, then
 * out.index_add_(dim, index, grad) (duplicate indices accumulate). index
 * is 1-D (or 0-d) int32/int64; an index outside [0, size) fails. */
DT_API dt_tensor *dt_index_select_backward(dt_tensor *grad, int dim,
                                           dt_tensor *index, int64_t size);
/* The gradient of dt_cross_entropy_smoothed(input, target, reduction,
 * ignore_index, label_smoothing) w.r.t. input (input's shape and dtype),
 * for every target kind it takes; grad is a scalar for SUM/MEAN, the
 * loss's shape for NONE. */
DT_API dt_tensor *dt_cross_entropy_backward(dt_tensor *grad, dt_tensor *input,
                                            dt_tensor *target,
                                            dt_reduction reduction,
                                            int64_t ignore_index,
                                            double label_smoothing);

/* Autograd (gradients, in-place writes, optimisers), debugging (shadow
 * checks, communication debugging, inspection, timelines), the
 * simulator's dry runs and fault injection, and the per-rank (SPMD) model
 * have their own headers, part of this API. */
#include "dtorch/autograd.h"
#include "dtorch/debug.h"
#include "dtorch/sim.h"
#include "dtorch/spmd.h"

#ifdef __cplusplus
}
#endif
#endif /* DTORCH_DTORCH_H */
