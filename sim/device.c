/* Simulated device memory: a per-rank caching allocator with a capacity. */
#include "sim/device.h"

#include "core/fault.h"
#include "sched/fault.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SIM_LARGE ((size_t)256 << 10)
#define SIM_HUGE ((size_t)4 << 20)       /* from here: huge pages */
#define SIM_HUGE_PAGE ((size_t)2 << 20)
#define SIM_ALIGN 64
#define SIM_SMALL ((size_t)4096) /* below: malloc, data 16-byte aligned */
#define SIM_CACHE_MAX ((int64_t)1 << 30) /* cached bytes per rank, no capacity */

/* header in front of each block, padded to keep the data 64-byte aligned */
struct sim_block {
  sim_block *prev, *next;
  size_t size;       /* bytes asked for */
  size_t cap;        /* bytes the block holds */
  char pad[SIM_ALIGN - 2 * sizeof(void *) - 2 * sizeof(size_t)];
};
_Static_assert(sizeof(sim_block) == SIM_ALIGN, "block header size");

void sim_device_init(sim_device *d, int rank, int64_t capacity) {
  memset(d, 0, sizeof *d);
  d->rank = rank;
  d->capacity = capacity;
}

/* 4 classes per power of two */
static int size_class(size_t n, size_t *rounded) {
  int log2 = 63 - __builtin_clzll((unsigned long long)n);
  size_t step = ((size_t)1 << log2) / 4;
  size_t r = (n + step - 1) / step * step;
  *rounded = r;
  return log2 * 4 + (int)((r - ((size_t)1 << log2)) / step);
}

static void live_push(sim_device *d, sim_block *b) {
  b->prev = NULL;
  b->next = d->live;
  if (d->live) d->live->prev = b;
  d->live = b;
}
static void live_remove(sim_device *d, sim_block *b) {
  if (b->prev) b->prev->next = b->next; else d->live = b->next;
  if (b->next) b->next->prev = b->prev;
}

static _Thread_local char oom_msg[256];

/* A block of cap bytes of data behind its header. From SIM_HUGE up the
 * block is 2 MiB-aligned and asked to be backed by transparent huge pages
 * (before anything touches it): a 64 MiB buffer then faults in 32 times
 * instead of 16,384 and needs 32 TLB entries instead of 16,384. Where THP
 * is off the advice is ignored. */
