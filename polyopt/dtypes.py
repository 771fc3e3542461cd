"""Scalar types of the TC language: numpy and C spellings, promotion, reduction identities."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str  # canonical TC name: float32, int8, bool, ...
    c: str  # C spelling in generated code
    kind: str  # "b" bool, "u" unsigned, "i" signed, "f" float
    bits: int

    @functools.cached_property
    def np(self) -> np.dtype:
        """numpy's dtype (bfloat16's loads ml_dtypes, at its first use: see _numpy_dtype)."""
        return _numpy_dtype(self.name)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_integral(self) -> bool:
        return self.kind in "bui"


def _numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        # numpy has no bfloat16: ml_dtypes (JAX's) adds it as a numpy dtype. Imported here,
        # by the first use of bfloat16, as it takes longer than the rest of `import polyopt`.
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


# numpy's longdouble is C's long double on every platform (x86-64: the 80-bit x87 format in
# 16 bytes), so a kernel computes it exactly as numpy stores it. Its bits are its storage's.
_LONGDOUBLE = DType("longdouble", "long double", "f", 8 * np.dtype(np.longdouble).itemsize)


DTYPES: dict[str, DType] = {d.name: d for d in (
    DType("bool", "bool", "b", 1),
    DType("uint8", "uint8_t", "u", 8), DType("uint16", "uint16_t", "u", 16),
    DType("uint32", "uint32_t", "u", 32), DType("uint64", "uint64_t", "u", 64),
    DType("int8", "int8_t", "i", 8), DType("int16", "int16_t", "i", 16),
    DType("int32", "int32_t", "i", 32), DType("int64", "int64_t", "i", 64),
    # bfloat16 has no C type: the printer keeps it as bits and computes in float.
    DType("float16", "_Float16", "f", 16), DType("bfloat16", "float", "f", 16),
    DType("float32", "float", "f", 32),
    DType("float64", "double", "f", 64),
    _LONGDOUBLE,
)}

# Type names the language accepts, with their canonical name.
TYPE_NAMES: dict[str, str] = {**{n: n for n in DTYPES}, "float": "float32", "double": "float64"}


def get(name: str) -> DType:
    return DTYPES[TYPE_NAMES[name]]


def from_numpy(dtype: np.dtype) -> DType | None:
    """The TC type with numpy dtype ``dtype``, or None for complex, object, ... dtypes."""
    for d in DTYPES.values():
        if d.name == "bfloat16" and "ml_dtypes" not in sys.modules:
            continue  # only ml_dtypes makes bfloat16 arrays: none exist before it is loaded
        if d.np == dtype:
            return d
    return None


def promote(*names: str) -> str:
    """TC's promotion rule (language reference §3.2) over canonical type names."""
    out = DTYPES[names[0]]
    for n in names[1:]:
        out = _promote2(out, DTYPES[n])
    return out.name


def _promote2(a: DType, b: DType) -> DType:
    if a == b:
        return a
    if a.is_float and b.is_float and a.bits == b.bits == 16:  # float16 with bfloat16
        return DTYPES["float32"]
    if a.is_float or b.is_float:
        floats = [d for d in (a, b) if d.is_float]
        return max(floats, key=lambda d: d.bits)
    if a.kind in "bu" and b.kind in "bu":
        return max(a, b, key=lambda d: d.bits)
    return DTYPES[f"int{max(8, a.bits, b.bits)}"]


def identity(op: str, name: str) -> float | int | bool:
    """The value ``op=!`` starts from: 0, 1, +inf or the type's max, -inf or the type's min."""
    d = DTYPES[name]
    if op == "+":
        return 0
    if op == "*":
        return 1
    if d.is_float:
        return float("inf") if op == "min" else float("-inf")
    if d.kind == "b":
        return op == "min"
    info = np.iinfo(d.np)
    return int(info.max) if op == "min" else int(info.min)
