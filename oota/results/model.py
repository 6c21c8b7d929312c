"""The result of one cell, as types: what ``result.json`` holds (``schema/result-v1.json``).

Built in one place (:mod:`oota.results.assemble`), written by one writer and read back by
:mod:`oota.results.store`. Each type's JSON comes from its fields (:mod:`oota.results.codec`:
``to_json`` and ``from_json``, the ``json_shape`` saying what an object leaves out), read back
with each value checked against its field's type, so a hand-edited or foreign file that the
schema lets through (it leaves host facts and test data open) still cannot put a wrong type
into the report: :class:`~oota.results.jsonfields.ResultFormatError` names the key instead.

Free-form parts (a test's measurements, a stage's detail, host facts) stay JSON values: they
are recorded and shown, never interpreted. What the image holds (torch, packages, sources,
the lock's pins) is :mod:`oota.results.software`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from oota.results.codec import ALL, Record, Shape, decode, encode
from oota.results.jsonfields import JSONObject, as_object, get_str
from oota.results.software import Installed, Requirements, Sources
from oota.vocab import Status

SCHEMA_ID = "oota.result/v1"


# -- the parts --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class CellRef(Record):
    """Which cell: its coordinates, and the fingerprint of everything its image was built from."""

    json_shape = Shape(omit=("channel", "platform"))

    id: str
    vendor: str
    os: str
    python: str
    torch: str
    toolkit: str | None
    toolkit_version: str | None
    fingerprint: str
    channel: str | None = None   # 'nightly': torch from a channel (then torch says the same)
    platform: str | None = None  # 'linux/arm64': built for it; None (absent): linux/amd64


@dataclass(frozen=True, kw_only=True, slots=True)
class Stage(Record):
    """One step of a cell's run (build, verify): how it ended and where its log is."""

    json_shape = Shape(omit=ALL)

    status: Status
    duration_s: float
    message: str = ""
    log: str | None = None  # relative to the result's folder
    detail: JSONObject = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class TestOutcome(Record):
    """One test of the in-image suite."""

    json_shape = Shape(omit=ALL)

    __test__ = False  # not a pytest test class, despite its name

    id: str
    layer: str
    status: Status
    duration_s: float
    message: str = ""
    data: JSONObject = field(default_factory=dict)  # measurements (model, seconds, ...)


@dataclass(frozen=True, kw_only=True, slots=True)
class VendorCheck(Record):
    """What the host check found for the cell's vendor."""

    json_shape = Shape(rest="facts")

    supported: bool
    reasons: tuple[str, ...] = ()
    facts: JSONObject = field(default_factory=dict)  # driver probe output, runtimes, ...


def place_name(engine: str | None, hostname: str | None) -> str:
    """The host's name in hosts.yaml; for the default engine (called 'local' on every machine)
    and for results older than engines, the machine's name."""
    if engine and engine != "local":
        return engine
    return hostname or engine or "unknown host"


def host_key(host: Host) -> str:
    """Which Engine made a result: its identity (``engine_id``), else, for results older than
    identities, its place name. Two results of one Engine have one key whatever they were
    called (``main`` in hosts.yaml, the machine's name without one)."""
    return host.text("engine_id") or host.place()


@dataclass(frozen=True, kw_only=True, slots=True)
class Host(Record):
    """The machine the result was made on: Docker's and the platform's facts as recorded
    (``python`` is the interpreter that ran the suite for ``verify --here``)."""

    json_shape = Shape(omit=("vendor_check",), rest="facts")

    facts: JSONObject = field(default_factory=dict)
    vendor_check: VendorCheck | None = None

    def text(self, key: str) -> str | None:
        value = self.facts.get(key)
        return None if value is None else str(value)

    def place(self) -> str:
        """Where the result was made, as people name it (:func:`place_name`)."""
        return place_name(self.text("engine"), self.text("hostname"))


