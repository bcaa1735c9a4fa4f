/* An HTTP server that embeds dtorch: libmicrohttpd's thread pool accepts
 * connections; POST /v1/forward runs the tensor-parallel MLP below
 * on a dtorch runtime and answers JSON; GET /metrics reports per-rank
 * memory and queue depth, requests in flight and latencies (Prometheus
 * text).
 *
 * No thread waits for a tensor: the handler issues the ops and the fetch,
 * suspends the connection (MHD_suspend_connection) and returns; the
 * fetch's future calls back on dtorch's completion thread
 * (dt_future_then), which resumes the connection; MHD then calls the
 * handler again and it sends the result. SIGTERM (or SIGINT): stop
 * accepting, answer every request in flight, stop, free the model and the
 * runtime, report the live tensors (0), exit 0.
 *
 * For tests, --hold-fd N makes a gate of file descriptor N (a pipe's read
 * end): a request with "hold": true is computed, then waits, suspended,
 * until a byte arrives on N (or its writer closes), so a test can have
 * requests in flight when it sends the signal however loaded the machine
 * is. On the signal the server prints "draining: K requests in flight"
 * once it accepts no more connections.
 *
 *   dtorch_server --write-model model.safetensors       # seeded weights
 *   dtorch_server --model model.safetensors [--tp 4] [--threads 4] [--port 0]
 *                 [--hold-fd N]
 *   curl -d '{"input": [[...64 floats...]]}' 127.0.0.1:PORT/v1/forward
 * prints "listening on 127.0.0.1:PORT" once it serves (port 0: any free
 * port). Listens on loopback only. */
#include <cjson/cJSON.h>
#include <dtorch/dtorch.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the model */
/* The served model: a two-layer MLP, y = relu(x W1ᵀ + b1) W2ᵀ + b2,
 * tensor-parallel over a 1-d "tp" mesh (Megatron's split: W1 and b1 by
 * rows, Shard(0); W2 by columns, Shard(1); b2 replicated), loaded from a
 * safetensors file whose tensors are named w1, b1, w2, b2. Public API only. */
typedef struct model {
  dt_runtime *rt;
  dt_mesh *mesh;
  dt_tensor *w1, *b1, *w2, *b2;
  int in, hidden, out;
} model;

/* Writes a model of seeded random weights (scaled 1/sqrt(fan in)) to path.
 * 0 on success; -1 with the error printed. */
static int model_write(const char *path, int in, int hidden, int out, uint64_t seed);
/* Loads path onto a new runtime of tp ranks. 0 on success; -1 with the
 * error printed (nothing left to free). */
static int model_load(model *m, const char *path, int tp);
static void model_free(model *m);
/* Issues the forward of rows x cols floats (row-major; cols must be
 * m->in: dtorch's shape checks say so otherwise), `repeat` times (the
 * last result is fetched; a stand-in for decode steps), and the fetch of
 * the result into out (rows x m->out floats, valid until the future
 * completes). Returns the future, with *y the tensor to release after it
 * completes; NULL with dtorch's error set when an op refuses the input. */
static dt_future *model_forward_async(model *m, const float *x, int rows, int cols,
                                      int repeat, float *out, dt_tensor **y);

static const char *const NAMES[4] = {"w1", "b1", "w2", "b2"};

static int fail(const char *what) {
  fprintf(stderr, "model: %s: %s\n", what, dt_last_error());
  return -1;
}

static int model_write(const char *path, int in, int hidden, int out, uint64_t seed) {
  dt_manual_seed(seed);
  dt_shape shapes[4] = {DT_SHAPE(hidden, in), DT_SHAPE(hidden), DT_SHAPE(out, hidden),
                        DT_SHAPE(out)};
  double scale[4] = {1 / sqrt(in), 0.1, 1 / sqrt(hidden), 0.1};
  dt_tensor *t[4] = {0};
  int rc = 0;
  for (int i = 0; i < 4 && !rc; i++) {
    dt_tensor *r = dt_randn(shapes[i], NULL);
    t[i] = dt_mul_scalar(r, scale[i]);
    dt_tensor_release(r);
    if (!t[i]) rc = fail("randn");
  }
  if (!rc && dt_save_safetensors(path, t, NAMES, 4) != DT_OK) rc = fail(path);
  for (int i = 0; i < 4; i++) dt_tensor_release(t[i]);
  return rc;
}

