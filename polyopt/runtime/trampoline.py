"""A CPython extension that calls a compiled kernel with numpy buffers, built once per
interpreter and compiler (and kept in the kernel cache).

A ctypes call of a kernel costs about 7 us before the kernel runs, most of it finding each
array's address (``ndarray.ctypes.data`` builds a ctypes object, about 1.3 us per array);
the kernel of a 16x16 matmul runs in a fraction of a microsecond. The extension's
``call(kernel, dims, *buffers)`` takes the buffers through the buffer protocol (a
C-contiguous view, or an error: never a strided array read as a flat one) and integers as
addresses (scratch the caller keeps), releases the GIL while the kernel runs, as ctypes
does, and returns None, or the kernel's error record when it reports one.

Building needs ``Python.h``; where it is missing or the build fails, :func:`load` returns
None and kernels are called through ctypes as before.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.machinery
import importlib.util
import sysconfig
from types import ModuleType

from polyopt.errors import CompileError
from polyopt.runtime.compiler import compile_shared

NAME = "_polyopt_trampoline"
MAX_BUFFERS = 256

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define PO_MAX_BUFFERS @MAX@
typedef int (*po_kernel)(void **, const long *, long *);

/* call(kernel_address, dims, *buffers): buffers are C-contiguous buffer objects or integer
   addresses. Returns None, or (code, a, b, c) when the kernel reports an error. */
static PyObject *po_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs < 2 || nargs - 2 > PO_MAX_BUFFERS) {
    PyErr_SetString(PyExc_TypeError, "call(kernel, dims, *buffers): bad argument count");
    return NULL;
  }
  po_kernel fn = (po_kernel)PyLong_AsVoidPtr(args[0]);
  if (fn == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "null kernel address");
    return NULL;
  }
  Py_ssize_t n = nargs - 1, held = 0;
  Py_buffer views[PO_MAX_BUFFERS + 1];
  void *ptrs[PO_MAX_BUFFERS + 1];
  int failed = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *o = args[i + 1];
    if (i > 0 && PyLong_Check(o)) {
      ptrs[i] = PyLong_AsVoidPtr(o);
      views[i].obj = NULL;
      if (PyErr_Occurred()) { failed = 1; break; }
      continue;
    }
    if (PyObject_GetBuffer(o, &views[i], PyBUF_C_CONTIGUOUS) != 0) { failed = 1; break; }
    ptrs[i] = views[i].buf;
    held = i + 1;
  }
  long err[4] = {0, 0, 0, 0};
  int rc = 0;
  if (!failed) {
    Py_BEGIN_ALLOW_THREADS
    rc = fn(ptrs + 1, (const long *)ptrs[0], err);
    Py_END_ALLOW_THREADS
  }
  for (Py_ssize_t i = 0; i < held; i++)
    if (views[i].obj != NULL) PyBuffer_Release(&views[i]);
  if (failed) return NULL;
  if (err[0] == 0 && rc == 0) Py_RETURN_NONE;
  return Py_BuildValue("(llll)", err[0] ? err[0] : (long)rc, err[1], err[2], err[3]);
}

static PyMethodDef po_methods[] = {
  {"call", (PyCFunction)(void (*)(void))po_call, METH_FASTCALL, "call a kernel"},
  {NULL, NULL, 0, NULL}};

static struct PyModuleDef po_module = {PyModuleDef_HEAD_INIT, "@NAME@", NULL, -1, po_methods};

PyMODINIT_FUNC PyInit_@NAME@(void) { return PyModule_Create(&po_module); }
""".replace("@MAX@", str(MAX_BUFFERS)).replace("@NAME@", NAME)

@functools.cache
def load() -> ModuleType | None:
    """The extension module (built on first use), or None where it cannot be built."""
    include = sysconfig.get_paths().get("include")
    if not include:
        return None
    flags = ["-O2", "-fPIC", "-shared", f"-I{include}"]
    with contextlib.suppress(CompileError, OSError, ImportError):
        path = compile_shared(SOURCE, flags=flags)
        loader = importlib.machinery.ExtensionFileLoader(NAME, str(path))
        spec = importlib.util.spec_from_file_location(NAME, str(path), loader=loader)
        if spec is None:
            return None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    return None
