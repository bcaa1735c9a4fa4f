/* The op list: every op is declared here once; the enum (dispatch.h), the
 * name/schema/function tables (ops/registry.c) and the prototypes
 * (ops/ops.h) are generated from it, so they cannot drift.
 *
 * CORE_OP(ID, "name", "schema", infer_fn, cpu_kernel_fn, sharding_rule_fn,
 *         grad_fn)
 * — schema: core/call.h; the rule: ops/ops.h (ops_rule_fn); grad_fn: the
 * backward formula (ops/ops.h, ops_grad_fn), ops_grad_none when the op is
 * not differentiable (its outputs never require grad)
 * No include guard: included with different CORE_OP definitions. */

/* creation (ops/creation.c) */
CORE_OP(EMPTY,        "empty",        "ID",    ops_factory_infer,   ops_empty_cpu, ops_factory_rule, ops_grad_none)
CORE_OP(FULL,         "full",         "IDs",   ops_factory_infer,   ops_full_cpu, ops_factory_rule, ops_grad_none)
CORE_OP(ARANGE,       "arange",       "dddD",  ops_arange_infer,    ops_arange_cpu, ops_factory_rule, ops_grad_none)
CORE_OP(RAND,         "rand",         "IDnn",  ops_factory_infer,   ops_random_cpu, ops_factory_rule, ops_grad_none)
CORE_OP(RANDN,        "randn",        "IDnn",  ops_factory_infer,   ops_random_cpu, ops_factory_rule, ops_grad_none)
CORE_OP(FROM_HOST,    "from_host",    "PID",   ops_factory_infer,   ops_from_host_cpu, ops_factory_rule, ops_grad_none)

