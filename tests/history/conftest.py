"""The history's stores for the tests: an SQLite file, and a real PostgreSQL server started
here (Debian's postgresql package: initdb and pg_ctl) and removed at the end.

Every store test runs against both (``history_url``). PostgreSQL's initdb refuses to run as
root, so as root the server runs as ``nobody`` from a folder that user owns.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

PG_USER = "postgres"


def _pg_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                   else 0)
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "nobody", "--", *argv] if os.geteuid() == 0 else argv


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(_as_server_user(argv), capture_output=True, text=True, timeout=120,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}): {proc.stderr[-2000:]}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server on a loopback port for this session: its admin URL."""
    bin_dir = _pg_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server here (initdb); scripts/ensure-env.sh installs it")
    top = Path(tempfile.mkdtemp(prefix="oota-pg-"))
    top.chmod(0o755)  # the server's user must reach its data folder
    data, sockets = top / "data", top / "sockets"
    for folder in (data, sockets):
        folder.mkdir(mode=0o700)
        if os.geteuid() == 0:
            shutil.chown(folder, "nobody")
    port = _free_port()
    try:
        _run([str(bin_dir / "initdb"), "-D", str(data), "-U", PG_USER, "-A", "trust",
              "-E", "UTF8", "--no-sync"], "initdb")
        _run([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(sockets / "server.log"),
              "-w", "-t", "60", "-o",
              f"-F -p {port} -k {sockets} -c listen_addresses=127.0.0.1", "start"], "pg_ctl start")
        yield f"postgresql://{PG_USER}@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast",
                                        "-w", "stop"]), capture_output=True, timeout=120,
                       check=False)
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def postgres_database(postgres_server: str) -> Iterator[str]:
    """A new, empty database on the session's server (dropped after the test)."""
    name = f"history_{uuid.uuid4().hex[:12]}"
    admin = postgres_server
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield postgres_server.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def history_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty history: an SQLite file, or a database on a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    return str(request.getfixturevalue("postgres_database"))
