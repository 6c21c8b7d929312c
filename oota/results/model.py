"""The result of one cell, as types: what ``result.json`` holds (``schema/result-v1.json``).

Built in one place (:mod:`oota.results.assemble`), written by one writer and read back by
:mod:`oota.results.store`. ``to_json`` gives the file's shape; ``from_json`` reads it back with
typed getters (:mod:`oota.results.jsonfields`), so a hand-edited or foreign file that the schema
lets through (it leaves host facts and test data open) still cannot put a wrong type into the
report: :class:`~oota.results.jsonfields.ResultFormatError` names the key instead.

Free-form parts (a test's measurements, a stage's detail, host facts) stay JSON values: they
are recorded and shown, never interpreted. What the image holds (torch, packages, sources,
the lock's pins) is :mod:`oota.results.software`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from oota.results.jsonfields import (
    JSON,
    JSONObject,
    ResultFormatError,
    as_object,
    drop_empty,
    get_int,
    get_number,
    get_opt_str,
    get_str,
    get_strs,
    json_object,
    status_of,
)
from oota.results.software import Installed, Requirements, Sources
from oota.vocab import Status

SCHEMA_ID = "oota.result/v1"


# -- the parts --------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class CellRef:
    """Which cell: its coordinates, and the fingerprint of everything its image was built from."""

    id: str
    vendor: str
    os: str
    python: str
    torch: str
    toolkit: str | None
    toolkit_version: str | None
    fingerprint: str
    channel: str | None = None   # 'nightly': torch from a channel (then torch says the same)

    def to_json(self) -> JSONObject:
        data: JSONObject = {
            "id": self.id, "vendor": self.vendor, "os": self.os, "python": self.python,
            "torch": self.torch, "toolkit": self.toolkit, "toolkit_version": self.toolkit_version,
            "fingerprint": self.fingerprint}
        return data | ({"channel": self.channel} if self.channel else {})

    @classmethod
    def from_json(cls, value: object, where: str = "cell") -> CellRef:
        d = as_object(value, where)
        return cls(id=get_str(d, "id", where), vendor=get_str(d, "vendor", where),
                   os=get_str(d, "os", where), python=get_str(d, "python", where),
                   torch=get_str(d, "torch", where), toolkit=get_opt_str(d, "toolkit", where),
                   toolkit_version=get_opt_str(d, "toolkit_version", where),
                   fingerprint=get_str(d, "fingerprint", where),
                   channel=get_opt_str(d, "channel", where))


@dataclass(frozen=True, kw_only=True, slots=True)
class Stage:
    """One step of a cell's run (build, verify): how it ended and where its log is."""

    status: Status
    duration_s: float
    message: str = ""
    log: str | None = None  # relative to the result's folder
    detail: JSONObject = field(default_factory=dict)

    def to_json(self) -> JSONObject:
        return drop_empty({"status": self.status, "duration_s": self.duration_s,
                            "message": self.message, "log": self.log, "detail": self.detail})

    @classmethod
    def from_json(cls, value: object, where: str) -> Stage:
        d = as_object(value, where)
        return cls(status=status_of(d.get("status"), f"{where}.status"),
                   duration_s=get_number(d, "duration_s", where),
                   message=get_opt_str(d, "message", where) or "", log=get_opt_str(d, "log", where),
                   detail=json_object(d.get("detail") or {}, f"{where}.detail"))


@dataclass(frozen=True, kw_only=True, slots=True)
class TestOutcome:
    """One test of the in-image suite."""

    __test__ = False  # not a pytest test class, despite its name

    id: str
    layer: str
    status: Status
    duration_s: float
    message: str = ""
    data: JSONObject = field(default_factory=dict)  # measurements (model, seconds, ...)

    def to_json(self) -> JSONObject:
        return drop_empty({"id": self.id, "layer": self.layer, "status": self.status,
                            "duration_s": self.duration_s, "message": self.message,
                            "data": self.data})

    @classmethod
    def from_json(cls, value: object, where: str) -> TestOutcome:
        d = as_object(value, where)
        return cls(id=get_str(d, "id", where), layer=get_str(d, "layer", where),
                   status=status_of(d.get("status"), f"{where}.status"),
                   duration_s=get_number(d, "duration_s", where),
                   message=get_opt_str(d, "message", where) or "",
                   data=json_object(d.get("data") or {}, f"{where}.data"))


