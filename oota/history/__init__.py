"""The history of runs: every build, verify, merged report and imported results folder kept in
one store (an SQLite file by default, or a shared PostgreSQL), through SQLAlchemy Core.

:mod:`.location` turns ``--history``/``OOTA_HISTORY`` into a store URL, :mod:`.records` turns
:class:`~oota.results.model.Result` objects into the rows of one run, :mod:`.tables` declares
the schema, :mod:`.store` writes and reads it, and :mod:`.changes` finds where a cell or test
changed outcome and what changed in its inputs. For the HUD (oota/report/hud.py),
:mod:`.timeline` says how long a cell has been failing, blames its first bad run and tells
flaky failures apart, and :mod:`.policy` judges workload figures by ``history-policy.yaml``.
"""
