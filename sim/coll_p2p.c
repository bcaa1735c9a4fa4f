/* Point-to-point send/recv between rank threads (sim/collectives.h).
 *
 * Channel. One mailbox per ordered pair (from, to), made with the sender's
 * row on the pair's first use (sim_coll_mailbox_of): only rank `from`'s
 * thread sends on it and only rank `to`'s thread receives, one message at
 * a time (send blocks until the receiver took the bytes), so messages of
 * a pair arrive in order. The mailbox's `state` word is the whole
 * protocol and the futex word both sides sleep on:
 *
 *     EMPTY --sender--> POSTED --receiver CAS--> TAKING --copy--> DONE
 *       ^                 |                                 or MISMATCH
 *       |                 +--sender CAS on timeout--> EMPTY      |
 *       +--------------------------sender-------------------------+
 *
 * The sender writes buf/bytes and stores POSTED (release); the receiver
 * claims the message with a CAS POSTED -> TAKING (acquire: it then reads
 * buf/bytes and the sender's buffer), copies, and stores DONE (release:
 * its reads of the sender's buffer happen before the sender, which loads
 * DONE with acquire, reuses it). A sender that times out retracts with a
 * CAS POSTED -> EMPTY; the two CASes on one word are totally ordered, so
 * either the receiver owns the message (the sender then waits for DONE:
 * the copy is bounded, and returning earlier would free a buffer being
 * read) or the retraction won and the receiver never reads the buffer.
 * Every transition wakes the word (FUTEX_WAKE); a sleeper passes the value
 * it last saw to FUTEX_WAIT, which the kernel compares atomically with the
 * wake, so no wake-up is lost.
 *
 * Pairing after a timeout. Send k and recv k of a pair belong together:
 * each side numbers its own calls (nsent, nrecv) and a posting carries its
 * number. A receiver that claims a message numbered below its own call's
 * was posted for a recv that timed out: it marks it DROPPED (the sender
 * fails with that reason) and waits on. One numbered above its own call's
 * means the sender gave up on the message this recv was for: it puts the
 * posting back (TAKING -> POSTED, for the next recv) and fails. So a
 * timeout fails exactly the two calls it concerns, and later calls pair
 * as they were issued. */
#include <stdbool.h>
#include <string.h>

#include "core/error.h"
#include "sim/coll_internal.h"
#include "sim/coll_proc.h"

enum { MAIL_EMPTY, MAIL_POSTED, MAIL_TAKING, MAIL_DONE, MAIL_MISMATCH,
       MAIL_DROPPED };
#define MAIL_BIT(s) (1u << (s))

/* spin this long before sleeping (p2p is not a hot path) */
#define P2P_SPIN_NS ((int64_t)10 * 1000)

/* waits until state is one of the MAIL_BIT set `want` (acquire: pairs with
 * the other side's release store or CAS that wrote it); false on the
 * deadline */
/* (SPMD) peer left its function: a wait for it gives up as at its
 * deadline (checked each sleep slice: a departure wakes no mailbox) */
static bool peer_gone(const sim_coll_world *w, int peer) {
  return atomic_load_explicit(&w->ngone, memory_order_relaxed) &&
         sim_coll_is_gone(w, peer);
}

static bool wait_state(const sim_coll_world *w, int peer,
                       _Atomic uint32_t *word, uint32_t want,
                       int64_t deadline, uint32_t *seen) {
  int64_t spin_end = sim_coll_now_ns() + P2P_SPIN_NS;
  for (unsigned i = 1;; i++) {
    uint32_t v = atomic_load_explicit(word, memory_order_acquire);
    if (MAIL_BIT(v) & want) {
      *seen = v;
      return true;
    }
    if (i % 64 == 0 && sim_coll_now_ns() >= spin_end) {
      if (peer >= 0 && peer_gone(w, peer)) return false;
      int64_t rel = sim_coll_sleep_ns(deadline);
      if (rel <= 0) return false;
      sim_coll_futex_wait(word, v, rel);
    } else {
      sim_coll_relax();
    }
  }
}

static dt_status check_pair(sim_coll_world *w, const char *what, int from,
                            int to, const void *buf, int64_t bytes) {
  if (!w)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: world is NULL", what);
  if (from < 0 || from >= w->nranks || to < 0 || to >= w->nranks)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: ranks %d -> %d out of range [0, %d)", what,
                        from, to, w->nranks);
  if (from == to)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: rank %d to itself would never complete", what,
                        from);
  if (w->dev && w->dev->call)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: rank %d -> %d: send/recv "
                          "between ranks on different GPUs is not built yet "
                          "(the collectives are)", what, from, to);
  if (bytes < 0 || (bytes > 0 && !buf))
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: %lld bytes at %p", what, (long long)bytes, buf);
  return DT_OK;
}