@dataclass(frozen=True, kw_only=True, slots=True)
class VendorCheck:
    """What the host check found for the cell's vendor."""

    supported: bool
    reasons: tuple[str, ...] = ()
    facts: JSONObject = field(default_factory=dict)  # driver probe output, runtimes, ...

    def to_json(self) -> JSONObject:
        return {**self.facts, "supported": self.supported, "reasons": list(self.reasons)}

    @classmethod
    def from_json(cls, value: object, where: str) -> VendorCheck:
        facts = json_object(value, where)
        reasons = get_strs(facts, "reasons", where)
        supported = facts.pop("supported", False)
        facts.pop("reasons", None)
        return cls(supported=bool(supported), reasons=reasons, facts=facts)


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
class Host:
    """The machine the result was made on: Docker's and the platform's facts as recorded
    (``python`` is the interpreter that ran the suite for ``verify --here``)."""

    facts: JSONObject = field(default_factory=dict)
    vendor_check: VendorCheck | None = None

    def text(self, key: str) -> str | None:
        value = self.facts.get(key)
        return None if value is None else str(value)

    def place(self) -> str:
        """Where the result was made, as people name it (:func:`place_name`)."""
        return place_name(self.text("engine"), self.text("hostname"))

    def to_json(self) -> JSONObject:
        check = {"vendor_check": self.vendor_check.to_json()} if self.vendor_check else {}
        return {**self.facts, **check}

    @classmethod
    def from_json(cls, value: object, where: str = "host") -> Host:
        facts = json_object(value, where)
        check = facts.pop("vendor_check", None)
        return cls(facts=facts, vendor_check=None if check is None
                   else VendorCheck.from_json(check, f"{where}.vendor_check"))


@dataclass(frozen=True, kw_only=True, slots=True)
class BaseImage:
    """The image a cell's image was built on, and how oota got it (pulled, bootstrapped,
    reused: taken from the up-to-date image's label)."""

    ref: str
    how: str = ""
    note: str = ""

    def to_json(self) -> JSONObject:
        return drop_empty({"ref": self.ref, "how": self.how, "note": self.note}) | {
            "ref": self.ref}

    @classmethod
    def from_json(cls, value: object, where: str) -> BaseImage:
        d = as_object(value, where)
        return cls(ref=get_opt_str(d, "ref", where) or "", how=get_opt_str(d, "how", where) or "",
                   note=get_opt_str(d, "note", where) or "")


@dataclass(frozen=True, kw_only=True, slots=True)
class Sealed:
    """The verification put into the image: the new image id and file, or why that failed."""

    id: str | None = None
    file: str | None = None
    at: str | None = None
    error: str | None = None

    def to_json(self) -> JSONObject:
        return drop_empty({"id": self.id, "file": self.file, "at": self.at, "error": self.error})

    @classmethod
    def from_json(cls, value: object, where: str) -> Sealed:
        d = as_object(value, where)
        return cls(id=get_opt_str(d, "id", where), file=get_opt_str(d, "file", where),
                   at=get_opt_str(d, "at", where), error=get_opt_str(d, "error", where))


