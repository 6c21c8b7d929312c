"""Result files: one ``result.json`` per cell (schema ``schema/result-v1.json``) and its JUnit XML.

The one writer and the one reader of :class:`~oota.results.model.Result`. Every result is
validated against the published schema before it is written, and again when it is read back.
Writes go through :func:`oota.files.write_atomic`, so a crash or Ctrl-C never leaves a
half-written result for ``report`` to trip over.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from xml.etree import ElementTree as ET

from oota import schemas
from oota.files import RESULT_LIMIT, exclusive, json_bytes, read_text, write_atomic
from oota.resources import shipped
from oota.results.assemble import overall_status, summarize
from oota.results.jsonfields import ResultFormatError
from oota.results.model import SCHEMA_ID, Result, Stage, TestOutcome
from oota.vocab import Status, worst

SCHEMA_FILE = shipped("schema") / "result-v1.json"
RESULT_FILE = "result.json"
SIGNATURE_FILE = "result.sig"   # oota/results/signed.py
JUNIT_FILE = "junit.xml"
# The cases an accelerator's ops layer judged (verify/oota_judge.py's format), beside the result:
# `oota judge results/<cell>/cases.pt` judges them again anywhere.
CASES_FILE = "cases.pt"
# JUnit has no word for these: each maps to the element CI systems count it under.
_JUNIT_ELEMENT = {"failed": "failure", "error": "error", "interrupted": "error",
                  "skipped": "skipped", "unsupported-here": "skipped", "cpu-fallback": "skipped",
                  "not-claimed": "skipped"}
_JUNIT_SKIPPED: tuple[Status, ...] = ("skipped", "unsupported-here", "cpu-fallback",
                                      "not-claimed")
_MESSAGE_CHARS = 500

__all__ = ["CASES_FILE", "RESULT_FILE", "SCHEMA_ID", "junit_xml", "keep_recording", "load",
           "load_all", "load_found", "result_bytes", "save", "validation_errors", "writing",
           "Writer"]

# How long a run waits for another one writing into the same results folder: the end of its
# report, not its builds (a run takes minutes to hours; waiting that long would look hung).
LOCK_WAIT_S = 10
# What oota.files.write_atomic leaves of a file of a cell folder when its writer is killed
# between the write and the rename: '.result.json.' and mkstemp's eight characters.
_HALF_WRITTEN = re.compile(r"^\.(result\.json|junit\.xml|result\.sig|cases\.pt\.sig)"
                           r"\.[a-z0-9_]{8}$")


class ResultSchemaError(ValueError):
    """A result that does not match schema/result-v1.json (a bug in oota when writing)."""


@contextlib.contextmanager
def writing(results_dir: Path) -> Iterator[None]:
    """Hold the results folder ``results_dir`` while the body writes into it: a second run
    into the same folder waits :data:`LOCK_WAIT_S`, then is :class:`oota.files.Busy` (exit 3)
    naming the holder, instead of mixing its logs, results and signatures with the first's.
    The lock (an ``flock`` on ``.NAME.lock`` beside the folder) is the system's: a killed
    holder releases it, so the half-written files its holder finds are a dead writer's and go."""
    target = results_dir.resolve()
    with exclusive(target.parent / f".{target.name}.lock", f"the results folder {results_dir}",
                   LOCK_WAIT_S):
        recover(target)
        yield


class Writer:
    """A run's hold on its results folder (:func:`writing`), taken when the run is about to
    write (:meth:`take`: its input checked, its Engine reached; bad input writes nothing, not
    even a lock) and kept until the run's signing, history and report are done (the end of
    the ``with`` block)."""

    def __init__(self, results_dir: Path) -> None:
        self.results_dir = results_dir
        self._stack = contextlib.ExitStack()

    def take(self) -> None:
        """Hold the folder from now on (waiting for, or refused by, another run's hold)."""
        self._stack.enter_context(writing(self.results_dir))

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stack.close()


def recover(results_dir: Path) -> list[Path]:
    """Remove what a killed writer left half-written in the cell folders of ``results_dir``
    (call it holding :func:`writing`'s lock, so that no live writer's file is taken); the
    paths removed."""
    removed = []
    for path in sorted(results_dir.glob("*/.*")):
        if _HALF_WRITTEN.match(path.name) and path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def schema() -> Mapping[str, object]:
    return schemas.load(SCHEMA_FILE.name)


def validation_errors(data: Mapping[str, object]) -> list[str]:
    """Every way ``data`` (a result.json's content) breaks the schema, as 'path: message'."""
    return schemas.errors(SCHEMA_FILE.name, data)


def keep_recording(suite_out: Path, folder: Path) -> Path | None:
    """The suite's recorded cases moved from its output folder to beside the cell's result
    (``folder``); a recording of an earlier run is removed when this one made none."""
    made, kept = suite_out / CASES_FILE, folder / CASES_FILE
    if made.is_file():
        made.replace(kept)
        return kept
    kept.unlink(missing_ok=True)
    return None


def _case(suite: ET.Element, cell: str, layer: str, name: str, status: Status, duration_s: float,
          message: str) -> None:
    node = ET.SubElement(suite, "testcase", classname=f"{cell}.{layer}", name=name,
                         time=f"{duration_s:.3f}")
    element = _JUNIT_ELEMENT.get(status)
    if element == "skipped":
        ET.SubElement(node, element, message=f"{status}: {message}"[:_MESSAGE_CHARS])
    elif element is not None:
        text = f"{status}: {message}" if status == "interrupted" else message
        ET.SubElement(node, element, type=status,
                      message=text[:_MESSAGE_CHARS]).text = text


