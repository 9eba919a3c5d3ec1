/* cclz._fastcall: the Python package's calls on a training step's path (all-gather,
 * reduce-scatter, all-reduce, their error-feedback forms, all-to-all, send, recv) without ctypes'
 * per-call cost (docs/python.md, "Call overhead").
 *
 * ctypes builds a C argument for each Python argument through its type objects and takes ~1.5 us
 * a call on an H200 host, half the package's budget. This module takes plain ints (pointers,
 * handles, the codec configuration's address; None for NULL) as METH_FASTCALL arguments and calls
 * the library's function directly, releasing the GIL around the call as ctypes does.
 *
 * It is compiled against Python only, never against torch or libcclz: _capi.py hands it the
 * addresses of the functions of the libcclz that ctypes loaded (bind), so both bindings always
 * call the same library. Where it is not built (no Python headers), _capi.py binds the same
 * calls through ctypes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stddef.h>
#include <string.h>

/* The signatures, as in include/cclz/cclz.h (enums and handles are ints and pointers there). */
typedef int (*GatherFn)(const void*, void*, size_t, int, void*, const void*, void*);
typedef int (*ReduceFn)(const void*, void*, size_t, int, int, void*, const void*, void*);
typedef int (*FeedbackFn)(const void*, void*, size_t, int, int, void*, const void*, void*,
                          void*);
typedef int (*PeerFn)(void*, size_t, int, int, void*, const void*, void*);

static GatherFn all_gather_fn, all_to_all_fn;
static ReduceFn reduce_scatter_fn, all_reduce_fn;
static FeedbackFn reduce_scatter_feedback_fn, all_reduce_feedback_fn;
static PeerFn send_fn, recv_fn;

/* ---- arguments --------------------------------------------------------------------------- */

static int arg_pointer(PyObject* o, void** out) {
  if (o == Py_None) {
    *out = NULL;
    return 0;
  }
  *out = PyLong_AsVoidPtr(o);
  return (*out == NULL && PyErr_Occurred()) ? -1 : 0;
}

static int arg_size(PyObject* o, size_t* out) {
  *out = PyLong_AsSize_t(o);
  return (*out == (size_t)-1 && PyErr_Occurred()) ? -1 : 0;
}

static int arg_int(PyObject* o, int* out) {
  const long v = PyLong_AsLong(o);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < INT_MIN || v > INT_MAX) {
    PyErr_SetString(PyExc_OverflowError, "an int argument out of the C int's range");
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int expect_args(const char* name, Py_ssize_t got, Py_ssize_t want, const void* fn) {
  if (!fn) {
    PyErr_Format(PyExc_RuntimeError, "%s: not bound to the library (cclz._capi binds it)", name);
    return -1;
  }
  if (got != want) {
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, want, got);
    return -1;
  }
  return 0;
}

/* ---- the calls ------------------------------------------------------------------------------ */

/* (send, recv, count, dtype, comm, config, stream) */
static PyObject* call_gather(const char* name, GatherFn fn, PyObject* const* a, Py_ssize_t n) {
  void *send, *recv, *comm, *config, *stream;
  size_t count;
  int dtype;
  if (expect_args(name, n, 7, (const void*)fn) || arg_pointer(a[0], &send) ||
      arg_pointer(a[1], &recv) || arg_size(a[2], &count) || arg_int(a[3], &dtype) ||
      arg_pointer(a[4], &comm) || arg_pointer(a[5], &config) || arg_pointer(a[6], &stream))
    return NULL;
  int code;
  Py_BEGIN_ALLOW_THREADS
  code = fn(send, recv, count, dtype, comm, config, stream);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(code);
}

/* (send, recv, count, dtype, op, comm, config, stream) */
static PyObject* call_reduce(const char* name, ReduceFn fn, PyObject* const* a, Py_ssize_t n) {
  void *send, *recv, *comm, *config, *stream;
  size_t count;
  int dtype, op;
  if (expect_args(name, n, 8, (const void*)fn) || arg_pointer(a[0], &send) ||
      arg_pointer(a[1], &recv) || arg_size(a[2], &count) || arg_int(a[3], &dtype) ||
      arg_int(a[4], &op) || arg_pointer(a[5], &comm) || arg_pointer(a[6], &config) ||
      arg_pointer(a[7], &stream))
    return NULL;
  int code;
  Py_BEGIN_ALLOW_THREADS
  code = fn(send, recv, count, dtype, op, comm, config, stream);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(code);
}

