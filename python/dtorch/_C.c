/* dtorch._C: the Tensor base type of the Python binding, in C, for speed
 * and lifetimes (docs/python-api.md, "Binding").
 *
 * A TensorBase holds its dt_tensor handle in a C field (no Python int to
 * go stale: the handle is released in tp_dealloc, after the last Python
 * reference is gone) and answers the arithmetic operators itself: tensor
 * op tensor and a floating tensor op a Python int / float call the C
 * function directly (one call, the GIL released around it); everything
 * else (0-d torch tensors, integer dtypes, the kinds PyTorch promotes)
 * goes to the Python implementation _tensor.py registers.
 *
 * The module links to nothing: init() is handed the C functions'
 * addresses from the ctypes-loaded library (so _lib.py's lookup rules
 * decide which libdtorch runs, and pip builds this with no header or
 * library present), the Python Tensor class, the fallbacks and the enum
 * values it needs (read from the library, never written here). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

typedef void *(*bin_fn)(void *, void *);
typedef void *(*scalar_fn)(void *, double, int);
typedef void *(*un_fn)(void *);
typedef void (*release_fn)(void *);
typedef int (*dtype_fn)(const void *);

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_MATMUL,
       N_OPS };
static const char *const op_names[N_OPS] = {
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul"};
enum { UN_NEG, UN_ABS, N_UN };
static const char *const un_names[N_UN] = {"neg", "abs"};

static bin_fn f_bin[N_OPS];
static scalar_fn f_scalar[N_OPS]; /* NULL: no scalar form (matmul) */
static un_fn f_un[N_UN];
static release_fn f_release;
static dtype_fn f_dtype;
/* the Python implementations: fwd(self, other), rev(self, other) */
static PyObject *py_fwd[N_OPS], *py_rev[N_OPS], *py_raise;
static PyObject *api_fwd[N_OPS], *api_rev[N_OPS], *api_un[N_UN];
static PyTypeObject *tensor_type; /* what the operators return */
static uint64_t float_dtypes;     /* bit d: dt_dtype d is floating */
static int kind_int, kind_float;  /* dt_scalar_kind values */
static int ready;

typedef struct {
  PyObject_HEAD
  void *h;
} TensorBase;

static PyTypeObject TensorBaseType;

/* the release may wait (the owning rank's queue full, runtime/storage.c):
 * without the GIL, as the ctypes path does, so no Python thread stalls
 * behind it and a rank thread of dtorch.run waiting for the GIL can drain
 * that queue meanwhile (~40 ns an object) */
static void tb_dealloc(PyObject *self) {
  void *h = ((TensorBase *)self)->h;
  ((TensorBase *)self)->h = NULL;
  if (h && f_release) {
    Py_BEGIN_ALLOW_THREADS
    f_release(h);
    Py_END_ALLOW_THREADS
  }
  Py_TYPE(self)->tp_free(self);
}

static PyObject *tb_get_h(PyObject *self, void *unused) {
  (void)unused;
  void *h = ((TensorBase *)self)->h;
  if (!h) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(h);
}

/* _h = int | None stores the handle; the caller owns what it replaces
 * (the Python code that swaps handles releases the old one itself) */
static int tb_set_h(PyObject *self, PyObject *v, void *unused) {
  (void)unused;
  if (!v || v == Py_None) {
    ((TensorBase *)self)->h = NULL;
    return 0;
  }
  if (!PyLong_Check(v)) {
    PyErr_Format(PyExc_TypeError, "Tensor._h: a handle is an int or None, "
                 "got %s", Py_TYPE(v)->tp_name);
    return -1;
  }
  void *h = PyLong_AsVoidPtr(v);
  if (!h && PyErr_Occurred()) return -1;
  ((TensorBase *)self)->h = h;
  return 0;
}

