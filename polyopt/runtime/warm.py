"""Warm starts: what a definition lowered to, kept in the cache so that a later process calls
it without lowering again (parse, isl, scheduling and code generation cost 50-300 ms).

A ``kernels`` record (:mod:`.records`) maps a *variant key* to a :class:`Compiled`: the
generated source and the signature a call needs (size names, tensors in ``dims[]`` order).
The object itself is found from the source as every compile finds it (``load_library``),
so the record holds no code that runs. The key covers everything the lowering reads: the
checked program's full text (``repr``: names, dtypes, extents, statements, compile-time
sizes), the compile options (target, machine model, flags, OpenMP, knobs...), the schedule
asked for and the state of the tuning database, polyopt's code (:func:`code_stamp`),
islpy's and Python's versions and the host CPU. A ``checked`` record says that a
size-generic program passed the compile-time bounds check. A ``hints`` record says that a
compile keyed more cheaply than by its program (a torch partition's source and options) was
lowered before.

Records are only an index: a miss, or a record that cannot be trusted or parsed, is lowered
again and rewritten. None are read or written without a disk cache, or when
``POLYOPT_DEBUG`` asks to see the stages.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import islpy as isl

from polyopt import config, host, ir
from polyopt.codegen.contract import KernelSource
from polyopt.runtime import cache, records
from polyopt.version import __version__


@dataclass(frozen=True)
class Signature:
    """What calling a lowered program needs of it: its unbound sizes and its tensors (the
    schedule's, which may add packed copies), inputs, outputs then locals."""

    name: str
    sizes: tuple[str, ...]
    inputs: tuple[ir.Tensor, ...]
    outputs: tuple[ir.Tensor, ...]
    locals: tuple[ir.Tensor, ...]

    @cached_property
    def tensors(self) -> dict[str, ir.Tensor]:
        """By name, in ``dims[]`` order (as ``ir.Program.tensors``)."""
        return {t.name: t for t in (*self.inputs, *self.outputs, *self.locals)}

    @staticmethod
    def of(program: ir.Program) -> Signature:
        return Signature(program.name, program.sizes, program.inputs, program.outputs,
                         program.locals)


@dataclass(frozen=True)
class Compiled:
    """One lowered variant as a call needs it: the signature and the generated source."""

    signature: Signature
    source: KernelSource
    warnings: tuple[str, ...] = ()
    """What the lowering warned (``PolyoptWarning`` messages: isl's scheduler out of its
    budget, say), said again when a later process loads the record."""


def variant_key(program: ir.Program, options: Mapping[str, Any], schedule: str) -> str:
    """The key of the variant ``program`` lowers to with ``options`` and ``schedule`` (the
    schedule asked for and, when the tuning database may choose, its state)."""
    return records.key_of("kernels", code_stamp(), repr(program), _options_text(options),
                          schedule)


def load(key: str) -> Compiled | None:
    """The variant recorded under ``key``, or None (no record, or one that cannot be used)."""
    root = records_root()
    payload = _read(root, "kernels", key) if root is not None else None
    if payload is None:
        return None
    try:
        return _compiled(payload)
    except (KeyError, TypeError, ValueError) as exc:  # well-formed JSON of another shape
        cache.logger.info("malformed kernels record %s (%s); lowering again", key, exc)
        return None


def save(key: str, compiled: Compiled) -> None:
    """Record ``compiled`` under ``key`` (C targets: CUDA sources also carry launches)."""
    root = records_root()
    if root is not None and compiled.source.target == "c" and not compiled.source.launches:
        _write(root, "kernels", key, _payload(compiled))


def is_checked(program: ir.Program) -> bool:
    """Did an earlier process find ``program``'s accesses inside their tensors?"""
    root = records_root()
    found = _read(root, "checked", _checked_key(program)) if root is not None else None
    return found is not None and found.get("bounds") is True


def note_checked(program: ir.Program) -> None:
    root = records_root()
    if root is not None:
        _write(root, "checked", _checked_key(program), {"bounds": True})


def hint_key(*parts: Any) -> str:
    """The key of a hint about a compile that is cheaper to find than its variant key
    (which needs the checked program): this polyopt's ``code_stamp`` and ``parts``."""
    return records.key_of("hint", code_stamp(), *parts)


def hinted(key: str) -> bool:
    """Did an earlier process record hint ``key`` (``note_hint``)? Only a hint: a stale one
    costs time, never a wrong result."""
    root = records_root()
    return root is not None and _read(root, "hints", key) is not None


def note_hint(key: str) -> None:
    """Record hint ``key``, unless it is already (a write replaces a file: 2 ms)."""
    root = records_root()
    if root is not None and _read(root, "hints", key) is None:
        _write(root, "hints", key, {})


@functools.cache
def code_stamp() -> str:
    """polyopt's code as lowering sees it: each module's path, size and modification time
    (an edited checkout is another polyopt, whatever its version says), the version, the
    islpy and Python versions and the host CPU."""
    package = str(Path(__file__).resolve().parent.parent)
    files: list[tuple[str, int, int]] = []
    _stat_sources(package, "", files)
    return records.key_of(__version__, isl.__version__, sys.version, host.fingerprint(), files)


def _stat_sources(folder: str, prefix: str, out: list[tuple[str, int, int]]) -> None:
    """(relative path, size, mtime) of each ``.py`` file below ``folder``, sorted."""
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                _stat_sources(entry.path, f"{prefix}{entry.name}/", out)
            elif entry.name.endswith(".py"):
                st = entry.stat()
                out.append((prefix + entry.name, st.st_size, st.st_mtime_ns))


def _checked_key(program: ir.Program) -> str:
    return records.key_of("checked", code_stamp(), repr(program))


def _options_text(options: Mapping[str, Any]) -> str:
    # The values are plain data or frozen dataclasses (Machine, Knobs, GpuMapping), whose
    # reprs list every field.
    return repr(sorted(options.items()))


def records_root() -> Path | None:
    """The cache root records go under, or None when none are read or written (no disk
    cache, or ``POLYOPT_DEBUG`` asking to see every stage lowered)."""
    cfg = config.current()
    if cfg.no_cache or cfg.debug:  # POLYOPT_DEBUG dumps the stages: lower to show them
        return None
    try:
        return cache.usable_root(cfg.cache_dir)
    except OSError:  # the compile reports an unusable cache dir
        return None


def _read(root: Path, kind: str, key: str) -> dict[str, Any] | None:
    try:
        return records.read(root, kind, key)
    except OSError:
        return None


def _write(root: Path, kind: str, key: str, payload: Mapping[str, Any]) -> None:
    try:
        records.write(root, kind, key, payload)
    except OSError as exc:  # a record that cannot be written only costs time later
        cache.logger.info("cannot write the %s record %s (%s)", kind, key, exc)


def _payload(compiled: Compiled) -> dict[str, Any]:
    sig, src = compiled.signature, compiled.source
    tensors = [[t.name, t.dtype, list(t.shape), t.role] for t in sig.tensors.values()]
    return {"signature": {"name": sig.name, "sizes": list(sig.sizes), "tensors": tensors},
            "source": {"name": src.name, "symbol": src.symbol, "text": src.text,
                       "buffers": list(src.buffers), "dims": list(src.dims),
                       "gathers": list(src.gathers), "specialized": src.specialized,
                       "target": src.target, "slices": list(src.slices),
                       "roles": list(src.roles),
                       "tails": [[name, n] for name, n in src.tails],
                       "once": src.once, "held": list(src.held)},
            "warnings": list(compiled.warnings)}


def _compiled(payload: Mapping[str, Any]) -> Compiled:
    sig, src = payload["signature"], payload["source"]
    tensors = [ir.Tensor(_str(n), _str(d), _strs(shape), _str(role))
               for n, d, shape, role in sig["tensors"]]
    groups = {role: tuple(t for t in tensors if t.role == role)
              for role in ("input", "output", "local")}
    if sum(map(len, groups.values())) != len(tensors) or not isinstance(src["specialized"],
                                                                         bool):
        raise ValueError("a tensor role or a flag is not one polyopt writes")
    signature = Signature(_str(sig["name"]), _strs(sig["sizes"]), groups["input"],
                          groups["output"], groups["local"])
    source = KernelSource(_str(src["name"]), _str(src["symbol"]), _str(src["text"]),
                          _strs(src["buffers"]), _strs(src["dims"]), _strs(src["gathers"]),
                          src["specialized"], _str(src["target"]), _strs(src["slices"]),
                          roles=_strs(src["roles"]), tails=_tails(src["tails"]),
                          once=None if src["once"] is None else _str(src["once"]),
                          held=_strs(src["held"]))
    return Compiled(signature, source, _strs(payload.get("warnings", [])))


def _tails(values: Any) -> tuple[tuple[str, int], ...]:
    """``KernelSource.tails`` from a record: pairs of a local's name and a count."""
    if not isinstance(values, list):
        raise TypeError(f"expected a list, got {type(values).__name__}")
    out = []
    for pair in values:
        if not (isinstance(pair, list) and len(pair) == 2 and type(pair[1]) is int
                and pair[1] >= 0):
            raise ValueError("a tail is not a [name, count] pair")
        out.append((_str(pair[0]), pair[1]))
    return tuple(out)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _strs(values: Any) -> tuple[str, ...]:
    if not isinstance(values, list):
        raise TypeError(f"expected a list, got {type(values).__name__}")
    return tuple(_str(v) for v in values)
