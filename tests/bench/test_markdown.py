"""The BENCHMARKS.md machinery of ``--update``: which options a run records, and the rewrite
of one section that leaves the others as they are."""

from __future__ import annotations

import sys

import pytest

from polyopt.bench import markdown, ops, suite

TEXT = "# B\n\n## CPU: operators (1)\n\nold\n\n## CPU: operator suite (2)\n\nkept\n"


def test_a_section_is_replaced_and_its_neighbours_kept() -> None:
    new = markdown.replace_section(TEXT, "## CPU: operators (3)\n\nnew\n", ops.SECTION)
    assert new == "# B\n\n## CPU: operators (3)\n\nnew\n\n## CPU: operator suite (2)\n\nkept\n"
    added = markdown.replace_section("# B\n", "## X (4)\n", "## X")
    assert added == "# B\n\n## X (4)\n"


def test_the_suites_record_their_cli_command() -> None:
    assert suite.COMMAND_PREFIX.endswith("polyopt bench suite")
    assert ops.COMMAND_PREFIX.endswith("polyopt bench ops")
    text = markdown.section_text(["--repeat", "3"], ["- env"], ["| t |"], heading=suite.SECTION,
                                 prefix=suite.COMMAND_PREFIX, notes="notes")
    assert text.startswith(suite.SECTION + " (")
    assert "Command: `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE polyopt bench suite " \
           "--repeat 3`" in text


@pytest.mark.parametrize(("argv", "options"), [
    (["polyopt", "bench", "suite", "--repeat", "3"], ["--repeat", "3"]),
    (["suite.py", "--quick"], ["--quick"]),
])
def test_given_options_follow_the_subcommand(argv: list[str], options: list[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", argv)
    assert markdown.given_options("suite") == options
