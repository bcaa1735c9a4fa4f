/* The op list as data (names, schemas, public functions and flags per op
 * id) and the tensor-input counts built on the schema walk (core/call.h). */
#include "core/call.h"

static const char *const op_names[CORE_OP_COUNT] = {
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags) [CORE_OP_##id] = name,
#include "core/op_list.h"
#undef CORE_OP
};
const char *const core_op_schemas[CORE_OP_COUNT] = {
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags) [CORE_OP_##id] = schema,
#include "core/op_list.h"
#undef CORE_OP
};

static const char *const op_apis[CORE_OP_COUNT] = {
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags) [CORE_OP_##id] = api,
#include "core/op_list.h"
#undef CORE_OP
};

const unsigned char core_op_flag_table[CORE_OP_COUNT] = {
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
  return (unsigned)op < CORE_OP_COUNT ? core_op_schemas[op] : "";
}
const char *core_op_api(core_op_id op) {
  return (unsigned)op < CORE_OP_COUNT ? op_apis[op] : "?";
}


int core_call_num_tensor_inputs(const dt_op_call *c) {
  int n = 0;
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);) n++;
  return n;
}

dt_tensor *core_call_tensor_input(const dt_op_call *c, int k) {
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);)
    if (k-- == 0) return it.t;
  return NULL;
}
