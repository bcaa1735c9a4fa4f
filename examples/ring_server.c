/* A server loop on liburing that waits for sockets and tensors in one
 * io_uring_wait_cqe (dt_future_notify_ring).
 *
 * The server listens on a Unix socket. A request is one int64 n; for it
 * the server computes sum(arange(n)) on a 2-rank mesh (a DTensor op and a
 * Partial reduced on fetch), starts the fetch with dt_to_host_async and
 * asks dtorch to post the future's completion into the server's ring.
 * Its loop never blocks on a tensor: it waits for CQEs only — accept,
 * receive, a tensor ready, send. A client thread in this program sends
 * REQUESTS requests and checks every answer against n(n-1)/2; the program
 * exits non-zero on any mismatch or error. Public API and liburing only. */
#include <dtorch/dtorch.h>
#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum { REQUESTS = 16 };
enum { TAG_ACCEPT = 1, TAG_RECV, TAG_TENSOR, TAG_SEND }; /* low byte of user_data */

typedef struct server {
  struct io_uring ring;
  dt_mesh *mesh;
  int conn;
  int64_t request;           /* the n being received */
  double answer;             /* fetched here by dtorch */
  dt_tensor *pending;        /* the tensor being fetched */
  dt_future *future;
  int served;
} server;

static void submit(server *s, int tag, void (*prep)(struct io_uring_sqe *, server *)) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
  prep(sqe, s);
  io_uring_sqe_set_data64(sqe, (uint64_t)tag);
  io_uring_submit(&s->ring);
}
static void prep_recv(struct io_uring_sqe *q, server *s) {
  io_uring_prep_recv(q, s->conn, &s->request, sizeof s->request, MSG_WAITALL);
}
static void prep_send(struct io_uring_sqe *q, server *s) {
  io_uring_prep_send(q, s->conn, &s->answer, sizeof s->answer, 0);
}

/* a request: sum(arange(n)) as a DTensor, fetched without blocking */
static int start_tensor(server *s) {
  dt_tensor_options o = {.dtype = DT_FLOAT64, .mesh = s->mesh,
                         .placements = DT_PLACEMENTS(DT_SHARD(0))};
  dt_tensor *a = dt_arange(0, (double)s->request, 1, &o);
  s->pending = a ? dt_sum(a, NULL, 0, false) : NULL; /* Partial(sum) */
  dt_tensor_release(a);
  s->future = s->pending ? dt_to_host_async(s->pending, &s->answer, sizeof s->answer) : NULL;
  if (!s->future || dt_future_notify_ring(s->future, s->ring.ring_fd, TAG_TENSOR) != DT_OK) {
    fprintf(stderr, "ring_server: %s\n", dt_last_error());
    return 1;
  }
  return 0;
}

static int handle(server *s, int tag, int res) {
  switch (tag) {
  case TAG_ACCEPT:
    if (res < 0) return fprintf(stderr, "ring_server: accept: %s\n", strerror(-res)), 1;
    s->conn = res;
    submit(s, TAG_RECV, prep_recv);
    return 0;
  case TAG_RECV:
    if (res != (int)sizeof s->request) return fprintf(stderr, "ring_server: short request\n"), 1;
    return start_tensor(s);
  case TAG_TENSOR: /* the future's CQE: res 0 or -status */
    /* a wait on a complete future returns at once; it orders our read of
     * the answer after the ranks' writes in the C memory model too */
    if (res == 0) res = -(int)dt_future_wait(s->future, 0);
    dt_future_release(s->future);
    dt_tensor_release(s->pending);
    if (res != 0) return fprintf(stderr, "ring_server: tensor failed: %d\n", res), 1;
    submit(s, TAG_SEND, prep_send);
    return 0;
  default: /* TAG_SEND */
    if (++s->served < REQUESTS) submit(s, TAG_RECV, prep_recv);
    return 0;
  }
}

typedef struct client { const char *path; int failures; } client;

static void *run_client(void *arg) {
  client *c = arg;
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", c->path);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    c->failures = REQUESTS;
    return NULL;
  }
  for (int k = 0; k < REQUESTS; k++) {
    int64_t n = 1000 + 37 * k;
    double got = -1;
    if (write(fd, &n, sizeof n) != (ssize_t)sizeof n ||
        recv(fd, &got, sizeof got, MSG_WAITALL) != (ssize_t)sizeof got ||
        got != (double)(n * (n - 1) / 2)) {
      fprintf(stderr, "ring_server: request %d (n %lld): got %.0f\n", k, (long long)n, got);
      c->failures++;
    }
  }
  close(fd);
  return NULL;
}

int main(void) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/dtorch_ring_server.%d", (int)getpid());
  int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
  unlink(path);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) || listen(lfd, 1)) {
    perror("ring_server: listen");
    return 1;
  }
  server s = {.conn = -1};
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  s.mesh = rt ? dt_mesh_init(rt, "cpu", DT_SHAPE(2), NULL) : NULL;
  if (!s.mesh || io_uring_queue_init(16, &s.ring, 0) != 0) {
    fprintf(stderr, "ring_server: setup: %s\n", dt_last_error());
    return 1;
  }
  struct io_uring_sqe *sqe = io_uring_get_sqe(&s.ring);
  io_uring_prep_accept(sqe, lfd, NULL, NULL, 0);
  io_uring_sqe_set_data64(sqe, TAG_ACCEPT);
  io_uring_submit(&s.ring);
  client c = {.path = path};
  pthread_t th;
  pthread_create(&th, NULL, run_client, &c);
  int rc = 0;
  while (!rc && s.served < REQUESTS) { /* sockets and tensors, one wait */
    struct io_uring_cqe *cqe;
    if (io_uring_wait_cqe(&s.ring, &cqe) != 0) break;
    int tag = (int)(cqe->user_data & 0xff), res = cqe->res;
    io_uring_cqe_seen(&s.ring, cqe);
    rc = handle(&s, tag, res);
  }
  if (rc && s.conn >= 0) shutdown(s.conn, SHUT_RDWR); /* unblock the client */
  pthread_join(th, NULL);
  if (s.conn >= 0) close(s.conn);
  close(lfd);
  unlink(path);
  io_uring_queue_exit(&s.ring);
  dt_mesh_release(s.mesh);
  dt_runtime_destroy(rt);
  printf("ring_server: %d requests served, %d wrong\n", s.served, c.failures);
  return rc || c.failures || s.served != REQUESTS;
}
