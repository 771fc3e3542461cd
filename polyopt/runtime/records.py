"""Small JSON records in the kernel cache, keyed by a hash: what lets a fresh process skip
work an earlier one did (which object a source compiles to, what a definition lowers to).

Layout under the cache root (beside the objects of :mod:`.cache`)::

    <kind>/<key[:2]>/<key>.json   {"format", "kind", "key", "payload", "sha256"}

A record is read under the same rules as an object: every directory from the root down and
the file itself must be ours alone, the file is read under :func:`.trust.read_trusted` (at
most ``CAPS["record"]`` bytes, no symlink, no FIFO), and the checksum over the payload must
hold. A record that fails either, cannot be parsed, or names another key is a miss (logged),
so the caller redoes the work and writes it again; it is never half-trusted. Writes are
atomic (:func:`.cache.atomic_write`), so a reader sees the old record or the new one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from polyopt import trust
from polyopt.runtime import cache

RECORD_FORMAT = 1
"""Bump when a record's envelope changes, so old records are never reused."""


def record_path(root: Path, kind: str, key: str) -> Path:
    return Path(root) / kind / key[:2] / f"{key}.json"


def read(root: Path, kind: str, key: str) -> dict[str, Any] | None:
    """The payload stored for ``key``, or None when there is none or it cannot be trusted.
    Raises :class:`~.trust.UntrustedLocationError` when a directory above it is not ours."""
    path = record_path(root, kind, key)
    cache.check_tree(Path(root), Path(kind, key[:2]))
    text = cache.read_file(path, "record")
    if text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        cache.logger.info("unreadable %s record %s (%s); redoing it", kind, path, exc)
        return None
    payload = data.get("payload") if isinstance(data, dict) else None
    good = (isinstance(payload, dict) and data.get("format") == RECORD_FORMAT
            and data.get("kind") == kind and data.get("key") == key
            and data.get("sha256") == _digest(payload))
    if not good:
        cache.logger.info("corrupt %s record %s (checksum or envelope mismatch); redoing it",
                          kind, path)
        return None
    return payload  # type: ignore[return-value]


def write(root: Path, kind: str, key: str, payload: Mapping[str, Any]) -> None:
    """Store ``payload`` (JSON data) for ``key``, replacing what was there."""
    trust.make_private_dirs(Path(root), Path(kind, key[:2]))
    body = {"format": RECORD_FORMAT, "kind": kind, "key": key, "payload": payload,
            "sha256": _digest(payload)}
    # No fsync: a record lost in a crash, or torn (its checksum fails), is only made again.
    cache.atomic_write(record_path(root, kind, key), json.dumps(body).encode(), sync=False)


def key_of(*parts: Any) -> str:
    """sha256 over an unambiguous encoding of ``parts`` (JSON data)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _digest(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
