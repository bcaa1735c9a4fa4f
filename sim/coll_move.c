/* The data movement of one collective round (sim/collectives.c runs the
 * rendezvous around it). Two plans:
 *
 * pull (every member's input was small enough to travel in its entry,
 *   an all_to_all member's counts with it):
 *   each member computes its own output from the entries and touches no
 *   other member's buffer, so the round needs one barrier.
 * split (otherwise): member i does 1/n of the work, reading and writing
 *   the members' buffers directly, so nobody copies everything:
 *   all_reduce      element range i of every input, reduced over the
 *                   members' tree (coll_reduce.h), written to every output
 *   reduce_scatter  its own block, reduced over every input
 *   all_gather      its input, copied into every output at its offset
 *   all_to_all      block i of every input, into its own output
 *   broadcast       range i of the root's buffer, to every other member
 *   scatter/gather  range i of the concatenation, to/from its owners
 *   Ranges are cut at 64-byte boundaries (no two members write one cache
 *   line). The caller runs the completion barrier afterwards. In a device
 *   world (coll_device.c) the same shares are issued as copies and
 *   reductions on the member's stream.
 *
 * The members' entries agree (checked by the caller), so the counts array
 * of the calling member stands for everyone's. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "sim/coll_internal.h"
#include "sim/coll_reduce.h"

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* elements before block j of a counts array */
static int64_t prefix(const int64_t *counts, int j) {
  int64_t off = 0;
  for (int l = 0; l < j; l++) off += counts[l];
  return off;
}

/* member's share [lo, hi) of `total` elements: n near-equal runs of whole
 * 64-byte units */
static void share(int64_t total, int n, int member, size_t esz, int64_t *lo,
                  int64_t *hi) {
  int64_t unit = 64 / (int64_t)esz;
  int64_t units = (total + unit - 1) / unit;
  int64_t q = units / n, r = units % n;
  int64_t a = member * q + min64(member, r);
  int64_t b = a + q + (member < r);
  *lo = min64(a * unit, total);
  *hi = min64(b * unit, total);
}

/* p + elems (p may be NULL when there is nothing to address) */
static inline const char *at(const void *p, int64_t elems, size_t esz) {
  return elems ? (const char *)p + (size_t)elems * esz : p;
}

/* memcpy of n elements; a NULL buffer is allowed when n is 0 */
static inline void put(void *dst, int64_t elem_off, const void *src,
                       int64_t n, size_t esz) {
  if (n > 0)
    memcpy((char *)dst + (size_t)elem_off * esz, src, (size_t)n * esz);
}

/* bytes per piece of a fan-out copy: the piece is read from memory once
 * and then stays in L2 while it is written to every destination */
#define FANOUT_CHUNK ((int64_t)64 * 1024)

/* src[0..bytes) to dst[j] + 0..bytes for the nd destinations */
static void fan_out(char *const *dst, int nd, const char *src,
                    int64_t bytes) {
  bool stream = sim_coll_streams(bytes);
  for (int64_t off = 0; off < bytes; off += FANOUT_CHUNK) {
    int64_t len = min64(FANOUT_CHUNK, bytes - off);
    for (int j = 0; j < nd; j++)
      sim_coll_copy(dst[j] + off, src + off, len, stream);
  }
}

/* plain copy of one block, streaming by its size; on a device, a copy
 * issued to the member's stream */
static void copy1(sim_coll_mover *mv, void *dst, const void *src,
                  int64_t bytes) {
  if (!mv) {
    sim_coll_copy(dst, src, bytes, sim_coll_streams(bytes));
  } else if (bytes > 0 && mv->st == DT_OK) {
    mv->st = mv->dev->copy(mv->dev->ctx, mv->rank, dst, src, bytes);
  }
}

/* fan_out, or one device copy per destination */
static void fan_out_mv(sim_coll_mover *mv, char *const *dst, int nd,
                       const char *src, int64_t bytes) {
  if (!mv) {
    fan_out(dst, nd, src, bytes);
    return;
  }
  for (int j = 0; j < nd; j++) copy1(mv, dst[j], src, bytes);
}

/* sim_coll_reduce, or the device's reduction on the member's stream */
static void reduce_mv(sim_coll_mover *mv, const void *const *in, int nin,
                      void *const *out, int nout, int64_t count, dt_dtype d,
                      dt_reduce_op op) {
  if (!mv) {
    sim_coll_reduce(in, nin, out, nout, count, d, op);
  } else if (count > 0 && mv->st == DT_OK) {
    mv->st = mv->dev->reduce(mv->dev->ctx, mv->rank, in, nin, out, nout,
                             count, d, op);
  }
}

