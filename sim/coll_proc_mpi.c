/* The messages of the cross-process collectives (sim/coll_proc_internal.h):
 * non-blocking sends and receives on the world's collective communicator
 * with the group's tag, waited for with the round's deadline
 * (sim_mpi_wait). A payload larger than MPI's int count is sent in pieces
 * of PIECE bytes, in order: both sides cut it the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host_alloc.h"
#include "sim/coll_proc_internal.h"

#if DTORCH_HAVE_MPI
#include "sim/mpi_internal.h"

#define PIECE ((int64_t)1 << 30)

struct sim_xp_msgs {
  sim_coll_group *g;
  uint64_t k;
  int64_t deadline;
  int n, cap;
  dt_status st;          /* the first failed post */
  MPI_Request *req;
  int *peer;             /* per request: the process index */
  bool *recv;            /* per request: a receive */
};

sim_xp_msgs *sim_xp_msgs_new(sim_coll_group *g, uint64_t k, int64_t deadline,
                             int cap) {
  sim_xp_msgs *m = calloc(1, sizeof *m);
  if (m) {
    m->cap = cap > 4 ? cap : 4;
    m->req = malloc((size_t)m->cap * sizeof *m->req);
    m->peer = malloc((size_t)m->cap * sizeof *m->peer);
    m->recv = malloc((size_t)m->cap * sizeof *m->recv);
  }
  if (!m || !m->req || !m->peer || !m->recv) {
    if (m) {
      free(m->req);
      free(m->peer);
      free(m->recv);
    }
    free(m);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "collective on group %s: out of host "
                   "memory for its messages", g->name);
    return NULL;
  }
  m->g = g;
  m->k = k;
  m->deadline = deadline;
  return m;
}

static MPI_Request *slot(sim_xp_msgs *m, int pi, bool recv) {
  if (m->n == m->cap) {
    int cap = m->cap * 2;
    MPI_Request *r = realloc(m->req, (size_t)cap * sizeof *r);
    if (r) m->req = r;
    int *p = realloc(m->peer, (size_t)cap * sizeof *p);
    if (p) m->peer = p;
    bool *v = realloc(m->recv, (size_t)cap * sizeof *v);
    if (v) m->recv = v;
    if (!r || !p || !v) return NULL;
    m->cap = cap;
  }
  m->peer[m->n] = pi;
  m->recv[m->n] = recv;
  return &m->req[m->n++];
}

static void post(sim_xp_msgs *m, int pi, void *buf, int64_t bytes, bool recv) {
  if (m->st != DT_OK) return;
  MPI_Comm comm = sim_mpi_coll_comm(m->g->world->mpi);
  int dest = m->g->xp->procs[pi];
  for (int64_t at = 0; at < bytes || (at == 0 && bytes == 0);) {
    int64_t len = bytes - at < PIECE ? bytes - at : PIECE;
    MPI_Request *r = slot(m, pi, recv);
    if (!r) {
      m->st = core_error_set(DT_ERR_OUT_OF_MEMORY, "collective on group %s: out "
                             "of host memory for its messages", m->g->name);
      return;
    }
    char *p = (char *)buf + at;
    int rc = recv ? MPI_Irecv(p, (int)len, MPI_BYTE, dest, m->g->xp->tag, comm, r)
                  : MPI_Isend(p, (int)len, MPI_BYTE, dest, m->g->xp->tag, comm, r);
    if (rc != MPI_SUCCESS) {
      m->n--;
      m->st = sim_mpi_check(rc, recv ? "MPI_Irecv" : "MPI_Isend");
      return;
    }
    at += len;
    if (len == 0) break;
  }
}

void sim_xp_msgs_send(sim_xp_msgs *m, int pi, const void *buf, int64_t bytes) {
  post(m, pi, (void *)buf, bytes, false);
}

void sim_xp_msgs_recv(sim_xp_msgs *m, int pi, void *buf, int64_t bytes) {
  post(m, pi, buf, bytes, true);
}