/* the model's sizes from the file's header: w1 [hidden, in], w2 [out, hidden] */
static int read_dims(model *m, const char *path) {
  dt_safetensors_info *info = dt_safetensors_index(path);
  if (!info) return fail(path);
  m->in = m->hidden = m->out = 0;
  for (int i = 0; i < info->n; i++) {
    const dt_safetensors_entry *e = &info->tensors[i];
    if (strcmp(e->name, "w1") == 0 && e->shape.ndim == 2) {
      m->hidden = (int)e->shape.dims[0];
      m->in = (int)e->shape.dims[1];
    } else if (strcmp(e->name, "w2") == 0 && e->shape.ndim == 2) {
      m->out = (int)e->shape.dims[0];
    }
  }
  dt_safetensors_info_free(info);
  if (!m->in || !m->hidden || !m->out) {
    fprintf(stderr, "model: %s has no 2-d w1 and w2\n", path);
    return -1;
  }
  return 0;
}

static int model_load(model *m, const char *path, int tp) {
  memset(m, 0, sizeof *m);
  if (read_dims(m, path)) return -1;
  /* auto_redistribute: the row-parallel layer's Partial(sum) output meets
   * the replicated bias; dtorch inserts the all-reduce it needs */
  m->rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = tp,
                                                   .auto_redistribute = true});
  if (!m->rt) return fail("runtime");
  m->mesh = dt_mesh_init(m->rt, "cpu", DT_SHAPE(tp), (const char *const[]){"tp"});
  if (!m->mesh) {
    model_free(m);
    return fail("mesh");
  }
  const dt_placement pl[4] = {DT_SHARD(0), DT_SHARD(0), DT_SHARD(1), DT_REPLICATE};
  dt_tensor **slot[4] = {&m->w1, &m->b1, &m->w2, &m->b2};
  for (int i = 0; i < 4; i++) {
    dt_load_options o = {.mesh = m->mesh, .placements = &pl[i]};
    *slot[i] = dt_load_safetensors(path, NAMES[i], &o);
    if (!*slot[i]) {
      fail(NAMES[i]);
      model_free(m);
      return -1;
    }
  }
  /* the weights are read by the ranks; wait, so a bad file fails here */
  if (dt_runtime_synchronize(m->rt) != DT_OK) {
    fail("load");
    model_free(m);
    return -1;
  }
  return 0;
}

static void model_free(model *m) {
  dt_tensor_release(m->w1);
  dt_tensor_release(m->b1);
  dt_tensor_release(m->w2);
  dt_tensor_release(m->b2);
  dt_mesh_release(m->mesh);
  dt_runtime_destroy(m->rt);
  memset(m, 0, sizeof *m);
}

static dt_tensor *forward(model *m, dt_tensor *x) {
  dt_tensor *z = dt_linear(x, m->w1, m->b1); /* [rows, hidden] S(1) */
  dt_tensor *h = dt_relu(z);
  dt_tensor_release(z);
  dt_tensor *y = dt_linear(h, m->w2, m->b2); /* [rows, out] */
  dt_tensor_release(h);
  return y;
}

static dt_future *model_forward_async(model *m, const float *x, int rows, int cols,
                                      int repeat, float *out, dt_tensor **y) {
  *y = NULL;
  dt_tensor_options o = {.mesh = m->mesh, .placements = DT_PLACEMENTS(DT_REPLICATE)};
  dt_tensor *xt = dt_from_host(x, DT_SHAPE(rows, cols), &o);
  if (!xt) return NULL;
  dt_tensor *r = NULL;
  for (int i = 0; i < repeat; i++) {
    dt_tensor_release(r);
    if (!(r = forward(m, xt))) break;
  }
  dt_tensor_release(xt);
  if (!r) return NULL;
  dt_future *f = dt_to_host_async(r, out, (size_t)rows * m->out * sizeof(float));
  if (!f) {
    dt_tensor_release(r);
    return NULL;
  }
  *y = r;
  return f;
}

/* ---- the HTTP server */
enum { MAX_BODY = 4 << 20, MAX_ROWS = 1024, MAX_REPEAT = 1000, LAT_RING = 1 << 16 };

struct request;
typedef struct server {
  model m;
  struct MHD_Daemon *d;
  _Atomic int64_t requests, errors, in_flight;
  pthread_mutex_t lat_lock;
  double lat[LAT_RING];   /* the last LAT_RING latencies, seconds */
  int64_t lat_n;
  double lat_sum;
  /* the test gate (--hold-fd): the held requests, computed and waiting
   * to be resumed, until the gate opens (released); under hold_lock */
  int hold_fd;            /* -1: no gate */
  pthread_mutex_t hold_lock;
  struct request *held;
  int64_t nheld;
  bool released;
} server;

