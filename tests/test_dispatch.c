/* The interception API (TorchDispatchMode in C, docs/dispatch.md): the op
 * printer's lines, the op counter's counts and format, hook nesting order,
 * ops called from inside a hook, failing hooks, the call accessors, the
 * limits of the hook stack, and that hooks are per thread. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/call.h"
#include "support/testutil.h"

/* reads all of f (rewound) into a malloc'd string */
static char *slurp(FILE *f) {
  rewind(f);
  size_t cap = 4096, n = 0;
  char *s = malloc(cap);
  int ch;
  while ((ch = fgetc(f)) != EOF) {
    if (n + 1 == cap) s = realloc(s, cap *= 2);
    s[n++] = (char)ch;
  }
  s[n] = '\0';
  return s;
}

/* the i-th line of s (without the newline) into buf */
static const char *line_at(const char *s, int i, char *buf, size_t len) {
  for (; i > 0 && s; i--) {
    s = strchr(s, '\n');
    if (s) s++;
  }
  if (!s || !*s) return NULL;
  size_t n = strcspn(s, "\n");
  if (n >= len) n = len - 1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  return buf;
}

static void test_op_printer(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(dt_op_printer_push(f), DT_OK);
  dt_tensor *a = dt_randn(DT_SHAPE(4, 8), NULL),
            *b = dt_randn(DT_SHAPE(4, 8), NULL);
  dt_tensor *c = dt_add(a, b), *r = dt_relu(c), *t = dt_transpose(r, 0, 1);
  dt_tensor *ab[2] = {a, b};
  dt_tensor *k = dt_cat(ab, 2, 0);
  dt_tensor *i = dt_cast(a, DT_INT32), *s = dt_add_scalar(i, 2.5);
  assert_int_equal(dt_intercept_pop(), DT_OK);
  dt_tensor *after = dt_neg(a); /* not printed: popped */
  char *out = slurp(f);
  fclose(f);
  const char *want[] = {
      NULL, NULL, /* randn: seed and offset vary, checked below */
      "add(float32[4, 8], float32[4, 8]) -> float32[4, 8]",
      "relu(float32[4, 8]) -> float32[4, 8]",
      "transpose(float32[4, 8], 0, 1) -> float32[8, 4]",
      "cat([float32[4, 8], float32[4, 8]], 0) -> float32[8, 8]",
      "cast(float32[4, 8], int32) -> int32[4, 8]",
      "add_scalar(int32[4, 8], 2.5) -> float32[4, 8]",
  };
  char line[256];
  for (int n = 0; n < 8; n++) {
    if (!line_at(out, n, line, sizeof line))
      fail_msg("printer output has only %d lines:\n%s", n, out);
    if (want[n] && strcmp(line, want[n]) != 0)
      fail_msg("line %d: \"%s\", want \"%s\"", n, line, want[n]);
    if (!want[n] && (strncmp(line, "randn([4, 8], float32, ", 23) != 0 ||
                     !strstr(line, ") -> float32[4, 8]")))
      fail_msg("line %d: \"%s\" is not a randn line", n, line);
  }
  if (line_at(out, 8, line, sizeof line)) fail_msg("extra line \"%s\"", line);
  free(out);
  TU_RELEASE(a, b, c, r, t, k, i, s, after);
  tu_leaks_end();
}

