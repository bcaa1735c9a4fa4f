/* Sharding-rule building blocks shared by the op families (ops/ops.h):
 * appending strategies, pointwise broadcasting, Partial passthrough. Each
 * op's own rule lives beside its infer in ops/<family>.c. */
#include "ops/ops.h"

ops_strategy *ops_rule_add(const dt_op_call *c, ops_rule_set *rs) {
  if (rs->n >= OPS_MAX_STRATEGIES) return NULL;
  ops_strategy *s = &rs->s[rs->n++];
  for (int i = 0; i < CORE_CALL_MAX_ARGS; i++) s->in[i] = DT_REPLICATE;
  for (int i = 0; i < CORE_CALL_MAX_OUTS; i++) s->out[i] = DT_REPLICATE;
  (void)c;
  return s;
}

/* the tensor argument at position i (NULL for an absent optional one) */
static const dt_tensor *arg_tensor(const dt_op_call *c, int i) {
  char k = core_op_schema(c->op)[i];
  return k == 'T' || k == 't' ? c->args[i].t : NULL;
}

void ops_rule_pointwise(const dt_op_call *c, ops_rule_set *rs, unsigned args) {
  ops_rule_add(c, rs);
  int no = c->meta[0].ndim;
  for (int d = 0; d < no; d++) {
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    s->out[0] = ops_shard(d);
    for (int i = 0; i < c->nargs; i++) {
      const dt_tensor *t = args >> i & 1 ? arg_tensor(c, i) : NULL;
      if (!t) continue;
      int ad = d - (no - t->local.ndim);
      if (ad >= 0 && t->local.sizes[ad] == c->meta[0].sizes[d])
        s->in[i] = ops_shard(ad);
    }
  }
}

void ops_rule_partial(const dt_op_call *c, ops_rule_set *rs, unsigned args,
                      unsigned repl, dt_reduce_op in, dt_reduce_op out) {
  ops_strategy *s = ops_rule_add(c, rs);
  if (!s) return;
  for (int i = 0; i < c->nargs; i++)
    if (args >> i & 1) s->in[i] = ops_partial(in);
  (void)repl; /* the others are Replicate already */
  s->out[0] = ops_partial(out);
}

void ops_rule_shard_dims(const dt_op_call *c, ops_rule_set *rs, int arg,
                         int ndim, int skip, int shift) {
  for (int d = 0; d < ndim; d++) {
    if (d == skip) continue;
    ops_strategy *s = ops_rule_add(c, rs);
    if (!s) return;
    s->in[arg] = ops_shard(d);
    s->out[0] = ops_shard(d + shift);
  }
}

/* factories make DTensors through the mesh layer (dt_zeros with a mesh),
 * never through a rule: no strategy */
void ops_factory_rule(const dt_op_call *c, ops_rule_set *rs) {
  (void)c;
  (void)rs;
}
