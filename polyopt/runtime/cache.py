"""On-disk cache of compiled shared objects, shared safely between processes.

Layout under ``<cache_dir>``::

    c/<key[:2]>/<key>.so     the object
    c/<key[:2]>/<key>.c      its source, kept for debugging
    c/<key[:2]>/<key>.json   metadata: format, key, size and sha256 of the .so, compiler, flags
    c/<key[:2]>/<key>.lock   flock target; serialises builds of one key across processes
    failed/<key>.c           sources the compiler rejected

Every file is written to a temp file in its final directory and moved with ``os.replace``, and
the ``.json`` is written last: an entry counts only when the metadata's checksum matches the
``.so``, so a reader never returns a half-written or corrupt object. Readers take no lock; a
miss or a bad entry is re-checked under the key's lock before it is (re)built, so concurrent
processes build one key once and all get a valid object.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

try:
    import fcntl

    _HAVE_FLOCK = True
except ImportError:  # pragma: no cover - non-POSIX: atomic writes alone keep entries valid
    _HAVE_FLOCK = False

CACHE_FORMAT = 1
"""Bump when the layout or the key's recipe changes, so old entries are never reused."""

logger = logging.getLogger("polyopt.runtime")

_MEMORY: dict[tuple[str, str], Path] = {}


def cache_key(source: str, identity: str, flags: Sequence[str]) -> str:
    """sha256 over an unambiguous encoding of everything the object depends on."""
    blob = json.dumps({"format": CACHE_FORMAT, "compiler": identity, "flags": list(flags),
                       "source": source}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def entry_path(cache_dir: Path, key: str, suffix: str = ".so") -> Path:
    """Where the entry's file with ``suffix`` (.so, .c, .json, .lock) lives."""
    return Path(cache_dir) / "c" / key[:2] / f"{key}{suffix}"


def lookup(cache_dir: Path, key: str) -> Path | None:
    """The verified object for ``key``: from memory, else from disk if its checksum holds."""
    mem = (str(cache_dir), key)
    hit = _MEMORY.get(mem)
    if hit is not None:
        return hit
    so = entry_path(cache_dir, key)
    if not _verify(so, entry_path(cache_dir, key, ".json"), key):
        return None
    _MEMORY[mem] = so
    return so


def get_or_build(cache_dir: Path, key: str, source: str, build: Callable[[], bytes],
                 info: Mapping[str, object]) -> Path:
    """The cached object for ``key``, calling ``build`` (under the key's lock) on a miss."""
    hit = lookup(cache_dir, key)
    if hit is not None:
        return hit
    with locked(cache_dir, key):
        hit = lookup(cache_dir, key)
        if hit is not None:
            return hit
        logger.debug("cache miss %s", key)
        return store(cache_dir, key, build(), source, info)


def store(cache_dir: Path, key: str, data: bytes, source: str,
          info: Mapping[str, object]) -> Path:
    """Write an entry atomically (source, object, then metadata) and remember it in memory."""
    so = entry_path(cache_dir, key)
    so.parent.mkdir(parents=True, exist_ok=True)
    meta = {**info, "format": CACHE_FORMAT, "key": key, "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "created": time.time()}
    atomic_write(entry_path(cache_dir, key, ".c"), source.encode())
    atomic_write(so, data)
    atomic_write(entry_path(cache_dir, key, ".json"), json.dumps(meta, indent=1).encode())
    _MEMORY[(str(cache_dir), key)] = so
    return so


def invalidate(cache_dir: Path, key: str) -> None:
    """Forget a bad entry (memory and disk), metadata first so no reader trusts the rest."""
    _MEMORY.pop((str(cache_dir), key), None)
    with contextlib.suppress(OSError), locked(cache_dir, key):
        for suffix in (".json", ".so"):
            with contextlib.suppress(FileNotFoundError):
                entry_path(cache_dir, key, suffix).unlink()


def save_failed(cache_dir: Path, key: str, source: str) -> Path:
    """Keep a rejected source for the user; a temp dir if the cache dir is not writable."""
    try:
        path = Path(cache_dir) / "failed" / f"{key}.c"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, source.encode())
    except OSError:
        path = Path(tempfile.mkdtemp(prefix="polyopt-failed-")) / f"{key}.c"
        path.write_text(source)
    return path


def clear_memory() -> None:
    """Drop the in-process index (tests use it to force a disk lookup)."""
    _MEMORY.clear()


@contextlib.contextmanager
def locked(cache_dir: Path, key: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the key's lock file (a no-op where flock is missing)."""
    path = entry_path(cache_dir, key, ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    if not _HAVE_FLOCK:  # pragma: no cover
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temp file in the same directory and ``os.replace`` it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _verify(so: Path, meta_path: Path, key: str) -> bool:
    """Whether ``so`` exists and matches its metadata; logs why a present entry is rejected."""
    try:
        meta = json.loads(meta_path.read_text())
        data = so.read_bytes()
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:
        logger.info("unreadable cache entry %s (%s); rebuilding", so, exc)
        return False
    good = (isinstance(meta, dict) and meta.get("format") == CACHE_FORMAT
            and meta.get("key") == key and meta.get("size") == len(data)
            and meta.get("sha256") == hashlib.sha256(data).hexdigest())
    if not good:
        logger.info("corrupt cache entry %s (checksum or metadata mismatch); rebuilding", so)
    return good