/* pointwise (ops/pointwise.c) */
CORE_OP(ADD,          "add",          "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad)
CORE_OP(SUB,          "sub",          "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad)
CORE_OP(MUL,          "mul",          "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad)
CORE_OP(DIV,          "div",          "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad)
CORE_OP(POW,          "pow",          "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad)
CORE_OP(MAXIMUM,      "maximum",      "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad)
CORE_OP(MINIMUM,      "minimum",      "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad)
CORE_OP(FLOOR_DIVIDE, "floor_divide", "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none)
CORE_OP(REMAINDER,    "remainder",    "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad)
CORE_OP(EQ,           "eq",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none)
CORE_OP(NE,           "ne",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none)
CORE_OP(LT,           "lt",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none)
CORE_OP(LE,           "le",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none)
CORE_OP(GT,           "gt",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none)
CORE_OP(GE,           "ge",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none)
CORE_OP(LOGICAL_AND,  "logical_and",  "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none)
CORE_OP(LOGICAL_OR,   "logical_or",   "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none)
CORE_OP(ADD_SCALAR,   "add_scalar",   "Ts",    ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad)
CORE_OP(SUB_SCALAR,   "sub_scalar",   "Ts",    ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad)
CORE_OP(MUL_SCALAR,   "mul_scalar",   "Ts",    ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad)
CORE_OP(DIV_SCALAR,   "div_scalar",   "Ts",    ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad)
CORE_OP(POW_SCALAR,   "pow_scalar",   "Ts",    ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad)
CORE_OP(FLOOR_DIVIDE_SCALAR, "floor_divide_scalar", "Ts", ops_scalar_infer, ops_scalar_cpu, ops_scalar_rule, ops_grad_none)
CORE_OP(REMAINDER_SCALAR, "remainder_scalar", "Ts", ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad)
CORE_OP(NEG,          "neg",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(ABS,          "abs",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(EXP,          "exp",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(LOG,          "log",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(SQRT,         "sqrt",         "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(RSQRT,        "rsqrt",        "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(SIN,          "sin",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(COS,          "cos",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(TANH,         "tanh",         "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(SIGMOID,      "sigmoid",      "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(RELU,         "relu",         "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(SILU,         "silu",         "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(GELU,         "gelu",         "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(GELU_TANH,    "gelu_tanh",    "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(LOGICAL_NOT,  "logical_not",  "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_grad_none)
CORE_OP(CLAMP,        "clamp",        "Tss",   ops_clamp_infer,     ops_clamp_cpu, ops_unary_rule, ops_pointwise_grad)
CORE_OP(WHERE,        "where",        "TTT",   ops_where_infer,     ops_where_cpu, ops_where_rule, ops_pointwise_grad)
CORE_OP(MASKED_FILL,  "masked_fill",  "TTs",   ops_masked_fill_infer, ops_masked_fill_cpu, ops_masked_fill_rule, ops_pointwise_grad)
CORE_OP(CAST,         "cast",         "TD",    ops_cast_infer,      ops_cast_cpu, ops_cast_rule, ops_pointwise_grad)

/* views and copies (ops/views.c); pure views run no kernel (ops_alias_cpu) */
CORE_OP(VIEW,         "view",         "TI",    ops_view_infer, ops_alias_cpu, ops_reshape_rule, ops_view_grad)
CORE_OP(RESHAPE,      "reshape",      "TI",    ops_reshape_infer,   ops_copy_cpu, ops_reshape_rule, ops_view_grad)
CORE_OP(TRANSPOSE,    "transpose",    "Tii",   ops_transpose_infer, ops_alias_cpu, ops_transpose_rule, ops_view_grad)
CORE_OP(PERMUTE,      "permute",      "TI",    ops_permute_infer, ops_alias_cpu, ops_permute_rule, ops_view_grad)
CORE_OP(SLICE,        "slice",        "Tiiii", ops_slice_infer, ops_alias_cpu, ops_slice_rule, ops_view_grad)
CORE_OP(NARROW,       "narrow",       "Tiii",  ops_narrow_infer, ops_alias_cpu, ops_slice_rule, ops_view_grad)
CORE_OP(SELECT,       "select",       "Tii",   ops_select_infer, ops_alias_cpu, ops_select_rule, ops_view_grad)
CORE_OP(EXPAND,       "expand",       "TI",    ops_expand_infer, ops_alias_cpu, ops_expand_rule, ops_view_grad)
CORE_OP(SQUEEZE,      "squeeze",      "Ti",    ops_squeeze_infer, ops_alias_cpu, ops_squeeze_rule, ops_view_grad)
CORE_OP(SQUEEZE_ALL,  "squeeze_all",  "T",     ops_squeeze_all_infer, ops_alias_cpu, ops_squeeze_rule, ops_view_grad)
CORE_OP(UNSQUEEZE,    "unsqueeze",    "Ti",    ops_unsqueeze_infer, ops_alias_cpu, ops_unsqueeze_rule, ops_view_grad)
CORE_OP(FLATTEN,      "flatten",      "Tii",   ops_flatten_infer,   ops_copy_cpu, ops_reshape_rule, ops_view_grad)
CORE_OP(CONTIGUOUS,   "contiguous",   "T",     ops_contiguous_infer, ops_copy_cpu, ops_same_rule, ops_view_grad)
CORE_OP(CLONE,        "clone",        "T",     ops_clone_infer,     ops_copy_cpu, ops_same_rule, ops_view_grad)

/* reductions (ops/reduce.c) */
CORE_OP(SUM,          "sum",          "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_reduce_grad)
CORE_OP(MEAN,         "mean",         "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_reduce_grad)
CORE_OP(AMAX,         "amax",         "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_reduce_grad)
CORE_OP(AMIN,         "amin",         "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_reduce_grad)
CORE_OP(PROD,         "prod",         "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_reduce_grad)
CORE_OP(ARGMAX,       "argmax",       "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_grad_none)
CORE_OP(ARGMIN,       "argmin",       "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_grad_none)
CORE_OP(VAR,          "var",          "TIbb",  ops_var_infer,       ops_var_cpu, ops_reduce_rule, ops_reduce_grad)

/* normalisation (ops/norm.c) */
CORE_OP(SOFTMAX,      "softmax",      "Ti",    ops_softmax_infer,   ops_softmax_cpu, ops_softmax_rule, ops_norm_grad)
CORE_OP(LOG_SOFTMAX,  "log_softmax",  "Ti",    ops_softmax_infer,   ops_softmax_cpu, ops_softmax_rule, ops_norm_grad)
CORE_OP(LAYER_NORM,   "layer_norm",   "Tttd",  ops_layer_norm_infer, ops_layer_norm_cpu, ops_norm_rule, ops_norm_grad)
CORE_OP(RMS_NORM,     "rms_norm",     "Ttd",   ops_rms_norm_infer,  ops_rms_norm_cpu, ops_norm_rule, ops_norm_grad)

/* linear algebra and nn (ops/linalg.c, ops/nn.c) */
CORE_OP(MATMUL,       "matmul",       "TT",    ops_matmul_infer,    ops_matmul_cpu, ops_matmul_rule, ops_linalg_grad)
CORE_OP(LINEAR,       "linear",       "TTt",   ops_linear_infer,    ops_linear_cpu, ops_linear_rule, ops_linalg_grad)
CORE_OP(EMBEDDING,    "embedding",    "TT",    ops_embedding_infer, ops_embedding_cpu, ops_embedding_rule, ops_nn_grad)
CORE_OP(INDEX_SELECT, "index_select", "TiT",   ops_index_select_infer, ops_index_select_cpu, ops_index_select_rule, ops_nn_grad)
CORE_OP(CROSS_ENTROPY,"cross_entropy","TTiis",  ops_cross_entropy_infer, ops_cross_entropy_cpu, ops_cross_entropy_rule, ops_nn_grad)
CORE_OP(DROPOUT,      "dropout",      "Tdbnn", ops_dropout_infer,   ops_dropout_cpu, ops_unary_rule, ops_nn_grad)

/* joining (ops/join.c); split/chunk are composites of narrow */
CORE_OP(CAT,          "cat",          "Li",    ops_cat_infer,       ops_cat_cpu, ops_cat_rule, ops_join_grad)
CORE_OP(STACK,        "stack",        "Li",    ops_stack_infer,     ops_stack_cpu, ops_stack_rule, ops_join_grad)

/* backward kernels (ops/grad_ops.c): what autograd needs that the ops above
 * cannot compose; not differentiable themselves */
CORE_OP(GELU_BACKWARD, "gelu_backward", "TT", ops_gelu_backward_infer, ops_gelu_backward_cpu, ops_gelu_backward_rule, ops_grad_none)
CORE_OP(SLICE_SCATTER, "slice_scatter", "TIiiii", ops_slice_scatter_infer, ops_slice_scatter_cpu, ops_slice_scatter_rule, ops_grad_none)
CORE_OP(INDEX_SELECT_BACKWARD, "index_select_backward", "TiTi", ops_index_select_backward_infer, ops_index_select_backward_cpu, ops_index_select_backward_rule, ops_grad_none)
CORE_OP(CROSS_ENTROPY_BACKWARD, "cross_entropy_backward", "TTTiis", ops_cross_entropy_backward_infer, ops_cross_entropy_backward_cpu, ops_cross_entropy_backward_rule, ops_grad_none)

/* fused optimiser updates (ops/optim_ops.c): one pass over a parameter */
CORE_OP(ADAM_MOMENT, "adam_moment", "TTsb", ops_adam_moment_infer, ops_adam_moment_cpu, ops_optim_rule, ops_grad_none)
CORE_OP(ADAMW_APPLY, "adamw_apply", "TTTsss", ops_adamw_apply_infer, ops_adamw_apply_cpu, ops_optim_rule, ops_grad_none)
