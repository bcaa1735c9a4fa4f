/* The op list: every op is declared here once, and this is the one table
 * of ops: the enum (core/call.h), the name/schema/public-function tables
 * (core/call.c), ops_defs and the CPU kernel table (ops/registry.c), the
 * CUDA kernel table (ops/cuda_ops.c) and the prototypes (ops/ops.h) are
 * generated from it, so they cannot drift.
 *
 * CORE_OP(ID, "name", "schema", infer, cpu, rule, grad,
 *         cuda, "public function", flags)
 *   schema   argument kinds, one character each (core/call.h)
 *   infer    validates the arguments, describes the outputs
 *   cpu      the CPU kernel binding (ops_alias_cpu: a view, no kernel)
 *   rule     the sharding rule (ops/ops.h, ops_rule_fn)
 *   grad     the backward formula (ops/ops.h, ops_grad_fn); ops_grad_none
 *            when the op is not differentiable (its outputs never require
 *            grad)
 *   cuda     the CUDA kernel binding, defined under DTORCH_HAVE_CUDA in
 *            the op's family file; ops_cuda_host_fallback: none (the host
 *            fallback runs it); ops_alias_cpu for a view
 *   public function  the dt_ function of include/dtorch/dtorch.h that
 *            boxes the call (messages; scripts/check-op-columns.py checks
 *            it exists, is exported and is declared by the Python binding)
 *   flags    0 or CORE_OP_CHECKS_DATA | CORE_OP_CONTRACTS (core/call.h)
 * No include guard: included with different CORE_OP definitions. */

/* creation (ops/creation.c) */
CORE_OP(EMPTY,        "empty",        "ID",    ops_factory_infer,   ops_empty_cpu, ops_factory_rule, ops_grad_none,
        ops_empty_cuda, "dt_empty", 0)
CORE_OP(FULL,         "full",         "IDs",   ops_factory_infer,   ops_full_cpu, ops_factory_rule, ops_grad_none,
        ops_full_cuda, "dt_full", 0)
CORE_OP(ARANGE,       "arange",       "dddD",  ops_arange_infer,    ops_arange_cpu, ops_factory_rule, ops_grad_none,
        ops_arange_cuda, "dt_arange", 0)
CORE_OP(RAND,         "rand",         "IDnn",  ops_factory_infer,   ops_random_cpu, ops_factory_rule, ops_grad_none,
        ops_random_cuda, "dt_rand", 0)
CORE_OP(RANDN,        "randn",        "IDnn",  ops_factory_infer,   ops_random_cpu, ops_factory_rule, ops_grad_none,
        ops_random_cuda, "dt_randn", 0)
CORE_OP(FROM_HOST,    "from_host",    "PID",   ops_factory_infer,   ops_from_host_cpu, ops_factory_rule, ops_grad_none,
        ops_from_host_cuda, "dt_from_host", 0)

/* pointwise (ops/pointwise.c) */
CORE_OP(ADD,          "add",          "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad,
        ops_binary_cuda, "dt_add", 0)
CORE_OP(SUB,          "sub",          "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad,
        ops_binary_cuda, "dt_sub", 0)
CORE_OP(MUL,          "mul",          "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad,
        ops_binary_cuda, "dt_mul", 0)
CORE_OP(DIV,          "div",          "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad,
        ops_binary_cuda, "dt_div", 0)
CORE_OP(POW,          "pow",          "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad,
        ops_binary_cuda, "dt_pow", 0)
CORE_OP(MAXIMUM,      "maximum",      "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad,
        ops_binary_cuda, "dt_maximum", 0)
CORE_OP(MINIMUM,      "minimum",      "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad,
        ops_binary_cuda, "dt_minimum", 0)
CORE_OP(FLOOR_DIVIDE, "floor_divide", "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none,
        ops_binary_cuda, "dt_floor_divide", 0)
CORE_OP(REMAINDER,    "remainder",    "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_pointwise_grad,
        ops_binary_cuda, "dt_remainder", 0)
CORE_OP(EQ,           "eq",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none,
        ops_compare_cuda, "dt_eq", 0)
CORE_OP(NE,           "ne",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none,
        ops_compare_cuda, "dt_ne", 0)
CORE_OP(LT,           "lt",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none,
        ops_compare_cuda, "dt_lt", 0)
CORE_OP(LE,           "le",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none,
        ops_compare_cuda, "dt_le", 0)
CORE_OP(GT,           "gt",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none,
        ops_compare_cuda, "dt_gt", 0)
