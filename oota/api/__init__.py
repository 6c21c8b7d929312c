"""The functions behind the tasks, by job: each takes parsed flags, does one job, returns data.

* :mod:`~oota.api.flags`: every flag of every task, checked (a new flag is checked there);
* :mod:`~oota.api.cells`: the tasks of the matrix without an Engine (matrix, generate, lint,
  release-check, lock);
* :mod:`~oota.api.runs`: the tasks that drive Engines (build, verify, publish, pull, hosts,
  judge) and the signing of what a run wrote;
* :mod:`~oota.api.reports` and :mod:`~oota.api.history`: the report, and the history wired in;
* :mod:`~oota.api.tables`: what ``matrix`` and ``hosts`` print.

Imports go one way: ``flags`` and ``tables`` at the bottom, then ``cells`` and ``history``,
then ``runs`` and ``reports``. ``tasks.py`` uses the names listed here. Nothing here prints
results or exits; ``tasks.py`` formats the returned data and maps exceptions
(:mod:`oota.errors`) to exit codes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The names below are imported when first used (PEP 562), so a task loads only the jobs it
# runs: `oota matrix` loads neither the SQL toolkit nor the Docker SDK, and every command
# starts in a fraction of the time (a command line is started hundreds of times by the tests).
if TYPE_CHECKING:
    from oota.api.cells import (
        cells_for,
        generate,
        lint,
        lock,
        lock_status,
        matrix_rows,
        matrix_text,
        release_check,
    )
    from oota.api.flags import (
        DEFAULT_RESULTS,
        FORMATS,
        HISTORY_ACTIONS,
        HISTORY_FORMATS,
        MATRIX_FORMATS,
        MAX_JOBS,
        build_options,
        ca_bundle,
        check_here_flags,
        check_history_flags,
        choice,
        engine_endpoint,
        folder,
        hud_runs,
        index_url,
        jobs,
        layers,
        lock_options,
        name_list,
        namespace,
        registry,
        registry_auth,
        registry_ca,
        registry_mirrors,
        report_formats,
        signing_key,
        since,
    )
    from oota.api.history import (
        History,
        Imported,
        git_revision,
        history_digest,
        history_import,
        history_location,
        history_query,
        history_target,
        hud_source,
        record_history,
    )
    from oota.api.reports import (
        Finished,
        Reported,
        current_fingerprints,
        finish_report,
        report,
        report_with_history,
    )
    from oota.api.runs import (
        Ran,
        build,
        default_torch_image,
        exit_code_for,
        hosts,
        judge,
        keygen,
        publish,
        pull,
        sign_results,
        verify_here,
    )
    from oota.api.tables import (
        format_hosts,
        format_rows,
        host_row,
        hosts_exit_code,
    )
    from oota.execute import judge as judging

_WHERE: dict[str, str] = {
    "DEFAULT_RESULTS": "flags",
    "FORMATS": "flags",
    "Finished": "reports",
    "HISTORY_ACTIONS": "flags",
    "HISTORY_FORMATS": "flags",
    "History": "history",
    "Imported": "history",
    "MATRIX_FORMATS": "flags",
    "MAX_JOBS": "flags",
    "Ran": "runs",
    "Reported": "reports",
    "build": "runs",
    "build_options": "flags",
    "ca_bundle": "flags",
    "cells_for": "cells",
    "check_here_flags": "flags",
    "check_history_flags": "flags",
    "choice": "flags",
    "current_fingerprints": "reports",
    "default_torch_image": "runs",
    "engine_endpoint": "flags",
    "exit_code_for": "runs",
    "finish_report": "reports",
    "folder": "flags",
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
    "hud_runs": "flags",
    "hud_source": "history",
    "index_url": "flags",
    "jobs": "flags",
    "judge": "runs",
    "keygen": "runs",
    "layers": "flags",
    "lint": "cells",
    "lock": "cells",
    "lock_options": "flags",
    "lock_status": "cells",
    "matrix_rows": "cells",
    "matrix_text": "cells",
    "name_list": "flags",
    "namespace": "flags",
    "publish": "runs",
    "pull": "runs",
    "record_history": "history",
    "registry": "flags",
    "registry_auth": "flags",
    "registry_ca": "flags",
    "registry_mirrors": "flags",
    "release_check": "cells",
    "report": "reports",
    "report_formats": "flags",
    "report_with_history": "reports",
    "sign_results": "runs",
    "signing_key": "flags",
    "since": "flags",
    "verify_here": "runs",
    "judging": "",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module("oota.execute.judge") if name == "judging" else getattr(
        importlib.import_module(f"oota.api.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_RESULTS",
    "FORMATS",
    "Finished",
    "HISTORY_ACTIONS",
    "HISTORY_FORMATS",
    "History",
    "Imported",
    "MATRIX_FORMATS",
    "MAX_JOBS",
    "Ran",
    "Reported",
    "build",
    "build_options",
    "ca_bundle",
    "cells_for",
    "check_here_flags",
    "check_history_flags",
    "choice",
    "current_fingerprints",
    "default_torch_image",
    "engine_endpoint",
    "exit_code_for",
    "finish_report",
    "folder",
    "format_hosts",
    "format_rows",
    "generate",
    "git_revision",
    "history_digest",
    "history_import",
    "history_location",
    "history_query",
    "history_target",
    "host_row",
    "hosts",
    "hosts_exit_code",
    "hud_runs",
    "hud_source",
    "index_url",
    "jobs",
    "judge",
    "judging",
    "keygen",
    "layers",
    "lint",
    "lock",
    "lock_options",
    "lock_status",
    "matrix_rows",
    "matrix_text",
    "name_list",
    "namespace",
    "publish",
    "pull",
    "record_history",
    "registry",
    "registry_auth",
    "registry_ca",
    "registry_mirrors",
    "release_check",
    "report",
    "report_formats",
    "report_with_history",
    "sign_results",
    "signing_key",
    "since",
    "verify_here",
]
