"""Tokens of the TC language (reference §1), with 1-based (line, column) positions."""

from __future__ import annotations

import re
import sys
import warnings
from dataclasses import dataclass

from polyopt.dtypes import TYPE_NAMES
from polyopt.errors import LanguageError, PolyoptWarning, format_at

KEYWORDS = frozenset({"def", "where", "in", "exists", "min", "max", *TYPE_NAMES})

# Longest first, so that the longest match wins.
PUNCT = sorted(
    ["(", ")", ",", "{", "}", "[", "]", "->", ":", "?", "=", "+=", "*=", "+=!", "*=!",
     "+", "-", "*", "/", "%", "<", ">", "<=", ">=", "==", "!=", "&&", "||", "!", "<=>"],
    key=len, reverse=True,
)
ASSIGN_OPS = frozenset({"=", "+=", "*=", "min=", "max=", "+=!", "*=!", "min=!", "max=!"})

INT32_MAX = 2**31 - 1

_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPACE = re.compile(r"(?:\s+|#[^\n]*)+")


@dataclass(frozen=True)
class Token:
    """``kind`` is "ident", "keyword", "int", "float", "punct", "assign" or "eof"."""

    kind: str
    text: str
    pos: tuple[int, int]
    value: int | float | None = None

    def is_(self, kind: str, text: str | None = None) -> bool:
        return self.kind == kind and (text is None or self.text == text)


def tokenize(source: str) -> list[Token]:
    """All tokens of ``source``, ending with an "eof" token."""
    lines = _line_starts(source)
    out: list[Token] = []
    i, n = 0, len(source)
    while True:
        m = _SPACE.match(source, i)
        if m:
            i = m.end()
        pos = _pos(lines, i)
        if i >= n:
            out.append(Token("eof", "", pos))
            return out
        tok = _number(source, i, pos) or _word(source, i, pos) or _punct(source, i, pos)
        if tok is None:
            raise LanguageError(f"unexpected character {source[i]!r}", source, pos)
        out.append(tok)
        i += len(tok.text)


def widen_floats(source: str) -> str:
    """``source`` with every float type name spelled ``float64``: the same definitions
    computed in double precision (the tuner's reference)."""
    lines = _line_starts(source)
    spans = [(lines[t.pos[0] - 1] + t.pos[1] - 1, len(t.text)) for t in tokenize(source)
             if t.kind == "keyword" and TYPE_NAMES.get(t.text, "").startswith("float")]
    out, last = [], 0
    for start, length in spans:
        out += [source[last:start], "float64"]
        last = start + length
    return "".join(out) + source[last:]


def _line_starts(source: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer(r"\n", source)]


def _pos(lines: list[int], offset: int) -> tuple[int, int]:
    lo, hi = 0, len(lines) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if lines[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1, offset - lines[lo] + 1


def _number(source: str, i: int, pos: tuple[int, int]) -> Token | None:
    m = _NUMBER.match(source, i)
    if m is None:
        return None
    text = m.group()
    if text[:2] in ("0x", "0X"):
        value: int | float = int(text, 16)
    elif "." in text or "e" in text or "E" in text:
        if "E" in text and "." not in text and "e" not in text:
            warnings.warn(format_at(
                f"{text!r} is float32 here; TC would read it as an int32 (upper-case E)",
                source, pos), PolyoptWarning, stacklevel=caller_level())
        return Token("float", text, pos, float(text))
    else:
        value = int(text)
    if value > INT32_MAX:
        raise LanguageError(f"integer literal {text} does not fit in int32", source, pos)
    return Token("int", text, pos, value)


def _word(source: str, i: int, pos: tuple[int, int]) -> Token | None:
    m = _IDENT.match(source, i)
    if m is None:
        return None
    text = m.group()
    if text in ("min", "max"):
        rest = source[m.end():m.end() + 2]
        if rest.startswith("=!"):
            return Token("assign", text + "=!", pos)
        if rest.startswith("=") and not rest.startswith("=="):
            return Token("assign", text + "=", pos)
    return Token("keyword" if text in KEYWORDS else "ident", text, pos)


def _punct(source: str, i: int, pos: tuple[int, int]) -> Token | None:
    for p in PUNCT:
        if source.startswith(p, i):
            return Token("assign" if p in ASSIGN_OPS else "punct", p, pos)
    return None


def caller_level() -> int:
    """The ``stacklevel`` of the first frame outside polyopt (the user's call)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("polyopt"):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level
