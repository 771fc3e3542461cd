"""No script imports another: code that two scripts share lives in ``polyopt.bench`` (or is
repeated), so each script under ``scripts/`` reads and runs on its own."""

from __future__ import annotations

import ast
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def _imported(tree: ast.AST) -> list[tuple[str, int]]:
    """(top-level module, line) of every import, those inside functions included."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name.partition(".")[0], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.append((node.module.partition(".")[0], node.lineno))
    return out


def _loads_a_file(tree: ast.AST) -> list[int]:
    """Lines that load a module from a file path (``importlib.util.spec_from_file_location``)."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and node.attr == "spec_from_file_location"]


def test_no_script_imports_another() -> None:
    scripts = sorted(SCRIPTS.rglob("*.py"))
    assert len(scripts) >= 20, "the scripts moved: fix SCRIPTS"
    names = {p.stem for p in scripts}
    found = []
    for path in scripts:
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(SCRIPTS.parent)
        found += [f"{where}:{line}: imports the script {name}" for name, line in _imported(tree)
                  if name in names]
        found += [f"{where}:{line}: loads a module from a file" for line in _loads_a_file(tree)]
    assert not found, "\n".join(found)


def test_scripts_sit_in_their_kind_s_folder() -> None:
    folders = {p.parent.relative_to(SCRIPTS).as_posix() for p in SCRIPTS.rglob("*.py")}
    assert folders <= {".", "calibrate", "checks", "studies", "dev"}, folders
