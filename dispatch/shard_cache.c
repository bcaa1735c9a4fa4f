/* The per-thread sharding cache (propagate.h): a set-associative table of
 * SETS x WAYS entries per thread, each a malloc'd (key words, plan). A
 * lookup hashes the key words, reads one set of this thread's table and
 * compares words: no lock, no atomic, no shared cache line. A full set
 * evicts round-robin. Entries name meshes by their process-unique id
 * (never reused), so a mesh made after another was destroyed cannot
 * match the dead one's entries; they age out. The table is freed when
 * the thread exits (a pthread key destructor). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "dispatch/propagate.h"
#include "mesh/mesh.h"

#define SETS 1024 /* a transformer step has a few hundred keys: 256 sets overflowed some */
#define WAYS 4

typedef struct entry {
  dispatch_plan plan;
  uint64_t hash;
  int n;
  int64_t w[]; /* n key words */
} entry;

typedef struct table {
  entry *e[SETS][WAYS];
  uint8_t next[SETS];          /* round-robin victim per set */
  int64_t hits, misses, entries, evictions;
} table;

static _Thread_local table *tls_table;
static pthread_key_t table_key;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_free(void *p) {
  table *t = p;
  for (int s = 0; s < SETS; s++)
    for (int w = 0; w < WAYS; w++) free(t->e[s][w]);
  free(t);
}
static void make_key(void) { pthread_key_create(&table_key, table_free); }

static table *mine(void) {
  if (tls_table) return tls_table;
  pthread_once(&table_once, make_key);
  table *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  pthread_setspecific(table_key, t);
  return tls_table = t;
}

/* ---- keys */
static inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

/* appends v to the key's words and its running hash (n = -1: too long) */
static void put(dispatch_key *k, int64_t v) {
  if (k->n < 0 || k->n >= DISPATCH_KEY_WORDS) {
    k->n = -1;
    return;
  }
  k->w[k->n++] = v;
  k->hash = mix(k->hash, (uint64_t)v);
}

/* a DTensor's words come ready-made with its spec (core_spec.key): copied,
 * and its precomputed hash mixed in once */
static void put_tensor(dispatch_key *k, const dt_tensor *t) {
  if (!t) {
    put(k, -1);
    return;
  }
  const core_spec *s = t->spec;
  if (k->n < 0 || k->n + s->key_n > DISPATCH_KEY_WORDS) {
    k->n = -1;
    return;
  }
  memcpy(k->w + k->n, s->key, sizeof(int64_t) * (size_t)s->key_n);
  k->n += s->key_n;
  k->hash = mix(k->hash, s->key_hash);
}

/* the ops whose sharding rule reads a scalar argument's class (zero,
 * infinite, NaN, other): mul_scalar and div_scalar keep a Partial only
 * for a finite, nonzero-divisor scalar (ops/pointwise.c ops_scalar_rule) */
static bool rule_reads_scalar(core_op_id op) {
  return op == CORE_OP_MUL_SCALAR || op == CORE_OP_DIV_SCALAR;
}

void dispatch_key_build(const dt_op_call *c, dispatch_key *k) {
  const char *s = core_op_schema(c->op);
  k->n = 0;
  k->statics = false;
  k->classes = 0;
  k->hash = 0x243f6a8885a308d3ull;
  put(k, (int64_t)c->op << 8 | c->nargs);
  for (int i = 0; s[i] && k->n >= 0; i++) {
    const core_value *v = &c->args[i];
    switch (s[i]) {
    case 'T': case 't': put_tensor(k, v->t); break;
    case 'L':
      put(k, v->list.n);
      for (int j = 0; j < v->list.n && k->n >= 0; j++) put_tensor(k, v->list.v[j]);
      break;
    case 'i': put(k, v->i); break;
    case 'b': put(k, v->b); break;
    case 'D': put(k, v->dtype); break;
    case 'I':
      put(k, v->ints.ndim);
      for (int j = 0; j < v->ints.ndim && j < DT_MAX_DIMS; j++) put(k, v->ints.dims[j]);
      break;
    case 's': /* for an op whose rule reads it, its class (it joins the
               * key in dispatch_key_put_meta's first word); no other op's
               * key holds it, so adam_moment's beta 0 on the first step
               * and 0.9 after share an entry */
      k->statics = true;
      if (rule_reads_scalar(c->op))
        k->classes |= (uint32_t)(isnan(v->d) ? 3 : isinf(v->d) ? 2 : v->d == 0) << 2 * i;
      break;
    case 'k': /* a scalar's kind: it decides the infer's dtype, which
               * enters (int32 + 1 and + 1.0 differ there); float32 + 1
               * and + 1.5 keep sharing an entry */
      k->statics = true;
      break;
    default: k->statics = true; break; /* d n P: their infer's result enters */
    }
  }
}

