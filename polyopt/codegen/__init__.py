"""Code generation: isl AST from a schedule, printed through one printer per dialect."""

from __future__ import annotations

from polyopt.codegen.ast import Ast, build_ast
from polyopt.codegen.printer import Dialect, KernelSource, render

__all__ = ["Ast", "Dialect", "KernelSource", "build_ast", "render"]
