"""README.md and the command line tell the same story: `oota --list` shows each task's whole
first sentence, and (below) every path, task and flag README names exists."""

from __future__ import annotations

import inspect

import pytest
from invoke import Collection
from invoke.tasks import Task

import tasks

COLLECTION = Collection.from_module(tasks)
TASKS: dict[str, Task[object]] = {name: COLLECTION[name] for name in COLLECTION.task_names}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_list_shows_a_whole_first_sentence(name: str) -> None:
    """invoke's --list shows a docstring's first line only: that line must be the whole first
    paragraph, one sentence, so the list never stops mid-sentence."""
    doc = inspect.getdoc(TASKS[name].body) or ""
    first_paragraph = doc.split("\n\n", 1)[0]
    assert "\n" not in first_paragraph, f"{name}: the first paragraph spans lines:\n{doc}"
    assert first_paragraph.endswith("."), f"{name}: {first_paragraph!r} is not a sentence"
    assert len(first_paragraph) <= 100, f"{name}: keep the first sentence short"
