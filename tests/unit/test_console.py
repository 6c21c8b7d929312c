"""The progress channel's folding: GitHub Actions' ::group:: blocks when it runs there, plain
lines elsewhere."""

from __future__ import annotations

import io

from oota.console import Console, folds_here


def test_folding_follows_github_actions() -> None:
    assert folds_here({"GITHUB_ACTIONS": "true"})
    assert not folds_here({}) and not folds_here({"GITHUB_ACTIONS": "false"})


def test_a_group_folds_its_lines_and_groups_do_not_nest() -> None:
    shown = io.StringIO()
    console = Console(shown, live=False, fold=True)
    with console.group("cpu-cell: build\x1b[2J"):
        console.info("base image pulled")
        with console.group("inner"):
            console.info("step")
    console.line("ok", "cpu-cell: build passed", 1.0)
    assert shown.getvalue().splitlines() == [
        "::group::cpu-cell: build\\x1b[2J", "     base image pulled", "     step",
        "::endgroup::", "ok   cpu-cell: build passed (1.0s)"]


def test_elsewhere_the_lines_are_plain() -> None:
    shown = io.StringIO()
    console = Console(shown, live=False, fold=False)
    with console.group("cpu-cell: build"):
        console.info("base image pulled")
    assert shown.getvalue() == "     base image pulled\n"
