"""The checks of the flags: each function takes a flag's text and returns its typed value, or
raises InputError (exit 2) naming the flag. The requests (:mod:`oota.api.requests`) say
which check each flag gets; the two ``check_*_flags`` check flags against each other."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from oota.config.yamlsrc import did_you_mean
from oota.engine.base import Endpoint, RegistryAuth
from oota.errors import (
    InputError,
)
from oota.files import SMALL_LIMIT, link_problem, read_text
from oota.net import find_ca_bundle, redact, redact_text
from oota.vocab import LAYERS

# The checks that need a large module (the hosts file's schema, the HUD, the report writer,
# signing, base images) import it when they run: every command line loads this table, and
# the tests start hundreds of them.
if TYPE_CHECKING:
    from oota.supply.signing import PrivateKey

# Output formats of `matrix` and `hosts`.
FORMATS = ("table", "json")

# `matrix` also prints the job matrix of the shipped GitHub Actions workflow (oota/github.py).
MATRIX_FORMATS = (*FORMATS, "github")
MAX_JOBS = 64
HISTORY_FORMATS = FORMATS
HISTORY_ACTIONS = ("import", "query", "digest")
DEFAULT_RESULTS = "results"


def choice(flag: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` when it is one of ``choices``; otherwise an InputError naming the valid ones."""
    if value not in choices:
        hint = did_you_mean(value, choices)
        raise InputError(f"{flag} {value!r} is not one of {', '.join(choices)}"
                         + (f"; {hint}" if hint and hint.startswith("did") else ""))
    return value


def name_list(flag: str, items: list[str] | None) -> list[str] | None:
    """Repeatable, comma-separable name flags (``--vendor a,b --vendor c``); None when absent."""
    if not items:
        return None
    found = [name.strip() for item in items for name in item.split(",") if name.strip()]
    if not found:
        raise InputError(f"{flag} needs a name, e.g. {flag}=cpu")
    return found


def layers(text: str) -> tuple[str, ...]:
    """``--layer device,models``: the suite's layers (:data:`oota.vocab.LAYERS`), in order."""
    found = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    for layer in found:
        if layer not in LAYERS:
            hint = did_you_mean(layer, LAYERS)
            raise InputError(f"--layer {layer!r} is not a layer of the verify suite "
                             f"({', '.join(LAYERS)})"
                             + (f"; {hint}" if hint and hint.startswith("did") else ""))
    return found


def folder(flag: str, value: str) -> Path:
    """A folder flag (created when missing): refused when it, or a parent of it, is a file,
    or when a symbolic link in the project takes it outside the project or nowhere."""
    path = Path(value)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        which = "is a file" if existing == path else f"is inside {existing}, which is a file"
        raise InputError(f"{flag} {value}: {which}; name a folder (it is created when missing)")
    return within_project(flag, path)


def within_project(flag: str, path: Path) -> Path:
    """``path``, unless a symbolic link inside the project (the current folder) takes it
    outside or nowhere (:func:`oota.files.link_problem`): InputError naming the link."""
    problem = link_problem(path, Path.cwd())
    if problem:
        raise InputError(f"{flag} {path}: {problem}; oota writes only where the project's "
                         "links lead inside it: remove the link, or name a folder outside the "
                         "project")
    return path


def report_folder(flag: str) -> Callable[[str], str]:
    """The check of a report's folder flag (``--results``, ``--out``): as written, unless a
    link takes it out of the project (:func:`within_project`)."""
    def check(value: str) -> str:
        within_project(flag, Path(value))
        return value
    return check


def index_url(value: str | None) -> str | None:
    """``--index-url``: an http(s) URL with a host (pip inside the build cannot read a host's
    file:// path)."""
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--index-url {redact(value)!r} is not an http(s) URL; give the index "
                         "root, e.g. https://pypi.org/simple (or a wheel folder: --find-links)")
    return value


def ca_bundle(value: str | None) -> str | None:
    """``--ca-bundle``: an existing file (InputError otherwise), as an absolute path."""
    found = find_ca_bundle(value) if value else None
    return str(found) if found else None


_REGISTRY = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")


def registry(value: str) -> str:
    """``--registry``: a registry host (``registry.lab:5000``), optionally with a path, and no
    scheme or credentials (InputError otherwise)."""
    if not _REGISTRY.match(value):
        raise InputError(f"--registry {redact_text(value)!r}: give a registry host and optional "
                         "path, e.g. registry.lab:5000 or ghcr.io/my-lab (no https://, no "
                         "user:password)")
    return value.rstrip("/")


_PATH = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")


def namespace(value: str) -> str:
    """``--namespace``: the repository path before ``<vendor>:<cell>`` (``oota``, ``lab/oota``)."""
    if not _PATH.match(value):
        raise InputError(f"--namespace {value!r}: lower-case path components separated by '/', "
                         "e.g. oota or my-lab/oota")
    return value


def registry_auth(path: str | None) -> RegistryAuth | None:
    """``--registry-auth FILE``: a JSON file ``{"username": ..., "password": ...}`` (keep it
    readable by you only); InputError naming what is wrong, never its content."""
    if path is None:
        return None
    try:
        data = json.loads(read_text(Path(path), SMALL_LIMIT))
    except (OSError, ValueError, RecursionError) as exc:
        # Never the JSON error's text: it quotes the file, which holds a password.
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise InputError(f"--registry-auth {path}: not a readable JSON file ({why})") from None
    if not (isinstance(data, dict) and isinstance(data.get("username"), str)
            and isinstance(data.get("password"), str) and data["username"]):
        raise InputError(f"--registry-auth {path}: expected {{\"username\": ..., \"password\": "
                         "...}")
    return RegistryAuth(username=data["username"], password=data["password"])


