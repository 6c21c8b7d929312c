"""A pulled image whose labels lie is refused before anything of it runs: labels (and the
verification it carries, /opt/oota/expected.json) claiming another cell, fingerprint, run or
verification than its provenance says, or a verification it does not carry. An Engine faked at
oota's own boundary serves the image's labels and files; the provenance is the one
``oota.supply.provenance.check`` reads back from a statement made as publish makes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oota.engine.base import Endpoint, RunOutcome, RunRequest
from oota.execute import pull
from oota.execute.pull import Refused, check_claims, claims_problems
from oota.execute.verify import EXPECTED_IN_IMAGE
from oota.supply.provenance import ProvenanceFacts, Verification, check, statement

CELL = "cpu-torch2.13.0-py3.11-debian12"
FINGERPRINT = "sha256:" + "9" * 64
AT = "2026-11-23T10:00:00Z"
RUN = "run-7c0ffee"
DIGEST = "sha256:" + "ab" * 32


def provenance(*, run_id: str = RUN, status: str = "passed"):
    facts = ProvenanceFacts(image="r:5000/oota/cpu", digest=DIGEST, cell=CELL, vendor="cpu",
                            fingerprint=FINGERPRINT, revision="abc123", inputs={},
                            dependencies=(), verification=Verification(
                                status=status, counts={"passed": 40}, at=AT, run_id=run_id))
    return check(statement(facts), DIGEST)


def honest_labels() -> dict[str, str]:
    return {"org.opencontainers.image.version": CELL, "oota.fingerprint": FINGERPRINT,
            "oota.verified": "passed", "oota.verified-at": AT, "oota.run-flags": "{}"}


def honest_carried() -> dict[str, object]:
    return {"schema": "oota.expected/v1", "cell": CELL, "status": "passed", "verified_at": AT,
            "run_id": RUN, "tests": []}


class Image:
    """An Engine holding one pulled image (its labels and its sealed file), that records
    whether anything of it ran."""

    def __init__(self, labels: dict[str, str], carried: bytes | None) -> None:
        self.labels, self.carried, self.ran = labels, carried, False
        self.endpoint = Endpoint()
        self.commands: list[list[str]] = []

    def image_labels(self, ref: str) -> dict[str, str] | None:
        return dict(self.labels)

    def read_file(self, image: str, path: str, *, run_id: str = "") -> bytes:
        if path != EXPECTED_IN_IMAGE or self.carried is None:
            raise FileNotFoundError(f"{path} in {image}")
        return self.carried

    def pull_digest(self, repository: str, digest: str, auth: object) -> str:
        return "sha256:" + "cd" * 32

    def run(self, request: RunRequest) -> RunOutcome:
        self.ran = True
        self.commands.append(list(request.command))
        return RunOutcome(exit_code=0, timed_out=False, output_tail="oota-verify: 40 passed")


def image(labels: dict[str, str] | None = None, carried: dict[str, object] | None = None,
          *, none: bool = False) -> Image:
    found = honest_carried() | (carried or {})
    return Image(honest_labels() | (labels or {}), None if none else json.dumps(found).encode())


def test_an_honest_image_says_of_itself_what_its_provenance_says() -> None:
    assert claims_problems(honest_labels(), honest_carried(), provenance()) == []
    check_claims(image(), "r:5000/oota/cpu:x", "img", provenance())  # not refused
    # Every test skipped: the verification says so, the result (stages too) says passed.
    assert claims_problems(honest_labels() | {"oota.verified": "skipped"},
                           honest_carried() | {"status": "skipped"}, provenance()) == []


LIES = {
    "label-claims-another-cell": (
        image({"org.opencontainers.image.version": "cuda-torch2.15.0-cu13.2-py3.12-debian12"}),
        "its label org.opencontainers.image.version says 'cuda-torch2.15.0-cu13.2-py3.12-"
        f"debian12', its provenance '{CELL}'"),
    "label-claims-another-fingerprint": (
        image({"oota.fingerprint": "sha256:" + "1" * 64}),
        f"its label oota.fingerprint says 'sha256:{'1' * 64}', its provenance '{FINGERPRINT}'"),
    "label-claims-passed-over-a-failed-verification": (
        image(carried={"status": "failed"}),
        "the verification it carries (status) says 'failed', its provenance 'passed'"),
    "label-claims-another-verification-time": (
        image({"oota.verified-at": "2026-11-20T08:00:00Z"}),
        "its label oota.verified-at says '2026-11-20T08:00:00Z', its provenance "
        f"'{AT}'"),
    "carried-verification-of-another-run": (
        image(carried={"run_id": "run-other"}),
        f"the verification it carries (run_id) says 'run-other', its provenance '{RUN}'"),
    "carried-verification-of-another-cell": (
        image(carried={"cell": "cpu-torch2.12.0-py3.11-debian12"}),
        "the verification it carries (cell) says 'cpu-torch2.12.0-py3.11-debian12', its "
        f"provenance '{CELL}'"),
    "labels-claim-a-verification-it-does-not-carry": (
        image(none=True),
        f"it carries no verification ({EXPECTED_IN_IMAGE}), though its provenance says it "
        "was verified"),
}


@pytest.mark.parametrize("engine, why", LIES.values(), ids=LIES.keys())
def test_labels_that_lie_are_refused_before_anything_runs(engine: Image, why: str) -> None:
    with pytest.raises(Refused) as refused:
        check_claims(engine, "r:5000/oota/cpu:x", "img", provenance())
    assert refused.value.exit_code == 5
    assert str(refused.value).startswith("r:5000/oota/cpu:x: refused: the image says "
                                         "something else of itself than its provenance: ")
    assert why in str(refused.value)


def test_without_the_provenance_naming_a_field_the_image_is_held_to_itself() -> None:
    """A provenance an older oota wrote names no run, time or outcome of the verification:
    the image's labels and the verification it carries must still agree."""
    older = provenance(run_id="")
    assert claims_problems(honest_labels(), honest_carried() | {"run_id": "any"}, older) == []
    assert claims_problems(honest_labels() | {"oota.verified-at": "2026-01-01T00:00:00Z"},
                           honest_carried(), older)[-1] == (
        "its label oota.verified-at says '2026-01-01T00:00:00Z' and the verification it "
        f"carries (verified_at) says '{AT}'")


