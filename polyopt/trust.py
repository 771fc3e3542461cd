"""Whether a file or directory can only have been written by the current user (or root),
and reading such a file safely: the one rule for everything polyopt reads from a cache root.

A cached object is code that runs as whoever loads it, and a checksum stored next to it
proves nothing: who can replace the object can replace the checksum. So, like CPython's
``__pycache__``, ccache and pip, polyopt trusts a cache location only when nobody else could
have written to it: the directory and everything polyopt reads in it must be owned by the
current user and not writable by group or others, and every directory above it owned by the
user or root and not writable by all unless sticky (``/tmp``), since whoever can write to a
parent can rename the directory away and put their own in its place. (Group-writable parents
pass: with a user-private group, the umask 002 that many systems use makes ``~/.cache`` so.)
Directories are created ``0700`` and files ``0600``; lock files are opened without following
symlinks.

A file is read with :func:`read_trusted`: opened without following a symlink and without
blocking (a FIFO would hang the open or the read, a symlink to ``/dev/zero`` would read until
memory runs out), then refused unless ``fstat`` shows a regular file of ours, not writable by
group or others, and no larger than the cap of its kind (:data:`CAPS`); at most cap + 1
bytes are read. A refused file is ignored with one warning (:func:`warn_once`).

The checks read the modes and owners themselves (``lstat``, ``fstat``), so they hold for
root too, whom the kernel's permission bits would not stop.

This module is in the core layer, below the machine model, which reads the host's profile
under the same rule; the runtime's cache uses it too.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from polyopt.errors import PolyoptError

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_ROOT_UID = 0
_READ_FLAGS = os.O_RDONLY | sum(getattr(os, flag, 0) for flag in (
    "O_NONBLOCK", "O_NOCTTY", "O_NOFOLLOW", "O_CLOEXEC", "O_BINARY"))

CAPS: dict[str, int] = {
    "object": 256 << 20,  # a compiled kernel (.so, .cubin): the largest polyopt makes ~2 MiB
    "metadata": 64 << 10,  # an object's .json (~300 bytes), a ptxas log
    "record": 16 << 20,  # a record (``runtime.records``): kernels records hold C source
    "profile": 1 << 20,  # a machine profile (``polyopt machine --calibrate``, ~1 KiB)
    "database": 4 << 30,  # the tuning database (a record is a few KiB: ~1e6 records)
}
"""The most bytes of each kind of cache file polyopt reads; a larger file is refused. Far
above what polyopt writes, far below what would exhaust memory."""

logger = logging.getLogger("polyopt.runtime")
_WARNED: set[str] = set()


class UntrustedLocationError(PolyoptError, OSError):
    """A cache location that someone other than the current user could have written to."""


def enforced() -> bool:
    """Whether the platform has owners to check (POSIX); elsewhere every check passes."""
    return hasattr(os, "geteuid")


def dir_problem(path: Path, *, sticky_ok: bool = False) -> str | None:
    """Why ``path`` is not a directory only we could have written to, or None when it is.
    ``sticky_ok``: a directory writable by all but sticky (like ``/tmp``) is fine too,
    owned by us or root, since others cannot replace what we create in it."""
    if not enforced():
        return None
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot be examined ({exc.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "is a symlink" if stat.S_ISLNK(st.st_mode) else "is not a directory"
    if sticky_ok and st.st_mode & stat.S_ISVTX and st.st_uid in (os.geteuid(), _ROOT_UID):
        return None
    return _owner_problem(st)


def file_problem(path: Path) -> str | None:
    """Why ``path`` is not a regular file only we could have written, or None when it is
    (or when it does not exist: there is nothing to trust or distrust)."""
    if not enforced():
        return None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be examined ({exc.strerror})"
    return _kind_problem(st) or _owner_problem(st)


def ancestors_problem(path: Path) -> tuple[Path, str] | None:
    """The first directory above ``path`` (resolved) that others could write to: one not
    owned by us or root, or writable by all without the sticky bit."""
    for parent in path.parents:
        try:
            st = os.stat(parent)
        except OSError as exc:
            return parent, f"cannot be examined ({exc.strerror})"
        if st.st_uid not in (os.geteuid(), _ROOT_UID):
            return parent, f"is owned by uid {st.st_uid}"
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            return parent, "is writable by all and not sticky"
    return None


def tree_problem(root: Path, relative: Path = Path()) -> tuple[Path, str] | None:
    """The first untrusted directory among ``root``'s parents, ``root`` itself (which may be
    sticky, like ``/tmp``) and the existing levels of ``root / relative``."""
    if not enforced():
        return None
    found = ancestors_problem(root)
    if found is not None:
        return found
    why = dir_problem(root, sticky_ok=True)
    if why is not None:
        return root, why
    path = root
    for part in relative.parts:
        path = path / part
        if not os.path.lexists(path):
            break
        why = dir_problem(path)
        if why is not None:
            return path, why
    return None


def make_private_dirs(root: Path, relative: Path = Path()) -> Path:
    """Create the missing levels of ``root / relative`` (and of ``root``'s parents) with mode
    0700, then check them all; raises :class:`UntrustedLocationError` naming the first bad
    directory, or OSError when one cannot be created."""
    target = root / relative
    missing = [p for p in (target, *target.parents) if not os.path.lexists(p)]
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it: checked below
            os.mkdir(path, 0o700)  # the umask can only take bits away
    found = tree_problem(root, relative)
    if found is not None:
        raise UntrustedLocationError(f"{found[0]} {found[1]}")
    return target


def open_lock(path: Path) -> int:
    """A file descriptor of the lock file ``path``, created 0600 if missing. Never follows a
    symlink (a planted ``<key>.lock -> ~/.bashrc`` would make us create or touch its target)
    and refuses a file someone else owns; raises :class:`UntrustedLocationError` then."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UntrustedLocationError(f"lock file {path} is a symlink") from None
        raise
    why = _owner_problem(os.fstat(fd)) if enforced() else None
    if why is not None:
        os.close(fd)
        raise UntrustedLocationError(f"lock file {path} {why}")
    return fd


def _owner_problem(st: os.stat_result) -> str | None:
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by the current user (uid {os.geteuid()})"
    if st.st_mode & _OTHERS_WRITE:
        return f"is writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


@contextlib.contextmanager
def opened(path: Path, cap: int) -> Iterator[tuple[int, os.stat_result]]:
    """A read-only file descriptor of ``path`` and its ``fstat``, when it is a regular file
    only we could have written, of at most ``cap`` bytes. Opened without following a symlink
    and without blocking; raises :class:`UntrustedLocationError` naming the file and why,
    FileNotFoundError when it is missing, OSError when it cannot be opened."""
    why = _kind_problem(os.lstat(path))  # never open a device, not even without blocking
    if why is not None:
        raise UntrustedLocationError(f"{path} {why}")
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # replaced by a symlink since the lstat
            raise UntrustedLocationError(f"{path} is a symlink") from None
        raise
    try:
        st = os.fstat(fd)
        why = _kind_problem(st) or (_owner_problem(st) if enforced() else None)
        if why is None and st.st_size > cap:
            why = f"is larger than the {cap}-byte cap of its kind ({st.st_size} bytes)"
        if why is not None:
            raise UntrustedLocationError(f"{path} {why}")
        yield fd, st
    finally:
        os.close(fd)


def read_trusted(path: Path, cap: int) -> bytes:
    """The contents of ``path`` under the rule of :func:`opened`; at most ``cap`` + 1 bytes
    are read, so a file that grows past the cap while read is refused too."""
    with opened(path, cap) as (fd, _):
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(fd, min(cap + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    if size > cap:
        raise UntrustedLocationError(f"{path} grew past the {cap}-byte cap of its kind")
    return b"".join(chunks)


def choose_root(configured: Path, relative: Path = Path()) -> Path:
    """The cache root to use: ``configured`` when nobody else could have written to it, else
    the private :func:`fallback_root` (with a warning, once per refusal). Creates the missing
    directories down to ``relative`` (mode 0700) and checks them. Raises
    :class:`UntrustedLocationError` when neither root can be trusted, OSError when neither
    can be created."""
    root = configured.expanduser().resolve()
    try:
        make_private_dirs(root, relative)
        return root
    except UntrustedLocationError as exc:
        fallback = fallback_root()
        warn_once(f"refusing the cache dir {root}: {exc}; using {fallback} instead")
    try:
        make_private_dirs(fallback, relative)
    except UntrustedLocationError as exc:
        raise UntrustedLocationError(f"neither the cache dir {root} nor the fallback "
                                     f"{fallback} can be trusted ({exc})") from None
    return fallback


def fallback_root() -> Path:
    """The private cache used when the configured one is refused: ``<tempdir>/polyopt-<uid>``."""
    user = os.geteuid() if enforced() else "user"
    return Path(tempfile.gettempdir()).resolve() / f"polyopt-{user}"


def warn_once(message: str) -> None:
    """A warning on the runtime's logger, once per process for each message."""
    if message not in _WARNED:
        _WARNED.add(message)
        logger.warning(message)


def _kind_problem(st: os.stat_result) -> str | None:
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISDIR, "a directory"))
    kind = next((name for test, name in kinds if test(st.st_mode)), "special")
    return f"is not a regular file ({kind})"