@dataclass(frozen=True, kw_only=True, slots=True)
class BaseImage(Record):
    """The image a cell's image was built on, and how oota got it (pulled, bootstrapped,
    reused: taken from the up-to-date image's label)."""

    json_shape = Shape(omit=ALL, keep=("ref",))

    ref: str
    how: str = ""
    note: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Sealed(Record):
    """The verification put into the image: the new image id and file, or why that failed;
    ``at`` and ``run_id``: the verification it carries (a run that keeps an equivalent seal
    did not make it: the pair says whose it is)."""

    json_shape = Shape(omit=ALL)

    id: str | None = None
    file: str | None = None
    at: str | None = None
    run_id: str | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Published(Record):
    """Where ``invoke publish`` pushed the verified image: the reference it was pushed as, the
    registry's manifest digest (what ``docker pull REF@DIGEST`` pins), and when; and the
    artifacts beside it in the registry (cosign's tag scheme), each ``REPO:TAG@DIGEST``: its
    signature ('' when published without a key), SBOM and provenance."""

    json_shape = Shape(omit=ALL)

    ref: str
    digest: str
    at: str
    signature: str = ""
    sbom: str = ""
    provenance: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Layer(Record):
    """One layer of the image: its digest (diff id) and the build step that made it."""

    json_shape = Shape(omit=ALL, keep=("id",))

    id: str
    step: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Image(Record):
    """The cell's image; ``id`` is the build output the verification judged (the sealed image
    adds only its results), ``layers`` its layers; ``run_flags`` are the device flags a
    ``docker run`` of it needs (its ``oota.run-flags`` label, :mod:`oota.supply.runflags`),
    empty on CPU and in older results."""

    json_shape = Shape(omit=ALL)

    tag: str
    id: str | None = None
    digest: str | None = None
    base: BaseImage | None = None
    sealed: Sealed | None = None
    published: tuple[Published, ...] = ()
    run_flags: JSONObject = field(default_factory=dict)
    layers: tuple[Layer, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class SkipRule(Record):
    """One entry of the vendor's skip list, with how many tests it matched in this run."""

    json_shape = Shape(omit=ALL)

    id: str
    reason: str
    owner: str
    expires: str
    added: str | None = None
    issue: str | None = None   # the address of the issue that tracks it
    kind: str | None = None    # 'xfail': an expected failure; None: a skip
    strict: bool | None = None  # xfail: an unexpected pass fails the run
    matched: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Skips(Record):
    """The vendor's skip list as applied: entries, those past their date, those that matched
    no test."""

    entries: tuple[SkipRule, ...] = ()
    expired: tuple[str, ...] = ()
    unmatched: tuple[str, ...] = ()
    unexpected_pass: tuple[str, ...] = ()  # expected failures whose tests passed


# -- the result -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Result(Record):
    """One cell's run. ``status``, ``summary`` and ``message`` are derived from the stages and
    tests by :func:`oota.results.assemble.assemble`, and stored as written."""

    json_shape = Shape(omit=("message", "run_id", "image", "installed", "sources", "skips",
                             "requested", "requirements"))

    cell: CellRef
    status: Status
    summary: Mapping[str, int]
    stages: Mapping[str, Stage]
    tests: tuple[TestOutcome, ...]
    host: Host
    oota_version: str
    started_at: str
    finished_at: str
    message: str = ""
    run_id: str | None = None
    image: Image | None = None
    installed: Installed | None = None
    sources: Sources | None = None
    skips: Skips | None = None
    requested: tuple[str, ...] = ()  # the pip requirements the cell asked for
    requirements: Requirements | None = None  # the same, vendor's apart from the suite's

    def pass_env(self) -> dict[str, str]:
        """The vendor's pass_env switches the verification ran with (the verify stage's
        ``detail.env``, written however it ended; {} for none)."""
        verify = self.stages.get("verify")
        env = verify.detail.get("env") if verify else None
        return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}

    def to_json(self) -> JSONObject:
        data = encode(self)
        version = data.pop("oota_version")
        return data | {"schema": SCHEMA_ID, "toolkit": {"name": "oota", "version": version}}

    @classmethod
    def from_json(cls, value: object, where: str = "") -> Result:
        data = dict(as_object(value, "result"))
        data["oota_version"] = get_str(as_object(data.get("toolkit"), "toolkit"), "version",
                                       "toolkit")
        return decode(cls, data, where)

__all__ = ["SCHEMA_ID", "BaseImage", "CellRef", "Host", "Image", "Result", "Sealed", "SkipRule",
           "Skips", "Stage", "Status", "TestOutcome", "VendorCheck"]
