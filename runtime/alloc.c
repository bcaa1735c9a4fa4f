/* Storage and a host caching allocator.
 *
 * Large blocks (>= 256 KiB) are kept on free lists by size class after their
 * storage dies and reused by the next request of the same class, so a loop
 * that makes and drops big tensors does not pay mmap + page faults each time
 * (what a CUDA caching allocator does for cudaMalloc). Size classes are four
 * steps per power of two (at most 25% waste). The cache holds at most
 * DT_ALLOC_CACHE_MAX bytes; beyond that blocks go back to the system.
 * One mutex guards the lists: the execution issue gives each rank its own
 * allocator, used only by that rank's thread, and the lock goes away. */
#include <pthread.h>
#include <stdlib.h>

#include "runtime/error.h"
#include "runtime/tensor.h"

#define DT_ALLOC_ALIGN 64
#define DT_ALLOC_LARGE ((size_t)256 << 10)
#define DT_ALLOC_CACHE_MAX ((size_t)2 << 30)
#define DT_ALLOC_CLASSES 256

typedef struct free_block { struct free_block *next; } free_block;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static free_block *cache_lists[DT_ALLOC_CLASSES];
static size_t cache_bytes;

/* class index and rounded size: 4 classes per power of two */
static int size_class(size_t n, size_t *rounded) {
  int log2 = 63 - __builtin_clzll((unsigned long long)n);
  size_t step = ((size_t)1 << log2) / 4;
  size_t r = (n + step - 1) / step * step;
  int sub = (int)((r - ((size_t)1 << log2)) / step); /* 0..4 */
  *rounded = r;
  return log2 * 4 + sub;
}

static void *raw_alloc(size_t n) {
  size_t padded = (n + DT_ALLOC_ALIGN - 1) / DT_ALLOC_ALIGN * DT_ALLOC_ALIGN;
  return aligned_alloc(DT_ALLOC_ALIGN, padded ? padded : DT_ALLOC_ALIGN);
}

static void *block_get(size_t n, size_t *cap) {
  if (n < DT_ALLOC_LARGE) {
    *cap = n;
    return raw_alloc(n);
  }
  size_t r;
  int c = size_class(n, &r);
  *cap = r;
  if (c < DT_ALLOC_CLASSES) {
    pthread_mutex_lock(&cache_lock);
    free_block *b = cache_lists[c];
    if (b) {
      cache_lists[c] = b->next;
      cache_bytes -= r;
    }
    pthread_mutex_unlock(&cache_lock);
    if (b) return b;
  }
  return raw_alloc(r);
}

static void block_put(void *p, size_t cap) {
  if (cap >= DT_ALLOC_LARGE) {
    size_t r;
    int c = size_class(cap, &r);
    pthread_mutex_lock(&cache_lock);
    if (c < DT_ALLOC_CLASSES && r == cap &&
        cache_bytes + cap <= DT_ALLOC_CACHE_MAX) {
      free_block *b = p;
      b->next = cache_lists[c];
      cache_lists[c] = b;
      cache_bytes += cap;
      p = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
  }
  free(p);
}

/* Returns every cached block to the system (tests call it before leak
 * checks; also at exit). */
void dt_alloc_trim(void) {
  pthread_mutex_lock(&cache_lock);
  for (int c = 0; c < DT_ALLOC_CLASSES; c++) {
    while (cache_lists[c]) {
      free_block *b = cache_lists[c];
      cache_lists[c] = b->next;
      free(b);
    }
  }
  cache_bytes = 0;
  pthread_mutex_unlock(&cache_lock);
}

__attribute__((destructor)) static void alloc_at_exit(void) { dt_alloc_trim(); }

/* Small storages live in one malloc block with their header (one malloc and
 * one free per tensor on the hot path; data 16-byte aligned). */
#define DT_INLINE_MAX ((size_t)4096)
#define DT_INLINE_HDR ((sizeof(dt_storage) + 15) / 16 * 16)

dt_storage *dt_storage_new(size_t nbytes, const char *fn) {
  if (nbytes <= DT_INLINE_MAX) {
    dt_storage *s = malloc(DT_INLINE_HDR + (nbytes ? nbytes : 1));
    if (!s) {
      dt_error_set(DT_ERR_OUT_OF_MEMORY,
                   "%s: cannot allocate %zu bytes of host memory", fn, nbytes);
      return NULL;
    }
    atomic_init(&s->refcount, 1);
    s->data = (char *)s + DT_INLINE_HDR;
    s->nbytes = nbytes;
    s->capacity = 0; /* inline */
    atomic_fetch_add_explicit(&dt_stat_live_bytes, (int64_t)nbytes,
                              memory_order_relaxed);
    return s;
  }
  dt_storage *s = malloc(sizeof *s);
  size_t cap = 0;
  void *data = s ? block_get(nbytes, &cap) : NULL;
  if (!data) {
    free(s);
    dt_error_set(DT_ERR_OUT_OF_MEMORY,
                 "%s: cannot allocate %zu bytes of host memory", fn, nbytes);
    return NULL;
  }
  atomic_init(&s->refcount, 1);
  s->data = data;
  s->nbytes = nbytes;
  s->capacity = cap;
  atomic_fetch_add_explicit(&dt_stat_live_bytes, (int64_t)nbytes,
                            memory_order_relaxed);
  return s;
}

void dt_storage_retain(dt_storage *s) {
  /* relaxed: the caller holds a reference */
  atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}

void dt_storage_release(dt_storage *s) {
  /* acq_rel: all uses of the data happen-before the free below */
  if (atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
    return;
  atomic_fetch_sub_explicit(&dt_stat_live_bytes, (int64_t)s->nbytes,
                            memory_order_relaxed);
  if (s->capacity) block_put(s->data, s->capacity);
  free(s);
}
