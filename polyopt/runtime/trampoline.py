"""A CPython extension that calls a compiled kernel with numpy buffers, built once per
interpreter and compiler (and kept in the kernel cache).

A ctypes call of a kernel costs about 7 us before the kernel runs, most of it finding each
array's address (``ndarray.ctypes.data`` builds a ctypes object, about 1.3 us per array);
the kernel of a 16x16 matmul runs in a fraction of a microsecond. The extension's
``call(kernel, dims, *buffers)`` takes the buffers through the buffer protocol (a
C-contiguous view, or an error: never a strided array read as a flat one) and integers as
addresses (scratch the caller keeps), releases the GIL while the kernel runs, as ctypes
does, and returns None, or the kernel's error record when it reports one. Before each
call the governor (:mod:`.governor`) sets how many threads the kernel's parallel regions
get: the cores other processes leave free.

Built against numpy's headers (the usual case), it also has ``prepare``/``run``: a call
bound once per kernel and shape (address, ``dims``, each input's dtype and shape, each
output's), which ``run(plan, inputs)`` checks, allocates and calls in C: the checks of the
Python fast path (``Kernel._host_call``: exact ndarrays, the dtype objects themselves,
ranks, shapes, C-contiguous and aligned), then the outputs. It returns them, or None when
an input is not what the plan was made for (the caller then takes its checked path); a
kernel's error record goes to the plan's ``on_error``, which raises.

Building needs ``Python.h``; where it is missing or the build fails, :func:`load` returns
None and kernels are called through ctypes as before.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
from collections.abc import Sequence
from types import ModuleType

import numpy as np

from polyopt.errors import CompileError
from polyopt.runtime import governor
from polyopt.runtime.compiler import compile_shared

NAME = "_polyopt_trampoline"
MAX_BUFFERS = 256

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define PO_MAX_BUFFERS @MAX@
typedef int (*po_kernel)(void **, const long *, long *);
@GOVERNOR@

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
    int had = po_govern();
    Py_BEGIN_ALLOW_THREADS
    rc = fn(ptrs + 1, (const long *)ptrs[0], err);
    Py_END_ALLOW_THREADS
    po_ungovern(had);
  }
  for (Py_ssize_t i = 0; i < held; i++)
    if (views[i].obj != NULL) PyBuffer_Release(&views[i]);
  if (failed) return NULL;
  if (err[0] == 0 && rc == 0) Py_RETURN_NONE;
  return Py_BuildValue("(llll)", err[0] ? err[0] : (long)rc, err[1], err[2], err[3]);
}

#ifdef PO_NUMPY
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

typedef struct {
  po_kernel fn;
  Py_ssize_t nin, nout;   /* arrays: inputs, then outputs */
  PyArray_Descr **descr;  /* owned */
  int *nd;
  npy_intp **shape;
  npy_intp *extents;
  long *dims;
  PyObject *on_error;     /* owned */
  PyObject *makers;       /* owned: per output, None (PyArray_Empty) or a callable */
} po_plan;

static void po_plan_release(po_plan *p) {
  if (p->descr != NULL)
    for (Py_ssize_t i = 0; i < p->nin + p->nout; i++) Py_XDECREF(p->descr[i]);
  Py_XDECREF(p->on_error);
  Py_XDECREF(p->makers);
  PyMem_Free(p->descr); PyMem_Free(p->nd); PyMem_Free(p->shape);
  PyMem_Free(p->extents); PyMem_Free(p->dims); PyMem_Free(p);
}

static void po_plan_free(PyObject *capsule) {
  po_plan *p = (po_plan *)PyCapsule_GetPointer(capsule, "polyopt.plan");
  if (p != NULL) po_plan_release(p);
}

/* Copy the (dtype, shape) pairs of ``specs`` into p, from array index ``at``. */
static int po_take_specs(po_plan *p, PyObject *specs, Py_ssize_t at, Py_ssize_t *used) {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(specs); i++) {
    PyObject *shape;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(specs, i), "O&O!", PyArray_DescrConverter,
                          &p->descr[at + i], &PyTuple_Type, &shape)) return -1;
    p->nd[at + i] = (int)PyTuple_GET_SIZE(shape);
    p->shape[at + i] = p->extents + *used;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(shape); k++) {
      p->extents[(*used)++] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, k));
      if (PyErr_Occurred()) return -1;
    }
  }
  return 0;
}

static Py_ssize_t po_count_extents(PyObject *specs) {
  Py_ssize_t n = 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(specs); i++) {
    PyObject *spec = PyTuple_GET_ITEM(specs, i);
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2 ||
        !PyTuple_Check(PyTuple_GET_ITEM(spec, 1))) {
      PyErr_SetString(PyExc_TypeError, "prepare: each spec is (dtype, shape tuple)");
      return -1;
    }
    n += PyTuple_GET_SIZE(PyTuple_GET_ITEM(spec, 1));
  }
  return n;
}

/* prepare(kernel_address, dims, inputs, outputs, on_error, makers) -> plan; inputs and
   outputs are tuples of (dtype, shape); makers, per output, None (a new numpy array) or a
   callable that returns the output (an array of its dtype and shape: the runtime's pool). */
static PyObject *po_prepare(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *address, *dims, *ins, *outs, *on_error, *makers;
  if (!PyArg_ParseTuple(args, "OO!O!O!OO!", &address, &PyTuple_Type, &dims, &PyTuple_Type, &ins,
                        &PyTuple_Type, &outs, &on_error, &PyTuple_Type, &makers)) return NULL;
  Py_ssize_t nin = PyTuple_GET_SIZE(ins), nout = PyTuple_GET_SIZE(outs), n = nin + nout;
  if (PyTuple_GET_SIZE(makers) != nout) {
    PyErr_SetString(PyExc_ValueError, "prepare: one maker (or None) per output");
    return NULL;
  }
  Py_ssize_t ein = po_count_extents(ins), eout = ein < 0 ? -1 : po_count_extents(outs);
  if (eout < 0) return NULL;
  if (n > PO_MAX_BUFFERS || nout < 1) {
    PyErr_SetString(PyExc_ValueError, "prepare: too many buffers, or no output");
    return NULL;
  }
  po_plan *p = (po_plan *)PyMem_Calloc(1, sizeof(po_plan));
  if (p == NULL) return PyErr_NoMemory();
  p->nin = nin; p->nout = nout;
  p->descr = (PyArray_Descr **)PyMem_Calloc((size_t)n, sizeof(PyArray_Descr *));
  p->nd = (int *)PyMem_Calloc((size_t)n, sizeof(int));
  p->shape = (npy_intp **)PyMem_Calloc((size_t)n, sizeof(npy_intp *));
  p->extents = (npy_intp *)PyMem_Calloc((size_t)(ein + eout + 1), sizeof(npy_intp));
  p->dims = (long *)PyMem_Calloc((size_t)PyTuple_GET_SIZE(dims) + 1, sizeof(long));
  Py_INCREF(on_error);
  p->on_error = on_error;
  Py_INCREF(makers);
  p->makers = makers;
  PyObject *capsule = PyCapsule_New(p, "polyopt.plan", po_plan_free);
  if (capsule == NULL) { po_plan_release(p); return NULL; }
  if (!p->descr || !p->nd || !p->shape || !p->extents || !p->dims) {
    Py_DECREF(capsule);
    return PyErr_NoMemory();
  }
  p->fn = (po_kernel)PyLong_AsVoidPtr(address);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dims) && !PyErr_Occurred(); i++)
    p->dims[i] = PyLong_AsLong(PyTuple_GET_ITEM(dims, i));
  Py_ssize_t used = 0;
  if (PyErr_Occurred() || p->fn == NULL || po_take_specs(p, ins, 0, &used) < 0 ||
      po_take_specs(p, outs, nin, &used) < 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "prepare: null kernel address");
    Py_DECREF(capsule);
    return NULL;
  }
  return capsule;
}

/* run(plan, inputs): the outputs (one array, or a tuple), or None when an input is not an
   exact ndarray of the plan's dtype and shape, C-contiguous and aligned. */
static PyObject *po_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2 || !PyTuple_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "run(plan, inputs): inputs is a tuple");
    return NULL;
  }
  po_plan *p = (po_plan *)PyCapsule_GetPointer(args[0], "polyopt.plan");
  if (p == NULL) return NULL;
  PyObject *ins = args[1];
  if (PyTuple_GET_SIZE(ins) != p->nin) Py_RETURN_NONE;
  void *ptrs[PO_MAX_BUFFERS];
  for (Py_ssize_t i = 0; i < p->nin; i++) {
    PyObject *o = PyTuple_GET_ITEM(ins, i);
    if (!PyArray_CheckExact(o)) Py_RETURN_NONE;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_DESCR(a) != p->descr[i] || PyArray_NDIM(a) != p->nd[i] ||
        !PyArray_CHKFLAGS(a, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED)) Py_RETURN_NONE;
    npy_intp *d = PyArray_DIMS(a);
    for (int k = 0; k < p->nd[i]; k++)
      if (d[k] != p->shape[i][k]) Py_RETURN_NONE;
    ptrs[i] = PyArray_DATA(a);
  }
  PyObject *outs[PO_MAX_BUFFERS];
  for (Py_ssize_t j = 0; j < p->nout; j++) {
    Py_ssize_t at = p->nin + j;
    PyObject *maker = PyTuple_GET_ITEM(p->makers, j);
    if (maker != Py_None) {
      outs[j] = PyObject_CallNoArgs(maker);
      if (outs[j] != NULL && !PyArray_CheckExact(outs[j])) {
        Py_DECREF(outs[j]);
        outs[j] = NULL;
        PyErr_SetString(PyExc_TypeError, "run: an output's maker returned no ndarray");
      }
    } else {
      Py_INCREF(p->descr[at]);  /* PyArray_Empty steals it */
      outs[j] = PyArray_Empty(p->nd[at], p->shape[at], p->descr[at], 0);
    }
    if (outs[j] == NULL) {
      for (Py_ssize_t k = 0; k < j; k++) Py_DECREF(outs[k]);
      return NULL;
    }
    ptrs[at] = PyArray_DATA((PyArrayObject *)outs[j]);
  }
  long err[4] = {0, 0, 0, 0};
  int rc;
  int had = po_govern();
  Py_BEGIN_ALLOW_THREADS
  rc = p->fn(ptrs, p->dims, err);
  Py_END_ALLOW_THREADS
  po_ungovern(had);
  if (err[0] != 0 || rc != 0) {
    PyObject *r = PyObject_CallFunction(p->on_error, "((llll))", err[0] ? err[0] : (long)rc,
                                        err[1], err[2], err[3]);
    Py_XDECREF(r);
    for (Py_ssize_t j = 0; j < p->nout; j++) Py_DECREF(outs[j]);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "kernel error not raised");
    return NULL;
  }
  if (p->nout == 1) return outs[0];
  PyObject *tuple = PyTuple_New(p->nout);
  if (tuple == NULL) {
    for (Py_ssize_t j = 0; j < p->nout; j++) Py_DECREF(outs[j]);
    return NULL;
  }
  for (Py_ssize_t j = 0; j < p->nout; j++) PyTuple_SET_ITEM(tuple, j, outs[j]);
  return tuple;
}
#endif

static PyMethodDef po_methods[] = {
  {"call", (PyCFunction)(void (*)(void))po_call, METH_FASTCALL, "call a kernel"},
  {"threads", po_threads, METH_NOARGS, "the threads the next kernel call gets"},
#ifdef PO_NUMPY
  {"prepare", (PyCFunction)(void (*)(void))po_prepare, METH_VARARGS, "bind a call"},
  {"run", (PyCFunction)(void (*)(void))po_run, METH_FASTCALL, "run a bound call"},
#endif
  {NULL, NULL, 0, NULL}};

static struct PyModuleDef po_module = {PyModuleDef_HEAD_INIT, "@NAME@", NULL, -1, po_methods};

PyMODINIT_FUNC PyInit_@NAME@(void) {
#ifdef PO_NUMPY
  import_array();
#endif
  return PyModule_Create(&po_module);
}
""".replace("@MAX@", str(MAX_BUFFERS)).replace("@NAME@", NAME).replace("@GOVERNOR@",
                                                                        governor.SOURCE)


@functools.cache
def load() -> ModuleType | None:
    """The extension module (built on first use), or None where it cannot be built: with
    ``prepare``/``run`` where numpy's headers are found, else with ``call`` alone."""
    include = _python_include()
    if not include:
        return None
    flags = ["-O2", "-fPIC", "-shared", "-fopenmp", f"-I{include}"]  # omp: the governor
    # numpy's version is in the flags: the cached object is rebuilt when numpy changes.
    with_numpy = [*flags, "-DPO_NUMPY", f"-I{np.get_include()}",
                  f"-DPO_NUMPY_VERSION={np.__version__}"]
    return _build(with_numpy) or _build(flags)


def _python_include() -> str | None:
    """Where ``Python.h`` is: the posix_prefix scheme's place when it is there (one stat),
    else what sysconfig says (which costs ~2 ms a process, a fifth of a warm start)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}{sys.abiflags}"
    guess = os.path.join(sys.base_prefix, "include", version)
    if os.path.isfile(os.path.join(guess, "Python.h")):
        return guess
    return sysconfig.get_paths().get("include")


def _build(flags: Sequence[str]) -> ModuleType | None:
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
