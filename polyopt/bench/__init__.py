"""Benchmarks of polyopt against other systems: the ``polyopt bench <suite>`` subcommands,
shipped so the installed CLI has them (each also runs as ``python3 -m polyopt.bench.<suite>``).

Suites, each with ``add_arguments(parser)`` and ``run(args)``:
- ``conv/``: the convolution layers of ResNet-50 or MobileNetV2 (``layers``) on polyopt,
  numpy, torch and TVM (``peers``, ``tvm_conv``); table, CSV, JSON and plot (``conv/records``,
  ``conv/report``).
- ``contention``: kernels timed quiet and next to a CPU-bound competitor.
- ``suite``: 40 operators in six families (``suite_cases``) against numpy, torch and TVM.
- ``ops``: eleven operators (``operators``) against program order, numpy, torch and TVM.
- ``latency``: import, first result and call overhead of fresh processes.
- ``memory``: RSS and mapped files of a long-running process.
- ``compile-time`` (``compile_time``): the compile-time reproducers, each in a child process.
- ``formulations``: equivalent formulations of the bundled stencils (``stencil_forms``, which
  the tests read too) against program order and numpy, each in a child process.
- ``einsum-paths`` (``einsum_paths``): multi-operand einsum along a path against numpy's.
- ``gpu/``: CUDA matmul and conv layers (``gpu/cases``) against torch on an NVIDIA GPU through
  PyCUDA, loaded at first use (``gpu/device``); rows, table and files (``gpu/records``).
- ``model/``: whole models (``model/networks``: ResNet-50, MobileNetV2, a BERT-base encoder)
  through eager torch, Inductor and ``torch.compile(backend="polyopt")``: cold and warm
  compile, latency and error, each in child processes (``model/child``, the only part that
  imports torch); rows, table and files (``model/records``).

Shared: ``measure`` (build, check and time a system) over ``timing`` (interleaved rounds),
``tvm_gemm`` (TVM's GEMM peer), ``markdown`` (BENCHMARKS.md sections and ``--update``),
``entry`` (a suite run as a module of its own).
Importing this package imports neither torch, TVM nor PyCUDA.
"""

from __future__ import annotations
