"""The distribution: a wheel (not an editable install) holds every module and data file of
the source tree, and ``polyopt.kernels`` is reachable after a bare ``import polyopt``.

``.ci/run`` goes further: it installs that wheel into a fresh virtual environment and runs
the command line from outside the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_kernels_are_reachable_after_a_bare_import() -> None:
    out = subprocess.run([sys.executable, "-c", "import polyopt; "
                          "print(len(polyopt.kernels.names()), polyopt.kernels.__name__)"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    count, name = out.stdout.split()
    assert int(count) > 10 and name == "polyopt.kernels"


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_data_file(tmp_path: Path) -> None:
    src = tmp_path / "src"  # a copy: building writes build/ and *.egg-info next to setup.py
    src.mkdir()
    for name in ("setup.py", "setup.cfg", "pyproject.toml", "README.md"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, src / name)
    for tree in ("polyopt", "kernels"):
        shutil.copytree(ROOT / tree, src / tree, ignore=shutil.ignore_patterns("__pycache__"))
    # pip's build isolation installs the build requirements (setuptools, wheel) as CI does.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path / "dist"), str(src)], check=True, capture_output=True)
    [wheel] = (tmp_path / "dist").glob("polyopt-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"polyopt/{p.relative_to(ROOT / 'polyopt').as_posix()}"
                for p in (ROOT / "polyopt").rglob("*") if p.suffix in (".py", ".h")}
    expected |= {f"polyopt/kernels/{p.name}" for p in (ROOT / "kernels").iterdir()
                 if p.suffix in (".py", ".tc")}
    assert not expected - names, sorted(expected - names)
    assert "polyopt/tuning/db.py" in names
