/* Simulated device memory: a per-rank caching allocator with a capacity.
 * Inside a record traced in process (`dtorch bench demo --breakdown`,
 * sched/trace_recorder.h) each allocation and free is a slice of its own
 * (`device_alloc`, `device_free`), so a rank's time can tell allocation
 * from the op around it; otherwise the cost is one thread-local load and
 * a branch. */
#include "sim/device.h"

#include "core/dtype.h"
#include "core/host_alloc.h"
#include "sched/fault_table.h"
#include "sched/pool.h"
#include "sched/trace_recorder.h"

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
  sim_tag tag;       /* in what would be padding */
};
_Static_assert(sizeof(sim_block) == SIM_ALIGN, "block header size");
_Static_assert(DT_REDUCE_PROD < 5 && DT_PLACEMENT_PARTIAL < 4, "tag bytes");

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

static _Thread_local char oom_msg[640];

/* "; largest live: ..." naming d's largest live blocks, into buf */
static void largest_str(const sim_device *d, char *buf, size_t n) {
  size_t sizes[3];
  sim_tag tags[3];
  int k = sim_device_largest_live(d, sizes, tags, 3);
  size_t at = (size_t)snprintf(buf, n, "%s", k ? "; largest live: " : "");
  for (int i = 0; i < k && at < n; i++) {
    char one[160];
    sim_tag_str(&tags[i], sizes[i], one, sizeof one);
    at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "", one);
  }
}

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

static void *device_alloc(sim_device *d, size_t n, const char **err);
static void device_free(sim_device *d, void *p);

void *sim_device_alloc(sim_device *d, size_t n, const char **err) {
  if (__builtin_expect(!sched_trace_in_record(), 1) || !sched_trace_fine())
    return device_alloc(d, n, err);
  int64_t cpu0 = sched_trace_cpu(), t0 = sched_trace_now();
  void *p = device_alloc(d, n, err);
  sched_trace_slice(sched_current_pool(), "device_alloc", "memory", t0, cpu0, NULL);
  return p;
}

void sim_device_free(sim_device *d, void *p) {
  if (!p) return;
  if (__builtin_expect(!sched_trace_in_record(), 1) || !sched_trace_fine()) {
    device_free(d, p);
    return;
  }
  int64_t cpu0 = sched_trace_cpu(), t0 = sched_trace_now();
  device_free(d, p);
  sched_trace_slice(sched_current_pool(), "device_free", "memory", t0, cpu0, NULL);
}

static void *device_alloc(sim_device *d, size_t n, const char **err) {
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
    char top[480];
    largest_str(d, top, sizeof top);
    snprintf(oom_msg, sizeof oom_msg,
             "rank %d: out of device memory: cannot allocate %zu bytes "
             "(%lld of %lld bytes in use, %lld free%s)", d->rank, n,
             (long long)d->used, (long long)d->capacity,
             (long long)(d->capacity - d->used), top);
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
  b->tag.op = NULL;
  live_push(d, b);
  d->used += (int64_t)n;
  if (d->used > d->peak) d->peak = d->used;
  d->allocs++;
  return b + 1;
}

static void device_free(sim_device *d, void *p) {
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

int sim_device_largest_live(const sim_device *d, size_t *sizes, sim_tag *tags,
                            int k) {
  int n = 0;
  for (const sim_block *b = d->live; b; b = b->next) {
    /* insertion into the k kept so far, largest first */
    int i = n < k ? n++ : k;
    while (i > 0 && sizes[i - 1] < b->size) {
      if (i < k) {
        sizes[i] = sizes[i - 1];
        if (tags) tags[i] = tags[i - 1];
      }
      i--;
    }
    if (i < k) {
      sizes[i] = b->size;
      if (tags) tags[i] = b->tag;
    }
  }
  return n;
}

/* ---- tags */
/* a placement in a byte: kind in the top 2 bits; a shard's dim or a
 * Partial's reduce op below */
static uint8_t place_byte(dt_placement p) {
  int low = p.kind == DT_PLACEMENT_SHARD ? p.dim
            : p.kind == DT_PLACEMENT_PARTIAL ? (int)p.reduce : 0;
  return (uint8_t)(((unsigned)p.kind & 3u) << 6 | ((unsigned)low & 63u));
}

void sim_device_tag(void *p, const char *op, int dtype, int ndim,
                    const int64_t *dims, const dt_placement *pl, int nplace) {
  if (!p) return;
  sim_tag *t = &((sim_block *)p - 1)->tag;
  t->op = op;
  t->dtype = (uint8_t)dtype;
  t->ndim = (uint8_t)ndim;
  for (int i = 0; i < ndim && i < SIM_TAG_DIMS; i++)
    t->dims[i] = dims[i] >= 0 && dims[i] < (int64_t)SIM_TAG_BIG ? (uint32_t)dims[i]
                                                                  : SIM_TAG_BIG;
  t->nplace = (uint8_t)(pl ? nplace : 0);
  for (int i = 0; i < t->nplace && i < SIM_TAG_PLACES; i++) t->place[i] = place_byte(pl[i]);
}

void sim_bytes_str(int64_t b, char *buf, size_t n) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (b < 1024) {
    snprintf(buf, n, "%lld B", (long long)b);
    return;
  }
  double v = (double)b / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, u++;
  snprintf(buf, n, "%.1f %s", v, units[u]);
}

static const char *const reduce_names[] = {"sum", "avg", "max", "min", "prod"};

static size_t place_str(uint8_t b, char *buf, size_t n) {
  int kind = b >> 6, low = b & 63;
  if (kind == DT_PLACEMENT_SHARD) return (size_t)snprintf(buf, n, "S(%d)", low);
  if (kind == DT_PLACEMENT_PARTIAL)
    return (size_t)snprintf(buf, n, "P(%s)", low < 5 ? reduce_names[low] : "?");
  return (size_t)snprintf(buf, n, "R");
}

void sim_tag_str(const sim_tag *t, size_t bytes, char *buf, size_t n) {
  char b[32];
  sim_bytes_str((int64_t)bytes, b, sizeof b);
  if (!t->op) {
    snprintf(buf, n, "%s (scratch)", b);
    return;
  }
  size_t at = (size_t)snprintf(buf, n, "%s %s[", b, core_dtype_name((dt_dtype)t->dtype));
  for (int i = 0; i < t->ndim && at < n; i++)
    at += i >= SIM_TAG_DIMS ? (size_t)snprintf(buf + at, n - at, ", ...")
        : t->dims[i] == SIM_TAG_BIG ? (size_t)snprintf(buf + at, n - at, "%s>4G", i ? ", " : "")
        : (size_t)snprintf(buf + at, n - at, "%s%u", i ? ", " : "", t->dims[i]);
  if (at < n) at += (size_t)snprintf(buf + at, n - at, "] %s", t->op);
  for (int i = 0; i < t->nplace && i < SIM_TAG_PLACES && at < n; i++) {
    at += (size_t)snprintf(buf + at, n - at, "%s", i ? ", " : " [");
    at += place_str(t->place[i], buf + at, at < n ? n - at : 0);
  }
  if (t->nplace && at < n) snprintf(buf + at, n - at, "]");
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
