"""The jobs behind the tasks: each takes a task's checked flags, does one job, returns data.

* :mod:`~oota.api.requests`: one typed request per task, its fields the task's flags (help,
  default, check); :mod:`~oota.api.flags`: the checks;
* :mod:`~oota.api.cells`: the tasks of the matrix without an Engine (matrix, generate, lint,
  release-check, lock);
* :mod:`~oota.api.runs`: the tasks that drive Engines (build, verify, publish, pull, hosts,
  judge) and the signing of what a run wrote;
* :mod:`~oota.api.reports` and :mod:`~oota.api.history`: the report, and the history wired in;
* :mod:`~oota.api.tables`: what ``matrix`` and ``hosts`` print.

Imports go one way: ``flags`` and ``tables`` at the bottom, ``requests`` on ``flags``, then
``cells`` and ``history``, then ``runs`` and ``reports``. ``tasks.py`` imports the requests
when it loads and each job in the body of its task: loading every job costs a command line
about half a second (the Docker SDK, the SQL toolkit, the schema checker), which ``oota
matrix`` or ``oota --version`` would pay for nothing. Nothing here prints results or exits;
``tasks.py`` formats the returned data and maps exceptions (:mod:`oota.errors`) to exit codes.
"""