@dataclass(frozen=True, kw_only=True, slots=True)
class Published:
    """Where ``invoke publish`` pushed the verified image: the reference it was pushed as, the
    registry's manifest digest (what ``docker pull REF@DIGEST`` pins), and when; and the
    artifacts beside it in the registry (cosign's tag scheme), each ``REPO:TAG@DIGEST``: its
    signature ('' when published without a key), SBOM and provenance."""

    ref: str
    digest: str
    at: str
    signature: str = ""
    sbom: str = ""
    provenance: str = ""

    def to_json(self) -> JSONObject:
        return drop_empty({"ref": self.ref, "digest": self.digest, "at": self.at,
                            "signature": self.signature or None, "sbom": self.sbom or None,
                            "provenance": self.provenance or None})

    @classmethod
    def from_json(cls, value: object, where: str) -> Published:
        d = as_object(value, where)
        return cls(ref=get_str(d, "ref", where), digest=get_str(d, "digest", where),
                   at=get_str(d, "at", where), signature=get_opt_str(d, "signature", where) or "",
                   sbom=get_opt_str(d, "sbom", where) or "",
                   provenance=get_opt_str(d, "provenance", where) or "")


@dataclass(frozen=True, kw_only=True, slots=True)
class Layer:
    """One layer of the image: its digest (diff id) and the build step that made it."""

    id: str
    step: str = ""

    def to_json(self) -> JSONObject:
        return drop_empty({"id": self.id, "step": self.step}) | {"id": self.id}


@dataclass(frozen=True, kw_only=True, slots=True)
class Image:
    """The cell's image; ``id`` is the build output the verification judged (the sealed image
    adds only its results), ``layers`` its layers; ``run_flags`` are the device flags a
    ``docker run`` of it needs (its ``oota.run-flags`` label, :mod:`oota.supply.runflags`),
    empty on CPU and in older results."""

    tag: str
    id: str | None = None
    digest: str | None = None
    base: BaseImage | None = None
    sealed: Sealed | None = None
    published: tuple[Published, ...] = ()
    run_flags: JSONObject = field(default_factory=dict)
    layers: tuple[Layer, ...] = ()

    def to_json(self) -> JSONObject:
        return drop_empty({"tag": self.tag, "id": self.id, "digest": self.digest,
                            "base": self.base.to_json() if self.base else None,
                            "sealed": self.sealed.to_json() if self.sealed else None,
                            "published": [p.to_json() for p in self.published] or None,
                            "run_flags": self.run_flags,
                            "layers": [x.to_json() for x in self.layers] or None})

    @classmethod
    def from_json(cls, value: object, where: str = "image") -> Image:
        d = as_object(value, where)
        published = d.get("published") or []
        if not isinstance(published, list):
            raise ResultFormatError(f"{where}.published: expected a list")
        return cls(tag=get_str(d, "tag", where), id=get_opt_str(d, "id", where),
                   digest=get_opt_str(d, "digest", where),
                   base=None if d.get("base") is None
                   else BaseImage.from_json(d["base"], f"{where}.base"),
                   sealed=None if d.get("sealed") is None
                   else Sealed.from_json(d["sealed"], f"{where}.sealed"),
                   published=tuple(Published.from_json(p, f"{where}.published[{i}]")
                                   for i, p in enumerate(published)),
                   run_flags=json_object(d.get("run_flags") or {}, f"{where}.run_flags"),
                   layers=_layers(d.get("layers"), f"{where}.layers"))


