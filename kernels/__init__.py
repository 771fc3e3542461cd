"""Operator definitions (.tc files) shipped with polyopt.

The library is plain TC text, one family per file (``matmul.tc``, ``conv.tc``, ``pool.tc``,
``norm.tc``, ``epilogue.tc``, ``polybench.tc``, and PolyBench's recurrences in ``stencil.tc``,
``solver.tc``, ``medley.tc``); a ``#`` comment above each def gives its
NumPy equivalent. This module only reads and rewrites that text; it never imports the
compiler::

    from polyopt import compile
    from polyopt.kernels import get
    conv = compile(get("conv2d", stride=2, padding=1), "conv2d")

``get(name, **params)`` returns the source of the single def ``name``. Keyword arguments
override the defaults of its ``<...>`` integer parameters and accept:

- the parameter names themselves, e.g. ``SH=2`` (see ``params(name)``);
- ``stride``, ``padding``, ``dilation``, ``kernel_size``: an int or an ``(h, w)`` pair, mapped
  onto ``SH, SW`` / ``PH, PW`` / ``DH, DW`` / ``KH, KW`` where the def has them;
  for the pools, a ``kernel_size`` without ``stride`` also sets the stride (as PyTorch does);
- ``groups``, ``in_channels``, ``out_channels`` for ``conv2d`` and ``conv2d_grouped``:
  ``groups > 1`` (which needs both channel counts, each divisible by ``groups``) returns the
  grouped body of ``conv2d_grouped``, still named as requested, with ``FG = out_channels //
  groups`` and ``CG = in_channels // groups``. Its weight has PyTorch's grouped layout
  ``(out_channels, in_channels // groups, KH, KW)``. ``groups=1`` leaves ``conv2d`` as it is.

Padding widths may be 0; every other parameter must be a positive int. The language wants
``<...>`` parameters positive, so get() writes a parameter whose value is 0 (no padding, the
default) into the body as the literal ``0`` and drops it from the ``<...>`` list; pass a
nonzero ``padding`` to keep ``PH``/``PW`` as parameters. Unknown kernel names and unknown or
invalid parameters raise ``polyopt.OptionError``.
"""

from __future__ import annotations

import difflib
import numbers
import re
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable

from polyopt.errors import OptionError, PolyoptError

__all__ = ["families", "get", "names", "params", "path", "source"]

_DEF_RE = re.compile(r"^[ \t]*def[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
_HEADER_RE = r"def[ \t]+{name}[ \t]*<([^>]*)>"
_PARAM_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:=\s*([0-9]+))?\s*$")

# Friendly keyword -> the (height, width) pair of <...> parameters it sets.
_PAIRS: dict[str, tuple[str, str]] = {
    "stride": ("SH", "SW"),
    "padding": ("PH", "PW"),
    "dilation": ("DH", "DW"),
    "kernel_size": ("KH", "KW"),
}
# Defs that understand groups / in_channels / out_channels, and the def giving the grouped body.
_GROUPED: dict[str, str] = {"conv2d": "conv2d_grouped", "conv2d_grouped": "conv2d_grouped"}
_GROUP_KEYS = ("groups", "in_channels", "out_channels")
_POOLS = ("maxpool2d", "avgpool2d")


def _files() -> list[Traversable]:
    root = resources.files(__name__)
    return sorted((f for f in root.iterdir() if f.name.endswith(".tc")), key=lambda f: f.name)


@lru_cache(maxsize=1)
def _library() -> dict[str, tuple[str, str]]:
    """def name -> (file name, text of the def with the comment block directly above it)."""
    out: dict[str, tuple[str, str]] = {}
    for f in _files():
        for name, text in _split(f.read_text(encoding="utf-8")):
            if name in out:
                raise PolyoptError(f"kernel {name!r} is defined in both {out[name][0]} "
                                   f"and {f.name}")
            out[name] = (f.name, text)
    return out


def _split(text: str) -> list[tuple[str, str]]:
    """Split a .tc file into its defs; each keeps the ``#`` lines directly above it."""
    lines = text.splitlines()
    heads: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        m = _DEF_RE.match(line)
        if m:
            heads.append((i, m.group(1)))
    starts = []
    for i, _ in heads:
        s = i
        while s > 0 and lines[s - 1].lstrip().startswith("#"):
            s -= 1
        starts.append(s)
    out = []
    for k, (_, name) in enumerate(heads):
        end = starts[k + 1] if k + 1 < len(heads) else len(lines)
        body = lines[starts[k]:end]
        while body and not body[-1].strip():
            body.pop()
        out.append((name, "\n".join(body) + "\n"))
    return out


def names() -> list[str]:
    """Sorted names of every def in the library."""
    return sorted(_library())


def families() -> list[str]:
    """The library's files, without ``.tc`` (``conv``, ``matmul``, ...)."""
    return [f.name[:-3] for f in _files()]


