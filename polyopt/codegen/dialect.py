"""What distinguishes one C-like target from another when printing a kernel.

``Dialect`` is C with OpenMP; a target subclasses it and overrides class attributes and a
few methods (``polyopt.codegen.cuda.CudaDialect``), as tinygrad's renderers and PPCG's
target callbacks do. The AST walker (``polyopt.codegen.walker``) asks the dialect, never
the target's name.
"""

from __future__ import annotations

from polyopt.codegen.builtins import PRELUDE
from polyopt.codegen.exprs import C_TYPES, Types
from polyopt.codegen.vmath import C_PRELUDE as VECTOR_MATH
from polyopt.costmodel.machine import Machine, host
from polyopt.schedules.marks import Marks, lanes_of


class Dialect:
    """C with OpenMP. Other targets override these attributes and a few methods."""

    name = "c"
    prelude = ("#define _GNU_SOURCE\n#define PO_FN static inline\n"
               "#if defined(__GNUC__) && !defined(__clang__)\n#define PO_NESTED_TILE_LOOPS "
               "__attribute__((optimize(\"no-predictive-commoning\")))\n#else\n"
               "#define PO_NESTED_TILE_LOOPS\n#endif" + PRELUDE + VECTOR_MATH)
    function_qualifier = ""
    # GCC's predictive commoning carries a register tile's broadcast values from one filter
    # tap to the next (the input at w + kw + 1 is the next row's at w + kw); with the
    # registers full of accumulators it spills them, and ResNet-50's 3x3 layers at 14 rows
    # of 2 vectors ran 1.2-1.3x slower for it (54 stack references in the tap loop). Off
    # only where a tile nests rolled loops: softmax ran 1.19x slower without it.
    nested_tile_loops_attribute = "PO_NESTED_TILE_LOOPS "
    restrict = "restrict"
    parallel_pragma = "#pragma omp parallel for"
    simd_pragma = "#pragma omp simd"
    # Ends the body of a loop that carries a dependence (isl's exact analysis says so) and
    # is a group of statements once short loops are peeled (``ast.straight_line_group``):
    # a volatile asm keeps the C compiler's loop vectorizer
    # off the loop, whose own dependence analysis polyopt would otherwise trust. GCC 12.2's
    # got a diagonal recurrence wrong (S(i,j) = f(S(i-1,j-1)) over a short j: the i loop
    # vectorized once j was peeled or written out; 44 of 60 shapes wrong at -O3, 4 at -O2),
    # a silent wrong answer. polyopt's own vector loops are ``omp simd``.
    # runtime/miscompiles.py keeps the case.
    carried_loop_guard = '__asm__ volatile("");'
    vector_bytes = 0  # register tiles use vectors this wide (0: plain loops)
    types: Types = C_TYPES  # bfloat16 as bits; C computes on _Float16 natively

    def function_header(self, symbol: str, nested_tile_loops: bool = False) -> str:
        """The kernel function's signature; ``nested_tile_loops``: a register tile of it
        keeps rolled loops inside one another."""
        attribute = self.nested_tile_loops_attribute if nested_tile_loops else ""
        return (f"{attribute}{self.function_qualifier}int {symbol}(void **bufs, "
                f"const long *dims, long *err)")

    def simd_clauses(self, tags: Marks) -> str:
        """The clauses after a vector loop's pragma: its width when the schedule fixes one
        (``simdlen``: GCC and Clang then vectorize by that many lanes, whatever width they
        prefer)."""
        lanes = lanes_of(tags)
        return f" simdlen({lanes})" if lanes else ""

    def loop_header(self, it: str, init: str, cond: str, inc: str,
                    tags: Marks) -> str:
        """The ``for`` line of an AST loop (the loop's ``tags`` may change how it runs)."""
        return f"for (long {it} = {init}; {cond}; {it} += {inc})"


def host_dialect() -> Dialect:
    """C for this machine: register tiles as wide as its vector registers."""
    return dialect_for(host())


def dialect_for(machine: Machine) -> Dialect:
    """C for ``machine``: register tiles as wide as its vector registers."""
    out = Dialect()
    out.vector_bytes = machine.vector_bytes
    return out