/* the timeout's report: the processes whose messages never came */
static void report(sim_xp_msgs *m, const sim_mpi_req_state *state,
                   const char *what, char *buf, size_t len) {
  sim_coll_group *g = m->g;
  size_t n = (size_t)snprintf(buf, len, "%s on group %s (seq %llu): timed out "
                              "after %.3f s waiting for ",
                              sim_coll_kind_names[g->entries[m->k & 1][g->xp->leader].d.kind],
                              g->name, (unsigned long long)m->k,
                              (double)sim_coll_world_timeout(g->world) * 1e-9);
  bool *named = calloc((size_t)g->xp->np, sizeof *named);
  int c = 0;
  if (n >= len) n = len - 1; /* a long group name was cut */
  for (int i = 0; named && i < m->n && n + 64 < len; i++) {
    if (state[i] == SIM_MPI_REQ_DONE || named[m->peer[i]]) continue;
    named[m->peer[i]] = true;
    char who[96];
    sim_xp_proc_name(g, m->peer[i], who, sizeof who);
    n += (size_t)snprintf(buf + n, len - n, "%s%s", c++ ? ", " : "", who);
  }
  free(named);
  if (n < len)
    snprintf(buf + n, len - n, "%s (%s through MPI); the group stays broken",
             c ? "" : "another process", what);
}

dt_status sim_xp_msgs_wait(sim_xp_msgs *m, const char *what) {
  dt_status st = m->st;
  sim_mpi_req_state *state = calloc((size_t)m->n + 1, sizeof *state);
  if (st == DT_OK && !state)
    st = core_error_set(DT_ERR_OUT_OF_MEMORY, "collective on group %s: out of "
                        "host memory", m->g->name);
  /* a failed post still waits for what was posted (with the deadline) */
  dt_status w = sim_mpi_wait(m->g->world->mpi, m->req, m->n, m->deadline,
                             state, what);
  if (st == DT_OK && w != DT_OK) {
    sim_coll_xp *x = m->g->xp;
    char msg[SIM_XP_MSG];
    if (w == DT_ERR_TIMEOUT && state)
      report(m, state, what, msg, sizeof msg);
    else
      snprintf(msg, sizeof msg, "%s on group %s (seq %llu): %s; the group "
               "stays broken", sim_coll_kind_names[m->g->entries[m->k & 1][x->leader].d.kind],
               m->g->name, (unsigned long long)m->k, core_last_error());
    /* MPI may still write the buffers of what it could not cancel: they
     * stay allocated (leaked) for good, and the group takes no new round */
    x->stage = NULL;
    x->stage_cap = 0;
    x->hbuf = NULL;
    free(x->broken);
    x->broken = strdup(msg);
    sim_mpi_note_broken(sim_coll_world_timeout(m->g->world)); /* exit: no wait for ever */
    st = core_error_set(w, "%s", msg);
  }
  free(state);
  free(m->req);
  free(m->peer);
  free(m->recv);
  free(m);
  return st;
}

/* ---- point to point */

static int pair_tag(const sim_coll_world *w, int from, int to) {
  int ub = sim_mpi_tag_ub(w->mpi);
  int64_t t = (int64_t)from * w->nranks + to;
  return (int)(t % (ub > 0 ? ub : 32767));
}

/* one blocking-with-deadline transfer; `what` names it in the errors */
static dt_status p2p(sim_coll_world *w, int peer_rank, int tag, void *buf,
                     int64_t bytes, bool recv, const char *what) {
  MPI_Comm comm = sim_mpi_p2p_comm(w->mpi);
  int dest = peer_rank / w->per;
  int64_t deadline = sim_coll_deadline(w);
  for (int64_t at = 0; at < bytes || at == 0;) {
    int64_t len = bytes - at < PIECE ? bytes - at : PIECE;
    MPI_Request r;
    char *p = (char *)buf + at;
    int rc = recv ? MPI_Irecv(p, (int)len, MPI_BYTE, dest, tag, comm, &r)
                  : MPI_Isend(p, (int)len, MPI_BYTE, dest, tag, comm, &r);
    if (rc != MPI_SUCCESS) return sim_mpi_check(rc, what);
    sim_mpi_req_state state;
    dt_status st = sim_mpi_wait(w->mpi, &r, 1, deadline, &state, what);
    if (st == DT_ERR_TIMEOUT) sim_mpi_note_broken(sim_coll_world_timeout(w));
    if (st == DT_ERR_TIMEOUT)
      return core_error_set(st, "%s: timed out after %.3f s: process %d (ranks "
                            "%d..%d) did not take part", what,
                            (double)sim_coll_world_timeout(w) * 1e-9, dest,
                            dest * w->per, dest * w->per + w->per - 1);
    if (st != DT_OK) return st;
    at += len;
    if (len == 0) break;
  }
  return DT_OK;
}

