"""Compile generated C into shared objects with the system compiler, cached, and load them.

``compile_shared`` returns the path of a cached ``.so``; ``load_library`` also ``dlopen``s it
through ctypes, once while it is in use: the library is closed (``dlclose``) when its last
user (a kernel, a ctypes function of it) is collected, so a long-lived process that drops
its kernels drops their mappings too. Compiles run in a
private temp dir (never the working directory) with ``LC_ALL=C`` so logs are predictable.
Uncached objects live in a per-process temp dir removed at exit; ``load_library`` unlinks
them once loaded (the mapping stays valid).
Compilers that reject ``-march=native`` (some clang and non-x86 gcc builds) are retried once
without it, and remembered per process.

An object's key names the compiler by its ``--version``, which costs a subprocess (5-10 ms)
per process. So each cached object is also found by the compiler's *stamp* (its resolved
path, size and modification time, as ccache checks compilers by default): an ``objects``
record (:mod:`.records`) maps the stamp, flags and source to the object's key, and a process
whose compiler is unchanged loads a cached object without running anything.
"""

from __future__ import annotations

import _ctypes
import contextlib
import ctypes
import ctypes.util
import functools
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from polyopt import config, host
from polyopt.codegen import vmath
from polyopt.errors import CompileError
from polyopt.runtime import cache, miscompiles, records, tempdirs

# -fno-split-loops: GCC 12.2's -O3 loop splitting, with its loop distribution, reordered a
# load after the store it reads in a time-skewed jacobi-1d nest (At(t,0) written, then read
# as Ao(0) in the same iteration: Ao(0) came out 0). Either flag off fixes it; isl's loops
# seldom keep the in-loop conditions that splitting removes, and distribution makes memsets.
# The nest is reproducers/gcc_split_loops.c, which the compiler self-test runs
# (runtime/miscompiles.py) with these flags and any others.
DEFAULT_FLAGS: tuple[str, ...] = ("-O3", "-march=native", "-fno-split-loops", "-fopenmp",
                                  "-fPIC", "-shared", "-std=gnu11")
@functools.cache
def base_link_flags() -> tuple[str, ...]:
    """The flags every kernel links with: glibc's libmvec on x86-64, so vectorized loops
    call vector exp/log/... (the prelude declares them ``simd`` under ``POLYOPT_LIBMVEC``:
    ``polyopt.codegen.vmath``), and libm. Asked at the first build, not at import: finding
    libmvec runs the system's library lookup (milliseconds of ``import polyopt``)."""
    mvec = platform.machine() == "x86_64" and ctypes.util.find_library("mvec")
    return (*(("-DPOLYOPT_LIBMVEC", *vmath.no_builtin_flags(), "-lmvec") if mvec else ()),
            "-lm")
_REQUIRED = ("-fPIC", "-shared")
_NATIVE = "-march=native"
_HEX_KEY = re.compile(r"[0-9a-f]{64}")

# The libraries loaded and in use, by (cache dir, key): weak, since their users hold them
# (a kernel its library, a ctypes function the library it came from), and each one's
# finalizer closes it (``_load``). Uncached ones only for ``loaded_count``.
_LIBS: weakref.WeakValueDictionary[tuple[str, str], ctypes.CDLL] = \
    weakref.WeakValueDictionary()
_UNCACHED_LIBS: weakref.WeakSet[ctypes.CDLL] = weakref.WeakSet()
_NO_NATIVE: set[str] = set()


@dataclass(frozen=True)
class _Job:
    cfg: config.Config
    identity: str
    flags: tuple[str, ...]
    key: str
    link_flags: tuple[str, ...] = ()