typedef enum { REQ_NEW, REQ_WAITING, REQ_DONE } req_state;

typedef struct request {
  server *s;
  struct MHD_Connection *conn;
  char *body;
  size_t len, cap;
  /* REQ_DONE is stored (release) by the completion callback and loaded
   * (acquire) by MHD's thread before it reads out or frees the request:
   * the hand-off through MHD_resume_connection happens inside
   * libmicrohttpd, where ThreadSanitizer cannot see it */
  _Atomic req_state state;
  int rows;
  bool hold;              /* wait at the gate before the answer */
  struct request *next_held;
  float *out;
  dt_tensor *y;
  dt_future *f;
  double t0;
} request;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, char *text,
                             const char *type) {
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text,
                                                           MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", type);
  enum MHD_Result ret = MHD_queue_response(c, code, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result reply_error(request *q, unsigned code, const char *msg) {
  atomic_fetch_add_explicit(&q->s->errors, 1, memory_order_relaxed);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "error", msg);
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return text ? reply(q->conn, code, text, "application/json") : MHD_NO;
}

static void record_latency(server *s, double sec) {
  pthread_mutex_lock(&s->lat_lock);
  s->lat[s->lat_n % LAT_RING] = sec;
  s->lat_n++;
  s->lat_sum += sec;
  pthread_mutex_unlock(&s->lat_lock);
}

/* dtorch's completion thread: the result is in q->out (or the future
 * failed); hand the connection back to MHD */
static void on_done(dt_future *f, dt_status st, void *user) {
  request *q = user;
  struct MHD_Connection *conn = q->conn;
  (void)f;
  (void)st;
  server *s = q->s;
  record_latency(s, now() - q->t0);
  bool hold = q->hold;
  /* release: pairs with the acquire loads in handle and completed; q is
   * not touched after it (MHD may free it once resumed) unless held */
  atomic_store_explicit(&q->state, REQ_DONE, memory_order_release);
  if (hold) { /* the gate resumes it (gate_main), unless already open */
    pthread_mutex_lock(&s->hold_lock);
    bool open = s->released;
    if (!open) {
      q->next_held = s->held;
      s->held = q;
      s->nheld++;
    }
    pthread_mutex_unlock(&s->hold_lock);
    if (!open) return;
  }
  MHD_resume_connection(conn);
}

/* the gate's thread: waits for a byte (or EOF) on hold_fd, then resumes
 * every held request; later ones are not held (released) */
static void *gate_main(void *arg) {
  server *s = arg;
  char c;
  while (read(s->hold_fd, &c, 1) < 0 && errno == EINTR) {}
  pthread_mutex_lock(&s->hold_lock);
  s->released = true;
  request *q = s->held;
  s->held = NULL;
  s->nheld = 0;
  pthread_mutex_unlock(&s->hold_lock);
  while (q) { /* q may be freed once resumed: read it first */
    request *next = q->next_held;
    MHD_resume_connection(q->conn);
    q = next;
  }
  return NULL;
}

/* {"input": [[...], ...], "repeat": n, "hold": bool} -> rows x cols floats */
static const char *parse(const char *body, size_t len, float **x, int *rows,
                         int *cols, int *repeat, bool *hold) {
  cJSON *o = cJSON_ParseWithLength(body, len);
  if (!o) return "the body is not JSON";
  const char *err = NULL;
  cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "input");
  cJSON *rep = cJSON_GetObjectItemCaseSensitive(o, "repeat");
  *repeat = cJSON_IsNumber(rep) ? (int)rep->valuedouble : 1;
  *hold = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "hold"));
  int n = cJSON_IsArray(in) ? cJSON_GetArraySize(in) : -1;
  int w = n > 0 && cJSON_IsArray(cJSON_GetArrayItem(in, 0))
              ? cJSON_GetArraySize(cJSON_GetArrayItem(in, 0)) : -1;
  if (n < 1 || n > MAX_ROWS || w < 1)
    err = "\"input\" must be a list of 1 to 1024 rows of numbers";
  else if (*repeat < 1 || *repeat > MAX_REPEAT)
    err = "\"repeat\" must be 1 to 1000";
  else if (!(*x = malloc(sizeof(float) * (size_t)n * w)))
    err = "out of memory";
  for (int i = 0; !err && i < n; i++) {
    cJSON *row = cJSON_GetArrayItem(in, i);
    if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != w) {
      err = "every row of \"input\" must have the same length";
      break;
    }
    int j = 0;
    for (cJSON *v = row->child; v; v = v->next, j++) {
      if (!cJSON_IsNumber(v)) {
        err = "\"input\" holds a value that is not a number";
        break;
      }
      (*x)[(size_t)i * w + j] = (float)v->valuedouble;
    }
  }
  cJSON_Delete(o);
  if (err) {
    free(*x);
    *x = NULL;
  }
  *rows = n;
  *cols = w;
  return err;
}