static void test_op_counter(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3), NULL);
  dt_op_counter *cnt = dt_op_counter_push();
  assert_non_null(cnt);
  dt_tensor *x = dt_add(a, a), *y = dt_add(x, a), *z = dt_add(y, x);
  dt_tensor *r1 = dt_relu(z), *r2 = dt_relu(r1), *t = dt_transpose(r2, 0, 1);
  dt_tensor *n = dt_neg(t);
  assert_int_equal(dt_op_counter_pop(cnt), DT_OK);
  dt_tensor *more = dt_add(a, a); /* after the pop: not counted */
  assert_int_equal(dt_op_counter_get(cnt, "add"), 3);
  assert_int_equal(dt_op_counter_get(cnt, "relu"), 2);
  assert_int_equal(dt_op_counter_get(cnt, "transpose"), 1);
  assert_int_equal(dt_op_counter_get(cnt, "neg"), 1);
  assert_int_equal(dt_op_counter_get(cnt, "matmul"), 0);
  assert_int_equal(dt_op_counter_get(cnt, "no_such_op"), 0);
  assert_int_equal(dt_op_counter_get(cnt, NULL), 0);
  assert_int_equal(dt_op_counter_total(cnt), 7);
  char buf[256];
  int len = dt_op_counter_format(cnt, buf, sizeof buf);
  /* most frequent first; ties in op-table order (neg before transpose) */
  const char *want = "   3 add\n   2 relu\n   1 neg\n   1 transpose\n";
  assert_string_equal(buf, want);
  assert_int_equal(len, (int)strlen(want));
  char small[12];
  len = dt_op_counter_format(cnt, small, sizeof small); /* truncates */
  assert_int_equal(len, 11);
  assert_string_equal(small, "   3 add\n  ");
  assert_int_equal(dt_op_counter_format(cnt, NULL, 10), -1);
  dt_op_counter_free(cnt);
  dt_op_counter_free(NULL);
  TU_RELEASE(a, x, y, z, r1, r2, t, n, more);
  tu_leaks_end();
}

/* ---- recording hooks */
typedef struct recorder {
  const char *tag;
  char *log;               /* shared log: "tag>op tag<op " */
  const char *call_op;     /* when set: call dt_neg on input 0 of that op */
  dt_status fail_before;   /* != DT_OK: fail with it without running */
  dt_status fail_after;    /* != DT_OK: run, then fail with it */
  bool fail_by_op;         /* fail with the error of a failing dt_view */
  bool skip_run;           /* return DT_OK without running */
  int seen;
} recorder;

static void log_add(char *log, const char *tag, char dir, const char *op) {
  size_t n = strlen(log);
  snprintf(log + n, 1024 - n, "%s%c%s ", tag, dir, op);
}

static dt_status record_hook(dt_op_call *call, void *user) {
  recorder *r = user;
  const char *op = dt_op_call_name(call);
  r->seen++;
  if (r->log) log_add(r->log, r->tag, '>', op);
  if (r->call_op && strcmp(op, r->call_op) == 0) {
    dt_tensor *inner = dt_neg(dt_op_call_input(call, 0));
    if (!inner) return dt_last_status();
    dt_tensor_release(inner);
  }
  if (r->fail_before != DT_OK) return r->fail_before;
  if (r->fail_by_op) {
    dt_tensor *bad = dt_view(dt_op_call_input(call, 0), DT_SHAPE(-1, -1));
    if (bad) dt_tensor_release(bad);
    return dt_last_status();
  }
  if (r->skip_run) return DT_OK;
  dt_status st = dt_op_call_run(call);
  if (r->log) log_add(r->log, r->tag, '<', op);
  if (st == DT_OK && r->fail_after != DT_OK) return r->fail_after;
  return st;
}

static void test_nested_hooks(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3), NULL);
  char log[1024] = "";
  recorder A = {.tag = "A", .log = log}, B = {.tag = "B", .log = log};
  assert_int_equal(dt_intercept_push(record_hook, &A), DT_OK);
  assert_int_equal(dt_intercept_push(record_hook, &B), DT_OK);
  dt_tensor *c = dt_add(a, a);
  assert_non_null(c);
  assert_int_equal(dt_intercept_pop(), DT_OK);
  assert_int_equal(dt_intercept_pop(), DT_OK);
  /* innermost (last pushed) first; each sees the op exactly once */
  assert_string_equal(log, "B>add A>add A<add B<add ");
  assert_int_equal(A.seen, 1);
  assert_int_equal(B.seen, 1);
  double *v = tu_values(c);
  for (int i = 0; i < 6; i++) assert_true(v[i] == 2);
  free(v);
  dt_tensor_release(c);
  dt_tensor_release(a);
  tu_leaks_end();
}

