"""The package list, found: every package under polyopt/ (a new subpackage cannot be left
out of a non-editable install, as polyopt.tune once was), plus polyopt.kernels, which lives
at the top level (kernels/, mapped by setup.cfg's package_dir). The rest is in setup.cfg."""

from __future__ import annotations

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["polyopt", "polyopt.*"]), "polyopt.kernels"])