/* the timeout of one side of a pair: "send from rank 0 to rank 1 (8
 * bytes): timed out after 0.100 s; rank 1 did not receive" (the peer did
 * not `missing`) */
static dt_status p2p_timeout(sim_coll_world *w, const char *side, int me,
                             const char *dir, int peer, int64_t bytes,
                             const char *missing) {
  if (peer_gone(w, peer)) {
    char why[1200];
    sim_coll_gone_str(w, peer, why, sizeof why);
    return core_error_set(DT_ERR_DESYNC, "%s rank %d %s rank %d (%lld bytes): "
                          "%s without a matching %s", side, me, dir, peer,
                          (long long)bytes, why, missing);
  }
  double secs = (double)atomic_load_explicit(&w->timeout_ns,
                                             memory_order_relaxed) * 1e-9;
  return core_error_set(DT_ERR_TIMEOUT,
                      "%s rank %d %s rank %d (%lld bytes): timed out after "
                      "%.3f s; rank %d did not %s",
                      side, me, dir, peer, (long long)bytes, secs, peer,
                      missing);
}

/* ---- device worlds: the copy is issued to the receiver's stream after
 * the sender's ready event; the sender's stream then waits for the copy's
 * done event before anything later overwrites the buffer. The sender
 * releases both events (the receiver issued its wait before DONE). */
static dt_status p2p_device_copy(const sim_coll_device *dev,
                                 sim_coll_mailbox *mb, int to, void *buf,
                                 int64_t bytes) {
  dt_status st = dev->wait(dev->ctx, to, mb->ev);
  if (st == DT_OK && bytes > 0)
    st = dev->copy(dev->ctx, to, buf, mb->buf, bytes);
  void *done = dev->record(dev->ctx, to);
  if (!done && st == DT_OK) st = core_last_status();
  mb->ev_done = done;
  mb->dev_st = st;
  return st;
}

/* the sender after the receiver finished (v: DONE or MISMATCH) */
static dt_status p2p_sender_done(const sim_coll_device *dev,
                                 sim_coll_mailbox *mb, int from, uint32_t v) {
  dt_status st = v == MAIL_DONE ? mb->dev_st : DT_OK;
  if (st != DT_OK)
    core_error_set(st, "send from rank %d: the receiver could not copy the "
                   "message on its device", from);
  if (mb->ev_done) {
    dt_status ws = dev->wait(dev->ctx, from, mb->ev_done);
    if (st == DT_OK) st = ws;
    dev->release(dev->ctx, mb->ev_done);
  }
  dev->release(dev->ctx, mb->ev);
  mb->ev = mb->ev_done = NULL;
  return st;
}

dt_status sim_coll_send(sim_coll_world *w, int from, int to, const void *buf,
                    int64_t bytes) {
  dt_status st = check_pair(w, "coll_send", from, to, buf, bytes);
  if (st != DT_OK) return st;
  if (w->mpi && to / w->per != w->proc) /* another process's rank */
    return sim_xp_send(w, from, to, buf, bytes);
  sim_coll_mailbox *mb = sim_coll_mailbox_of(w, from, to);
  if (!mb) return core_last_status();
  int64_t deadline = sim_coll_deadline(w);
  /* the previous send on this pair finished (it reset the word itself) */
  CORE_ASSERT(atomic_load_explicit(&mb->state, memory_order_relaxed) ==
            MAIL_EMPTY);
  const sim_coll_device *dev = w->dev;
  mb->ev = mb->ev_done = NULL;
  mb->dev_st = DT_OK;
  /* a device: the receiver's stream waits for what wrote buf (a failed
   * record still takes this send's number: the paired recv then fails
   * rather than pairing with the next send) */
  if (dev && !(mb->ev = dev->record(dev->ctx, from))) {
    mb->nsent++;
    return core_last_status();
  }
  mb->buf = buf;
  mb->bytes = bytes;
  mb->msg = mb->nsent++;
  /* release: pairs with the receiver's acquire CAS POSTED -> TAKING */
  atomic_store_explicit(&mb->state, MAIL_POSTED, memory_order_release);
  sim_coll_futex_wake(&mb->state);
  const uint32_t ends =
      MAIL_BIT(MAIL_DONE) | MAIL_BIT(MAIL_MISMATCH) | MAIL_BIT(MAIL_DROPPED);
  uint32_t v;
  while (!wait_state(w, to, &mb->state, ends, deadline, &v)) {
    uint32_t expect = MAIL_POSTED;
    /* relaxed: a won retraction publishes nothing; a lost one is followed
     * by the acquire wait below */
    if (atomic_compare_exchange_strong_explicit(&mb->state, &expect,
                                                MAIL_EMPTY,
                                                memory_order_relaxed,
                                                memory_order_relaxed)) {
      if (dev) dev->release(dev->ctx, mb->ev); /* never waited on */
      return p2p_timeout(w, "send from", from, "to", to, bytes, "receive");
    }
    /* the receiver holds it: wait, without a deadline, until it is done
     * or puts it back (then retract again: the deadline has passed) */
    wait_state(w, -1, &mb->state, ends | MAIL_BIT(MAIL_POSTED), -1, &v);
    if (v != MAIL_POSTED) break;
  }
  if (v == MAIL_DROPPED) {
    if (dev) dev->release(dev->ctx, mb->ev); /* never waited on */
    atomic_store_explicit(&mb->state, MAIL_EMPTY, memory_order_relaxed);
    return core_error_set(DT_ERR_TIMEOUT,
                          "send from rank %d to rank %d (%lld bytes): rank "
                          "%d's recv of this message had timed out; the "
                          "message was dropped", from, to, (long long)bytes,
                          to);
  }
  /* read before the reset lets the next message in */
  int64_t want = v == MAIL_MISMATCH ? mb->want : bytes;
  dt_status dev_st = dev ? p2p_sender_done(dev, mb, from, v) : DT_OK;
  /* relaxed: the next send's release store of POSTED orders this */
  atomic_store_explicit(&mb->state, MAIL_EMPTY, memory_order_relaxed);
  if (v == MAIL_MISMATCH)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "send from rank %d to rank %d: sent %lld bytes, the "
                        "receiver expected %lld", from, to, (long long)bytes,
                        (long long)want);
  return dev_st;
}

