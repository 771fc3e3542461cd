"""Private scratch directories in the system temp dir, and removal of the ones left behind.

Compiles run in a ``polyopt-cc-*`` (or ``polyopt-nvcc-*``) directory removed when the compile
ends; uncached objects go to one ``polyopt-nocache-*`` directory per process, removed when
the process exits. Each directory is made by ``mkdtemp`` (mode 0700) and holds an ``flock``
on a lock file inside it for as long as it is in use, so a later process can tell one whose
owner was killed (lockable) from one in use (locked) without guessing from its age: the first
scratch directory a process asks for removes the stale ones that belong to the same user.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl

    _HAVE_FLOCK = True
except ImportError:  # pragma: no cover - non-POSIX: directories are removed on exit only
    _HAVE_FLOCK = False

PREFIXES = ("polyopt-cc-", "polyopt-nocache-", "polyopt-nvcc-", "polyopt-selftest-")
_LOCK = ".polyopt-lock"
_GRACE_S = 60.0
"""A lock file younger than this may not be locked yet (it is locked right after creation)."""
_UNLOCKED_STALE_S = 86400.0
"""A directory without a lock file (made by an older polyopt) is stale after a day."""

_CLEANED: set[str] = set()
_PROCESS_DIRS: dict[tuple[int, str], Path] = {}


@contextlib.contextmanager
def private_tempdir(prefix: str) -> Iterator[Path]:
    """A new directory ``<tempdir>/<prefix>*`` (mode 0700) for the block, then removed."""
    clean_stale()
    path = Path(tempfile.mkdtemp(prefix=prefix))
    fd = _hold(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


def process_dir() -> Path:
    """This process's ``polyopt-nocache-*`` directory, removed when the process exits (or,
    if it is killed, by the next process's :func:`clean_stale`)."""
    slot = (os.getpid(), tempfile.gettempdir())  # a forked child makes its own
    path = _PROCESS_DIRS.get(slot)
    if path is None or not path.is_dir():
        clean_stale()
        path = Path(tempfile.mkdtemp(prefix="polyopt-nocache-"))
        atexit.register(_remove, path, _hold(path), os.getpid())
        _PROCESS_DIRS[slot] = path
    return path


def clean_stale() -> None:
    """Remove this user's scratch directories whose owner is gone (once per temp dir and
    process: listing a busy ``/tmp`` costs a few milliseconds)."""
    tmp = tempfile.gettempdir()
    if tmp in _CLEANED:
        return
    _CLEANED.add(tmp)
    try:
        names = [n for n in os.listdir(tmp) if n.startswith(PREFIXES)]
    except OSError:
        return
    now = time.time()
    for name in names:
        path = Path(tmp) / name
        if _stale(path, now):
            shutil.rmtree(path, ignore_errors=True)


def _stale(path: Path, now: float) -> bool:
    """Whether ``path`` is our directory and nobody holds its lock (or, with no lock file,
    it is older than a day)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or not _HAVE_FLOCK:
        return False
    flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path / _LOCK, flags)
    except FileNotFoundError:
        return now - st.st_mtime > _UNLOCKED_STALE_S
    except OSError:
        return False
    try:
        if now - os.fstat(fd).st_mtime < _GRACE_S:
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # locked: its owner is alive
        return False
    finally:
        os.close(fd)
    return True


def _hold(path: Path) -> int:
    """Create ``path``'s lock file and lock it; the descriptor keeps the lock until closed."""
    flags = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))
    fd = os.open(path / _LOCK, flags, 0o600)
    if _HAVE_FLOCK:
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _remove(path: Path, fd: int, owner: int) -> None:
    if os.getpid() == owner:  # not in a forked child that exits through atexit
        shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.close(fd)
