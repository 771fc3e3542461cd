"""The single registry of polyopt's environment knobs, read at call time (never at import).

=====================  ==========================================  ===============================
Variable               Meaning                                     Default
=====================  ==========================================  ===============================
``POLYOPT_CACHE_DIR``  Root of the on-disk cache of compiled       ``platformdirs.user_cache_dir
                       objects (``<dir>/c/``) and of sources the   ("polyopt")``
                       compiler rejected (``<dir>/failed/``).
                       Refused, with a warning, for a private
                       ``<tempdir>/polyopt-<uid>`` when others
                       could write to it (README, Security).
``POLYOPT_NO_CACHE``   Truthy (``1/true/yes/on``) disables the     off
                       disk cache: every compile goes to a fresh
                       temp dir. Falsy: ``0/false/no/off/""``.
``POLYOPT_DEBUG``      Verbosity 0..4. The runtime prints each     ``0``
                       compiler command to stderr at >= 1 and
                       cache decisions at >= 2; 3..4 are for
                       other stages' dumps.
``POLYOPT_PROFILE``    The machine profile ``polyopt machine       ``<cache dir>/machine/
                       --calibrate`` wrote, whose measured         <host fingerprint>.json``
                       fields the host's machine model takes;      (the cache dir in use: the
                       ``none`` reads none. Read as cache files    fallback when the configured
                       are (``polyopt.trust``).                    one is refused)
``CC``                 The C compiler command; may carry           ``cc``
                       arguments (``"ccache gcc"``), split like
                       a shell would.
``POLYOPT_CFLAGS``     Extra compiler flags, shell-split and       none
                       appended after polyopt's own flags.
=====================  ==========================================  ===============================

A malformed value raises :class:`~polyopt.errors.OptionError` naming the variable, so a typo
is reported instead of being silently ignored.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from polyopt import host, trust
from polyopt.errors import OptionError

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})
MAX_DEBUG = 4


@dataclass(frozen=True)
class Config:
    """A snapshot of every knob, taken by :func:`current`."""

    cache_dir: Path
    no_cache: bool
    debug: int
    cc: tuple[str, ...]
    cflags: tuple[str, ...]


def current() -> Config:
    """Read every knob now, so a change to ``os.environ`` takes effect on the next call."""
    return Config(cache_dir=cache_dir(), no_cache=no_cache(), debug=debug_level(),
                  cc=cc_command(), cflags=extra_cflags())


def cache_dir() -> Path:
    """``POLYOPT_CACHE_DIR`` or the platform's per-user cache directory, as configured: the
    runtime checks who could write to it before use (``polyopt.runtime.cache.usable_root``)."""
    value = os.environ.get("POLYOPT_CACHE_DIR", "").strip()
    if value:
        return Path(value).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("polyopt"))


@contextlib.contextmanager
def scratch_cache(parent: Path | str | None = None) -> Iterator[Path]:
    """A new, empty ``POLYOPT_CACHE_DIR`` for the block, which the processes it starts
    (the tuner's workers) inherit: a benchmark's runs then reuse no compiled object and
    leave nothing in the user's cache. Made under ``parent`` and left for its owner to
    remove; without ``parent``, a temporary directory removed on exit."""
    path = Path(tempfile.mkdtemp(prefix="polyopt-cache-", dir=parent))
    old = os.environ.get("POLYOPT_CACHE_DIR")
    os.environ["POLYOPT_CACHE_DIR"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("POLYOPT_CACHE_DIR", None)
        else:
            os.environ["POLYOPT_CACHE_DIR"] = old
        if parent is None:
            shutil.rmtree(path, ignore_errors=True)


def machine_profile() -> Path | None:
    """Where this host's measured machine profile is (whether or not it exists), or None
    when ``POLYOPT_PROFILE=none`` asks for the unmeasured model. By default under the cache
    root in use (:func:`polyopt.trust.choose_root`), never under one that was refused: who
    could write there could choose the model's figures; None (with a warning) when neither
    the cache dir nor its fallback can be used."""
    value = os.environ.get("POLYOPT_PROFILE", "").strip()
    if value.lower() == "none":
        return None
    if value:
        return Path(value).expanduser()
    name = host.fingerprint().replace(":", "-").replace("/", "-")
    try:
        root = trust.choose_root(cache_dir())
    except OSError as exc:  # UntrustedLocationError included
        trust.warn_once(f"no machine profile is read: {exc}")
        return None
    return root / "machine" / f"{name}.json"


def no_cache() -> bool:
    """Whether ``POLYOPT_NO_CACHE`` asks to bypass the disk cache."""
    return _flag("POLYOPT_NO_CACHE")


def guard_scratch() -> bool:
    """Whether ``POLYOPT_GUARD_SCRATCH`` asks for scratch that ends at an inaccessible page
    (``polyopt.runtime.guard``): a kernel reading past a local faults at once."""
    return _flag("POLYOPT_GUARD_SCRATCH")


def debug_level() -> int:
    """``POLYOPT_DEBUG`` as an int in ``0..MAX_DEBUG`` (empty means 0)."""
    value = os.environ.get("POLYOPT_DEBUG", "").strip()
    if not value:
        return 0
    try:
        level = int(value)
    except ValueError:
        level = -1
    if not 0 <= level <= MAX_DEBUG:
        raise OptionError(f"POLYOPT_DEBUG must be an integer 0..{MAX_DEBUG}, got {value!r}")
    return level


def cc_command() -> tuple[str, ...]:
    """``CC`` split into argv words (``cc`` when unset or blank)."""
    words = _split("CC")
    return words or ("cc",)


def extra_cflags() -> tuple[str, ...]:
    """``POLYOPT_CFLAGS`` split into words."""
    return _split("POLYOPT_CFLAGS")


def _flag(name: str) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise OptionError(f"{name} must be one of 1/true/yes/on or 0/false/no/off, got {value!r}")


def _split(name: str) -> tuple[str, ...]:
    value = os.environ.get(name, "")
    try:
        return tuple(shlex.split(value))
    except ValueError as exc:
        raise OptionError(f"{name} is not valid shell words ({exc}): {value!r}") from exc