def compile_shared(source: str, *, flags: Sequence[str] | None = None,
                   link_flags: Sequence[str] = ()) -> Path:
    """Compile ``source`` to a shared object (or fetch it from the cache) and return its path.

    ``flags`` replaces :data:`DEFAULT_FLAGS` (``-fPIC -shared`` are added if missing, since the
    result must be a shared object); ``POLYOPT_CFLAGS`` is appended and ``-lm`` is linked.
    ``link_flags`` (libraries such as ``-lstdc++``) go after the source, where the linker
    needs them. Raises :class:`CompileError` with the compiler's log and the saved source on
    failure.
    """
    cfg = config.current()
    known = _known_object(cfg, source, flags, link_flags)
    if known is not None:
        return known[1]
    job = _prepare(source, flags, link_flags, cfg)
    path, root = _compile(job, source)
    _note_object(cfg, source, flags, link_flags, job.key, root)
    return path


def load_library(source: str, *, flags: Sequence[str] | None = None,
                 link_flags: Sequence[str] = ()) -> ctypes.CDLL:
    """``compile_shared`` then ``ctypes.CDLL``; an object that fails to load is rebuilt once."""
    cfg = config.current()
    known = _known_object(cfg, source, flags, link_flags)
    lib = None if known is None else _load_known(cfg, *known)
    if lib is not None:
        return lib
    job = _prepare(source, flags, link_flags, cfg)
    mem = (str(job.cfg.cache_dir), job.key)
    lib = None if job.cfg.no_cache else _LIBS.get(mem)
    if lib is not None:
        return lib
    path, root = _compile(job, source)
    try:
        lib = _load(path, root)
    except OSError as exc:
        if root is None:
            raise CompileError(f"cannot load the compiled object {path}", str(exc)) from exc
        _trace(job.cfg, 1, f"cached object {path} does not load ({exc}); rebuilding")
        cache.invalidate(root, job.key)
        path, root = _compile(job, source)
        try:
            lib = _load(path, root)
        except OSError as exc2:
            saved = str(cache.entry_path(root, job.key, ".c")) if root else None
            raise CompileError(f"cannot load the freshly compiled object {path}", str(exc2),
                               saved) from exc2
    if job.cfg.no_cache:
        _UNCACHED_LIBS.add(lib)
    else:
        _LIBS[mem] = lib
        _note_object(cfg, source, flags, link_flags, job.key, root)
    return lib


def _load_known(cfg: config.Config, key: str, path: Path, root: Path) -> ctypes.CDLL | None:
    """The library of a verified cached object, loaded once per process; None when it does
    not load (the full path rebuilds it)."""
    mem = (str(cfg.cache_dir), key)
    lib = _LIBS.get(mem)
    if lib is None:
        with contextlib.suppress(OSError):
            lib = _LIBS[mem] = _load(path, root)
    return lib


def loaded_count() -> int:
    """How many libraries ``load_library`` loaded are still in use (open)."""
    return len(_LIBS) + len(_UNCACHED_LIBS)


def _load(path: Path, root: Path | None) -> ctypes.CDLL:
    """``dlopen`` the object, to be ``dlclose``d when the library object is collected; an
    uncached one (``root`` None) is unlinked once loaded, since nothing will load it again
    and the mapping keeps its inode alive."""
    try:
        lib = ctypes.CDLL(str(path))
    finally:
        if root is None:
            with contextlib.suppress(OSError):
                path.unlink()
    close = getattr(_ctypes, "dlclose", None)  # POSIX; Windows keeps its libraries
    if close is not None:
        # Collected means unused: every function of it and every kernel holds the object.
        # Not at exit: the process's end unmaps it anyway, after threads that may still run.
        weakref.finalize(lib, close, lib._handle).atexit = False
    return lib


def compiler_identity(cc: str | Sequence[str]) -> str:
    """Resolved path of the compiler plus the first line of its ``--version`` (cached)."""
    argv = tuple(shlex.split(cc)) if isinstance(cc, str) else tuple(cc)
    return _identity(argv or ("cc",))