/* A first word (the output count and the scalars' classes), then per
 * output a word for dtype and ndim and one per size. What a rule reads of
 * the infer is exactly this (c->meta[o].dtype, ndim, sizes; a DTensor
 * output is always fresh and contiguous), so two calls with the same key
 * words get the same strategies. This runs on every hit of such an op, so
 * only the first and the dtype words are mixed into the hash: equal words
 * still give equal hashes, and the lookup compares every word. */
void dispatch_key_put_meta(const dt_op_call *c, dispatch_key *k) {
  int n = k->n, need = 1;
  for (int o = 0; o < c->nmeta; o++) need += 1 + c->meta[o].ndim;
  if (n < 0 || n + need > DISPATCH_KEY_WORDS) {
    k->n = -1;
    return;
  }
  int64_t *w = k->w + n;
  uint64_t f = (uint64_t)c->nmeta | (uint64_t)k->classes << 8;
  *w++ = (int64_t)f;
  for (int o = 0; o < c->nmeta; o++) {
    const core_meta *m = &c->meta[o];
    *w = (int64_t)m->dtype << 8 | m->ndim;
    f = (f ^ (uint64_t)*w++) * 0x100000001b3ull;
    memcpy(w, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
    w += m->ndim;
  }
  k->n = n + need;
  k->hash = mix(k->hash, f);
}

/* ---- lookup and insert */
const dispatch_plan *dispatch_cache_find(const dispatch_key *k) {
  table *t = mine();
  if (!t) return NULL;
  if (k->n >= 0) {
    entry *const *set = t->e[k->hash % SETS];
    for (int w = 0; w < WAYS; w++) {
      const entry *e = set[w];
      if (e && e->hash == k->hash && e->n == k->n &&
          !memcmp(e->w, k->w, sizeof(int64_t) * (size_t)k->n)) {
        t->hits++;
        return &e->plan;
      }
    }
  }
  t->misses++;
  return NULL;
}

bool dispatch_cache_insert(const dispatch_key *k, const dispatch_plan *p) {
  table *t = mine();
  if (!t || k->n < 0) return false;
  entry *e = malloc(sizeof *e + sizeof(int64_t) * (size_t)k->n);
  if (!e) return false;
  e->plan = *p;
  e->hash = k->hash;
  e->n = k->n;
  memcpy(e->w, k->w, sizeof(int64_t) * (size_t)k->n);
  size_t s = k->hash % SETS;
  int way = -1;
  for (int w = 0; w < WAYS && way < 0; w++)
    if (!t->e[s][w]) way = w;
  if (way < 0) {
    way = t->next[s];
    t->next[s] = (uint8_t)((way + 1) % WAYS);
    free(t->e[s][way]);
    t->evictions++;
    t->entries--;
  }
  t->e[s][way] = e;
  t->entries++;
  return true;
}

dt_cache_stats dispatch_cache_stats(void) {
  table *t = tls_table;
  dt_cache_stats st = {0};
  if (t) {
    st.hits = t->hits;
    st.misses = t->misses;
    st.entries = t->entries;
  }
  return st;
}

int64_t dispatch_cache_evictions(void) {
  return tls_table ? tls_table->evictions : 0;
}

void dispatch_cache_clear(void) {
  table *t = tls_table;
  if (!t) return;
  for (int s = 0; s < SETS; s++)
    for (int w = 0; w < WAYS; w++) {
      free(t->e[s][w]);
      t->e[s][w] = NULL;
    }
  memset(t->next, 0, sizeof t->next);
  t->hits = t->misses = t->entries = t->evictions = 0;
}
