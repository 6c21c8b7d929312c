"""invoke publish: only verified, sealed, current images are pushed; every other cell is refused
with its reason (fake engine: no Docker; the real push is tests/docker/test_publish.py)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
from pathlib import Path

import pytest

from oota.api import flags
from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import Endpoint, RegistryAuth
from oota.errors import InputError, StepFailed
from oota.execute.publish import publish_cells, refusal
from oota.plan import plan
from oota.render import context_files, fingerprint, render_cell
from oota.results.assemble import assemble, cell_ref, now
from oota.results.model import Host, Image, Sealed, Stage, TestOutcome
from oota.results.store import load, save
from tests import forkcli

REPO = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "ab" * 32


class FakeEngine:
    endpoint = Endpoint()

    def __init__(self, labels: dict[str, str] | None, image_id: str = "sha256:sealed",
                 fails: bool = False) -> None:
        self.labels, self.id, self.fails = labels, image_id, fails
        self.pushed: list[tuple[str, str, RegistryAuth | None]] = []

    def image_labels(self, ref: str) -> dict[str, str] | None:
        return self.labels

    def image_id(self, ref: str) -> str | None:
        return self.id if self.labels is not None else None

    def push(self, image: str, ref: str, auth: RegistryAuth | None) -> str:
        if self.fails:
            raise StepFailed(f"push of {ref} failed: unauthorized: authentication required")
        self.pushed.append((image, ref, auth))
        return DIGEST


def _cell(project):
    matrix = load_matrix(project.matrix)
    cell = plan(matrix, ["cpu"])[0]
    return matrix, cell, fingerprint(context_files(matrix, render_cell(matrix, cell)))


def _result(cell, print_: str, *, test_status="passed", sealed_id="sha256:sealed"):
    tests = (TestOutcome(id="test_install.py::test_torch_imports", layer="install",
                         status=test_status, duration_s=0.1),)
    return assemble(cell=cell_ref(cell.coordinates(), id=cell.id, fingerprint=print_),
                    stages={"verify": Stage(status="passed", duration_s=1.0)}, tests=tests,
                    host=Host(facts={"engine": "local"}), started_at=now(), run_id="r1",
                    image=Image(tag=f"oota/cpu:{cell.id}", id=sealed_id,
                                sealed=Sealed(id=sealed_id, at="2026-11-23T10:00:00")))


def _labels(print_: str, **more: str) -> dict[str, str]:
    return {"oota.fingerprint": print_, "oota.verified": "passed", **more}


def test_what_is_refused_and_why(project):
    _, cell, current = _cell(project)
    good = _result(cell, current)
    assert refusal(good, _labels(current), "sha256:sealed", current) == ""
    cases = {
        "no image": refusal(good, None, None, current),
        "stale image": refusal(good, _labels("sha256:" + "0" * 64), "sha256:sealed", current),
        "never verified": refusal(None, _labels(current), "sha256:sealed", current),
        "stale result": refusal(_result(cell, "sha256:" + "1" * 64), _labels(current),
                                "sha256:sealed", current),
        "failed": refusal(_result(cell, current, test_status="failed"), _labels(current),
                          "sha256:sealed", current),
        "unsealed": refusal(good, {"oota.fingerprint": current}, "sha256:sealed", current),
        "retagged": refusal(good, _labels(current), "sha256:other", current),
    }
    assert cases["no image"].startswith("no image: build and verify it first")
    assert cases["stale image"].startswith("stale: the image was built from other inputs")
    assert cases["never verified"].startswith("never verified: no result.json")
    assert cases["stale result"].startswith("stale: its last verification was of other inputs")
    assert cases["failed"].startswith("its last verification failed")
    assert cases["unsealed"].startswith("unsealed: the image does not carry its verification")
    assert cases["retagged"].startswith("the image changed since its verification")


def test_an_unsupported_here_verification_may_be_published(project):
    _, cell, current = _cell(project)
    tests = (TestOutcome(id="test_device.py::test_alloc", layer="device",
                         status="unsupported-here", duration_s=0.0, message="no GPU"),)
    result = assemble(cell=cell_ref(cell.coordinates(), id=cell.id, fingerprint=current),
                      stages={}, tests=tests, host=Host(facts={}), started_at=now(),
                      image=Image(tag="t", sealed=Sealed(id="sha256:sealed")))
    assert result.status == "unsupported-here"
    assert refusal(result, _labels(current), "sha256:sealed", current) == ""


def test_a_pushed_image_is_recorded_in_its_result_and_others_are_left_alone(project, tmp_path):
    matrix, cell, current = _cell(project)
    results = tmp_path / "results"
    save(results / cell.id, _result(cell, current))
    engine = FakeEngine(_labels(current))
    auth = RegistryAuth(username="lab", password="s3cret-password")
    shown = io.StringIO()
    cells = plan(matrix, ["cpu"])
    outcomes = publish_cells(matrix, cells, engine, Console(shown, live=False),
                             results_dir=results, registry="registry.lab:5000",
                             namespace="oota", local_namespace="oota", auth=auth)
    first, second = outcomes
    assert (first.status, first.digest) == ("pushed", DIGEST)
    assert first.ref == f"registry.lab:5000/oota/cpu:{cell.id}"
    assert engine.pushed == [(f"oota/cpu:{cell.id}", first.ref, auth)]
    assert second.status == "refused" and second.reason.startswith("stale")  # not its image
    published = load(results / cell.id / "result.json").image.published
    assert [(p.ref, p.digest) for p in published] == [(first.ref, DIGEST)]
    # Publishing again to the same place replaces the entry; the password is nowhere.
    publish_cells(matrix, cells[:1], engine, Console(io.StringIO(), live=False),
                  results_dir=results, registry="registry.lab:5000", namespace="oota",
                  local_namespace="oota", auth=auth)
    assert len(load(results / cell.id / "result.json").image.published) == 1
    assert "s3cret" not in (results / cell.id / "result.json").read_text()
    assert "s3cret" not in shown.getvalue() and "s3cret" not in repr(auth)


def test_a_failed_push_is_reported_and_the_result_unchanged(project, tmp_path):
    matrix, cell, current = _cell(project)
    results = tmp_path / "results"
    save(results / cell.id, _result(cell, current))
    before = (results / cell.id / "result.json").read_text()
    [outcome] = publish_cells(matrix, plan(matrix, ["cpu"])[:1], FakeEngine(
        _labels(current), fails=True), Console(io.StringIO(), live=False), results_dir=results,
        registry="r:5000", namespace="oota", local_namespace="oota", auth=None)
    assert outcome.status == "failed" and "authentication required" in outcome.reason
    assert (results / cell.id / "result.json").read_text() == before


@pytest.mark.parametrize("value", ["https://registry.lab", "user:pw@registry.lab", "reg lab",
                                   ""])
def test_bad_registries_are_refused(value):
    with pytest.raises(InputError, match="--registry"):
        flags.registry(value)
    assert flags.registry("registry.lab:5000/my-lab") == "registry.lab:5000/my-lab"


def test_registry_auth_file(tmp_path):
    good = tmp_path / "auth.json"
    good.write_text(json.dumps({"username": "lab", "password": "pw"}))
    assert flags.registry_auth(str(good)) == RegistryAuth(username="lab", password="pw")
    bad = tmp_path / "bad.json"
    bad.write_text('{"user": "lab", "password": "hunter2"}')
    with pytest.raises(InputError) as info:
        flags.registry_auth(str(bad))
    assert "hunter2" not in str(info.value)


def test_publish_refuses_with_exit_1_and_one_line_per_cell(project):
    """The real command: nothing was verified in a fresh project, so every cell is refused
    (Docker answers here or not: a missing engine is exit 3, which the test accepts only if
    no engine runs)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = forkcli.run([sys.executable, "-m", "oota", "-r", str(REPO), "publish",
                        "--registry", "127.0.0.1:1", "--vendor", "cpu", "--all"],
                       env=env, capture_output=True, text=True, cwd=project.root,
                       timeout=120)
    if proc.returncode == 3:
        pytest.skip(f"no Docker Engine here: {proc.stderr.strip()}")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2 and all(line.split()[0] == "refused" for line in lines), lines