@functools.cache
def _identity(argv: tuple[str, ...]) -> str:
    resolved = shutil.which(argv[0])
    if resolved is None:
        raise _missing(argv)
    try:
        proc = subprocess.run([resolved, *argv[1:], "--version"], capture_output=True,
                              text=True, env=_env(), timeout=60, check=False)
    except OSError as exc:
        raise _missing(argv, exc) from exc
    lines = (proc.stdout or proc.stderr).strip().splitlines()
    words = shlex.join([os.path.realpath(resolved), *argv[1:]])
    return f"{words} | {lines[0] if lines else f'exit {proc.returncode}'}"


def _missing(argv: Sequence[str], exc: Exception | None = None) -> CompileError:
    why = f" ({exc})" if exc else ""
    return CompileError(f"C compiler command {argv[0]!r} was not found or cannot run{why}; "
                        "set CC to a working C compiler (e.g. CC=gcc)")


def _prepare(source: str, flags: Sequence[str] | None, link_flags: Sequence[str] = (),
             cfg: config.Config | None = None) -> _Job:
    """Read the config, resolve the compiler and compute the key, all before any build."""
    cfg = cfg or config.current()
    identity = compiler_identity(cfg.cc)
    final = _final_flags(cfg, flags)
    link = tuple(link_flags)
    final += miscompiles.remedies(cfg.cc, identity, final, (*base_link_flags(), *link),
                                  _verdict_root(cfg))
    key = cache.cache_key(source, f"{identity} | {_machine(final)}",
                          (*final, *base_link_flags(), *link))
    return _Job(cfg, identity, final, key, link)


def _verdict_root(cfg: config.Config) -> Path | None:
    """Where the compiler self-test's verdict is kept (None: this process only)."""
    if cfg.no_cache:
        return None
    try:
        return cache.usable_root(cfg.cache_dir)
    except OSError:
        return None


def _final_flags(cfg: config.Config, flags: Sequence[str] | None) -> tuple[str, ...]:
    chosen = list(DEFAULT_FLAGS if flags is None else flags)
    chosen += [f for f in _REQUIRED if f not in chosen]
    return (*chosen, *cfg.cflags)


def _machine(flags: Sequence[str]) -> str:
    # -march=native makes the object depend on this CPU: keep shared caches (NFS homes) apart.
    return host.fingerprint() if any(f.endswith("=native") for f in flags) else ""


@functools.cache
def compiler_stamp(argv: tuple[str, ...]) -> str | None:
    """The compiler command found without running it: each word that names a program,
    resolved, with its size and modification time (what ccache checks by default); None when
    the compiler is not found (the full path then says why)."""
    parts = []
    for k, word in enumerate(argv):
        found = shutil.which(word)
        if found is None:
            if k == 0:
                return None
            parts.append(word)
            continue
        real = os.path.realpath(found)
        try:
            st = os.stat(real)
        except OSError:
            return None
        parts.append(f"{real}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}")
    return " ".join(parts)


def _stamp_key(cfg: config.Config, source: str, flags: Sequence[str] | None,
               link_flags: Sequence[str]) -> str | None:
    """The key of the ``objects`` record for this compile, or None without a disk cache or
    when the compiler is not found."""
    stamp = None if cfg.no_cache else compiler_stamp(cfg.cc)
    if stamp is None:
        return None
    final = _final_flags(cfg, flags)
    return records.key_of(cache.CACHE_FORMAT, stamp, final, base_link_flags(), tuple(link_flags),
                          _machine(final), source)


def _known_object(cfg: config.Config, source: str, flags: Sequence[str] | None,
                  link_flags: Sequence[str]) -> tuple[str, Path, Path] | None:
    """(key, path, root) of the verified cached object an earlier process built from this
    source with this compiler (unchanged since), found without running the compiler."""
    stamp_key = _stamp_key(cfg, source, flags, link_flags)
    if stamp_key is None:
        return None
    try:
        root = cache.usable_root(cfg.cache_dir)
        found = records.read(root, "objects", stamp_key)
        key = found.get("object") if found else None
        if not isinstance(key, str) or not _HEX_KEY.fullmatch(key):
            return None
        path = cache.lookup(root, key)
    except OSError:  # an unusable cache dir: the full path warns and compiles uncached
        return None
    return None if path is None else (key, path, root)


