"""Expected failures of the skip list (``kind: xfail`` in vendors/<name>/skips.yaml).

The test runs. Failing, it is recorded ``skipped``, its message beginning with the skip list's
words and 'expected failure': a known failure is skip debt, like a skipped test, outside pass
and fail in every verdict, JUnit and crcr alike (a status of its own would change every writer
for what each of them shows as a skip with its reason), and it is never a pass. Passing, it is
an unexpected pass: the run names the entry to remove (tests.json ``skips.unexpected_pass``,
verify.log); recorded ``passed`` (it did pass), or ``failed`` where the entry says
``strict: true``, as pytest's strict xfail does: then the vendor wants the run to fail until
the entry is removed.
"""

from __future__ import annotations

from typing import Any

import pytest

SKIP_LIST = "skip list: "
EXPECTED = "expected failure: "
UNEXPECTED = "unexpected pass: "


def entry_words(entry: dict[str, Any], late: bool) -> str:
    """An entry as its skip reason names it: why, who, until when, where it is tracked."""
    issue = f", issue {entry['issue']}" if entry.get("issue") else ""
    return (f"{entry['reason']} (owner {entry['owner']}, expires {entry['expires']}"
            f"{' EXPIRED' if late else ''}{issue})")


def mark(item: pytest.Item, entry: dict[str, Any], late: bool) -> None:
    """Run ``item`` expecting it to fail, as ``entry`` says."""
    item.add_marker(pytest.mark.xfail(reason=SKIP_LIST + EXPECTED + entry_words(entry, late),
                                      strict=bool(entry.get("strict"))))


def outcome(report: pytest.TestReport, entry: dict[str, Any]) -> tuple[str, str] | None:
    """(status, message) of a report of a test that ``entry`` expects to fail; None for a
    report that says nothing of it (a passed setup or teardown)."""
    if report.skipped and hasattr(report, "wasxfail"):
        crash = getattr(report.longrepr, "reprcrash", None)
        failure = crash.message if crash else (str(report.longrepr).splitlines() or [""])[-1]
        first_line = (failure.splitlines() or [""])[0]
        return "skipped", f"{report.wasxfail}; it failed: {first_line}"[:2000]
    strict_pass = report.failed and str(report.longrepr).startswith("[XPASS(strict)]")
    if (report.passed and hasattr(report, "wasxfail")) or strict_pass:
        strict = " (strict: the vendor fails the run on it)" if strict_pass else ""
        return ("failed" if strict_pass else "passed",
                f"{UNEXPECTED}remove the entry '{entry['id']}' from the vendor's skips.yaml: "
                f"the test passed, though listed as an expected failure{strict}")
    return None