class Identified(FakeEngine):
    def __init__(self, engine_id: str, labels: dict[str, str] | None, image_id: str) -> None:
        super().__init__(labels, image_id)
        self.engine_id = engine_id
        self.endpoint = Endpoint(name=engine_id.removeprefix("id-"))

    def facts(self) -> dict[str, str]:
        return {"engine_id": self.engine_id}


def _verified_on(cell, current, engine_id: str):
    result = _result(cell, current)
    facts = {"engine": "e2", "engine_id": engine_id, "endpoint": "tcp://127.0.0.1:2376"}
    return dataclasses.replace(result, host=Host(facts=facts))


def test_an_image_is_pushed_from_the_engine_that_verified_it(project, tmp_path):
    matrix, cell, current = _cell(project)
    save(tmp_path / "results" / cell.id, _verified_on(cell, current, "id-e2"))
    e1 = Identified("id-e1", _labels(current), "sha256:built-here-too")
    e2 = Identified("id-e2", _labels(current), "sha256:sealed")
    said = io.StringIO()
    [outcome] = publish_cells(matrix, [cell], e1, Console(said, live=False),
                              results_dir=tmp_path / "results", registry="r:5000",
                              namespace="oota", local_namespace="oota", auth=None, others=[e2])
    assert outcome.status == "pushed"
    assert (e1.pushed, [p[1] for p in e2.pushed]) == ([], [outcome.ref])
    assert outcome.engine == "e2" and said.getvalue().rstrip().endswith("(from e2)")