/* the body is in: issue the forward and the fetch, suspend */
static enum MHD_Result start(request *q) {
  float *x = NULL;
  int rows, cols, repeat;
  const char *err = parse(q->body, q->len, &x, &rows, &cols, &repeat, &q->hold);
  if (!err && q->hold && q->s->hold_fd < 0) {
    free(x);
    err = "\"hold\" needs the server started with --hold-fd";
  }
  if (err) return reply_error(q, MHD_HTTP_BAD_REQUEST, err);
  model *m = &q->s->m;
  q->rows = rows;
  /* in flight from here until answered (completed() counts it down): the
   * issue below can wait for room in the ranks' queues under load */
  atomic_store_explicit(&q->state, REQ_WAITING, memory_order_relaxed);
  atomic_fetch_add_explicit(&q->s->in_flight, 1, memory_order_relaxed);
  q->out = malloc(sizeof(float) * (size_t)rows * m->out);
  /* dtorch checks the shapes: a row of the wrong width fails in dt_linear
   * with its message (from_host copies x before it returns) */
  q->f = q->out ? model_forward_async(m, x, rows, cols, repeat, q->out, &q->y) : NULL;
  free(x);
  if (!q->f) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", q->out ? dt_last_error() : "out of memory");
    dt_clear_error();
    return reply_error(q, MHD_HTTP_BAD_REQUEST, msg);
  }
  MHD_suspend_connection(q->conn);
  if (dt_future_then(q->f, on_done, q) != DT_OK) { /* only on bad arguments */
    atomic_store_explicit(&q->state, REQ_DONE, memory_order_relaxed);
    MHD_resume_connection(q->conn);
  }
  return MHD_YES;
}

/* resumed: the future completed */
static enum MHD_Result finish(request *q) {
  atomic_fetch_add_explicit(&q->s->requests, 1, memory_order_relaxed);
  if (dt_future_status(q->f) != DT_OK)
    return reply_error(q, MHD_HTTP_INTERNAL_SERVER_ERROR, dt_future_error(q->f));
  int out = q->s->m.out;
  size_t cap = (size_t)q->rows * out * 18 + 64, n = 0;
  char *text = malloc(cap);
  if (!text) return MHD_NO;
  n += (size_t)snprintf(text + n, cap - n, "{\"output\":[");
  for (int i = 0; i < q->rows; i++) {
    text[n++] = i ? ',' : '[';
    if (i) text[n++] = '[';
    for (int j = 0; j < out; j++)
      n += (size_t)snprintf(text + n, cap - n, "%s%.9g", j ? "," : "",
                            (double)q->out[(size_t)i * out + j]);
    text[n++] = ']';
  }
  snprintf(text + n, cap - n, "]}");
  return reply(q->conn, MHD_HTTP_OK, text, "application/json");
}

static char *metrics_text(server *s, struct MHD_Connection *c);

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version,
                              const char *upload, size_t *upload_size, void **con_cls) {
  server *s = cls;
  (void)version;
  request *q = *con_cls;
  if (!q) {
    if (!(q = calloc(1, sizeof *q))) return MHD_NO;
    q->s = s;
    q->conn = c;
    q->t0 = now();
    *con_cls = q;
    return MHD_YES;
  }
  if (strcmp(url, "/metrics") == 0 && strcmp(method, "GET") == 0) {
    char *text = metrics_text(s, c);
    return text ? reply(c, MHD_HTTP_OK, text, "text/plain; version=0.0.4") : MHD_NO;
  }
  if (strcmp(url, "/v1/forward") != 0 || strcmp(method, "POST") != 0)
    return reply_error(q, MHD_HTTP_NOT_FOUND, "POST /v1/forward or GET /metrics");
  /* acquire: pairs with on_done's release (q->out is written) */
  req_state st = atomic_load_explicit(&q->state, memory_order_acquire);
  if (st == REQ_DONE) return finish(q);
  if (*upload_size) {
    if (q->len + *upload_size > MAX_BODY) return reply_error(q, 413, "body over 4 MiB");
    if (q->len + *upload_size > q->cap) {
      size_t cap = (q->len + *upload_size) * 2;
      char *b = realloc(q->body, cap);
      if (!b) return MHD_NO;
      q->body = b;
      q->cap = cap;
    }
    memcpy(q->body + q->len, upload, *upload_size);
    q->len += *upload_size;
    *upload_size = 0;
    return MHD_YES;
  }
  return st == REQ_NEW ? start(q) : MHD_YES;
}