static PyGetSetDef tb_getset[] = {
    {"_h", tb_get_h, tb_set_h, "the dt_tensor handle (an int; None: none)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* a new Tensor owning h, or the error the call left (named api) */
static PyObject *wrap(void *h, PyObject *api) {
  if (!h) {
    PyObject *r = PyObject_CallOneArg(py_raise, api);
    Py_XDECREF(r);
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_RuntimeError, "dtorch: a call failed");
    return NULL;
  }
  TensorBase *o = (TensorBase *)tensor_type->tp_alloc(tensor_type, 0);
  if (!o) {
    f_release(h);
    return NULL;
  }
  o->h = h;
  return (PyObject *)o;
}

static void *call_bin(bin_fn f, void *a, void *b) {
  void *r;
  Py_BEGIN_ALLOW_THREADS
  r = f(a, b);
  Py_END_ALLOW_THREADS
  return r;
}

/* a Python float, or an int a double holds exactly (|i| <= 2**53), as
 * the double and its dt_scalar_kind; 0 if not one */
static int scalar_value(PyObject *o, double *v, int *kind) {
  if (PyFloat_CheckExact(o)) {
    *v = PyFloat_AS_DOUBLE(o);
    *kind = kind_float;
    return 1;
  }
  if (PyLong_CheckExact(o)) {
    int overflow;
    long long i = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (i == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return 0;
    }
    if (i > (1LL << 53) || i < -(1LL << 53)) return 0;
    *v = (double)i;
    *kind = kind_int;
    return 1;
  }
  return 0;
}

/* t op scalar for a floating t: PyTorch keeps t's dtype for a Python int
 * or float there, which is what the typed C function gives */
static PyObject *scalar_op(int op, PyObject *t, PyObject *s, PyObject *api) {
  void *h = ((TensorBase *)t)->h;
  double v;
  int kind;
  if (!h || !f_scalar[op] || !scalar_value(s, &v, &kind)) return NULL;
  int dt = f_dtype(h);
  if (dt < 0 || dt >= 64 || !((float_dtypes >> dt) & 1)) return NULL;
  void *r;
  Py_BEGIN_ALLOW_THREADS
  r = f_scalar[op](h, v, kind);
  Py_END_ALLOW_THREADS
  PyObject *out = wrap(r, api);
  if (!out) return Py_None; /* an error is set: not "no fast path" */
  return out;
}

static PyObject *binop(PyObject *a, PyObject *b, int op) {
  int ta = PyObject_TypeCheck(a, &TensorBaseType);
  int tb = PyObject_TypeCheck(b, &TensorBaseType);
  if (!ready) {
    PyErr_SetString(PyExc_RuntimeError, "dtorch._C: init() was not called");
    return NULL;
  }
  if (ta && tb && ((TensorBase *)a)->h && ((TensorBase *)b)->h)
    return wrap(call_bin(f_bin[op], ((TensorBase *)a)->h, ((TensorBase *)b)->h),
                api_fwd[op]);
  /* s + t and s * t are t + s and t * s */
  int commutes = op == OP_ADD || op == OP_MUL;
  if (ta || (tb && commutes)) {
    PyObject *r = ta ? scalar_op(op, a, b, api_fwd[op])
                     : scalar_op(op, b, a, api_rev[op]);
    if (r == Py_None) return NULL;
    if (r) return r;
  }
  if (ta) return PyObject_CallFunctionObjArgs(py_fwd[op], a, b, NULL);
  return PyObject_CallFunctionObjArgs(py_rev[op], b, a, NULL);
}

#define BINOP(name, op) \
  static PyObject *nb_##name(PyObject *a, PyObject *b) { return binop(a, b, op); }
BINOP(add, OP_ADD)
BINOP(sub, OP_SUB)
BINOP(mul, OP_MUL)
BINOP(truediv, OP_DIV)
BINOP(floordiv, OP_FLOORDIV)
BINOP(mod, OP_MOD)
BINOP(matmul, OP_MATMUL)

static PyObject *nb_power(PyObject *a, PyObject *b, PyObject *mod) {
  if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED; /* pow(t, e, m): no */
  return binop(a, b, OP_POW);
}

static PyObject *unop(PyObject *a, int op) {
  void *h = ((TensorBase *)a)->h;
  if (!ready || !h) {
    PyErr_SetString(PyExc_ValueError, "dtorch: the tensor has no handle");
    return NULL;
  }
  void *r;
  Py_BEGIN_ALLOW_THREADS
  r = f_un[op](h);
  Py_END_ALLOW_THREADS
  return wrap(r, api_un[op]);
}
static PyObject *nb_negative(PyObject *a) { return unop(a, UN_NEG); }
static PyObject *nb_absolute(PyObject *a) { return unop(a, UN_ABS); }

static PyNumberMethods tb_number = {
    .nb_add = nb_add,
    .nb_subtract = nb_sub,
    .nb_multiply = nb_mul,
    .nb_remainder = nb_mod,
    .nb_power = nb_power,
    .nb_negative = nb_negative,
    .nb_absolute = nb_absolute,
    .nb_floor_divide = nb_floordiv,
    .nb_true_divide = nb_truediv,
    .nb_matrix_multiply = nb_matmul,
};

static PyTypeObject TensorBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dtorch._C.TensorBase",
    .tp_doc = "The C part of dtorch.Tensor: the handle and the operators.",
    .tp_basicsize = sizeof(TensorBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = tb_dealloc,
    .tp_as_number = &tb_number,
    .tp_getset = tb_getset,
};

static void *addr_of(PyObject *fns, const char *name) {
  PyObject *v = PyDict_GetItemString(fns, name); /* borrowed */
  if (!v) {
    PyErr_Format(PyExc_KeyError, "dtorch._C.init: no address for %s", name);
    return NULL;
  }
  void *p = PyLong_AsVoidPtr(v);
  if (!p && !PyErr_Occurred())
    PyErr_Format(PyExc_ValueError, "dtorch._C.init: %s is NULL", name);
  return p;
}

static int take(PyObject *d, const char *key, PyObject **out) {
  PyObject *v = PyDict_GetItemString(d, key);
  if (!v) {
    PyErr_Format(PyExc_KeyError, "dtorch._C.init: no %s", key);
    return -1;
  }
  Py_INCREF(v);
  Py_XSETREF(*out, v);
  return 0;
}

/* init(fns, tensor_type, fwd, rev, raise_last, float_dtypes, kind_int,
 * kind_float): fns {"dt_add": address, ...}; fwd / rev {"add": callable,
 * ...} by op_names */
static PyObject *c_init(PyObject *mod, PyObject *args) {
  (void)mod;
  PyObject *fns, *type, *fwd, *rev, *raise;
  unsigned long long mask;
  int ki, kf;
  if (!PyArg_ParseTuple(args, "O!O!O!O!OKii", &PyDict_Type, &fns, &PyType_Type,
                        &type, &PyDict_Type, &fwd, &PyDict_Type, &rev, &raise,
                        &mask, &ki, &kf))
    return NULL;
  if (!PyType_IsSubtype((PyTypeObject *)type, &TensorBaseType)) {
    PyErr_SetString(PyExc_TypeError, "dtorch._C.init: the tensor type is no TensorBase");
    return NULL;
  }
  static const char *const c_bin[N_OPS] = {
      "dt_add", "dt_sub", "dt_mul", "dt_div", "dt_floor_divide", "dt_remainder",
      "dt_pow", "dt_matmul"};
  static const char *const c_scalar[N_OPS] = {
      "dt_add_scalar_typed", "dt_sub_scalar_typed", "dt_mul_scalar_typed",
      "dt_div_scalar_typed", "dt_floor_divide_scalar_typed",
      "dt_remainder_scalar_typed", "dt_pow_scalar_typed", NULL};
  static const char *const c_un[N_UN] = {"dt_neg", "dt_abs"};
  for (int i = 0; i < N_OPS; i++) {
    if (!(f_bin[i] = (bin_fn)addr_of(fns, c_bin[i]))) return NULL;
    if (c_scalar[i] && !(f_scalar[i] = (scalar_fn)addr_of(fns, c_scalar[i])))
      return NULL;
    if (take(fwd, op_names[i], &py_fwd[i]) || take(rev, op_names[i], &py_rev[i]))
      return NULL;
    Py_XSETREF(api_fwd[i], PyUnicode_FromFormat("Tensor.__%s__", op_names[i]));
    Py_XSETREF(api_rev[i], PyUnicode_FromFormat("Tensor.__r%s__", op_names[i]));
    if (!api_fwd[i] || !api_rev[i]) return NULL;
  }
  for (int i = 0; i < N_UN; i++) {
    if (!(f_un[i] = (un_fn)addr_of(fns, c_un[i]))) return NULL;
    Py_XSETREF(api_un[i], PyUnicode_FromFormat("Tensor.__%s__", un_names[i]));
    if (!api_un[i]) return NULL;
  }
  if (!(f_release = (release_fn)addr_of(fns, "dt_tensor_release"))) return NULL;
  if (!(f_dtype = (dtype_fn)addr_of(fns, "dt_tensor_dtype"))) return NULL;
  Py_INCREF(raise);
  Py_XSETREF(py_raise, raise);
  Py_INCREF(type);
  Py_XSETREF(tensor_type, (PyTypeObject *)type);
  float_dtypes = mask;
  kind_int = ki;
  kind_float = kf;
  ready = 1;
  Py_RETURN_NONE;
}

/* from_handle(h): a new Tensor owning the handle h (an int, not 0) */
static PyObject *c_from_handle(PyObject *mod, PyObject *h) {
  (void)mod;
  if (!ready) {
    PyErr_SetString(PyExc_RuntimeError, "dtorch._C: init() was not called");
    return NULL;
  }
  void *p = PyLong_AsVoidPtr(h);
  if (!p) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError, "dtorch._C.from_handle: a NULL handle");
    return NULL;
  }
  TensorBase *o = (TensorBase *)tensor_type->tp_alloc(tensor_type, 0);
  if (!o) return NULL;
  o->h = p;
  return (PyObject *)o;
}

static PyMethodDef c_methods[] = {
    {"init", c_init, METH_VARARGS, "Hands the module the C functions and fallbacks."},
    {"from_handle", c_from_handle, METH_O, "A Tensor owning a handle."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef c_module = {
    PyModuleDef_HEAD_INIT, "dtorch._C",
    "dtorch's Tensor base type and operators in C (docs/python-api.md).", -1,
    c_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__C(void) {
  if (PyType_Ready(&TensorBaseType) < 0) return NULL;
  PyObject *m = PyModule_Create(&c_module);
  if (!m) return NULL;
  Py_INCREF(&TensorBaseType);
  if (PyModule_AddObject(m, "TensorBase", (PyObject *)&TensorBaseType) < 0) {
    Py_DECREF(&TensorBaseType);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