def test_a_cell_verified_on_an_engine_not_reached_is_refused_naming_it(project, tmp_path):
    matrix, cell, current = _cell(project)
    save(tmp_path / "results" / cell.id, _verified_on(cell, current, "id-e2"))
    [outcome] = publish_cells(matrix, [cell], Identified("id-e1", _labels(current), "sha256:x"),
                              Console(io.StringIO(), live=False),
                              results_dir=tmp_path / "results", registry="r:5000",
                              namespace="oota", local_namespace="oota", auth=None)
    assert outcome.status == "refused"
    assert outcome.reason == ("verified on host e2 (tcp://127.0.0.1:2376), which this command "
                              "does not reach: give the hosts file (--hosts hosts.yaml) or "
                              "that Engine (--host ENDPOINT)")


def _signed_build(cell, current, results: Path, key) -> Path:
    """A cell's result as `build --key` leaves it: result.json and its result.sig."""
    from oota.results.signed import sign_result

    folder = results / cell.id
    result = _result(cell, current)
    save(folder, result)
    sign_result(folder, result, key)
    return folder


def test_build_sign_publish_then_a_merge_checks_the_signature(project, tmp_path, monkeypatch):
    """Publishing records the push in result.json; with the lab's key it signs that result
    again, so a merge with the lab's public key still sees it signed (it used to find it
    unsigned: saving removes the signature of the result it replaces)."""
    from oota.execute import publish as publishing
    from oota.execute.attach import Attached, Signer
    from oota.supply import signing

    keys = signing.generate(tmp_path / "lab", None)
    key = signing.load_private(keys.private, None)
    matrix, cell, current = _cell(project)
    folder = _signed_build(cell, current, tmp_path / "results", key)
    tag = "registry.lab:5000/oota/cpu:sha256-" + "ab" * 32
    monkeypatch.setattr(publishing, "attach", lambda *a, **k: Attached(
        sbom=f"{tag}.sbom@{DIGEST}", provenance=f"{tag}.att@{DIGEST}",
        signature=f"{tag}.sig@{DIGEST}"))
    [outcome] = publish_cells(matrix, [cell], FakeEngine(_labels(current)),
                              Console(io.StringIO(), live=False),
                              results_dir=tmp_path / "results", registry="registry.lab:5000",
                              namespace="oota", local_namespace="oota", auth=None,
                              signer=Signer(key=key))
    assert outcome.status == "pushed" and not outcome.unsigned_result
    assert load(folder / "result.json").image.published  # the push is in the signed result
    merged = forkcli.run(
        [sys.executable, "-m", "oota", "report", "--merge", "results", "--key",
         str(keys.public), "--no-history"], cwd=tmp_path, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert merged.returncode == 0, merged.stderr
    assert "signatures: 1 result(s) signed by --key, 0 unsigned" in merged.stdout


def test_publishing_a_signed_result_without_a_key_says_it_is_no_longer_signed(project,
                                                                             tmp_path):
    from oota.supply import signing

    keys = signing.generate(tmp_path / "lab", None)
    matrix, cell, current = _cell(project)
    folder = _signed_build(cell, current, tmp_path / "results",
                           signing.load_private(keys.private, None))
    shown = io.StringIO()
    [outcome] = publish_cells(matrix, [cell], FakeEngine(_labels(current)),
                              Console(shown, live=False), results_dir=tmp_path / "results",
                              registry="registry.lab:5000", namespace="oota",
                              local_namespace="oota", auth=None)
    assert outcome.status == "pushed" and outcome.unsigned_result
    assert not (folder / "result.sig").exists()
    assert "its result.json records the push and is no longer signed" in shown.getvalue()