/* A send is three messages on the pair's tag: the size and the payload
 * to the receiver, then the receiver's answer back (the size it
 * expected; the reverse direction uses the same tag, which no other
 * message from that process to this one carries: tags name the ordered
 * pair, and the pair's sender lives here). The answer makes dt_send
 * return once the receiver took the bytes, as within a process, and lets
 * a size disagreement fail both sides; the receiver takes a wrong-sized
 * payload anyway, so the pair's next messages stay in step. */
dt_status sim_xp_send(sim_coll_world *w, int from, int to, const void *buf,
                      int64_t bytes) {
  char what[96];
  snprintf(what, sizeof what, "send from rank %d to rank %d", from, to);
  int tag = pair_tag(w, from, to);
  int64_t size = bytes, want = -1;
  dt_status st = p2p(w, to, tag, &size, sizeof size, false, what);
  if (st == DT_OK) st = p2p(w, to, tag, (void *)buf, bytes, false, what);
  if (st == DT_OK) st = p2p(w, to, tag, &want, sizeof want, true, what);
  if (st == DT_OK && want != bytes)
    st = core_error_set(DT_ERR_INVALID_ARGUMENT, "send from rank %d to rank "
                        "%d: sent %lld bytes, the receiver expected %lld",
                        from, to, (long long)bytes, (long long)want);
  return st;
}

dt_status sim_xp_recv(sim_coll_world *w, int to, int from, void *buf,
                      int64_t bytes) {
  char what[96];
  snprintf(what, sizeof what, "recv on rank %d from rank %d", to, from);
  int tag = pair_tag(w, from, to);
  int64_t size = -1, want = bytes;
  dt_status st = p2p(w, from, tag, &size, sizeof size, true, what);
  if (st != DT_OK) return st;
  if (size == bytes) {
    st = p2p(w, from, tag, buf, bytes, true, what);
    if (st == DT_OK) st = p2p(w, from, tag, &want, sizeof want, false, what);
    return st;
  }
  void *tmp = core_host_malloc(size > 0 ? (size_t)size : 1);
  if (tmp) st = p2p(w, from, tag, tmp, size, true, what);
  free(tmp);
  if (tmp && st == DT_OK) st = p2p(w, from, tag, &want, sizeof want, false, what);
  if (!tmp || st != DT_OK) /* the sender then times out: say why here */
    return tmp ? st : core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host "
                                     "memory for a %lld-byte message", what,
                                     (long long)size);
  return core_error_set(DT_ERR_INVALID_ARGUMENT, "recv on rank %d from rank "
                        "%d: expected %lld bytes, the sender sent %lld", to,
                        from, (long long)bytes, (long long)size);
}

#else /* no MPI: no world has processes, so nothing reaches these */

dt_status sim_xp_send(sim_coll_world *w, int from, int to, const void *buf,
                      int64_t bytes) {
  (void)w, (void)from, (void)to, (void)buf, (void)bytes;
  return core_error_set(DT_ERR_UNSUPPORTED, "send: this build has no MPI");
}
dt_status sim_xp_recv(sim_coll_world *w, int to, int from, void *buf,
                      int64_t bytes) {
  (void)w, (void)from, (void)to, (void)buf, (void)bytes;
  return core_error_set(DT_ERR_UNSUPPORTED, "recv: this build has no MPI");
}

sim_xp_msgs *sim_xp_msgs_new(sim_coll_group *g, uint64_t k, int64_t deadline,
                             int cap) {
  (void)k, (void)deadline, (void)cap;
  core_error_set(DT_ERR_UNSUPPORTED, "collective on group %s: this build has "
                 "no MPI", g->name);
  return NULL;
}
void sim_xp_msgs_send(sim_xp_msgs *m, int pi, const void *buf, int64_t bytes) {
  (void)m, (void)pi, (void)buf, (void)bytes;
}
void sim_xp_msgs_recv(sim_xp_msgs *m, int pi, void *buf, int64_t bytes) {
  (void)m, (void)pi, (void)buf, (void)bytes;
}
dt_status sim_xp_msgs_wait(sim_xp_msgs *m, const char *what) {
  (void)m, (void)what;
  return DT_ERR_UNSUPPORTED;
}

#endif