def _check_name(name: str) -> None:
    if name not in _library():
        close = difflib.get_close_matches(name, names(), n=5, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise OptionError(f"unknown kernel {name!r}{hint} (polyopt.kernels.names() lists all "
                          f"{len(_library())})")


def path(name: str) -> Traversable:
    """The .tc file that holds def ``name`` (or the family ``name``, e.g. ``"conv"``).

    A ``pathlib.Path`` for a normal install; in general an ``importlib.resources`` Traversable.
    """
    for f in _files():
        if f.name == f"{name}.tc":
            return f
    _check_name(name)
    fname = _library()[name][0]
    return resources.files(__name__) / fname


def source(name: str) -> str:
    """The text of def ``name`` exactly as the library has it (defaults unchanged)."""
    _check_name(name)
    return _library()[name][1]


def _header(name: str, text: str) -> list[tuple[str, int | None]]:
    m = re.search(_HEADER_RE.format(name=re.escape(name)), text)
    if m is None:
        return []
    out: list[tuple[str, int | None]] = []
    for item in m.group(1).split(","):
        if not item.strip():
            continue
        pm = _PARAM_RE.match(item)
        if pm is None:  # pragma: no cover - only if a library file is malformed
            raise PolyoptError(f"cannot read the <...> parameter {item.strip()!r} of {name}")
        out.append((pm.group(1), None if pm.group(2) is None else int(pm.group(2))))
    return out


def params(name: str) -> dict[str, int | None]:
    """The ``<...>`` parameters of def ``name`` and their defaults (None: no default)."""
    return dict(_header(name, source(name)))


def _valid_keys(name: str) -> list[str]:
    ps = params(name)
    keys = list(ps)
    keys += [k for k, (h, w) in _PAIRS.items() if h in ps and w in ps]
    if name in _GROUPED:
        keys += list(_GROUP_KEYS)
    return keys


def _int(key: str, value: object, minimum: int) -> int:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)  # numpy integers are fine too
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        need = "a non-negative int" if minimum == 0 else "a positive int"
        raise OptionError(f"{key}={value!r}: must be {need}")
    return value


def _pair(key: str, value: object, minimum: int) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise OptionError(f"{key}={value!r}: give an int or an (h, w) pair")
        return _int(key, value[0], minimum), _int(key, value[1], minimum)
    v = _int(key, value, minimum)
    return v, v


def _minimum(param: str) -> int:
    return 0 if param in ("PH", "PW") else 1


def get(name: str, **kw: object) -> str:
    """Source text of the single def ``name``, with ``<...>`` defaults overridden by ``kw``.

    See the module docstring for the accepted keywords.
    """
    _check_name(name)
    valid = _valid_keys(name)
    unknown = [k for k in kw if k not in valid]
    if unknown:
        shown = ", ".join(valid) if valid else "none"
        close = {c for k in unknown for c in difflib.get_close_matches(k, valid, n=2, cutoff=0.6)}
        hint = f" (did you mean {', '.join(sorted(close))}?)" if close else ""
        raise OptionError(f"unknown parameter(s) {', '.join(unknown)} for kernel {name!r}{hint}; "
                          f"valid ones: {shown}")

    body_name = name
    values: dict[str, int] = {}
    given_by: dict[str, str] = {}

    def assign(param: str, value: int, key: str) -> None:
        if param in values and given_by[param] != key:
            raise OptionError(f"{param} is set twice, by {given_by[param]} and by {key}")
        values[param] = value
        given_by[param] = key

    if name in _GROUPED:
        groups = _int("groups", kw.get("groups", 1), 1)
        cin, cout = kw.get("in_channels"), kw.get("out_channels")
        if groups > 1 or (name == "conv2d_grouped" and (cin is not None or cout is not None)):
            if cin is None or cout is None:
                raise OptionError(f"{name} with groups={groups} needs in_channels= and "
                                  "out_channels=")
            ci, co = _int("in_channels", cin, 1), _int("out_channels", cout, 1)
            if ci % groups or co % groups:
                raise OptionError(f"in_channels={ci} and out_channels={co} must both be "
                                  f"divisible by groups={groups}")
            body_name = _GROUPED[name]
            assign("FG", co // groups, "out_channels")
            assign("CG", ci // groups, "in_channels")
        else:
            for key in ("in_channels", "out_channels"):
                if key in kw:
                    _int(key, kw[key], 1)

    ps = params(body_name)
    for key, value in kw.items():
        if key in _GROUP_KEYS:
            continue
        if key in _PAIRS:
            h, w = _PAIRS[key]
            vh, vw = _pair(key, value, _minimum(h))
            assign(h, vh, key)
            assign(w, vw, key)
        else:
            assign(key, _int(key, value, _minimum(key)), key)
    if name in _POOLS and "kernel_size" in kw and "stride" not in kw:
        for k, s in (("KH", "SH"), ("KW", "SW")):
            if s not in values:
                values[s] = values[k]
                given_by[s] = "kernel_size"

    text = source(body_name)
    if body_name != name:
        text = re.sub(rf"\bdef([ \t]+){re.escape(body_name)}\b", rf"def\g<1>{name}", text)
    merged = {p: values.get(p, d) for p, d in ps.items()}
    zeros = [p for p, v in merged.items() if v == 0]
    if not values and not zeros:
        return text
    inner = ", ".join(p if v is None else f"{p}={v}" for p, v in merged.items() if v != 0)
    header = f"def {name}<{inner}>" if inner else f"def {name}"
    text = re.sub(_HEADER_RE.format(name=re.escape(name)), lambda _m: header, text, count=1)
    if zeros:
        # <...> parameters must be positive, so a zero (no padding) is written as a literal.
        at = _DEF_RE.search(text)
        assert at is not None
        body = text[at.start():]
        for p in zeros:
            body = re.sub(rf"\b{p}\b", "0", body)
        text = text[:at.start()] + body
    return text