/* MHD is done with a request (answered, or the connection closed) */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode why) {
  server *s = cls;
  request *q = *con_cls;
  (void)c;
  (void)why;
  if (!q) return;
  /* acquire: pairs with on_done's release (its last touch of q) */
  if (atomic_load_explicit(&q->state, memory_order_acquire) != REQ_NEW)
    atomic_fetch_sub_explicit(&s->in_flight, 1, memory_order_release);
  dt_future_release(q->f);
  dt_tensor_release(q->y);
  free(q->out);
  free(q->body);
  free(q);
  *con_cls = NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static char *metrics_text(server *s, struct MHD_Connection *c) {
  size_t cap = 8192 + 256 * (size_t)dt_runtime_num_ranks(s->m.rt), n = 0;
  char *t = malloc(cap);
  double *lat = malloc(sizeof(double) * LAT_RING);
  if (!t || !lat) {
    free(t);
    free(lat);
    return NULL;
  }
  pthread_mutex_lock(&s->lat_lock);
  int64_t count = s->lat_n, k = count < LAT_RING ? count : LAT_RING;
  double sum = s->lat_sum;
  memcpy(lat, s->lat, sizeof(double) * (size_t)k);
  pthread_mutex_unlock(&s->lat_lock);
  qsort(lat, (size_t)k, sizeof(double), cmp_double);
  double p50 = k ? lat[(k - 1) / 2] : 0, p99 = k ? lat[(k - 1) * 99 / 100] : 0;
  free(lat);
  /* the daemon through the connection: s->d is stored after the workers
   * start */
  const union MHD_ConnectionInfo *di = MHD_get_connection_info(c, MHD_CONNECTION_INFO_DAEMON);
  const union MHD_DaemonInfo *ci =
      di ? MHD_get_daemon_info(di->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS) : NULL;
#define OUT(...) n += (size_t)snprintf(t + n, n < cap ? cap - n : 0, __VA_ARGS__)
  OUT("# requests answered, failed, and taken but not yet answered\n");
  OUT("dtorch_server_requests_total %lld\n", (long long)atomic_load(&s->requests));
  OUT("dtorch_server_errors_total %lld\n", (long long)atomic_load(&s->errors));
  OUT("dtorch_server_in_flight %lld\n", (long long)atomic_load(&s->in_flight));
  OUT("dtorch_server_connections %u\n", ci ? ci->num_connections : 0);
  pthread_mutex_lock(&s->hold_lock);
  long long held = (long long)s->nheld;
  pthread_mutex_unlock(&s->hold_lock);
  OUT("# answers computed and waiting at the test gate (--hold-fd)\n");
  OUT("dtorch_server_held %lld\n", held);
  OUT("# issue to completion, over the last %d requests\n", LAT_RING);
  OUT("dtorch_server_latency_seconds{quantile=\"0.5\"} %.6f\n", p50);
  OUT("dtorch_server_latency_seconds{quantile=\"0.99\"} %.6f\n", p99);
  OUT("dtorch_server_latency_seconds_sum %.6f\n", sum);
  OUT("dtorch_server_latency_seconds_count %lld\n", (long long)count);
  OUT("dtorch_live_tensors %lld\n", (long long)dt_live_tensors());
  OUT("dtorch_live_storage_bytes %lld\n", (long long)dt_live_storage_bytes());
  for (int r = 0; r < dt_runtime_num_ranks(s->m.rt); r++) {
    dt_memory_stats ms = {0};
    dt_runtime_memory(s->m.rt, r, &ms);
    OUT("dtorch_rank_memory_used_bytes{rank=\"%d\"} %lld\n", r, (long long)ms.used);
    OUT("dtorch_rank_memory_peak_bytes{rank=\"%d\"} %lld\n", r, (long long)ms.peak);
    OUT("dtorch_rank_queue_depth{rank=\"%d\"} %lld\n", r,
        (long long)dt_runtime_queue_depth(s->m.rt, r));
  }
#undef OUT
  return t;
}

static int usage(void) {
  fprintf(stderr, "usage: dtorch_server --write-model PATH [--in N --hidden N --out N --seed N]\n"
                  "       dtorch_server --model PATH [--tp N] [--threads N] [--port N]"
                  " [--hold-fd N]\n");
  return 2;
}

static int serve(server *s, int threads, int port) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                          MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
                          0, NULL, NULL, handle, s,
                          MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                          MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads,
                          MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                          MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                          MHD_OPTION_END);
  if (!s->d) {
    fprintf(stderr, "dtorch_server: cannot listen on 127.0.0.1:%d\n", port);
    return 1;
  }
  const union MHD_DaemonInfo *pi = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  printf("listening on 127.0.0.1:%u (%d ranks, %d threads, model %dx%dx%d)\n",
         pi ? pi->port : 0, dt_runtime_num_ranks(s->m.rt), threads, s->m.in,
         s->m.hidden, s->m.out);
  fflush(stdout);
  return 0;
}