static sim_block *block_alloc(size_t cap) {
  size_t total = (sizeof(sim_block) + cap + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
  if (cap < SIM_HUGE) return core_host_aligned_alloc(SIM_ALIGN, total);
  total = (total + SIM_HUGE_PAGE - 1) / SIM_HUGE_PAGE * SIM_HUGE_PAGE;
  sim_block *b = core_host_aligned_alloc(SIM_HUGE_PAGE, total);
  if (b) madvise(b, total, MADV_HUGEPAGE);
  return b;
}

void *sim_device_alloc(sim_device *d, size_t n, const char **err) {
  *err = NULL;
  char why[128];
  if (d->faults && __builtin_expect(sched_faults_armed(d->faults), 0) &&
      sched_fault_take_at(d->faults, d->rank, SCHED_FAULT_OOM, why, sizeof why)) {
    snprintf(oom_msg, sizeof oom_msg, "rank %d: out of device memory: cannot "
             "allocate %zu bytes (%s)", d->rank, n, why);
    *err = oom_msg;
    return NULL;
  }
  if (d->capacity > 0 && (int64_t)n > d->capacity - d->used) {
    snprintf(oom_msg, sizeof oom_msg,
             "rank %d: out of device memory: cannot allocate %zu bytes "
             "(%lld of %lld bytes in use, %lld free)", d->rank, n,
             (long long)d->used, (long long)d->capacity,
             (long long)(d->capacity - d->used));
    *err = oom_msg;
    return NULL;
  }
  size_t cap = n ? n : 1;
  sim_block *b = NULL;
  if (n >= SIM_LARGE) {
    int c = size_class(n, &cap);
    if (c < SIM_CACHE_CLASSES && d->cache[c]) {
      b = d->cache[c];
      d->cache[c] = b->next;
      d->cached -= (int64_t)cap;
    }
  }
  if (!b && n < SIM_SMALL) {
    /* small: plain malloc (16-byte aligned data), no memalign overhead */
    b = core_host_malloc(sizeof(sim_block) + cap);
  } else if (!b) {
    b = block_alloc(cap);
    if (!b && d->cached) { /* give the cache back and retry once */
      sim_device_trim(d);
      b = block_alloc(cap);
    }
  }
  if (!b) {
    snprintf(oom_msg, sizeof oom_msg,
             "rank %d: out of host memory backing the device: cannot "
             "allocate %zu bytes (%lld bytes in use)", d->rank, n,
             (long long)d->used);
    *err = oom_msg;
    return NULL;
  }
  b->size = n;
  b->cap = cap;
  live_push(d, b);
  d->used += (int64_t)n;
  if (d->used > d->peak) d->peak = d->used;
  d->allocs++;
  return b + 1;
}

void sim_device_free(sim_device *d, void *p) {
  if (!p) return;
  sim_block *b = (sim_block *)p - 1;
  live_remove(d, b);
  d->used -= (int64_t)b->size;
  d->frees++;
  if (b->cap >= SIM_LARGE) {
    size_t r;
    int c = size_class(b->cap, &r);
    /* the cache holds device memory: with a capacity, cached + used stay
     * within it (as a GPU's caching allocator's reserved memory does);
     * without one, at most SIM_CACHE_MAX bytes per rank */
    int64_t room = d->capacity > 0 ? d->capacity - d->used : SIM_CACHE_MAX;
    if (c < SIM_CACHE_CLASSES && r == b->cap &&
        d->cached + (int64_t)b->cap <= room) {
      b->next = d->cache[c];
      d->cache[c] = b;
      d->cached += (int64_t)b->cap;
      return;
    }
  }
  free(b);
}

void sim_device_trim(sim_device *d) {
  for (int c = 0; c < SIM_CACHE_CLASSES; c++)
    while (d->cache[c]) {
      sim_block *b = d->cache[c];
      d->cache[c] = b->next;
      free(b);
    }
  d->cached = 0;
}

int sim_device_largest_live(const sim_device *d, size_t *sizes, int k) {
  int n = 0;
  for (const sim_block *b = d->live; b; b = b->next) {
    /* insertion into the k kept so far, largest first */
    int i = n < k ? n++ : k;
    while (i > 0 && sizes[i - 1] < b->size) {
      if (i < k) sizes[i] = sizes[i - 1];
      i--;
    }
    if (i < k) sizes[i] = b->size;
  }
  return n;
}

void sim_device_teardown(sim_device *d) {
  while (d->live) {
    sim_block *b = d->live;
    d->live = b->next;
    free(b);
  }
  d->used = 0;
  sim_device_trim(d);
}

int64_t sim_parse_bytes(const char *s) {
  if (!s || !*s) return -1;
  char *end;
  double v = strtod(s, &end);
  if (end == s || v < 0) return -1;
  double mult = 1;
  switch (toupper((unsigned char)*end)) {
  case 'K': mult = 1024.0; end++; break;
  case 'M': mult = 1024.0 * 1024; end++; break;
  case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
  case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
  default: break;
  }
  if (toupper((unsigned char)*end) == 'B') end++; /* "80GB", "64KiB" */
  else if (*end == 'i' && toupper((unsigned char)end[1]) == 'B') end += 2;
  if (*end) return -1;
  double bytes = v * mult;
  /* NaN fails every comparison; a fraction of a byte is not a size */
  if (!(bytes >= 0 && bytes <= 9.2e18) || bytes != floor(bytes)) return -1;
  return (int64_t)bytes;
}