/* an op called from inside hook B is seen by the hooks below B only */
static void test_hook_calls_op(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3), NULL);
  char log[1024] = "";
  recorder A = {.tag = "A", .log = log};
  recorder B = {.tag = "B", .log = log, .call_op = "add"};
  recorder C = {.tag = "C", .log = log};
  assert_int_equal(dt_intercept_push(record_hook, &A), DT_OK);
  assert_int_equal(dt_intercept_push(record_hook, &B), DT_OK);
  assert_int_equal(dt_intercept_push(record_hook, &C), DT_OK);
  dt_tensor *c = dt_add(a, a);
  assert_non_null(c);
  for (int i = 0; i < 3; i++) assert_int_equal(dt_intercept_pop(), DT_OK);
  assert_string_equal(log, "C>add B>add A>neg A<neg A>add A<add B<add C<add ");
  assert_int_equal(A.seen, 2);
  assert_int_equal(B.seen, 1);
  assert_int_equal(C.seen, 1);
  dt_tensor_release(c);
  dt_tensor_release(a);
  tu_leaks_end();
}

/* runs dt_add(a, a) under hook r (above a plain recorder) and expects it
 * to fail with `want` and no tensor left behind */
static void expect_hook_failure(recorder *r, dt_status want, const char *s1,
                                const char *s2) {
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3), NULL);
  recorder below = {.tag = "below"};
  tu_settle();
  int64_t live = dt_live_tensors();
  assert_int_equal(dt_intercept_push(record_hook, &below), DT_OK);
  assert_int_equal(dt_intercept_push(record_hook, r), DT_OK);
  dt_clear_error();
  dt_tensor *c = dt_add(a, a);
  dt_status st = dt_last_status();
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", dt_last_error());
  assert_int_equal(dt_intercept_pop(), DT_OK);
  assert_int_equal(dt_intercept_pop(), DT_OK);
  dt_tensor_release(a); /* before any check, so a failure leaks nothing */
  dt_tensor_release(c);
  assert_null(c);
  tu_settle();
  assert_int_equal(dt_live_tensors(), live - 1); /* no output leaked */
  if (st != want)
    fail_msg("status %s, want %s (message \"%s\")", dt_status_name(st),
             dt_status_name(want), msg);
  if (s1 && !strstr(msg, s1)) fail_msg("\"%s\" lacks \"%s\"", msg, s1);
  if (s2 && !strstr(msg, s2)) fail_msg("\"%s\" lacks \"%s\"", msg, s2);
  dt_clear_error();
}

static void test_hook_failures(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  /* fails with the error of an op it called */
  recorder r1 = {.tag = "r1", .fail_by_op = true};
  expect_hook_failure(&r1, DT_ERR_SHAPE, "dt_view", "-1");
  /* returns DT_OK without running the op */
  recorder r2 = {.tag = "r2", .skip_run = true};
  expect_hook_failure(&r2, DT_ERR_INVALID_ARGUMENT, "dt_add", "dt_op_call_run");
  tu_leaks_end();
}

/* A hook cannot set a message (core_error_set is internal), so it may return
 * a bare status; dt_add must still return NULL with that status as this
 * thread's last error (the NULL-means-error-set convention), and release
 * the output the hook let run. */
static void test_hook_bare_status(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  /* runs the op, then returns an error: the output is released */
  recorder r3 = {.tag = "r3", .fail_after = DT_ERR_FAULT};
  expect_hook_failure(&r3, DT_ERR_FAULT, "dt_add", NULL);
  /* returns an error status before running the op */
  recorder r4 = {.tag = "r4", .fail_before = DT_ERR_UNSUPPORTED};
  expect_hook_failure(&r4, DT_ERR_UNSUPPORTED, "dt_add", NULL);
  tu_leaks_end();
}

/* ---- accessors, seen from inside a hook and checked after it */
typedef struct inspect {
  char name[32], before[160], after[160], small[16];
  int nin, nout_before, nout_after, small_len, full_len;
  dt_tensor *in[4], *out0_before, *out0;
  bool in_neg_null, in_past_null;
} inspect;

static dt_status inspect_hook(dt_op_call *call, void *user) {
  inspect *s = user;
  snprintf(s->name, sizeof s->name, "%s", dt_op_call_name(call));
  s->nin = dt_op_call_num_inputs(call);
  for (int i = 0; i < 4; i++) s->in[i] = dt_op_call_input(call, i);
  s->in_neg_null = dt_op_call_input(call, -1) == NULL;
  s->in_past_null = dt_op_call_input(call, s->nin) == NULL;
  s->nout_before = dt_op_call_num_outputs(call);
  s->out0_before = dt_op_call_output(call, 0);
  dt_op_call_format(call, s->before, sizeof s->before);
  dt_status st = dt_op_call_run(call);
  s->nout_after = dt_op_call_num_outputs(call);
  s->out0 = dt_op_call_output(call, 0);
  s->full_len = dt_op_call_format(call, s->after, sizeof s->after);
  s->small_len = dt_op_call_format(call, s->small, sizeof s->small);
  return st;
}