CORE_OP(GE,           "ge",           "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none,
        ops_compare_cuda, "dt_ge", 0)
CORE_OP(LOGICAL_AND,  "logical_and",  "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none,
        ops_logical_cuda, "dt_logical_and", 0)
CORE_OP(LOGICAL_OR,   "logical_or",   "TT",    ops_binary_infer,    ops_binary_cpu, ops_binary_rule, ops_grad_none,
        ops_logical_cuda, "dt_logical_or", 0)
CORE_OP(ADD_SCALAR,   "add_scalar",   "Tsk",    ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad,
        ops_scalar_cuda, "dt_add_scalar", 0)
CORE_OP(SUB_SCALAR,   "sub_scalar",   "Tsk",    ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad,
        ops_scalar_cuda, "dt_sub_scalar", 0)
CORE_OP(MUL_SCALAR,   "mul_scalar",   "Tsk",    ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad,
        ops_scalar_cuda, "dt_mul_scalar", 0)
CORE_OP(DIV_SCALAR,   "div_scalar",   "Tsk",    ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad,
        ops_scalar_cuda, "dt_div_scalar", 0)
CORE_OP(POW_SCALAR,   "pow_scalar",   "Tsk",    ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad,
        ops_scalar_cuda, "dt_pow_scalar", 0)
CORE_OP(FLOOR_DIVIDE_SCALAR, "floor_divide_scalar", "Tsk", ops_scalar_infer, ops_scalar_cpu, ops_scalar_rule, ops_grad_none,
        ops_scalar_cuda, "dt_floor_divide_scalar", 0)
CORE_OP(REMAINDER_SCALAR, "remainder_scalar", "Tsk", ops_scalar_infer,    ops_scalar_cpu, ops_scalar_rule, ops_pointwise_grad,
        ops_scalar_cuda, "dt_remainder_scalar", 0)