@pytest.mark.parametrize("carried", [b"\xff not json", b"[1, 2]", b"[" * 100_000],
                         ids=["not-json", "not-an-object", "nested-deep"])
def test_a_verification_it_cannot_read_is_refused(carried: bytes) -> None:
    with pytest.raises(Refused, match=f"the verification it carries \\({EXPECTED_IN_IMAGE}\\) "
                       "is (unreadable|not an object)"):
        check_claims(Image(honest_labels(), carried), "r", "img", provenance())


class Registry:
    """The registry, faked: every tag is DIGEST."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def resolve(self, repository: str, tag: str) -> str:
        return DIGEST


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry faked, and the image's provenance and SBOM taken as checked."""
    monkeypatch.setattr(pull, "RegistryClient", Registry)
    monkeypatch.setattr(pull, "check_provenance", lambda *args: provenance())
    monkeypatch.setattr(pull, "check_sbom", lambda *args: "checked")


def test_pull_refuses_the_lie_before_running_the_image(registry, tmp_path: Path) -> None:
    lying = image({"oota.fingerprint": "sha256:" + "1" * 64})
    with pytest.raises(Refused, match="its label oota.fingerprint says"):
        pull.pull_and_verify(lying, "r:5000/oota/cpu:x", key=None,  # type: ignore[arg-type]
                             auth=None, ca=None, workdir=tmp_path)
    assert not lying.ran
    honest = image()
    done = pull.pull_and_verify(honest, "r:5000/oota/cpu:x", key=None,  # type: ignore[arg-type]
                                auth=None, ca=None, workdir=tmp_path)
    assert honest.ran and done.counts == "40 passed"


def test_pull_with_layers_runs_those_layers_of_the_suite(registry, tmp_path: Path) -> None:
    """``oota pull --layer install,device``: the image's suite runs those layers only (its
    comparison with the verification the image carries says how many tests did not run)."""
    honest = image()
    for layers in (("install", "device"), ()):
        pull.pull_and_verify(honest, "r:5000/oota/cpu:x", key=None,  # type: ignore[arg-type]
                             auth=None, ca=None, workdir=tmp_path, layers=layers)
    with_layers, whole = honest.commands
    assert with_layers[with_layers.index("--layer") + 1] == "install,device"
    assert "--layer" not in whole
