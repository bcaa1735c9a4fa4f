/* dtorch's own io_uring, for completions delivered into other rings
 * (uring.c). */
#ifndef SCHED_URING_H
#define SCHED_URING_H

#include <stdint.h>

#include "dtorch/dtorch.h"

/* Posts a CQE {user_data, res} into the io_uring whose fd is ring_fd
 * (IORING_OP_MSG_RING from a ring dtorch owns, made on first use), and
 * waits for the kernel to accept it. Any thread; serialised on one lock.
 * Errors name api: no io_uring here (DT_ERR_UNSUPPORTED), the kernel's
 * refusal (a bad or closed ring fd, a full target ring: DT_ERR_IO with
 * strerror). */
dt_status sched_uring_msg(int ring_fd, uint64_t user_data, int32_t res,
                          const char *api);
/* DT_OK if MSG_RING can be sent (the ring made and the opcode probed);
 * else the error sched_uring_msg would give */
dt_status sched_uring_check(const char *api);

#endif