static void test_call_accessors(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3), NULL), *b = dt_zeros(DT_SHAPE(3), NULL);
  inspect s;
  memset(&s, 0, sizeof s);
  assert_int_equal(dt_intercept_push(inspect_hook, &s), DT_OK);
  dt_tensor *c = dt_add(a, b);
  assert_int_equal(dt_intercept_pop(), DT_OK);
  assert_string_equal(s.name, "add");
  assert_int_equal(s.nin, 2);
  assert_ptr_equal(s.in[0], a);
  assert_ptr_equal(s.in[1], b);
  assert_true(s.in_neg_null && s.in_past_null);
  assert_int_equal(s.nout_before, 0);
  assert_null(s.out0_before);
  assert_int_equal(s.nout_after, 1);
  assert_ptr_equal(s.out0, c);
  assert_string_equal(s.before, "add(float32[2, 3], float32[3])");
  assert_string_equal(s.after, "add(float32[2, 3], float32[3]) -> float32[2, 3]");
  assert_int_equal(s.full_len, (int)strlen(s.after));
  assert_string_equal(s.small, "add(float32[2, "); /* truncated, terminated */
  assert_int_equal(s.small_len, 15);
  /* a list op: each entry is an input */
  dt_tensor *l[3] = {b, b, b};
  memset(&s, 0, sizeof s);
  assert_int_equal(dt_intercept_push(inspect_hook, &s), DT_OK);
  dt_tensor *k = dt_stack(l, 3, 0);
  dt_tensor *z = dt_zeros(DT_SHAPE(2), NULL);
  assert_int_equal(dt_intercept_pop(), DT_OK);
  assert_string_equal(s.name, "full"); /* the last op seen: zeros */
  assert_int_equal(s.nin, 0);
  assert_null(s.in[0]);
  assert_non_null(k);
  /* NULL calls: each kind's failed result (dtorch.h), the error set */
  assert_null(dt_op_call_name(NULL));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_op_call_name", "call is NULL", NULL);
  assert_int_equal(dt_op_call_num_inputs(NULL), -1);
  assert_int_equal(dt_op_call_num_outputs(NULL), -1);
  assert_null(dt_op_call_input(NULL, 0));
  assert_null(dt_op_call_output(NULL, 0));
  char buf[8];
  assert_int_equal(dt_op_call_format(NULL, buf, sizeof buf), -1);
  tu_expect_status(dt_op_call_run(NULL), DT_ERR_INVALID_ARGUMENT,
                   "dt_op_call_run", NULL);
  TU_RELEASE(a, b, c, k, z);
  tu_leaks_end();
}

static void test_list_inputs(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(2), NULL), *b = dt_zeros(DT_SHAPE(3), NULL);
  dt_tensor *l[3] = {a, b, a};
  inspect s;
  memset(&s, 0, sizeof s);
  assert_int_equal(dt_intercept_push(inspect_hook, &s), DT_OK);
  dt_tensor *k = dt_cat(l, 3, 0);
  assert_int_equal(dt_intercept_pop(), DT_OK);
  assert_non_null(k);
  assert_string_equal(s.name, "cat");
  assert_int_equal(s.nin, 3);
  assert_ptr_equal(s.in[0], a);
  assert_ptr_equal(s.in[1], b);
  assert_ptr_equal(s.in[2], a);
  assert_null(s.in[3]);
  assert_string_equal(
      s.after, "cat([float32[2], float32[3], float32[2]], 0) -> float32[7]");
  dt_tensor_release(k);
  dt_tensor_release(a);
  dt_tensor_release(b);
  tu_leaks_end();
}

/* The tensor-argument walk (core_call_args) against hand-listed
 * expectations: positions, list indices and tensors in schema order, an
 * absent optional as NULL, an empty list as nothing. The tensors are
 * distinct addresses the walk never dereferences. */
