"""The history's schema (SQLAlchemy Core). A run has results, one per cell and host; a result
has its tests, its measurements (figures) and the extensions it installed. Indexes serve the
questions asked of a history: a cell's or a test's runs in time order, a vendor's cells.

``SCHEMA_VERSION`` is written into ``schema_version``; a later oota that changes the tables
raises it and migrates a history it finds at an older version (:data:`MIGRATIONS`).

Version 2: ``results.engine_id``, the identity of the Engine that made a result (its name, in
``host``, may change: blame and baselines compare identities), and ``environment``, the
pass_env switches a result's verification ran with.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

SCHEMA_VERSION = 2
# The statements that bring a history from the version before each key to that version (the
# tables added meanwhile are made by create_all); plain SQL both SQLite and PostgreSQL run.
MIGRATIONS = {2: ("ALTER TABLE results ADD COLUMN engine_id VARCHAR(80)",)}

metadata = MetaData()

schema_version = Table(
    "schema_version", metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", String(40), nullable=False),
)

runs = Table(
    "runs", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_key", String(200), nullable=False),
    Column("origin", String(16), nullable=False),  # build, verify, merge, import
    Column("started_at", String(40), nullable=False),  # ISO 8601 with offset, sorts as text
    Column("finished_at", String(40), nullable=False),
    Column("recorded_at", String(40), nullable=False),
    Column("oota_version", String(40), nullable=False),
    Column("git_revision", String(64)),
    UniqueConstraint("run_key", "origin", name="uq_runs_key_origin"),
    Index("ix_runs_started", "started_at"),
)

run_hosts = Table(
    "run_hosts", metadata,
    Column("run_id", ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("host", String(200), primary_key=True),
)

results = Table(
    "results", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("cell_id", String(200), nullable=False),
    Column("vendor", String(64), nullable=False),
    Column("os", String(64), nullable=False),
    Column("python", String(16), nullable=False),
    Column("torch", String(64), nullable=False),  # the matrix's coordinate
    Column("toolkit", String(64)),
    Column("toolkit_version", String(64)),
    Column("fingerprint", String(80), nullable=False),
    Column("status", String(24), nullable=False),
    Column("message", Text, nullable=False),
    Column("host", String(200), nullable=False),
    Column("engine", String(200)),
    Column("engine_id", String(80)),  # version 2; None in results older than identities
    Column("hostname", String(200)),
    Column("started_at", String(40), nullable=False),
    Column("finished_at", String(40), nullable=False),
    Column("torch_version", String(128)),  # resolved in the image
    Column("torch_git", String(64)),
    Column("toolkit_resolved", String(64)),
    Column("base_ref", Text),
    Column("image_tag", Text),
    Column("image_id", String(80)),
    Column("image_digest", String(80)),
    UniqueConstraint("run_id", "cell_id", "host", name="uq_results_run_cell_host"),
    Index("ix_results_cell", "cell_id", "run_id"),
    Index("ix_results_vendor", "vendor", "run_id"),
)

extensions = Table(
    "extensions", metadata,
    Column("result_id", ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(200), primary_key=True),
    Column("version", String(128)),
)

# The pip requirements a result's cell asked for, in their order (the blame names a changed
# pin). Added after version 1's first tables: create_all adds it to an older history, whose
# results simply have none.
requirements = Table(
    "requirements", metadata,
    Column("result_id", ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("text", Text, nullable=False),
)

# The vendor's run.pass_env switches a result's verification ran with (a fault injected, an
# operator slowed): the blame names one set or changed. Version 2.
environment = Table(
    "environment", metadata,
    Column("result_id", ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(200), primary_key=True),
    Column("value", Text, nullable=False),
)

tests = Table(
    "tests", metadata,
    Column("result_id", ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    Column("test_id", String(500), primary_key=True),
    Column("layer", String(32), nullable=False),
    Column("status", String(24), nullable=False),
    Column("duration_s", Float, nullable=False),
    Column("message", Text, nullable=False),
    Index("ix_tests_test", "test_id", "result_id"),
)

figures = Table(
    "figures", metadata,
    Column("result_id", ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    Column("test_id", String(500), primary_key=True),
    Column("name", String(200), primary_key=True),
    Column("number", Float),
    Column("text", Text),
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "environment", "extensions", "figures", "metadata",
           "requirements", "results", "run_hosts", "runs", "schema_version", "tests"]