/* after SIGTERM: no new connections; every request in flight answered */
static void drain(server *s) {
  MHD_socket ls = MHD_quiesce_daemon(s->d);
  if (ls != MHD_INVALID_SOCKET) close(ls);
  int64_t at_signal = atomic_load(&s->in_flight);
  /* no connection is accepted from here: a test may open the gate */
  printf("draining: %lld requests in flight\n", (long long)at_signal);
  fflush(stdout);
  double t0 = now();
  while (atomic_load_explicit(&s->in_flight, memory_order_acquire) > 0 && now() - t0 < 30)
    usleep(1000);
  int64_t left = atomic_load(&s->in_flight);
  MHD_stop_daemon(s->d);
  printf("shutdown: %lld requests in flight at the signal, %lld unanswered after %.3f s; "
         "%lld answered in all\n", (long long)at_signal, (long long)left, now() - t0,
         (long long)atomic_load(&s->requests));
}

int main(int argc, char **argv) {
  const char *write_path = NULL, *model_path = NULL;
  int in = 64, hidden = 256, out = 16, tp = 4, threads = 4, port = 0, hold_fd = -1;
  unsigned long long seed = 1;
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) return usage();
    if (strcmp(a, "--write-model") == 0) write_path = v;
    else if (strcmp(a, "--model") == 0) model_path = v;
    else if (strcmp(a, "--in") == 0) in = atoi(v);
    else if (strcmp(a, "--hidden") == 0) hidden = atoi(v);
    else if (strcmp(a, "--out") == 0) out = atoi(v);
    else if (strcmp(a, "--seed") == 0) seed = strtoull(v, NULL, 10);
    else if (strcmp(a, "--tp") == 0) tp = atoi(v);
    else if (strcmp(a, "--threads") == 0) threads = atoi(v);
    else if (strcmp(a, "--port") == 0) port = atoi(v);
    else if (strcmp(a, "--hold-fd") == 0) hold_fd = atoi(v);
    else return usage();
  }
  if (write_path) return model_write(write_path, in, hidden, out, seed) ? 1 : 0;
  if (!model_path || tp < 1 || threads < 1 || port < 0 || port > 65535 ||
      hold_fd < -1)
    return usage();

  /* the signals go to sigwait below, not to a rank or connection thread */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  static server s;
  pthread_mutex_init(&s.lat_lock, NULL);
  pthread_mutex_init(&s.hold_lock, NULL);
  s.hold_fd = hold_fd;
  if (model_load(&s.m, model_path, tp)) return 1;
  if (serve(&s, threads, port)) {
    model_free(&s.m);
    return 1;
  }
  pthread_t gate;
  /* detached: it may wait on the fd until the process exits */
  if (hold_fd >= 0) {
    if (pthread_create(&gate, NULL, gate_main, &s) != 0) {
      fprintf(stderr, "dtorch_server: cannot start the --hold-fd thread\n");
      return 1;
    }
    pthread_detach(gate);
  }
  int sig = 0;
  sigwait(&sigs, &sig);
  drain(&s);
  model_free(&s.m);
  long long live = (long long)dt_live_tensors();
  printf("stopped on %s; live tensors %lld\n", sig == SIGTERM ? "SIGTERM" : "SIGINT", live);
  pthread_mutex_destroy(&s.lat_lock);
  return live == 0 ? 0 : 1;
}
