/* dtorch's own io_uring (uring.h): one ring per process, made on first
 * use, that sends IORING_OP_MSG_RING to a server's ring so that a future's
 * completion appears among the server's sockets and files in one
 * io_uring_wait_cqe. A mutex serialises the SQ and the CQ: one SQE, then
 * its CQE, per message (a message is rare next to the ops it reports). */
#include "sched/uring.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <string.h>

#include "core/error.h"

static struct {
  pthread_mutex_t lock;
  pthread_once_t once;
  struct io_uring ring;
  int init_err;      /* 0, -errno from io_uring_queue_init, or -EOPNOTSUPP */
} u = {.lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static void make_ring(void) {
  int r = io_uring_queue_init(8, &u.ring, 0);
  if (r < 0) {
    u.init_err = r;
    return;
  }
  struct io_uring_probe *p = io_uring_get_probe_ring(&u.ring);
  bool ok = p && io_uring_opcode_supported(p, IORING_OP_MSG_RING);
  if (p) io_uring_free_probe(p);
  if (!ok) {
    io_uring_queue_exit(&u.ring);
    u.init_err = -EOPNOTSUPP;
  }
}

dt_status sched_uring_check(const char *api) {
  pthread_once(&u.once, make_ring);
  if (u.init_err == -EOPNOTSUPP)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: this kernel's io_uring has "
                          "no IORING_OP_MSG_RING (Linux 5.18 or later needed)", api);
  if (u.init_err)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: io_uring is not available "
                          "here: %s", api, strerror(-u.init_err));
  return DT_OK;
}

dt_status sched_uring_msg(int ring_fd, uint64_t user_data, int32_t res,
                          const char *api) {
  dt_status st = sched_uring_check(api);
  if (st != DT_OK) return st;
  pthread_mutex_lock(&u.lock);
  struct io_uring_sqe *sqe = io_uring_get_sqe(&u.ring);
  int r = -EBUSY;
  if (sqe) {
    /* the target's CQE: res = len, user_data = data */
    io_uring_prep_msg_ring(sqe, ring_fd, (unsigned)res, user_data, 0);
    r = io_uring_submit(&u.ring);
    struct io_uring_cqe *cqe;
    if (r >= 0 && (r = io_uring_wait_cqe(&u.ring, &cqe)) == 0) {
      r = cqe->res;
      io_uring_cqe_seen(&u.ring, cqe);
    }
  }
  pthread_mutex_unlock(&u.lock);
  if (r < 0)
    return core_error_set(DT_ERR_IO, "%s: posting to the io_uring of fd %d "
                          "failed: %s", api, ring_fd, strerror(-r));
  return DT_OK;
}
