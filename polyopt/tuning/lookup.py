"""Which tuning database a compile reads, and its best record for a definition at sizes.

``db`` is a path, an open :class:`Database`, or None for the user's default database
(``default_path``); a path that does not exist is no database (reading creates nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from polyopt import ir, lang
from polyopt.errors import OptionError, PolyoptError, SizesRequiredError
from polyopt.tuning.db import Database, Record, default_path
from polyopt.tuning.key import Key


def make_key(source: str | lang.Definition, name: str | None, sizes: Mapping[str, int],
             target: str) -> Key:
    """The database key of def ``name`` at ``sizes`` on ``target`` on this machine."""
    definition = lang.define(source, name)
    sized = lang.build_program(definition, sizes=sizes)
    if sized.sizes:
        raise OptionError(f"a tuning key needs every size of def '{sized.name}'; "
                          f"unbound: {', '.join(sized.sizes)}")
    # The <...> parameters (strides, padding) select the operator; the tensor sizes are the
    # key's shapes.
    params = {k: v for k, v in sizes.items() if k in definition.params}
    try:
        generic = lang.build_program(definition, sizes=params)
    except SizesRequiredError:  # affine only at these sizes: they are part of the definition
        generic = sized
    shapes = [tuple(ir.extent_value(e, {}) for e in t.shape) for t in sized.inputs]
    return Key.make(generic, shapes, target)


def lookup(source: str | lang.Definition, name: str | None, sizes: Mapping[str, int],
           target: str, db: str | Path | Database | None = None) -> Record | None:
    """The best recorded schedule for this key, or None (no database, no record, or a
    database that cannot be read; ``polyopt.tuning.replay`` says why when compiling)."""
    try:
        return best_record(make_key(source, name, sizes, target), db)
    except (PolyoptError, OSError):
        return None


def best_record(key: Key, db: str | Path | Database | None = None) -> Record | None:
    """The best record of ``key`` in ``db`` (default: the user's database), None when
    there is no such file or record; DatabaseError when it cannot be read."""
    database = open_database(db, create=False)
    if database is None:
        return None
    try:
        return database.best(key)
    finally:
        if database is not db:  # opened here: do not leave a connection per compile
            database.close()


def has_database(db: str | Path | Database | None = None) -> bool:
    """Is there a database for ``best_record`` to read (default: the user's)?"""
    if isinstance(db, Database):
        return True
    return Path(default_path() if db is None else db).exists()


def open_database(db: str | Path | Database | bool | None, create: bool = True) -> Database | None:
    """``db`` opened (True or None: the default path; False: none); with ``create=False``,
    None for a path that does not exist."""
    if db is False:
        return None
    if isinstance(db, Database):
        return db
    path = default_path() if db is None or db is True else db
    if not create and not Path(path).exists():
        return None
    return Database(path)