def registry_ca(path: str | None) -> Path | None:
    """``--registry-ca FILE``: the CA bundle the registry's TLS certificate chains to."""
    if path is None:
        return None
    if not Path(path).is_file():
        raise InputError(f"--registry-ca {path}: no such file (a PEM CA bundle)")
    return Path(path)


def signing_key(path: str | None) -> PrivateKey | None:
    """``--key FILE`` of build and verify: the lab's private key (its password in
    OOTA_SIGNING_PASSWORD), loaded before the run (InputError, exit 2, when it is not one)."""
    from oota.supply import signing

    return signing.load_private(Path(path), signing.password_from_env()) if path else None


def engine_endpoint(host: str | None) -> Endpoint:
    """``--host``: one Docker Engine, written as a host of hosts.yaml writes its endpoint or
    context (InputError otherwise); None: the environment's engine."""
    if host is None:
        return Endpoint()
    from oota.config.hostsfile import endpoint_of

    url, context = endpoint_of(host, "--host")
    return Endpoint(name=host, url=url, context=context)


def check_here_flags(*, here: bool, python: str | None, cells: list[str] | None,
                     everything: bool, hosts: str | None = None, jobs: int = 1) -> None:
    """``verify --here`` verifies this environment as the one cell it matches: ``--cell`` and
    ``--all`` make no sense with it, nor do ``--hosts`` and ``--jobs`` (no engine is used),
    and ``--python`` none without it."""
    if here and (cells or everything):
        raise InputError("--cell and --all do not apply with --here: it verifies this "
                         "environment as the vendor's cell it matches")
    if here and (hosts is not None or jobs != 1):
        raise InputError("--hosts and --jobs do not apply with --here: it verifies this "
                         "environment, without Docker")
    if not here and python is not None:
        raise InputError("--python applies only with --here (built images carry their own)")


def registry_mirrors(items: list[str] | None) -> tuple[tuple[str, str], ...]:
    """``--registry-mirror REGISTRY=MIRROR`` flags, validated (InputError, exit code 2)."""
    from oota.execute.bases import parse_mirrors

    return tuple(parse_mirrors(items or []).items())


def jobs(text: str | int) -> int:
    """``--jobs N``: how many cells the local engine runs at once (1 to 64)."""
    value = str(text).strip()
    if not value.isdigit() or len(value) > 3 or not 1 <= int(value) <= MAX_JOBS:
        raise InputError(f"--jobs {str(text)[:20]!r}: give a whole number from 1 to "
                         f"{MAX_JOBS}, e.g. --jobs 2")
    return int(value)


def report_formats(text: str | None) -> tuple[str, ...]:
    """``--format crcr``: the extra outputs (a comma list of
    :data:`oota.report.write.EXTRA_FORMATS`)."""
    from oota.report.write import EXTRA_FORMATS

    names = tuple(dict.fromkeys(x.strip() for x in (text or "").split(",") if x.strip()))
    return tuple(choice("--format", name, EXTRA_FORMATS) for name in names)


def public_url(value: str | None) -> str | None:
    """``--public-url``: where the report is published, an http(s) URL without a credential
    (the scorecard prints it)."""
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f"--public-url {redact(value)!r}: not an http(s) URL; give the public "
                         "site the report is published at, e.g. https://lab.github.io/oota/report/")
    if redact(value) != value or "@" in parts.netloc:
        raise InputError(f"--public-url {redact(value)}: holds a credential; give the public "
                         "address, without one")
    return value


def hud_runs(value: str | int) -> int:
    """``--hud-runs N``: how many runs the HUD shows (a whole number, 1 or more)."""
    from oota.report import hud

    text = str(value).strip()
    if not text.isdigit() or len(text) > 9 or int(text) < 1:
        raise InputError(f"--hud-runs {str(value)[:20]!r} is not a number of runs; give 1 or "
                         f"more, e.g. --hud-runs {hud.DEFAULT_RUNS}")
    return int(text)


def since(value: str) -> dt.timedelta:
    """``--since 24h``, ``3d`` or ``1w``: the digest's window."""
    from oota.report import hud

    try:
        return hud.parse_since(value)
    except ValueError:
        raise InputError(f"--since {value[:40]!r} is not a window; give hours, days or weeks up "
                         f"to {hud.LONGEST_SINCE_DAYS} days, e.g. --since 24h, --since 3d or "
                         "--since 1w") from None


def check_history_flags(action: str, *, dirs: list[str] | None, selection: dict[str, str | None],
                        fmt: str, window: dt.timedelta | None = None) -> None:
    """``history ACTION``'s flags: each applies to one action (InputError, exit 2)."""
    choice("history", action, HISTORY_ACTIONS)
    given = [f"--{name}" for name, value in selection.items() if value]
    if action != "query" and (given or fmt != "table"):
        raise InputError(f"{(given or ['--format'])[0]} applies to `history query`; "
                         f"`history {action}` takes {_TAKES[action]}")
    if action != "import" and dirs:
        raise InputError(f"--dir applies to `history import`; `history {action}` takes "
                         f"{_TAKES[action]}")
    if action != "digest" and window is not None:
        raise InputError(f"--since applies to `history digest`; `history {action}` takes "
                         f"{_TAKES[action]}")


_TAKES = {"import": "--dir", "query": "--vendor, --cell and --test",
          "digest": "--since (e.g. --since 24h)"}
