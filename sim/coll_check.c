/* The checks of one member's collective call against its group (sizes,
 * blocks, dtype and reduce op, root), before it enters a round: a
 * member's own arguments are its own error, not a desync. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "core/dtype.h"
#include "core/error.h"
#include "sim/coll_internal.h"
#include "sim/coll_reduce.h"


/* FNV-1a over the counts: members compare one word, not n */
static uint64_t hash_counts(const int64_t *c, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; i++) {
    h ^= (uint64_t)c[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* an argument error, prefixed "all_reduce on group [0, 1]: " (formatted
 * only when raised: the checks run on every call) */
static dt_status arg_error(const sim_coll_group *g, const sim_coll_desc *d,
                           dt_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static dt_status arg_error(const sim_coll_group *g, const sim_coll_desc *d,
                           dt_status code, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return core_error_set(code, "%s on group %s: %s", sim_coll_kind_names[d->kind],
                      g->name, msg);
}

/* counts: n entries, none negative; *total their sum */
static dt_status check_counts(const sim_coll_group *g, const sim_coll_desc *d,
                              const char *name, const int64_t *c,
                              int64_t *total) {
  *total = 0;
  if (!c) return arg_error(g, d, DT_ERR_INVALID_ARGUMENT, "%s is NULL", name);
  for (int i = 0; i < g->n; i++) {
    if (c[i] < 0 || c[i] > (INT64_MAX >> 4) - *total)
      return arg_error(g, d, DT_ERR_INVALID_ARGUMENT,
                       "%s[%d] = %lld (negative or too large)", name, i,
                       (long long)c[i]);
    *total += c[i];
  }
  return DT_OK;
}

static dt_status need(const sim_coll_group *g, const sim_coll_desc *d,
                      const char *name, const void *p, int64_t elems) {
  if (elems > 0 && !p)
    return arg_error(g, d, DT_ERR_INVALID_ARGUMENT,
                     "%s is NULL with %lld elements", name, (long long)elems);
  return DT_OK;
}

/* checks counts/pointers of the counts-array kinds; *in_elems: what this
 * member publishes as its input */
static dt_status check_blocks(const sim_coll_group *g, int member, sim_coll_desc *d,
                              int64_t *in_elems) {
  dt_status st = check_counts(g, d, "counts", d->counts, &d->count);
  if (st != DT_OK) return st;
  d->sig = hash_counts(d->counts, g->n);
  int64_t own = d->counts[member], total = d->count;
  bool root = member == d->root;
  int64_t in = 0, out = 0;
  switch (d->kind) {
  case KIND_ALL_GATHER: in = own, out = total; break;
  case KIND_REDUCE_SCATTER: in = total, out = own; break;
  case KIND_SCATTER: in = root ? total : 0, out = own; break;
  default: in = own, out = root ? total : 0; break; /* gather */
  }
  *in_elems = in;
  if ((st = need(g, d, "in", d->in, in)) != DT_OK) return st;
  return need(g, d, "out", d->out, out);
}

static dt_status check_all_to_all(const sim_coll_group *g, sim_coll_desc *d,
                                  int64_t *in_elems) {
  int64_t sent = 0, got = 0;
  dt_status st = check_counts(g, d, "send", d->send, &sent);
  if (st == DT_OK) st = check_counts(g, d, "recv", d->recv, &got);
  if (st == DT_OK) st = need(g, d, "in", d->in, sent);
  if (st == DT_OK) st = need(g, d, "out", d->out, got);
  d->count = 0; /* totals differ per member; the matrix is checked later */
  /* inline when the input and both counts arrays fit the entry (the
   * counts travel with it: run_round) */
  int64_t bytes = sent * (int64_t)core_dtype_size(d->dtype);
  *in_elems = st == DT_OK && sim_coll_a2a_inline_bytes(bytes, g->n) <= SIM_COLL_INLINE
                  ? sent : -1;
  return st;
}

static dt_status check_dtype_op(const sim_coll_group *g, const sim_coll_desc *d) {
  bool ok = (unsigned)d->dtype < (unsigned)DT_DTYPE_COUNT &&
            (unsigned)d->op <= (unsigned)DT_REDUCE_PROD &&
            !(d->dtype == DT_BOOL && d->op == DT_REDUCE_AVG);
  if (ok) return DT_OK;
  char what[192];
  snprintf(what, sizeof what, "%s on group %s", sim_coll_kind_names[d->kind],
           g->name);
  return sim_coll_reduce_check(what, d->dtype, d->op);
}

/* validates the member's call and fills what the entry compares; *bytes:
 * its input's size (-1: must stay in the caller's buffer) */
dt_status sim_coll_prepare(const sim_coll_group *g, int member, sim_coll_desc *d,
                          int64_t *bytes) {
  if (!sim_coll_is_reducing(d->kind)) d->op = DT_REDUCE_SUM;
  if (!sim_coll_is_rooted(d->kind)) d->root = 0;
  *bytes = 0;
  if (d->kind == KIND_BARRIER) return DT_OK;
  dt_status st = check_dtype_op(g, d);
  if (st != DT_OK) return st;
  if (sim_coll_is_rooted(d->kind) && (d->root < 0 || d->root >= g->n))
    return arg_error(g, d, DT_ERR_INVALID_ARGUMENT,
                     "root %d out of range [0, %d)", d->root, g->n);
  int64_t elems = 0;
  if (d->kind == KIND_ALL_REDUCE || d->kind == KIND_BROADCAST) {
    if (d->count < 0 || d->count > (INT64_MAX >> 4))
      return arg_error(g, d, DT_ERR_INVALID_ARGUMENT, "count %lld",
                       (long long)d->count);
    bool has_in = d->kind == KIND_ALL_REDUCE || member == d->root;
    elems = has_in ? d->count : 0;
    st = need(g, d, "in", d->in, elems);
    if (st == DT_OK) st = need(g, d, "out", d->out, d->count);
  } else if (d->kind == KIND_ALL_TO_ALL) {
    st = check_all_to_all(g, d, &elems);
  } else {
    st = check_blocks(g, member, d, &elems);
  }
  *bytes = elems < 0 ? -1 : elems * (int64_t)core_dtype_size(d->dtype);
  return st;
}

static const char *const op_names[] = {"sum", "avg", "max", "min", "prod"};
_Static_assert(sizeof op_names / sizeof op_names[0] == DT_REDUCE_PROD + 1,
               "one name per reduce op");

/* "all_reduce(float32[1024], sum) at train.c:88": the call an entry
 * describes (counts: the total, " in blocks" when a counts array split it) */
void sim_coll_describe(char *buf, size_t len, const sim_coll_entry *e) {
  const sim_coll_desc *d = &e->d;
  int n;
  if (d->kind == KIND_BARRIER || d->kind == KIND_ABSTAIN) {
    n = snprintf(buf, len, "%s()", sim_coll_kind_names[d->kind]);
  } else {
    n = snprintf(buf, len, "%s(%s[%lld]%s", sim_coll_kind_names[d->kind],
                 core_dtype_name(d->dtype), (long long)d->count,
                 d->sig ? " in blocks" : "");
    if (sim_coll_is_reducing(d->kind) && n >= 0 && (size_t)n < len)
      n += snprintf(buf + n, len - (size_t)n, ", %s",
                    (unsigned)d->op <= DT_REDUCE_PROD ? op_names[d->op] : "?");
    if (sim_coll_is_rooted(d->kind) && n >= 0 && (size_t)n < len)
      n += snprintf(buf + n, len - (size_t)n, ", root %d", d->root);
    if (n >= 0 && (size_t)n < len) n += snprintf(buf + n, len - (size_t)n, ")");
  }
  if (e->site[0] && n >= 0 && (size_t)n < len)
    snprintf(buf + n, len - (size_t)n, " at %s", e->site);
}
