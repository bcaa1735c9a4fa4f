/* The op list as data (names and schemas per op id) and the schema walks
 * every layer shares. */
#include "core/call.h"

static const char *const op_names[CORE_OP_COUNT] = {
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags) [CORE_OP_##id] = name,
#include "core/op_list.h"
#undef CORE_OP
};
static const char *const op_schemas[CORE_OP_COUNT] = {
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags) [CORE_OP_##id] = schema,
#include "core/op_list.h"
#undef CORE_OP
};

static const char *const op_apis[CORE_OP_COUNT] = {
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags) [CORE_OP_##id] = api,
#include "core/op_list.h"
#undef CORE_OP
};

static const unsigned op_flags[CORE_OP_COUNT] = {
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags) [CORE_OP_##id] = flags,
#include "core/op_list.h"
#undef CORE_OP
};

/* one entry per enum value, and every schema fits a call */
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags)                                 \
  _Static_assert(sizeof(schema) - 1 <= CORE_CALL_MAX_ARGS, "schema of " name);
#include "core/op_list.h"
#undef CORE_OP
_Static_assert(sizeof op_names / sizeof *op_names == CORE_OP_COUNT,
               "op name table size");

const char *core_op_name(core_op_id op) {
  return (unsigned)op < CORE_OP_COUNT ? op_names[op] : "?";
}
const char *core_op_schema(core_op_id op) {
  return (unsigned)op < CORE_OP_COUNT ? op_schemas[op] : "";
}
const char *core_op_api(core_op_id op) {
  return (unsigned)op < CORE_OP_COUNT ? op_apis[op] : "?";
}
unsigned core_op_flags(core_op_id op) {
  return (unsigned)op < CORE_OP_COUNT ? op_flags[op] : 0;
}

int core_call_num_tensor_inputs(const dt_op_call *c) {
  const char *s = op_schemas[c->op];
  int n = 0;
  for (int i = 0; s[i]; i++) {
    if (s[i] == 'T' || s[i] == 't') n++;
    else if (s[i] == 'L') n += c->args[i].list.n;
  }
  return n;
}

dt_tensor *core_call_tensor_input(const dt_op_call *c, int k) {
  const char *s = op_schemas[c->op];
  for (int i = 0; s[i]; i++) {
    if (s[i] == 'T' || s[i] == 't') {
      if (k-- == 0) return c->args[i].t;
    } else if (s[i] == 'L') {
      if (k < c->args[i].list.n) return c->args[i].list.v[k];
      k -= c->args[i].list.n;
    }
  }
  return NULL;
}
