"""The functions behind the tasks, by job: each takes parsed flags, does one job, returns data.

* :mod:`~oota.api.options`: every flag of every task, its help, default and check, in one table
  (a new flag is one entry there); :mod:`~oota.api.flags`: the checks;
* :mod:`~oota.api.cells`: the tasks of the matrix without an Engine (matrix, generate, lint,
  release-check, lock);
* :mod:`~oota.api.runs`: the tasks that drive Engines (build, verify, publish, pull, hosts,
  judge) and the signing of what a run wrote;
* :mod:`~oota.api.reports` and :mod:`~oota.api.history`: the report, and the history wired in;
* :mod:`~oota.api.tables`: what ``matrix`` and ``hosts`` print.

Imports go one way: ``flags`` and ``tables`` at the bottom, ``options`` on ``flags``, then
``cells`` and ``history``, then ``runs`` and ``reports``. ``tasks.py`` uses the names listed
here. Nothing here prints results or exits; ``tasks.py`` formats the returned data and maps
exceptions (:mod:`oota.errors`) to exit codes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The names below are imported when first used (PEP 562), so a task loads only the jobs it
# runs: `oota matrix` loads neither the SQL toolkit nor the Docker SDK, and every command
# starts in a fraction of the time (a command line is started hundreds of times by the tests).
# mypy reads the imports; the table says where each name lives at run time
# (tests/unit/test_api_names.py holds the two to the same names).
if TYPE_CHECKING:
    from oota.api.cells import (
        cells_for as cells_for,
        generate as generate,
        lint as lint,
        lock as lock,
        lock_status as lock_status,
        matrix_rows as matrix_rows,
        matrix_text as matrix_text,
        release_check as release_check,
    )
    from oota.api.flags import (
        check_here_flags as check_here_flags,
        check_history_flags as check_history_flags,
        report_formats as report_formats,
    )
    from oota.api.history import (
        DEFAULT_SINCE as DEFAULT_SINCE,
        History as History,
        Imported as Imported,
        git_revision as git_revision,
        history_digest as history_digest,
        history_import as history_import,
        history_location as history_location,
        history_query as history_query,
        history_target as history_target,
        hud_source as hud_source,
        record_history as record_history,
    )
    from oota.api.options import (
        build_options as build_options,
        lock_options as lock_options,
    )
    from oota.api.reports import (
        Finished as Finished,
        Reported as Reported,
        current_fingerprints as current_fingerprints,
        finish_report as finish_report,
        report as report,
        report_with_history as report_with_history,
    )
    from oota.api.runs import (
        Ran as Ran,
        build as build,
        default_torch_image as default_torch_image,
        exit_code_for as exit_code_for,
        hosts as hosts,
        judge as judge,
        keygen as keygen,
        publish as publish,
        pull as pull,
        sign_results as sign_results,
        verify_here as verify_here,
    )
    from oota.api.tables import (
        format_hosts as format_hosts,
        format_rows as format_rows,
        host_row as host_row,
        hosts_exit_code as hosts_exit_code,
    )

_WHERE: dict[str, str] = {
    "DEFAULT_SINCE": "history",
    "Finished": "reports",
    "History": "history",
    "Imported": "history",
    "Ran": "runs",
    "Reported": "reports",
    "build": "runs",
    "build_options": "options",
    "cells_for": "cells",
    "check_here_flags": "flags",
    "check_history_flags": "flags",
    "current_fingerprints": "reports",
    "default_torch_image": "runs",
    "exit_code_for": "runs",
    "finish_report": "reports",
    "format_hosts": "tables",
    "format_rows": "tables",
    "generate": "cells",
    "git_revision": "history",
    "history_digest": "history",
    "history_import": "history",
    "history_location": "history",
    "history_query": "history",
    "history_target": "history",
    "host_row": "tables",
    "hosts": "runs",
    "hosts_exit_code": "tables",
    "hud_source": "history",
    "judge": "runs",
    "keygen": "runs",
    "lint": "cells",
    "lock": "cells",
    "lock_options": "options",
    "lock_status": "cells",
    "matrix_rows": "cells",
    "matrix_text": "cells",
    "publish": "runs",
    "pull": "runs",
    "record_history": "history",
    "release_check": "cells",
    "report": "reports",
    "report_formats": "flags",
    "report_with_history": "reports",
    "sign_results": "runs",
    "verify_here": "runs",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"oota.api.{module}"), name)
    globals()[name] = value
    return value


__all__ = sorted(_WHERE)
