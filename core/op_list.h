/* The op list: every op is declared here once; the enum (dispatch.h), the
 * name/schema/function tables (ops/registry.c) and the prototypes
 * (ops/ops.h) are generated from it, so they cannot drift.
 *
 * DT_OP(ID, "name", "schema", infer_fn, cpu_kernel_fn)  — schema: dispatch.h
 * No include guard: included with different DT_OP definitions. */

/* creation (ops/creation.c) */
DT_OP(EMPTY,        "empty",        "ID",    ops_factory_infer,   ops_empty_cpu)
DT_OP(FULL,         "full",         "IDs",   ops_factory_infer,   ops_full_cpu)
DT_OP(ARANGE,       "arange",       "dddD",  ops_arange_infer,    ops_arange_cpu)
DT_OP(RAND,         "rand",         "IDnn",  ops_factory_infer,   ops_random_cpu)
DT_OP(RANDN,        "randn",        "IDnn",  ops_factory_infer,   ops_random_cpu)
DT_OP(FROM_HOST,    "from_host",    "PID",   ops_factory_infer,   ops_from_host_cpu)

/* pointwise (ops/pointwise.c) */
DT_OP(ADD,          "add",          "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(SUB,          "sub",          "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(MUL,          "mul",          "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(DIV,          "div",          "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(POW,          "pow",          "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(MAXIMUM,      "maximum",      "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(MINIMUM,      "minimum",      "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(EQ,           "eq",           "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(NE,           "ne",           "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(LT,           "lt",           "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(LE,           "le",           "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(GT,           "gt",           "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(GE,           "ge",           "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(LOGICAL_AND,  "logical_and",  "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(LOGICAL_OR,   "logical_or",   "TT",    ops_binary_infer,    ops_binary_cpu)
DT_OP(ADD_SCALAR,   "add_scalar",   "Ts",    ops_scalar_infer,    ops_scalar_cpu)
DT_OP(SUB_SCALAR,   "sub_scalar",   "Ts",    ops_scalar_infer,    ops_scalar_cpu)
DT_OP(MUL_SCALAR,   "mul_scalar",   "Ts",    ops_scalar_infer,    ops_scalar_cpu)
DT_OP(DIV_SCALAR,   "div_scalar",   "Ts",    ops_scalar_infer,    ops_scalar_cpu)
DT_OP(POW_SCALAR,   "pow_scalar",   "Ts",    ops_scalar_infer,    ops_scalar_cpu)
DT_OP(NEG,          "neg",          "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(ABS,          "abs",          "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(EXP,          "exp",          "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(LOG,          "log",          "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(SQRT,         "sqrt",         "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(RSQRT,        "rsqrt",        "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(SIN,          "sin",          "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(COS,          "cos",          "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(TANH,         "tanh",         "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(SIGMOID,      "sigmoid",      "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(RELU,         "relu",         "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(SILU,         "silu",         "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(GELU,         "gelu",         "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(GELU_TANH,    "gelu_tanh",    "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(LOGICAL_NOT,  "logical_not",  "T",     ops_unary_infer,     ops_unary_cpu)
DT_OP(CLAMP,        "clamp",        "Tss",   ops_clamp_infer,     ops_clamp_cpu)
DT_OP(WHERE,        "where",        "TTT",   ops_where_infer,     ops_where_cpu)
DT_OP(MASKED_FILL,  "masked_fill",  "TTs",   ops_masked_fill_infer, ops_masked_fill_cpu)
DT_OP(CAST,         "cast",         "TD",    ops_cast_infer,      ops_cast_cpu)

/* views and copies (ops/views.c); pure views run no kernel (ops_alias_cpu) */
DT_OP(VIEW,         "view",         "TI",    ops_view_infer, ops_alias_cpu)
DT_OP(RESHAPE,      "reshape",      "TI",    ops_reshape_infer,   ops_copy_cpu)
DT_OP(TRANSPOSE,    "transpose",    "Tii",   ops_transpose_infer, ops_alias_cpu)
DT_OP(PERMUTE,      "permute",      "TI",    ops_permute_infer, ops_alias_cpu)
DT_OP(SLICE,        "slice",        "Tiiii", ops_slice_infer, ops_alias_cpu)
DT_OP(NARROW,       "narrow",       "Tiii",  ops_narrow_infer, ops_alias_cpu)
DT_OP(SELECT,       "select",       "Tii",   ops_select_infer, ops_alias_cpu)
DT_OP(EXPAND,       "expand",       "TI",    ops_expand_infer, ops_alias_cpu)
DT_OP(SQUEEZE,      "squeeze",      "Ti",    ops_squeeze_infer, ops_alias_cpu)
DT_OP(SQUEEZE_ALL,  "squeeze_all",  "T",     ops_squeeze_all_infer, ops_alias_cpu)
DT_OP(UNSQUEEZE,    "unsqueeze",    "Ti",    ops_unsqueeze_infer, ops_alias_cpu)
DT_OP(FLATTEN,      "flatten",      "Tii",   ops_flatten_infer,   ops_copy_cpu)
DT_OP(CONTIGUOUS,   "contiguous",   "T",     ops_contiguous_infer, ops_copy_cpu)
DT_OP(CLONE,        "clone",        "T",     ops_clone_infer,     ops_copy_cpu)

/* reductions (ops/reduce.c) */
DT_OP(SUM,          "sum",          "TIb",   ops_reduce_infer,    ops_reduce_cpu)
DT_OP(MEAN,         "mean",         "TIb",   ops_reduce_infer,    ops_reduce_cpu)
DT_OP(AMAX,         "amax",         "TIb",   ops_reduce_infer,    ops_reduce_cpu)
DT_OP(AMIN,         "amin",         "TIb",   ops_reduce_infer,    ops_reduce_cpu)
DT_OP(PROD,         "prod",         "TIb",   ops_reduce_infer,    ops_reduce_cpu)
DT_OP(ARGMAX,       "argmax",       "TIb",   ops_reduce_infer,    ops_reduce_cpu)
DT_OP(ARGMIN,       "argmin",       "TIb",   ops_reduce_infer,    ops_reduce_cpu)
DT_OP(VAR,          "var",          "TIbb",  ops_var_infer,       ops_var_cpu)

/* normalisation (ops/norm.c) */
DT_OP(SOFTMAX,      "softmax",      "Ti",    ops_softmax_infer,   ops_softmax_cpu)
DT_OP(LOG_SOFTMAX,  "log_softmax",  "Ti",    ops_softmax_infer,   ops_softmax_cpu)
DT_OP(LAYER_NORM,   "layer_norm",   "Tttd",  ops_layer_norm_infer, ops_layer_norm_cpu)
DT_OP(RMS_NORM,     "rms_norm",     "Ttd",   ops_rms_norm_infer,  ops_rms_norm_cpu)

/* linear algebra and nn (ops/linalg.c, ops/nn.c) */
DT_OP(MATMUL,       "matmul",       "TT",    ops_matmul_infer,    ops_matmul_cpu)
DT_OP(LINEAR,       "linear",       "TTt",   ops_linear_infer,    ops_linear_cpu)
DT_OP(EMBEDDING,    "embedding",    "TT",    ops_embedding_infer, ops_embedding_cpu)
DT_OP(INDEX_SELECT, "index_select", "TiT",   ops_index_select_infer, ops_index_select_cpu)
DT_OP(CROSS_ENTROPY,"cross_entropy","TTii",  ops_cross_entropy_infer, ops_cross_entropy_cpu)
DT_OP(DROPOUT,      "dropout",      "Tdbnn", ops_dropout_infer,   ops_dropout_cpu)

/* joining (ops/join.c); split/chunk are composites of narrow */
DT_OP(CAT,          "cat",          "Li",    ops_cat_infer,       ops_cat_cpu)
DT_OP(STACK,        "stack",        "Li",    ops_stack_infer,     ops_stack_cpu)