void sim_coll_move_pull(const sim_coll_entry *E, int n, int member,
                    const void **ins) {
  const sim_coll_desc *d = &E[member].d;
  size_t esz = core_dtype_size(d->dtype);
  void *out = d->out;
  switch (d->kind) {
  case KIND_ALL_REDUCE:
    for (int j = 0; j < n; j++) ins[j] = E[j].data;
    sim_coll_reduce(ins, n, &out, 1, d->count, d->dtype, d->op);
    break;
  case KIND_REDUCE_SCATTER: {
    int64_t off = prefix(d->counts, member);
    for (int j = 0; j < n; j++) ins[j] = at(E[j].data, off, esz);
    sim_coll_reduce(ins, n, &out, 1, d->counts[member], d->dtype, d->op);
    break;
  }
  case KIND_ALL_GATHER: {
    int64_t off = 0;
    for (int j = 0; j < n; j++) {
      put(out, off, E[j].data, d->counts[j], esz);
      off += d->counts[j];
    }
    break;
  }
  case KIND_BROADCAST:
    if (member != d->root)
      put(out, 0, E[d->root].data, d->count, esz);
    break;
  case KIND_SCATTER:
    put(out, 0, at(E[d->root].data, prefix(d->counts, member), esz),
        d->counts[member], esz);
    break;
  case KIND_GATHER:
    if (member == d->root) {
      int64_t off = 0;
      for (int j = 0; j < n; j++) {
        put(out, off, E[j].data, d->counts[j], esz);
        off += d->counts[j];
      }
    }
    break;
  case KIND_ALL_TO_ALL: { /* block `member` of every input, in order */
    int64_t off = 0;
    for (int j = 0; j < n; j++) {
      const int64_t *sj = sim_coll_a2a_counts(&E[j], n, false);
      put(out, off, at(E[j].data, prefix(sj, member), esz), sj[member], esz);
      off += sj[member];
    }
    break;
  }
  default:
    CORE_ASSERT(d->kind == KIND_BARRIER);
    break;
  }
}

/* scatter / gather: this member's range of the concatenation, block by
 * block, between the root's contiguous buffer and each member's own */
static void split_blocks(const sim_coll_entry *E, int n, int member,
                         sim_coll_mover *mv) {
  const sim_coll_desc *d = &E[member].d;
  size_t esz = core_dtype_size(d->dtype);
  int64_t lo, hi, off = 0;
  share(d->count, n, member, esz, &lo, &hi);
  for (int j = 0; j < n && off < hi; off += d->counts[j++]) {
    int64_t a = max64(lo, off), b = min64(hi, off + d->counts[j]);
    if (a >= b) continue;
    const sim_coll_desc *r = &E[d->root].d, *m = &E[j].d;
    if (d->kind == KIND_SCATTER)
      copy1(mv, (char *)m->out + (size_t)(a - off) * esz, at(r->in, a, esz),
            (b - a) * (int64_t)esz);
    else
      copy1(mv, (char *)r->out + (size_t)a * esz, at(m->in, a - off, esz),
            (b - a) * (int64_t)esz);
  }
}

/* all_to_all: block `member` of every input into this member's output */
static void split_all_to_all(const sim_coll_entry *E, int n, int member,
                             sim_coll_mover *mv) {
  const sim_coll_desc *d = &E[member].d;
  size_t esz = core_dtype_size(d->dtype);
  int64_t out_off = 0;
  for (int j = 0; j < n; j++) {
    const sim_coll_desc *src = &E[j].d;
    copy1(mv, (char *)d->out + (size_t)out_off * esz,
          at(src->in, prefix(src->send, member), esz),
          d->recv[j] * (int64_t)esz);
    out_off += d->recv[j];
  }
}

void sim_coll_move_split(const sim_coll_entry *E, int n, int member,
                     const void **ins, void **outs, sim_coll_mover *mv) {
  const sim_coll_desc *d = &E[member].d;
  size_t esz = core_dtype_size(d->dtype);
  int64_t lo, hi;
  switch (d->kind) {
  case KIND_ALL_REDUCE:
    share(d->count, n, member, esz, &lo, &hi);
    for (int j = 0; j < n; j++) {
      ins[j] = at(E[j].d.in, lo, esz);
      outs[j] = (char *)E[j].d.out + (size_t)lo * esz;
    }
    reduce_mv(mv, ins, n, outs, n, hi - lo, d->dtype, d->op);
    break;
  case KIND_REDUCE_SCATTER: {
    int64_t off = prefix(d->counts, member);
    for (int j = 0; j < n; j++) ins[j] = at(E[j].d.in, off, esz);
    outs[0] = d->out;
    reduce_mv(mv, ins, n, outs, 1, d->counts[member], d->dtype, d->op);
    break;
  }
  case KIND_ALL_GATHER: {
    int64_t off = prefix(d->counts, member);
    for (int j = 0; j < n; j++)
      outs[j] = (char *)E[j].d.out + (size_t)off * esz;
    fan_out_mv(mv, (char *const *)outs, n, d->in,
               d->counts[member] * (int64_t)esz);
    break;
  }
  case KIND_ALL_TO_ALL:
    split_all_to_all(E, n, member, mv);
    break;
  case KIND_BROADCAST: {
    share(d->count, n, member, esz, &lo, &hi);
    int nd = 0;
    for (int j = 0; j < n; j++)
      if (j != d->root) outs[nd++] = (char *)E[j].d.out + (size_t)lo * esz;
    fan_out_mv(mv, (char *const *)outs, nd, at(E[d->root].d.in, lo, esz),
               (hi - lo) * (int64_t)esz);
    break;
  }
  case KIND_SCATTER:
  case KIND_GATHER:
    split_blocks(E, n, member, mv);
    break;
  default:
    CORE_ASSERT(d->kind == KIND_BARRIER);
    break;
  }
}