CORE_OP(NEG,          "neg",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_neg", 0)
CORE_OP(ABS,          "abs",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_abs", 0)
CORE_OP(EXP,          "exp",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_exp", 0)
CORE_OP(LOG,          "log",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_log", 0)
CORE_OP(SQRT,         "sqrt",         "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_sqrt", 0)
CORE_OP(RSQRT,        "rsqrt",        "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_rsqrt", 0)
CORE_OP(SIN,          "sin",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_sin", 0)
CORE_OP(COS,          "cos",          "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_cos", 0)
CORE_OP(TANH,         "tanh",         "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_tanh", 0)
CORE_OP(SIGMOID,      "sigmoid",      "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_sigmoid", 0)
CORE_OP(RELU,         "relu",         "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_relu", 0)
CORE_OP(SILU,         "silu",         "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_silu", 0)
CORE_OP(GELU,         "gelu",         "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_gelu", 0)
CORE_OP(GELU_TANH,    "gelu_tanh",    "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_unary_cuda, "dt_gelu_tanh", 0)
CORE_OP(LOGICAL_NOT,  "logical_not",  "T",     ops_unary_infer,     ops_unary_cpu, ops_unary_rule, ops_grad_none,
        ops_logical_cuda, "dt_logical_not", 0)
CORE_OP(CLAMP,        "clamp",        "Tsksk", ops_clamp_infer,     ops_clamp_cpu, ops_unary_rule, ops_pointwise_grad,
        ops_clamp_cuda, "dt_clamp", 0)
CORE_OP(WHERE,        "where",        "TTT",   ops_where_infer,     ops_where_cpu, ops_where_rule, ops_pointwise_grad,
        ops_where_cuda, "dt_where", 0)
CORE_OP(MASKED_FILL,  "masked_fill",  "TTs",   ops_masked_fill_infer, ops_masked_fill_cpu, ops_masked_fill_rule, ops_pointwise_grad,
        ops_masked_fill_cuda, "dt_masked_fill", 0)
CORE_OP(CAST,         "cast",         "TD",    ops_cast_infer,      ops_cast_cpu, ops_cast_rule, ops_pointwise_grad,
        ops_copy_cuda, "dt_cast", 0)

/* views and copies (ops/views.c); pure views run no kernel (ops_alias_cpu) */
CORE_OP(VIEW,         "view",         "TI",    ops_view_infer, ops_alias_cpu, ops_reshape_rule, ops_view_grad,
        ops_alias_cpu, "dt_view", 0)
CORE_OP(RESHAPE,      "reshape",      "TI",    ops_reshape_infer,   ops_copy_cpu, ops_reshape_rule, ops_view_grad,
        ops_copy_cuda, "dt_reshape", 0)
CORE_OP(TRANSPOSE,    "transpose",    "Tii",   ops_transpose_infer, ops_alias_cpu, ops_transpose_rule, ops_view_grad,
        ops_alias_cpu, "dt_transpose", 0)
CORE_OP(PERMUTE,      "permute",      "TI",    ops_permute_infer, ops_alias_cpu, ops_permute_rule, ops_view_grad,
        ops_alias_cpu, "dt_permute", 0)
CORE_OP(SLICE,        "slice",        "Tiiii", ops_slice_infer, ops_alias_cpu, ops_slice_rule, ops_view_grad,
        ops_alias_cpu, "dt_slice", 0)
CORE_OP(NARROW,       "narrow",       "Tiii",  ops_narrow_infer, ops_alias_cpu, ops_slice_rule, ops_view_grad,
        ops_alias_cpu, "dt_narrow", 0)
CORE_OP(SELECT,       "select",       "Tii",   ops_select_infer, ops_alias_cpu, ops_select_rule, ops_view_grad,
        ops_alias_cpu, "dt_select", 0)
CORE_OP(EXPAND,       "expand",       "TI",    ops_expand_infer, ops_alias_cpu, ops_expand_rule, ops_view_grad,
        ops_alias_cpu, "dt_expand", 0)
CORE_OP(SQUEEZE,      "squeeze",      "Ti",    ops_squeeze_infer, ops_alias_cpu, ops_squeeze_rule, ops_view_grad,
        ops_alias_cpu, "dt_squeeze", 0)
CORE_OP(SQUEEZE_ALL,  "squeeze_all",  "T",     ops_squeeze_all_infer, ops_alias_cpu, ops_squeeze_rule, ops_view_grad,
        ops_alias_cpu, "dt_squeeze_all", 0)
CORE_OP(UNSQUEEZE,    "unsqueeze",    "Ti",    ops_unsqueeze_infer, ops_alias_cpu, ops_unsqueeze_rule, ops_view_grad,
        ops_alias_cpu, "dt_unsqueeze", 0)
CORE_OP(FLATTEN,      "flatten",      "Tii",   ops_flatten_infer,   ops_copy_cpu, ops_reshape_rule, ops_view_grad,
        ops_copy_cuda, "dt_flatten", 0)
CORE_OP(CONTIGUOUS,   "contiguous",   "T",     ops_contiguous_infer, ops_copy_cpu, ops_same_rule, ops_view_grad,
        ops_copy_cuda, "dt_contiguous", 0)
CORE_OP(CLONE,        "clone",        "T",     ops_clone_infer,     ops_copy_cpu, ops_same_rule, ops_view_grad,
        ops_copy_cuda, "dt_clone", 0)

/* reductions (ops/reduce.c) */
CORE_OP(SUM,          "sum",          "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_reduce_grad,
        ops_reduce_cuda, "dt_sum", 0)
CORE_OP(MEAN,         "mean",         "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_reduce_grad,
        ops_reduce_cuda, "dt_mean", 0)
CORE_OP(AMAX,         "amax",         "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_reduce_grad,
        ops_reduce_cuda, "dt_amax", 0)
CORE_OP(AMIN,         "amin",         "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_reduce_grad,
        ops_reduce_cuda, "dt_amin", 0)
CORE_OP(PROD,         "prod",         "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_reduce_grad,
        ops_reduce_cuda, "dt_prod", 0)
CORE_OP(ARGMAX,       "argmax",       "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_grad_none,
        ops_argext_cuda, "dt_argmax", 0)
CORE_OP(ARGMIN,       "argmin",       "TIb",   ops_reduce_infer,    ops_reduce_cpu, ops_reduce_rule, ops_grad_none,
        ops_argext_cuda, "dt_argmin", 0)
CORE_OP(VAR,          "var",          "TIbb",  ops_var_infer,       ops_var_cpu, ops_reduce_rule, ops_reduce_grad,
        ops_var_cuda, "dt_var", 0)

/* normalisation (ops/norm.c) */
CORE_OP(SOFTMAX,      "softmax",      "Ti",    ops_softmax_infer,   ops_softmax_cpu, ops_softmax_rule, ops_norm_grad,
        ops_softmax_cuda, "dt_softmax", 0)
CORE_OP(LOG_SOFTMAX,  "log_softmax",  "Ti",    ops_softmax_infer,   ops_softmax_cpu, ops_softmax_rule, ops_norm_grad,
        ops_softmax_cuda, "dt_log_softmax", 0)
CORE_OP(LAYER_NORM,   "layer_norm",   "Tttd",  ops_layer_norm_infer, ops_layer_norm_cpu, ops_norm_rule, ops_norm_grad,
        ops_norm_cuda, "dt_layer_norm", 0)
CORE_OP(RMS_NORM,     "rms_norm",     "Ttd",   ops_rms_norm_infer,  ops_rms_norm_cpu, ops_norm_rule, ops_norm_grad,
        ops_norm_cuda, "dt_rms_norm", 0)

/* linear algebra and nn (ops/linalg.c, ops/nn.c) */
CORE_OP(MATMUL,       "matmul",       "TT",    ops_matmul_infer,    ops_matmul_cpu, ops_matmul_rule, ops_linalg_grad,
        ops_matmul_cuda, "dt_matmul", CORE_OP_CONTRACTS)
CORE_OP(LINEAR,       "linear",       "TTt",   ops_linear_infer,    ops_linear_cpu, ops_linear_rule, ops_linalg_grad,
        ops_linear_cuda, "dt_linear", CORE_OP_CONTRACTS)
CORE_OP(EMBEDDING,    "embedding",    "TT",    ops_embedding_infer, ops_embedding_cpu, ops_embedding_rule, ops_nn_grad,
        ops_embedding_cuda, "dt_embedding", CORE_OP_CHECKS_DATA)
CORE_OP(INDEX_SELECT, "index_select", "TiT",   ops_index_select_infer, ops_index_select_cpu, ops_index_select_rule, ops_nn_grad,
        ops_index_select_cuda, "dt_index_select", CORE_OP_CHECKS_DATA)
CORE_OP(CROSS_ENTROPY,"cross_entropy","TTiis",  ops_cross_entropy_infer, ops_cross_entropy_cpu, ops_cross_entropy_rule, ops_nn_grad,
        ops_cross_entropy_cuda, "dt_cross_entropy", CORE_OP_CHECKS_DATA)
CORE_OP(DROPOUT,      "dropout",      "Tdbnn", ops_dropout_infer,   ops_dropout_cpu, ops_unary_rule, ops_nn_grad,
        ops_dropout_cuda, "dt_dropout", 0)

/* joining (ops/join.c); split/chunk are composites of narrow */
CORE_OP(CAT,          "cat",          "Li",    ops_cat_infer,       ops_cat_cpu, ops_cat_rule, ops_join_grad,
        ops_cat_cuda, "dt_cat", 0)
CORE_OP(STACK,        "stack",        "Li",    ops_stack_infer,     ops_stack_cpu, ops_stack_rule, ops_join_grad,
        ops_stack_cuda, "dt_stack", 0)

/* backward kernels (ops/grad_ops.c): what autograd needs that the ops above
 * cannot compose; not differentiable themselves */
CORE_OP(GELU_BACKWARD, "gelu_backward", "TT", ops_gelu_backward_infer, ops_gelu_backward_cpu, ops_gelu_backward_rule, ops_grad_none,
        ops_binary_cuda, "dt_gelu_backward", 0)
CORE_OP(SLICE_SCATTER, "slice_scatter", "TIiiii", ops_slice_scatter_infer, ops_slice_scatter_cpu, ops_slice_scatter_rule, ops_grad_none,
        ops_slice_scatter_cuda, "dt_slice_scatter", 0)
CORE_OP(INDEX_SELECT_BACKWARD, "index_select_backward", "TiTi", ops_index_select_backward_infer, ops_index_select_backward_cpu, ops_index_select_backward_rule, ops_grad_none,
        ops_index_select_backward_cuda, "dt_index_select_backward", CORE_OP_CHECKS_DATA)
CORE_OP(CROSS_ENTROPY_BACKWARD, "cross_entropy_backward", "TTTiis", ops_cross_entropy_backward_infer, ops_cross_entropy_backward_cpu, ops_cross_entropy_backward_rule, ops_grad_none,
        ops_cross_entropy_backward_cuda, "dt_cross_entropy_backward", CORE_OP_CHECKS_DATA)

/* fused optimiser updates (ops/optim_ops.c): one pass over a parameter */
CORE_OP(ADAM_MOMENT, "adam_moment", "TTsb", ops_adam_moment_infer, ops_adam_moment_cpu, ops_optim_rule, ops_grad_none,
        ops_adam_moment_cuda, "dt_adam_moment", 0)
CORE_OP(ADAMW_APPLY, "adamw_apply", "TTTsss", ops_adamw_apply_infer, ops_adamw_apply_cpu, ops_optim_rule, ops_grad_none,
        ops_adamw_apply_cuda, "dt_adamw_apply", 0)