/* (send, recv, count, dtype, op, comm, config, feedback, stream) */
static PyObject* call_feedback(const char* name, FeedbackFn fn, PyObject* const* a,
                               Py_ssize_t n) {
  void *send, *recv, *comm, *config, *feedback, *stream;
  size_t count;
  int dtype, op;
  if (expect_args(name, n, 9, (const void*)fn) || arg_pointer(a[0], &send) ||
      arg_pointer(a[1], &recv) || arg_size(a[2], &count) || arg_int(a[3], &dtype) ||
      arg_int(a[4], &op) || arg_pointer(a[5], &comm) || arg_pointer(a[6], &config) ||
      arg_pointer(a[7], &feedback) || arg_pointer(a[8], &stream))
    return NULL;
  int code;
  Py_BEGIN_ALLOW_THREADS
  code = fn(send, recv, count, dtype, op, comm, config, feedback, stream);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(code);
}

/* (buffer, count, dtype, peer, comm, config, stream) */
static PyObject* call_peer(const char* name, PeerFn fn, PyObject* const* a, Py_ssize_t n) {
  void *buffer, *comm, *config, *stream;
  size_t count;
  int dtype, peer;
  if (expect_args(name, n, 7, (const void*)fn) || arg_pointer(a[0], &buffer) ||
      arg_size(a[1], &count) || arg_int(a[2], &dtype) || arg_int(a[3], &peer) ||
      arg_pointer(a[4], &comm) || arg_pointer(a[5], &config) || arg_pointer(a[6], &stream))
    return NULL;
  int code;
  Py_BEGIN_ALLOW_THREADS
  code = fn(buffer, count, dtype, peer, comm, config, stream);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(code);
}

/* fast_<name>: the module's function <name>. */
#define CCLZ_CALL(name, kind, fn)                                                         \
  static PyObject* fast_##name(PyObject* self, PyObject* const* args, Py_ssize_t nargs) { \
    (void)self;                                                                          \
    return call_##kind(#name, fn, args, nargs);                                          \
  }

CCLZ_CALL(cclzAllGather, gather, all_gather_fn)
CCLZ_CALL(cclzAllToAll, gather, all_to_all_fn)
CCLZ_CALL(cclzReduceScatter, reduce, reduce_scatter_fn)
CCLZ_CALL(cclzAllReduce, reduce, all_reduce_fn)
CCLZ_CALL(cclzReduceScatterFeedback, feedback, reduce_scatter_feedback_fn)
CCLZ_CALL(cclzAllReduceFeedback, feedback, all_reduce_feedback_fn)
CCLZ_CALL(cclzSend, peer, send_fn)
CCLZ_CALL(cclzRecv, peer, recv_fn)

/* ---- binding -------------------------------------------------------------------------------- */

/* bind(name, address): the library's function `name` is at `address` (ctypes' view of it). */
static PyObject* bind(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2 || !PyUnicode_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "bind(name, address)");
    return NULL;
  }
  const char* name = PyUnicode_AsUTF8(args[0]);
  void* address;
  if (!name || arg_pointer(args[1], &address)) return NULL;
  if (!address) {
    PyErr_Format(PyExc_ValueError, "bind: %s at address 0", name);
    return NULL;
  }
  /* Function pointers from an object pointer: POSIX guarantees the conversion (dlsym). */
  if (!strcmp(name, "cclzAllGather")) all_gather_fn = (GatherFn)address;
  else if (!strcmp(name, "cclzAllToAll")) all_to_all_fn = (GatherFn)address;
  else if (!strcmp(name, "cclzReduceScatter")) reduce_scatter_fn = (ReduceFn)address;
  else if (!strcmp(name, "cclzAllReduce")) all_reduce_fn = (ReduceFn)address;
  else if (!strcmp(name, "cclzReduceScatterFeedback")) reduce_scatter_feedback_fn = (FeedbackFn)address;
  else if (!strcmp(name, "cclzAllReduceFeedback")) all_reduce_feedback_fn = (FeedbackFn)address;
  else if (!strcmp(name, "cclzSend")) send_fn = (PeerFn)address;
  else if (!strcmp(name, "cclzRecv")) recv_fn = (PeerFn)address;
  else {
    PyErr_Format(PyExc_ValueError, "bind: %s is not one of this module's calls", name);
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(name, address): call the library's function name at address"},
#define CCLZ_METHOD(name) \
  {#name, (PyCFunction)(void (*)(void))fast_##name, METH_FASTCALL, \
   "the C API's " #name ", every argument an int (None: NULL)"},
    CCLZ_METHOD(cclzAllGather) CCLZ_METHOD(cclzAllToAll) CCLZ_METHOD(cclzReduceScatter)
    CCLZ_METHOD(cclzAllReduce) CCLZ_METHOD(cclzReduceScatterFeedback)
    CCLZ_METHOD(cclzAllReduceFeedback) CCLZ_METHOD(cclzSend) CCLZ_METHOD(cclzRecv)
#undef CCLZ_METHOD
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastcall",
                                    "libcclz's hot calls without ctypes (cclz._capi binds them)",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastcall(void) { return PyModule_Create(&module); }
