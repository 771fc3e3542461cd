"""The key of a tuning record: what its times are valid for.

A :class:`Key` names the definition by a canonical hash that ignores whitespace, comments
and every name (tensors, indices, sizes), then the input shapes and dtypes, the target, the
machine (CPU model and flags; GPU name and compute capability) and the polyopt version.
``shape_distance`` orders the tuned shapes of one definition by nearness.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import islpy as isl

from polyopt import host, ir
from polyopt.driver import TARGETS
from polyopt.errors import OptionError
from polyopt.version import __version__

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# ---------------------------------------------------------------- canonical definition hash

def canonical_hash(program: ir.Program) -> str:
    """A hash of ``program`` that ignores its def name, tensor, index and size names (and the
    source's whitespace and comments, which never reach the Program) but nothing else.

    Hash the size-generic Program (``lang.build_program(source, name)``): sizes fixed by the
    caller are substituted as constants, so they change the hash; shapes are a Key field.
    """
    return hashlib.sha256(canonical_text(program).encode()).hexdigest()[:24]


def canonical_text(program: ir.Program) -> str:
    """The text :func:`canonical_hash` hashes: tensors renamed by role and position
    (``in0``, ``out0``, ``loc0``), sizes by signature order (``s0``), each statement's
    indices by position in its ``iters`` (``i0``), isl texts normalized by isl."""
    sizes = {n: f"s{i}" for i, n in enumerate(program.sizes)}
    tensors = {t.name: f"{prefix}{i}" for prefix, group in
               (("in", program.inputs), ("out", program.outputs), ("loc", program.locals))
               for i, t in enumerate(group)}
    parts = [f"sizes {len(program.sizes)}"]
    for t in (*program.inputs, *program.outputs, *program.locals):
        shape = [_isl_extent(e, sizes) for e in t.shape]
        parts.append(f"{t.role} {t.dtype} {tensors[t.name]} {shape}")
    for k, s in enumerate(program.stmts):
        parts.append(_canonical_stmt(k, s, sizes, tensors))
    return "\n".join(parts)


def _canonical_stmt(k: int, s: ir.Stmt, sizes: dict[str, str], tensors: dict[str, str]) -> str:
    iters = {n: f"i{j}" for j, n in enumerate(s.iters)}
    for e in s.rhs.walk():  # a gather's index not among the iters (defensive)
        if isinstance(e, ir.Var) and e.kind == "index" and e.name not in iters:
            iters[e.name] = f"i{len(iters)}"

    def rename(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Var):
            return replace(e, name=(iters if e.kind == "index" else sizes).get(e.name, e.name))
        if isinstance(e, ir.Read):
            pad = None if e.pad is None else tuple(
                ir.Pad(_isl_extent(p.before, sizes), _isl_extent(p.after, sizes))
                for p in e.pad)
            return replace(e, tensor=tensors[e.tensor], pad=pad)
        return e

    # repr, not str: it also shows every node's dtype and a literal's exact type.
    rhs = repr(ir.rewrite(s.rhs, rename))
    domain = str(isl.Set(_rename(s.domain, {**sizes, **iters, s.name: f"S{k}"})))
    lhs = ",".join(iters[n] for n in s.lhs)
    return f"{tensors[s.tensor]}[{lhs}] {s.op} init={s.init} iters={len(s.iters)}\n{rhs}\n{domain}"


@functools.lru_cache(maxsize=4096)
def _isl_extent_cached(extent: str, params: str) -> str:
    return str(isl.PwAff(f"[{params}] -> {{ [({extent})] }}"))


def _isl_extent(extent: str, sizes: dict[str, str]) -> str:
    """An extent over renamed sizes, printed by isl (its term order ignores the old names)."""
    return _isl_extent_cached(_rename(extent, sizes), ", ".join(sizes.values()))


def _rename(text: str, names: Mapping[str, str]) -> str:
    """Replace whole identifiers in one pass (so ``a -> b, b -> a`` swaps correctly)."""
    return _IDENT.sub(lambda m: names.get(m.group(0), m.group(0)), text)


# ---------------------------------------------------------------- machine identity

def machine_id(target: str) -> str:
    """What the times depend on besides the definition: the CPU (model, a hash of model and
    flags, usable cores) for ``"c"``; the GPU name and compute capability for ``"cuda"``."""
    _check_target(target)
    if target == "cuda":
        return _gpu_id()
    cpu = _cpu_id()
    return f"emulated:{cpu}" if target == "cuda-emulated" else cpu


@functools.lru_cache(maxsize=1)
def _cpu_id() -> str:
    return f"{host.cpu_model()} | {host.fingerprint()} | {host.usable_cores()} cores"


@functools.lru_cache(maxsize=1)
def _gpu_id() -> str:
    try:  # the driver alone: no context is created just to name the device
        import pycuda.driver as drv  # type: ignore[import-not-found, unused-ignore]

        drv.init()
        device = drv.Device(0)
        major, minor = device.compute_capability()
        return f"{device.name()} sm_{major}{minor}"
    except Exception:  # no PyCUDA, no driver, no device: PyCUDA raises its own errors
        return "cuda-unknown"


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise OptionError(f"unknown target {target!r}; valid: {', '.join(TARGETS)}")


Shapes = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Key:
    """What a time is valid for. ``def_name`` is informational only: it is not in ``id``."""

    definition: str
    shapes: Shapes
    dtypes: tuple[str, ...]
    target: str
    machine: str
    version: str
    def_name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", shapes_of(self.shapes))
        object.__setattr__(self, "dtypes", tuple(str(d) for d in self.dtypes))

    @staticmethod
    def make(program: ir.Program, shapes: Sequence[Sequence[int]], target: str = "c", *,
             machine: str | None = None) -> Key:
        """The key of size-generic ``program`` at input ``shapes`` on this machine."""
        _check_target(target)
        return Key(canonical_hash(program), shapes_of(shapes),
                   tuple(t.dtype for t in program.inputs), target,
                   machine if machine is not None else machine_id(target), __version__,
                   def_name=program.name)

    @property
    def id(self) -> str:
        """A stable hash of the identity fields (every field but ``def_name``)."""
        blob = json.dumps([self.definition, self.shapes, self.dtypes, self.target,
                           self.machine, self.version], separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:24]

    def as_dict(self) -> dict[str, Any]:
        return {"definition": self.definition, "def_name": self.def_name,
                "shapes": [list(s) for s in self.shapes], "dtypes": list(self.dtypes),
                "target": self.target, "machine": self.machine, "version": self.version}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Key:
        dtypes = d["dtypes"]
        if not isinstance(dtypes, list) or not all(isinstance(t, str) for t in dtypes):
            raise OptionError(f"Key dtypes must be a list of names, not {str(dtypes)[:80]}")
        return Key(str(d["definition"]), d["shapes"], tuple(dtypes), str(d["target"]),
                   str(d["machine"]), str(d["version"]), def_name=str(d.get("def_name", "")))


def shapes_of(shapes: Sequence[Sequence[int]]) -> Shapes:
    """``shapes`` as tuples of ints; OptionError for anything else (a string, a float, a bool
    or a negative extent)."""
    try:
        out = tuple(tuple(_dim(d) for d in s) for s in shapes)
    except (TypeError, ValueError):
        raise OptionError(f"Key shapes must be tuples of ints, not {str(shapes)[:80]}") from None
    if any(d < 0 for s in out for d in s):
        raise OptionError(f"Key shapes must not be negative: {out}")
    return out


def _dim(value: object) -> int:
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(value)
    return operator.index(value)  # type: ignore[arg-type]


def shape_distance(a: Shapes, b: Shapes) -> float | None:
    """Sum of ``|log(x/y)|`` over matching dims; None when the ranks differ."""
    if len(a) != len(b) or any(len(x) != len(y) for x, y in zip(a, b, strict=True)):
        return None
    return sum(abs(math.log(max(x, 1) / max(y, 1)))
               for sa, sb in zip(a, b, strict=True) for x, y in zip(sa, sb, strict=True))