dt_status sim_coll_recv(sim_coll_world *w, int to, int from, void *buf,
                    int64_t bytes) {
  dt_status st = check_pair(w, "coll_recv", from, to, buf, bytes);
  if (st != DT_OK) return st;
  if (w->mpi && from / w->per != w->proc)
    return sim_xp_recv(w, to, from, buf, bytes);
  sim_coll_mailbox *mb = sim_coll_mailbox_of(w, from, to);
  if (!mb) return core_last_status();
  int64_t deadline = sim_coll_deadline(w);
  uint64_t mine = mb->nrecv++;
  for (;;) {
    uint32_t v;
    if (!wait_state(w, from, &mb->state, MAIL_BIT(MAIL_POSTED), deadline, &v))
      return p2p_timeout(w, "recv on", to, "from", from, bytes, "send");
    uint32_t expect = MAIL_POSTED;
    /* acquire: pairs with the sender's release store of POSTED (buf,
     * bytes, msg and the buffer's contents) */
    if (!atomic_compare_exchange_strong_explicit(&mb->state, &expect,
                                                 MAIL_TAKING,
                                                 memory_order_acquire,
                                                 memory_order_relaxed))
      continue; /* the sender retracted (its timeout): wait for another */
    if (mb->msg == mine) break;
    if (mb->msg < mine) { /* posted for a recv that timed out */
      /* release: pairs with the sender's acquire wait */
      atomic_store_explicit(&mb->state, MAIL_DROPPED, memory_order_release);
      sim_coll_futex_wake(&mb->state);
      continue;
    }
    /* the sender gave up on ours: leave this one to the next recv
     * (release: pairs with the next claimer's acquire CAS) */
    atomic_store_explicit(&mb->state, MAIL_POSTED, memory_order_release);
    sim_coll_futex_wake(&mb->state);
    return core_error_set(DT_ERR_TIMEOUT,
                          "recv on rank %d from rank %d (%lld bytes): rank "
                          "%d's send of this message had timed out", to, from,
                          (long long)bytes, from);
  }
  if (mb->bytes != bytes) {
    int64_t sent = mb->bytes;
    mb->want = bytes;
    /* release: pairs with the sender's acquire wait (it reads `want`) */
    atomic_store_explicit(&mb->state, MAIL_MISMATCH, memory_order_release);
    sim_coll_futex_wake(&mb->state);
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "recv on rank %d from rank %d: expected %lld bytes, "
                        "the sender sent %lld", to, from, (long long)bytes,
                        (long long)sent);
  }
  st = w->dev ? p2p_device_copy(w->dev, mb, to, buf, bytes) : DT_OK;
  if (!w->dev && bytes > 0) memcpy(buf, mb->buf, (size_t)bytes);
  /* release: pairs with the sender's acquire wait for DONE; our reads of
   * its buffer happen before it reuses the buffer (a device: our copy's
   * done event and status, which the sender's stream then waits for) */
  atomic_store_explicit(&mb->state, MAIL_DONE, memory_order_release);
  sim_coll_futex_wake(&mb->state);
  return st;
}