typedef struct walk_step { int pos, elem; const void *t; } walk_step;
static void expect_walk(const dt_op_call *c, const walk_step *want, int n) {
  int k = 0;
  for (core_arg_it it = core_call_args(c); core_arg_next(&it); k++) {
    assert_true(k < n);
    assert_int_equal(it.pos, want[k].pos);
    assert_int_equal(it.elem, want[k].elem);
    assert_ptr_equal(it.t, want[k].t);
  }
  assert_int_equal(k, n);
  assert_int_equal(core_call_num_tensor_inputs(c), n);
  for (int i = 0; i < n; i++) assert_ptr_equal(core_call_tensor_input(c, i), want[i].t);
  assert_null(core_call_tensor_input(c, n));
}

static void test_arg_walk(void **state) {
  (void)state;
  static char cell[4];
  dt_tensor *x = (dt_tensor *)&cell[0], *y = (dt_tensor *)&cell[1],
            *z = (dt_tensor *)&cell[2];
  dt_op_call c;
  core_call_init(&c, CORE_OP_CAT, "test"); /* "Li" */
  dt_tensor *l[3] = {x, y, z};
  core_call_list(&c, l, 3);
  core_call_int(&c, 0);
  expect_walk(&c, (walk_step[]){{0, 0, x}, {0, 1, y}, {0, 2, z}}, 3);
  c.args[0].list.n = 0; /* an empty list: nothing */
  expect_walk(&c, NULL, 0);
  core_call_init(&c, CORE_OP_LINEAR, "test"); /* "TTt", no bias */
  core_call_tensor(&c, x);
  core_call_tensor(&c, y);
  core_call_tensor(&c, NULL);
  expect_walk(&c, (walk_step[]){{0, -1, x}, {1, -1, y}, {2, -1, NULL}}, 3);
  core_call_init(&c, CORE_OP_WHERE, "test"); /* "TTT" */
  core_call_tensor(&c, z);
  core_call_tensor(&c, x);
  core_call_tensor(&c, y);
  expect_walk(&c, (walk_step[]){{0, -1, z}, {1, -1, x}, {2, -1, y}}, 3);
  core_call_init(&c, CORE_OP_FULL, "test"); /* "IDs": no tensors */
  core_call_ints(&c, (dt_shape){0});
  core_call_dtype(&c, DT_FLOAT32);
  core_call_double(&c, 1);
  expect_walk(&c, NULL, 0);
  core_call_init(&c, CORE_OP_MASKED_FILL, "test"); /* "TTs" */
  core_call_tensor(&c, y);
  core_call_tensor(&c, x);
  core_call_double(&c, 2);
  expect_walk(&c, (walk_step[]){{0, -1, y}, {1, -1, x}}, 2);
  assert_int_equal(core_op_list_pos(CORE_OP_CAT), 0);
  assert_int_equal(core_op_list_pos(CORE_OP_STACK), 0);
  assert_int_equal(core_op_list_pos(CORE_OP_ADD), -1);
}

/* a hook that tries to change the hook stack and to run its op twice */
typedef struct meddler { dt_status push, pop, run2; } meddler;
static dt_status meddle_hook(dt_op_call *call, void *user) {
  meddler *m = user;
  m->push = dt_intercept_push(meddle_hook, m);
  m->pop = dt_intercept_pop();
  dt_status st = dt_op_call_run(call);
  m->run2 = dt_op_call_run(call);
  return st;
}