def junit_xml(result: Result) -> str:
    """JUnit XML for CI systems: one testsuite per cell, stages and tests as testcases.
    An interrupted stage or test is an ``error`` (type ``interrupted``): CI counts it as such."""
    cases: list[Stage | TestOutcome] = [*result.stages.values(), *result.tests]
    statuses = [c.status for c in cases]
    suite = ET.Element("testsuite", name=result.cell.id, tests=str(len(cases)),
                       failures=str(statuses.count("failed")),
                       errors=str(statuses.count("error") + statuses.count("interrupted")),
                       skipped=str(sum(statuses.count(s) for s in _JUNIT_SKIPPED)),
                       time=f"{sum(c.duration_s for c in cases):.3f}")
    for name, stage in result.stages.items():
        _case(suite, result.cell.id, "stage", f"stage::{name}", stage.status, stage.duration_s,
              stage.message)
    for test in result.tests:
        _case(suite, result.cell.id, test.layer, test.id, test.status, test.duration_s,
              test.message)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def result_bytes(result: Result) -> bytes:
    """``result`` as :func:`save` writes it into result.json: what a signature signs."""
    return json_bytes(result.to_json())


def save(folder: Path, result: Result) -> None:
    """Validate ``result`` and write result.json and junit.xml into ``folder``."""
    data = result.to_json()
    problems = validation_errors(data)
    if problems:
        raise ResultSchemaError("result does not match schema/result-v1.json:\n  "
                                + "\n  ".join(problems))
    # A signature of the result this one replaces would be a signature of another result.
    (folder / SIGNATURE_FILE).unlink(missing_ok=True)
    write_atomic(folder / RESULT_FILE, json_bytes(data))
    write_atomic(folder / JUNIT_FILE, junit_xml(result))


def load(path: Path) -> Result:
    """One result file, read back into the model.

    Raises ResultFormatError with one line saying what is wrong: unreadable, not UTF-8, not
    JSON, not matching the schema, or a value of the wrong type."""
    try:
        data = json.loads(read_text(path, RESULT_LIMIT))
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad UTF-8 or JSON
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else _one_line(exc)
        raise ResultFormatError(f"unreadable ({why})") from None
    if not isinstance(data, dict):
        raise ResultFormatError(f"does not match the schema: expected an object, "
                                f"got {type(data).__name__}")
    errors = validation_errors(data)
    if errors:
        raise ResultFormatError(f"does not match the schema: {errors[0]}")
    result = Result.from_json(data)
    problem = inconsistency(result)
    if problem:
        raise ResultFormatError(problem)
    return _judged_again(result)


def _judged_again(result: Result) -> Result:
    """A result an older oota stamped ``passed`` with no passed test of a device layer reads
    as what it is now (skipped, or ran on the CPU): no pass without evidence, whoever wrote it."""
    derived = overall_status(result.tests, result.stages)
    if derived == result.status:
        return result
    return dataclasses.replace(result, status=derived, message=result.message or (
        f"stamped {result.status!r} by oota {result.oota_version}, {derived!r} now: none of "
        "its tests of a layer that uses the device passed"))


def inconsistency(result: Result) -> str:
    """Why ``result`` contradicts itself ('' when it does not): its status and summary must be
    what its own stages and tests make them (:func:`oota.results.assemble.assemble` derives
    them so), or a hand-edited ``passed`` over failed tests would be believed."""
    derived = overall_status(result.tests, result.stages)
    counts = summarize(result.tests, result.stages)
    shown = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing run"
    if result.status != derived and not _older_pass(result, derived):
        return (f"inconsistent: it says {result.status!r}, but its stages and tests make it "
                f"{derived!r} ({shown}); refused: a status is derived, never taken as written")
    if dict(result.summary) != counts:
        return (f"inconsistent: its summary says {dict(sorted(result.summary.items()))}, but its "
                f"stages and tests count {shown}; refused")
    return ""


def _older_pass(result: Result, derived: str) -> bool:
    """Whether ``result`` is an older oota's ``passed`` that today's rule makes ``derived``:
    nothing failed, but no test of a device layer passed (oota.vocab.run_status)."""
    return (result.status == "passed" and derived in ("skipped", "cpu-fallback", "not-claimed")
            and worst([*(s.status for s in result.stages.values()),
                       *(t.status for t in result.tests)]) == "passed")


def load_all(results_dir: Path) -> tuple[list[Result], list[str]]:
    """Every readable, valid result under ``results_dir``; a line per file that is not."""
    found, problems = load_found(results_dir)
    return [result for _, result in found], problems


def load_found(results_dir: Path, skip: frozenset[str] = frozenset()
               ) -> tuple[list[tuple[Path, Result]], list[str]]:
    """:func:`load_all` with the folder each result was read from (a report links its logs);
    the folders named in ``skip`` are left unread."""
    found: list[tuple[Path, Result]] = []
    problems: list[str] = []
    for path in sorted(results_dir.glob(f"*/{RESULT_FILE}")):
        if path.parent.name in skip:
            continue
        try:
            found.append((path.parent, load(path)))
        except ResultFormatError as exc:
            problems.append(f"{path}: {exc}")
    return found, problems


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:300]
