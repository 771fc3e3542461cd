"""On-disk cache of compiled shared objects, shared safely between processes.

Layout under ``<cache_dir>``::

    c/<key[:2]>/<key>.so     the object
    c/<key[:2]>/<key>.c      its source, kept for debugging
    c/<key[:2]>/<key>.json   metadata: format, key, size and sha256 of the .so, compiler, flags
    c/<key[:2]>/<key>.lock   flock target; serialises builds of one key across processes
    failed/<key>.c           sources the compiler rejected
    objects/, kernels/, checked/   small JSON records that let a process skip work an
                             earlier one did (:mod:`.records`, :mod:`.warm`)

Every file is written to a temp file in its final directory and moved with ``os.replace``, and
the ``.json`` is written last: an entry counts only when the metadata's checksum matches the
``.so``, so a reader never returns a half-written or corrupt object. Readers take no lock; a
miss or a bad entry is re-checked under the key's lock before it is (re)built, so concurrent
processes build one key once and all get a valid object.

The checksum guards against corruption, not against other users: whoever can write the
``.so`` can write its ``.json``. So an entry is read only when it and every directory from
the cache root down could only have been written by the current user, and it is read under
the rule of :func:`.trust.read_trusted` (a regular file, no larger than its kind's cap, opened
without following a symlink or blocking on a FIFO); a root that fails the check is refused,
with a warning, for a private ``<tempdir>/polyopt-<uid>``. Directories are created 0700,
files 0600 (objects 0700).
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

from polyopt import trust

try:
    import fcntl

    _HAVE_FLOCK = True
except ImportError:  # pragma: no cover - non-POSIX: atomic writes alone keep entries valid
    _HAVE_FLOCK = False

CACHE_FORMAT = 1
"""Bump when the layout or the key's recipe changes, so old entries are never reused."""

logger = logging.getLogger("polyopt.runtime")
warn_once = trust.warn_once

_MEMORY: dict[tuple[str, str], Path] = {}
_ROOTS: dict[tuple[str, str], Path] = {}


def cache_key(source: str, identity: str, flags: Sequence[str]) -> str:
    """sha256 over an unambiguous encoding of everything the object depends on."""
    blob = json.dumps({"format": CACHE_FORMAT, "compiler": identity, "flags": list(flags),
                       "source": source}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def entry_path(cache_dir: Path, key: str, suffix: str = ".so") -> Path:
    """Where the entry's file with ``suffix`` (.so, .c, .json, .lock) lives."""
    return Path(cache_dir) / "c" / key[:2] / f"{key}{suffix}"


def usable_root(configured: Path, key: str | None = None) -> Path:
    """The cache root to use (:func:`.trust.choose_root`: ``configured``, or the private
    fallback when others could have written to it), with the directories down to the key's.
    Remembered per process (``lookup`` checks the directories again before it reads an
    entry from disk)."""
    memo = (str(configured), key[:2] if key else "")
    if memo not in _ROOTS:
        relative = Path("c", key[:2]) if key else Path()
        _ROOTS[memo] = trust.choose_root(Path(configured), relative)
    return _ROOTS[memo]


def lookup(cache_dir: Path, key: str) -> Path | None:
    """The verified object for ``key``: from memory, else from disk if its checksum holds and
    only we could have written it. Raises :class:`~.trust.UntrustedLocationError` when a
    directory from ``cache_dir`` down to the entry's is not ours alone."""
    mem = (str(cache_dir), key)
    hit = _MEMORY.get(mem)
    if hit is not None:
        return hit
    so = entry_path(cache_dir, key)
    check_tree(Path(cache_dir), Path("c", key[:2]))
    meta = read_file(entry_path(cache_dir, key, ".json"), "metadata")
    data = None if meta is None else read_file(so, "object")
    if meta is None or data is None or not _verify(so, meta, data, key):
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
    trust.make_private_dirs(Path(cache_dir), Path("c", key[:2]))
    meta = {**info, "format": CACHE_FORMAT, "key": key, "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "created": time.time()}
    atomic_write(entry_path(cache_dir, key, ".c"), source.encode())
    atomic_write(so, data, mode=0o700)
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
        path = trust.make_private_dirs(Path(cache_dir).resolve(), Path("failed")) / f"{key}.c"
        atomic_write(path, source.encode())
    except OSError:
        path = Path(tempfile.mkdtemp(prefix="polyopt-failed-")) / f"{key}.c"
        path.write_text(source)
    return path


def clear_memory() -> None:
    """Drop the in-process index and chosen roots (tests use it to force a disk lookup)."""
    _MEMORY.clear()
    _ROOTS.clear()


def check_tree(root: Path, relative: Path) -> None:
    """Raise :class:`~.trust.UntrustedLocationError` when a directory from ``root`` down to
    ``root / relative`` is not ours alone."""
    found = trust.tree_problem(root, relative)
    if found is not None:
        raise trust.UntrustedLocationError(f"{found[0]} {found[1]}")


def read_file(path: Path, kind: str) -> bytes | None:
    """The bytes of the cache file ``path`` of ``kind`` (a key of :data:`.trust.CAPS`), read
    under :func:`.trust.read_trusted`; None when it is missing or cannot be read, and when it
    is refused (with a warning, once), so that the caller makes it again. Check the
    directories above it first (:func:`check_tree`)."""
    try:
        return trust.read_trusted(path, trust.CAPS[kind])
    except FileNotFoundError:
        return None
    except trust.UntrustedLocationError as exc:
        warn_once(f"refusing the cache entry {exc}; making it again")
    except OSError as exc:
        logger.info("unreadable cache entry %s (%s); making it again", path, exc)
    return None


def trusted_files(root: Path, relative: Path, *files: Path) -> bool:
    """Whether ``files`` (those that exist) are regular files only we could have written.
    Raises :class:`~.trust.UntrustedLocationError` when a directory from ``root`` down to
    ``root / relative`` is not ours alone; warns (once) about a refused file. Only looks
    (``lstat``): read what passes with :func:`read_file`, which checks again as it reads."""
    check_tree(root, relative)
    for path in files:
        why = trust.file_problem(path)
        if why is not None:
            warn_once(f"refusing the cache entry {path}: it {why}; rebuilding it")
            return False
    return True


@contextlib.contextmanager
def locked(cache_dir: Path, key: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the key's lock file (a no-op where flock is missing)."""
    path = entry_path(cache_dir, key, ".lock")
    trust.make_private_dirs(Path(cache_dir), Path("c", key[:2]))
    if not _HAVE_FLOCK:  # pragma: no cover
        yield
        return
    fd = trust.open_lock(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def atomic_write(path: Path, data: bytes, mode: int = 0o600, *, sync: bool = True) -> None:
    """Write via a temp file in the same directory and ``os.replace`` it into place. The temp
    file is created exclusively (``mkstemp``), so a planted symlink is never followed.
    ``sync=False`` skips the ``fsync``, for what a crash may lose (a checksum catches a torn
    file, and it is made again)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _verify(so: Path, text: bytes, data: bytes, key: str) -> bool:
    """Whether the object ``data`` matches its metadata ``text``; logs why it does not."""
    try:
        meta = json.loads(text)
    except ValueError as exc:
        logger.info("unreadable cache entry %s (%s); rebuilding", so, exc)
        return False
    good = (isinstance(meta, dict) and meta.get("format") == CACHE_FORMAT
            and meta.get("key") == key and meta.get("size") == len(data)
            and meta.get("sha256") == hashlib.sha256(data).hexdigest())
    if not good:
        logger.info("corrupt cache entry %s (checksum or metadata mismatch); rebuilding", so)
    return good
