"""Code generation: isl AST from a schedule, printed through one printer per dialect."""

from __future__ import annotations

from polyopt.codegen.ast import Ast, build_ast
from polyopt.codegen.contract import KernelSource, Launch
from polyopt.codegen.dialect import Dialect
from polyopt.codegen.printer import render

__all__ = ["Ast", "Dialect", "KernelSource", "Launch", "build_ast", "render"]