static void test_stack_rules(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_clear_error();
  tu_expect_status(dt_intercept_pop(), DT_ERR_INVALID_ARGUMENT,
                   "dt_intercept_pop", "no hook", NULL);
  tu_expect_status(dt_intercept_push(NULL, NULL), DT_ERR_INVALID_ARGUMENT,
                   "dt_intercept_push", "fn", NULL);
  tu_expect_status(dt_op_printer_push(NULL), DT_ERR_INVALID_ARGUMENT,
                   "dt_op_printer_push", "out", NULL);
  tu_expect_status(dt_op_counter_pop(NULL), DT_ERR_INVALID_ARGUMENT,
                   "dt_op_counter_pop", NULL);
  /* a counter can only be popped while it is the innermost hook */
  recorder r = {.tag = "r"};
  dt_op_counter *c = dt_op_counter_push();
  assert_non_null(c);
  assert_int_equal(dt_intercept_push(record_hook, &r), DT_OK);
  tu_expect_status(dt_op_counter_pop(c), DT_ERR_INVALID_ARGUMENT,
                   "dt_op_counter_pop", "innermost", NULL);
  dt_op_counter_free(c); /* refused while pushed */
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_op_counter_free", "pop it first", NULL);
  assert_int_equal(dt_intercept_pop(), DT_OK);
  assert_int_equal(dt_op_counter_pop(c), DT_OK);
  dt_op_counter_free(c);
  /* at most 16 hooks */
  recorder rs[17];
  for (int i = 0; i < 16; i++) {
    rs[i] = (recorder){.tag = "x"};
    assert_int_equal(dt_intercept_push(record_hook, &rs[i]), DT_OK);
  }
  tu_expect_status(dt_intercept_push(record_hook, &rs[16]),
                   DT_ERR_INVALID_ARGUMENT, "dt_intercept_push", "16", NULL);
  dt_tensor *a = dt_ones(DT_SHAPE(2), NULL); /* all 16 see it, once each */
  for (int i = 0; i < 16; i++) assert_int_equal(rs[i].seen, 1);
  for (int i = 0; i < 16; i++) assert_int_equal(dt_intercept_pop(), DT_OK);
  tu_expect_status(dt_intercept_pop(), DT_ERR_INVALID_ARGUMENT,
                   "dt_intercept_pop", NULL);
  /* no push or pop from inside a hook; no second run */
  meddler m = {DT_OK, DT_OK, DT_OK};
  assert_int_equal(dt_intercept_push(meddle_hook, &m), DT_OK);
  dt_tensor *n = dt_neg(a);
  assert_int_equal(dt_intercept_pop(), DT_OK);
  assert_non_null(n);
  assert_int_equal(m.push, DT_ERR_INVALID_ARGUMENT);
  assert_int_equal(m.pop, DT_ERR_INVALID_ARGUMENT);
  assert_int_equal(m.run2, DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "already run"));
  dt_clear_error();
  dt_tensor_release(n);
  dt_tensor_release(a);
  tu_leaks_end();
}

/* ---- hooks are per thread */
typedef struct thread_result {
  int64_t own_adds, own_total;
  dt_status pop_empty;
  bool ok;
} thread_result;

static void *thread_body(void *arg) {
  thread_result *r = arg;
  r->pop_empty = dt_intercept_pop(); /* the main thread's hook is not ours */
  dt_tensor *a = dt_ones(DT_SHAPE(3), NULL), *b = dt_add(a, a);
  dt_op_counter *c = dt_op_counter_push();
  dt_tensor *d = dt_add(b, a);
  r->ok = c && b && d && dt_op_counter_pop(c) == DT_OK;
  r->own_adds = dt_op_counter_get(c, "add");
  r->own_total = dt_op_counter_total(c);
  dt_op_counter_free(c);
  dt_tensor_release(d);
  dt_tensor_release(b);
  dt_tensor_release(a);
  return NULL;
}

static void test_hooks_per_thread(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_op_counter *c = dt_op_counter_push();
  assert_non_null(c);
  thread_result r = {0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, thread_body, &r), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  dt_tensor *a = dt_ones(DT_SHAPE(2), NULL);
  assert_int_equal(dt_op_counter_pop(c), DT_OK);
  assert_true(r.ok);
  assert_int_equal(r.pop_empty, DT_ERR_INVALID_ARGUMENT);
  assert_int_equal(r.own_adds, 1);   /* only the add after its push */
  assert_int_equal(r.own_total, 1);
  assert_int_equal(dt_op_counter_total(c), 1); /* only our ones() */
  assert_int_equal(dt_op_counter_get(c, "full"), 1);
  assert_int_equal(dt_op_counter_get(c, "add"), 0);
  dt_op_counter_free(c);
  dt_tensor_release(a);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_op_printer),
      cmocka_unit_test(test_op_counter),
      cmocka_unit_test(test_nested_hooks),
      cmocka_unit_test(test_hook_calls_op),
      cmocka_unit_test(test_hook_failures),
      cmocka_unit_test(test_hook_bare_status),
      cmocka_unit_test(test_call_accessors),
      cmocka_unit_test(test_list_inputs),
      cmocka_unit_test(test_arg_walk),
      cmocka_unit_test(test_stack_rules),
      cmocka_unit_test(test_hooks_per_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