def _note_object(cfg: config.Config, source: str, flags: Sequence[str] | None,
                 link_flags: Sequence[str], key: str, root: Path | None) -> None:
    """Record which cached object this compile gave, for :func:`_known_object`."""
    stamp_key = None if root is None else _stamp_key(cfg, source, flags, link_flags)
    if stamp_key is not None and root is not None:
        with contextlib.suppress(OSError):  # a record that cannot be written only costs time
            records.write(root, "objects", stamp_key, {"object": key})


def _compile(job: _Job, source: str) -> tuple[Path, Path | None]:
    """The object's path and the cache root it is in (None for an uncached object)."""
    if job.cfg.no_cache:
        return _uncached(job, source), None
    info = {"compiler": job.identity, "flags": list(job.flags)}
    try:
        root = cache.usable_root(job.cfg.cache_dir, job.key)
        path = cache.get_or_build(root, job.key, source, lambda: _build(job, source), info)
    except OSError as exc:
        _trace(job.cfg, 0, f"cache dir {job.cfg.cache_dir} unusable ({exc}); compiling uncached")
        return _uncached(job, source), None
    _trace(job.cfg, 2, f"object {path}")
    return path, root


def _uncached(job: _Job, source: str) -> Path:
    """Build into this process's private temp dir (removed at exit), under a unique name."""
    data = _build(job, source)
    fd, name = tempfile.mkstemp(prefix=f"{job.key[:16]}-", suffix=".so",
                                dir=tempdirs.process_dir())
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(name, 0o700)
    return Path(name)


def _build(job: _Job, source: str) -> bytes:
    """Run the compiler in a private temp dir and return the object's bytes."""
    flags = job.flags
    if job.identity in _NO_NATIVE:
        flags = tuple(f for f in flags if f != _NATIVE)
    with tempdirs.private_tempdir("polyopt-cc-") as tmp:
        src, out = tmp / f"{job.key[:16]}.c", tmp / "out.so"
        src.write_text(source)
        proc = _run(job, flags, src, out)
        if proc.returncode != 0 and _NATIVE in flags and "-march" in proc.stderr:
            _trace(job.cfg, 0, f"{job.cfg.cc[0]} rejects {_NATIVE}; compiling without it")
            _NO_NATIVE.add(job.identity)
            proc = _run(job, tuple(f for f in flags if f != _NATIVE), src, out)
        if proc.returncode != 0 or not out.is_file():
            saved = cache.save_failed(job.cfg.cache_dir, job.key, source)
            log = (proc.stderr + proc.stdout).replace(str(src), str(saved))
            raise CompileError(f"C compiler failed (exit {proc.returncode}): "
                               f"{shlex.join(proc.args)}", log, str(saved))
        if proc.stderr.strip():
            _trace(job.cfg, 1, proc.stderr.strip())
        return out.read_bytes()


def _run(job: _Job, flags: Sequence[str], src: Path, out: Path) -> subprocess.CompletedProcess[str]:
    argv = [*job.cfg.cc, *flags, "-o", str(out), str(src), *base_link_flags(), *job.link_flags]
    _trace(job.cfg, 1, shlex.join(argv))
    try:
        return subprocess.run(argv, capture_output=True, text=True, cwd=src.parent,
                              env=_env(), check=False)
    except OSError as exc:
        raise _missing(job.cfg.cc, exc) from exc


def _env() -> dict[str, str]:
    return {**os.environ, "LC_ALL": "C"}


def _trace(cfg: config.Config, level: int, message: str) -> None:
    """Level 0 is a warning; higher levels go to stderr when ``POLYOPT_DEBUG`` >= ``level``."""
    if level == 0:
        cache.logger.warning(message)
        return
    cache.logger.debug(message)
    if cfg.debug >= level:
        print(f"[polyopt] {message}", file=sys.stderr)
