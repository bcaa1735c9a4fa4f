/* A simulated device: one rank's memory. Each rank owns one; only that
 * rank's thread allocates and frees on it, so it needs no lock. Capacity is
 * configurable (DTORCH_DEVICE_MEMORY); running past it is a per-rank
 * out-of-memory error naming the rank, the request and the usage, as a GPU
 * would report.
 *
 * Blocks of 256 KiB and more are cached by size class after they are freed
 * and reused (a CUDA caching allocator does this for cudaMalloc); cached
 * bytes do not count as used, but the cache keeps cached + used within the
 * capacity (1 GiB of cache per rank without one), and
 * dt_runtime_empty_cache gives it back. Every live block is on a list so that a
 * destroyed runtime frees what its tensors still hold. */
#ifndef SIM_DEVICE_H
#define SIM_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#define SIM_CACHE_CLASSES 256

struct dt_placement;

typedef struct sim_block sim_block;

/* What a live block holds, for the memory report and OOM messages
 * (docs/inspect.md): the public function whose output it is, its local
 * shape and dtype, its DTensor's placements. It lives in the block
 * header's padding: tagging costs a 32-byte copy per allocation and no
 * memory. A block never tagged (scratch, staging) has op NULL. */
#define SIM_TAG_DIMS 4
#define SIM_TAG_PLACES 5
#define SIM_TAG_BIG UINT32_MAX /* a dim too large to keep */
typedef struct sim_tag {
  const char *op;                 /* static string, or NULL */
  uint32_t dims[SIM_TAG_DIMS];    /* the first dims (ndim may be more) */
  uint8_t ndim, dtype;            /* dtype: a dt_dtype */
  uint8_t nplace;                 /* mesh dims; 0: a single-device tensor */
  uint8_t place[SIM_TAG_PLACES];  /* sim_tag_placement of each */
} sim_tag;

typedef struct sim_device {
  int rank;
  int64_t capacity;       /* bytes; <= 0 means unlimited */
  int64_t used, peak;     /* live bytes handed out */
  int64_t cached;         /* bytes held in the cache */
  int64_t allocs, frees;
  sim_block *live;        /* doubly linked list of live blocks */
  sim_block *cache[SIM_CACHE_CLASSES];
  struct sched_faults *faults; /* injected OOM (sched/fault_table.h); may be NULL */
} sim_device;

void sim_device_init(sim_device *d, int rank, int64_t capacity);
/* Frees every live and cached block (the owning thread is gone). */
void sim_device_teardown(sim_device *d);
/* memory of n bytes (64-byte aligned from 4 KiB, 16-byte below), or NULL with *err set to a message
 * (static thread-local buffer) naming the rank, n and the usage. */
void *sim_device_alloc(sim_device *d, size_t n, const char **err);
void sim_device_free(sim_device *d, void *p);
/* Returns the cache to the system. */
void sim_device_trim(sim_device *d);

/* Tags the block p (from sim_device_alloc) with what it holds: the op,
 * the local shape and dtype, and (pl non-NULL) the DTensor's nplace
 * placements. Owning thread only. */
void sim_device_tag(void *p, const char *op, int dtype, int ndim,
                    const int64_t *dims, const struct dt_placement *pl,
                    int nplace);
/* "1.0 MiB float32[512, 512] dt_matmul [S(0), R]" of a block of `bytes`
 * with tag t ("1.0 MiB (scratch)" when untagged) into buf */
void sim_tag_str(const sim_tag *t, size_t bytes, char *buf, size_t n);
/* 1536 -> "1.5 KiB"; below 1 KiB exact */
void sim_bytes_str(int64_t b, char *buf, size_t n);

/* The sizes and tags of the k largest live blocks, largest first, into
 * sizes and tags (may be NULL); returns how many it wrote (fewer than k
 * when fewer are live). Owning thread only: it walks the live list
 * (docs/inspect.md). */
int sim_device_largest_live(const sim_device *d, size_t *sizes, sim_tag *tags,
                            int k);

/* "80G", "512M", "64k", "1000" → bytes; -1 if malformed. */
int64_t sim_parse_bytes(const char *s);

#endif
