"""The trust rule for what the runtime reads and writes in its cache, under the runtime's
name: it lives in :mod:`polyopt.trust`, in the core layer, because the machine model (below
the runtime) reads the host's profile from the cache root under the same rule."""

from __future__ import annotations

from polyopt.trust import (
    CAPS,
    UntrustedLocationError,
    ancestors_problem,
    choose_root,
    dir_problem,
    enforced,
    fallback_root,
    file_problem,
    make_private_dirs,
    open_lock,
    opened,
    read_trusted,
    tree_problem,
    warn_once,
)

__all__ = ["CAPS", "UntrustedLocationError", "ancestors_problem", "choose_root", "dir_problem",
           "enforced", "fallback_root", "file_problem", "make_private_dirs", "open_lock",
           "opened", "read_trusted", "tree_problem", "warn_once"]
