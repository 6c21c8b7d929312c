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
    )
    from oota.api.cells import (
        generate as generate,
    )
    from oota.api.cells import (
        lint as lint,
    )
    from oota.api.cells import (
        lock as lock,
    )
    from oota.api.cells import (
        lock_status as lock_status,
    )
    from oota.api.cells import (
        matrix_rows as matrix_rows,
    )
    from oota.api.cells import (
        matrix_text as matrix_text,
    )
    from oota.api.cells import (
        release_check as release_check,
    )
    from oota.api.flags import (
        check_here_flags as check_here_flags,
    )
    from oota.api.flags import (
        check_history_flags as check_history_flags,
    )
    from oota.api.flags import (
        report_formats as report_formats,
    )
    from oota.api.flags import (
        since as since,
    )
    from oota.api.history import (
        History as History,
    )
    from oota.api.history import (
        Imported as Imported,
    )
    from oota.api.history import (
        git_revision as git_revision,
    )
    from oota.api.history import (
        history_digest as history_digest,
    )
    from oota.api.history import (
        history_import as history_import,
    )
    from oota.api.history import (
        history_location as history_location,
    )
    from oota.api.history import (
        history_query as history_query,
    )
    from oota.api.history import (
        history_target as history_target,
    )
    from oota.api.history import (
        hud_source as hud_source,
    )
    from oota.api.history import (
        record_history as record_history,
    )
    from oota.api.options import (
        build_options as build_options,
    )
    from oota.api.options import (
        lock_options as lock_options,
    )
    from oota.api.reports import (
        Finished as Finished,
    )
    from oota.api.reports import (
        Reported as Reported,
    )
    from oota.api.reports import (
        current_fingerprints as current_fingerprints,
    )
    from oota.api.reports import (
        finish_report as finish_report,
    )
    from oota.api.reports import (
        report as report,
    )
    from oota.api.reports import (
        report_with_history as report_with_history,
    )
    from oota.api.runs import (
        Ran as Ran,
    )
    from oota.api.runs import (
        build as build,
    )
    from oota.api.runs import (
        default_torch_image as default_torch_image,
    )
    from oota.api.runs import (
        exit_code_for as exit_code_for,
    )
    from oota.api.runs import (
        hosts as hosts,
    )
    from oota.api.runs import (
        judge as judge,
    )
    from oota.api.runs import (
        keygen as keygen,
    )
    from oota.api.runs import (
        publish as publish,
    )
    from oota.api.runs import (
        pull as pull,
    )
    from oota.api.runs import (
        sign_results as sign_results,
    )
    from oota.api.runs import (
        verify_here as verify_here,
    )
    from oota.api.tables import (
        format_hosts as format_hosts,
    )
    from oota.api.tables import (
        format_rows as format_rows,
    )
    from oota.api.tables import (
        host_row as host_row,
    )
    from oota.api.tables import (
        hosts_exit_code as hosts_exit_code,
    )

_WHERE: dict[str, str] = {
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
    "since": "flags",
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