def _layers(value: object, where: str) -> tuple[Layer, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ResultFormatError(f"{where}: expected a list")
    found = []
    for i, item in enumerate(value):
        d = as_object(item, f"{where}[{i}]")
        found.append(Layer(id=get_str(d, "id", f"{where}[{i}]"),
                           step=get_opt_str(d, "step", f"{where}[{i}]") or ""))
    return tuple(found)


@dataclass(frozen=True, kw_only=True, slots=True)
class SkipRule:
    """One entry of the vendor's skip list, with how many tests it matched in this run."""

    id: str
    reason: str
    owner: str
    expires: str
    added: str | None = None
    matched: int = 0

    def to_json(self) -> JSONObject:
        return drop_empty({"id": self.id, "reason": self.reason, "owner": self.owner,
                            "expires": self.expires, "added": self.added,
                            "matched": self.matched})

    @classmethod
    def from_json(cls, value: object, where: str) -> SkipRule:
        d = as_object(value, where)
        return cls(id=get_str(d, "id", where), reason=get_str(d, "reason", where),
                   owner=get_str(d, "owner", where), expires=get_str(d, "expires", where),
                   added=get_opt_str(d, "added", where), matched=get_int(d, "matched", where))


@dataclass(frozen=True, kw_only=True, slots=True)
class Skips:
    """The vendor's skip list as applied: entries, those past their date, those that matched
    no test."""

    entries: tuple[SkipRule, ...] = ()
    expired: tuple[str, ...] = ()
    unmatched: tuple[str, ...] = ()

    def to_json(self) -> JSONObject:
        return {"entries": [e.to_json() for e in self.entries], "expired": list(self.expired),
                "unmatched": list(self.unmatched)}

    @classmethod
    def from_json(cls, value: object, where: str = "skips") -> Skips:
        d = as_object(value, where)
        entries = d.get("entries") or []
        if not isinstance(entries, list):
            raise ResultFormatError(f"{where}.entries: expected a list")
        return cls(entries=tuple(SkipRule.from_json(e, f"{where}.entries[{i}]")
                                 for i, e in enumerate(entries)),
                   expired=get_strs(d, "expired", where), unmatched=get_strs(d, "unmatched", where))


# -- the result -------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class Result:
    """One cell's run. ``status``, ``summary`` and ``message`` are derived from the stages and
    tests by :func:`oota.results.assemble.assemble`, and stored as written."""

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
        data: JSONObject = {
            "schema": SCHEMA_ID, "cell": self.cell.to_json(), "status": self.status,
            "summary": dict(self.summary),
            "stages": {name: stage.to_json() for name, stage in self.stages.items()},
            "tests": [test.to_json() for test in self.tests], "host": self.host.to_json(),
            "toolkit": {"name": "oota", "version": self.oota_version},
            "started_at": self.started_at, "finished_at": self.finished_at}
        optional: dict[str, JSON] = {
            "message": self.message, "run_id": self.run_id,
            "image": self.image.to_json() if self.image else None,
            "installed": self.installed.to_json() if self.installed else None,
            "sources": self.sources.to_json() if self.sources else None,
            "skips": self.skips.to_json() if self.skips else None,
            "requested": list(self.requested) or None,
            "requirements": self.requirements.to_json() if self.requirements else None}
        return data | drop_empty(optional)

    @classmethod
    def from_json(cls, value: object) -> Result:
        d = as_object(value, "result")
        stages = as_object(d.get("stages") or {}, "stages")
        tests = d.get("tests") or []
        if not isinstance(tests, list):
            raise ResultFormatError("tests: expected a list")
        summary = as_object(d.get("summary") or {}, "summary")
        return cls(
            cell=CellRef.from_json(d.get("cell")),
            status=status_of(d.get("status"), "status"),
            summary={str(k): get_int(summary, str(k), "summary") for k in summary},
            stages={str(n): Stage.from_json(s, f"stages.{n}") for n, s in stages.items()},
            tests=tuple(TestOutcome.from_json(t, f"tests[{i}]") for i, t in enumerate(tests)),
            host=Host.from_json(d.get("host") or {}),
            oota_version=get_str(as_object(d.get("toolkit"), "toolkit"), "version", "toolkit"),
            started_at=get_str(d, "started_at", "result"),
            finished_at=get_str(d, "finished_at", "result"),
            message=get_opt_str(d, "message", "result") or "",
            run_id=get_opt_str(d, "run_id", "result"),
            image=None if d.get("image") is None else Image.from_json(d["image"]),
            installed=None if d.get("installed") is None else Installed.from_json(d["installed"]),
            sources=None if d.get("sources") is None else Sources.from_json(d["sources"]),
            skips=None if d.get("skips") is None else Skips.from_json(d["skips"]),
            requested=get_strs(d, "requested", "result"),
            requirements=None if d.get("requirements") is None
            else Requirements.from_json(d["requirements"]))


__all__ = ["SCHEMA_ID", "BaseImage", "CellRef", "Host", "Image", "Result", "Sealed", "SkipRule",
           "Skips", "Stage", "Status", "TestOutcome", "VendorCheck"]
