/* Point-to-point send/recv between rank threads (sim/collectives.h).
 *
 * Channel. One mailbox per ordered pair (from, to): only rank `from`'s
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
 * wake, so no wake-up is lost. */
#include <stdbool.h>
#include <string.h>

#include "core/error.h"
#include "sim/coll_internal.h"

enum { MAIL_EMPTY, MAIL_POSTED, MAIL_TAKING, MAIL_DONE, MAIL_MISMATCH };

/* spin this long before sleeping (p2p is not a hot path) */
#define P2P_SPIN_NS ((int64_t)10 * 1000)

/* waits until state is a or b (acquire: pairs with the other side's
 * release store or CAS that wrote it); false on the deadline */
static bool wait_state(_Atomic uint32_t *word, uint32_t a, uint32_t b,
                       int64_t deadline, uint32_t *seen) {
  int64_t spin_end = sim_coll_now_ns() + P2P_SPIN_NS;
  for (unsigned i = 1;; i++) {
    uint32_t v = atomic_load_explicit(word, memory_order_acquire);
    if (v == a || v == b) {
      *seen = v;
      return true;
    }
    if (i % 64 == 0 && sim_coll_now_ns() >= spin_end) {
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
  double secs = (double)atomic_load_explicit(&w->timeout_ns,
                                             memory_order_relaxed) * 1e-9;
  return core_error_set(DT_ERR_TIMEOUT,
                      "%s rank %d %s rank %d (%lld bytes): timed out after "
                      "%.3f s; rank %d did not %s",
                      side, me, dir, peer, (long long)bytes, secs, peer,
                      missing);
}

dt_status sim_coll_send(sim_coll_world *w, int from, int to, const void *buf,
                    int64_t bytes) {
  dt_status st = check_pair(w, "coll_send", from, to, buf, bytes);
  if (st != DT_OK) return st;
  sim_coll_mailbox *mb = &w->mail[(size_t)from * (size_t)w->nranks + (size_t)to];
  int64_t deadline = sim_coll_deadline(w);
  /* the previous send on this pair finished (it reset the word itself) */
  CORE_ASSERT(atomic_load_explicit(&mb->state, memory_order_relaxed) ==
            MAIL_EMPTY);
  mb->buf = buf;
  mb->bytes = bytes;
  /* release: pairs with the receiver's acquire CAS POSTED -> TAKING */
  atomic_store_explicit(&mb->state, MAIL_POSTED, memory_order_release);
  sim_coll_futex_wake(&mb->state);
  uint32_t v;
  if (!wait_state(&mb->state, MAIL_DONE, MAIL_MISMATCH, deadline, &v)) {
    uint32_t expect = MAIL_POSTED;
    /* relaxed: a won retraction publishes nothing; a lost one is followed
     * by the acquire wait below */
    if (atomic_compare_exchange_strong_explicit(&mb->state, &expect,
                                                MAIL_EMPTY,
                                                memory_order_relaxed,
                                                memory_order_relaxed))
      return p2p_timeout(w, "send from", from, "to", to, bytes, "receive");
    /* the receiver is copying: wait for it, without a deadline */
    wait_state(&mb->state, MAIL_DONE, MAIL_MISMATCH, -1, &v);
  }
  /* read before the reset lets the next message in */
  int64_t want = v == MAIL_MISMATCH ? mb->want : bytes;
  /* relaxed: the next send's release store of POSTED orders this */
  atomic_store_explicit(&mb->state, MAIL_EMPTY, memory_order_relaxed);
  if (v == MAIL_MISMATCH)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "send from rank %d to rank %d: sent %lld bytes, the "
                        "receiver expected %lld", from, to, (long long)bytes,
                        (long long)want);
  return DT_OK;
}

dt_status sim_coll_recv(sim_coll_world *w, int to, int from, void *buf,
                    int64_t bytes) {
  dt_status st = check_pair(w, "coll_recv", from, to, buf, bytes);
  if (st != DT_OK) return st;
  sim_coll_mailbox *mb = &w->mail[(size_t)from * (size_t)w->nranks + (size_t)to];
  int64_t deadline = sim_coll_deadline(w);
  for (;;) {
    uint32_t v;
    if (!wait_state(&mb->state, MAIL_POSTED, MAIL_POSTED, deadline, &v))
      return p2p_timeout(w, "recv on", to, "from", from, bytes, "send");
    uint32_t expect = MAIL_POSTED;
    /* acquire: pairs with the sender's release store of POSTED (buf,
     * bytes and the buffer's contents) */
    if (atomic_compare_exchange_strong_explicit(&mb->state, &expect,
                                                MAIL_TAKING,
                                                memory_order_acquire,
                                                memory_order_relaxed))
      break;
    /* the sender retracted (its timeout): wait for a new posting */
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
  if (bytes > 0) memcpy(buf, mb->buf, (size_t)bytes);
  /* release: pairs with the sender's acquire wait for DONE; our reads of
   * its buffer happen before it reuses the buffer */
  atomic_store_explicit(&mb->state, MAIL_DONE, memory_order_release);
  sim_coll_futex_wake(&mb->state);
  return DT_OK;
}
