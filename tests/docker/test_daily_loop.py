"""The lab's daily loop on two real Engines (two more dockerds on loopback), kept small: a tiny
image on the bootstrapped Debian base, no torch. What it checks is oota's own machinery, for
real: the same Dockerfile built on both Engines is one image id, and the same verification
sealed into it on both is one sealed id; where a step is not reproducible, the layer and the
file are named; a daemon killed while a run's container runs leaves that container (running,
then stopped by the restarted daemon) and the run's duty to remove it, which the next run that
reaches the Engine discharges. The whole loop with real cells (two Engines, a CPU cell built on
both, publish from one and pull into the other) is run by hand with tests/workflow_runner.py
(docs/guides/github-actions.md).

Cost: two dockerds and a copy of the base image into each (about 40 s), three tiny builds per
Engine (seconds), one daemon restart.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from oota import reproducible
from oota.console import Console
from oota.engine.base import BuildRequest, Endpoint
from oota.engine.docker import DockerEngine
from oota.execute import samebytes
from oota.execute.leftovers import engine_key, marker_path, owned_run, waiting
from oota.results.assemble import assemble, cell_ref, now
from oota.results.model import Host, Image, Layer, Sealed, TestOutcome
from tests.engines import ExtraEngine

REPO = Path(__file__).resolve().parents[2]
BASE = "oota/base:debian12"
TAG = "oota-test-loop/tiny:one"
TOKEN = f"oota-lost-run-{uuid.uuid4().hex[:12]}"
SLEEP = f"sleep 600; : {TOKEN}"


@pytest.fixture(scope="module")
def pair(debian12_base, tmp_path_factory):
    """Two Engines (e4, e5), each with the bootstrapped Debian 12 base copied in."""
    why = ExtraEngine.usable()
    if why:
        pytest.skip(f"no extra Docker Engines here: {why}")
    assert debian12_base == BASE
    root = tmp_path_factory.mktemp("loop-engines")
    started: list[ExtraEngine] = []
    try:
        for index in (4, 5):
            extra = ExtraEngine(root / f"e{index}", index).start()
            started.append(extra)
            extra.load_from_first(BASE)
        yield started
    finally:
        for extra in started:
            extra.remove()


def _engine(extra: ExtraEngine, name: str) -> DockerEngine:
    return DockerEngine(Endpoint(name=name, url=extra.url))


def _context(folder: Path, run: str) -> Path:
    """A Dockerfile as oota's templates write one (the etc layer, the SHELL that dates what a
    step writes), with one RUN of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / reproducible.ETC_LAYER).write_bytes(reproducible.etc_layer())
    shell = reproducible.SHELL
    (folder / "Dockerfile").write_text(textwrap.dedent(f"""\
        FROM {BASE} AS runtime
        ADD {reproducible.ETC_LAYER} /
        ARG SOURCE_DATE_EPOCH={reproducible.LAYER_EPOCH}
        SHELL {__import__("json").dumps(list(shell))}
        RUN mkdir -p /opt/oota && echo hello > /opt/oota/hello.txt
        RUN {run}
        CMD ["cat", "/opt/oota/hello.txt"]
        """))
    return folder


def _build(engine: DockerEngine, context: Path) -> str:
    engine.build(BuildRequest(context=context, tag=TAG, labels={"oota.test": "true"},
                              epoch=reproducible.LAYER_EPOCH), lambda _: None)
    output = engine.build_output(TAG)
    assert output is not None
    return output


def test_one_dockerfile_on_two_engines_is_one_image_and_one_sealed_image(pair, tmp_path):
    e4, e5 = _engine(pair[0], "e4"), _engine(pair[1], "e5")
    context = _context(tmp_path / "same", "ln -s /opt/oota/hello.txt /opt/oota/link")
    built = {_build(e4, context), _build(e5, context)}
    assert len(built) == 1, built
    files = {"/opt/oota/expected.json": b'{"status": "passed"}\n'}
    labels = {"oota.verified": "passed", "oota.verified-at": "2026-11-24T10:00:00+00:00"}
    sealed = {e4.seal(TAG, files, labels), e5.seal(TAG, files, labels)}
    assert len(sealed) == 1, sealed
    assert e5.read_file(TAG, "/opt/oota/expected.json") == files["/opt/oota/expected.json"]
    assert e5.build_output(TAG) == next(iter(built))   # the seal's label names the build
    assert [x.step for x in e5.image_layers(TAG)][-2:] == [
        "RUN ln -s /opt/oota/hello.txt /opt/oota/link", "oota seal: /opt/oota/expected.json"]
    # A seal has no parent link: `docker image prune` removes the build output. Resealing
    # loads it again from the seal, and the new seal replaces the old one (no stacking).
    pair[1].docker("rmi", next(iter(built)))
    layers = len(e5.image_layers(TAG))
    e5.seal(TAG, {"/opt/oota/expected.json": b'{"status": "failed"}\n'},
            {**labels, "oota.verified": "failed"})
    assert e5.build_output(TAG) == next(iter(built)) and len(e5.image_layers(TAG)) == layers


def test_a_step_that_is_not_reproducible_is_named_with_its_file(pair, tmp_path):
    e4, e5 = _engine(pair[0], "e4"), _engine(pair[1], "e5")
    context = _context(tmp_path / "clock", "date +%s%N > /opt/oota/built-at")
    there, here = _build(e4, context), _build(e5, context)
    assert there != here
    verified = assemble(
        cell=cell_ref({"vendor": "cpu", "os": "debian12", "python": "3.11", "torch": "2.13.0"},
                      id="c", fingerprint="sha256:f"),
        stages={}, started_at=now(), tests=(TestOutcome(id="t::a", layer="install",
                                                        status="passed", duration_s=0.1),),
        host=Host(facts={"engine": "e4", "engine_id": e4.facts()["engine_id"]}),
        image=Image(tag=TAG, id=there, sealed=Sealed(id="sha256:x"),
                    layers=tuple(Layer(id=x.id, step=x.step) for x in e4.image_layers(TAG))))
    found = samebytes.compare(e5, TAG, verified, lambda key: e4 if key == verified.host.text(
        "engine_id") else None)
    assert not found.same
    assert "layer 4 of 4 differs (RUN date +%s%N > /opt/oota/built-at); files: " \
           "/opt/oota/built-at: content" in found.why


def test_a_killed_daemons_run_is_cleaned_up_when_the_engine_answers_again(pair, tmp_path):
    """An oota run (its own process) has a container running on e5; e5's dockerd is killed:
    the container goes on (its shim survives), the run cannot remove it and keeps its duty
    towards e5. After the restart, the next run that reaches e5 removes it."""
    extra, cache = pair[1], tmp_path / ".oota-cache"
    script = textwrap.dedent(f"""\
        import os
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from oota.console import Console
        from oota.engine.base import Endpoint, RunRequest
        from oota.engine.docker import DockerEngine
        from oota.execute.leftovers import owned_run
        engine = DockerEngine(Endpoint(name="e5", url={extra.url!r}))
        with owned_run(engine, __import__("pathlib").Path({str(cache)!r}), "lost-run",
                       Console()):
            try:
                engine.run(RunRequest(image={BASE!r}, command=["sh", "-c", os.environ["SLEEP"]],
                                      labels={{"oota.run": "lost-run"}}, timeout_s=600))
            except Exception as exc:
                print("run ended:", exc, file=sys.stderr)
        """)
    # The command reaches the run through its environment: pgrep -f must find the container,
    # not the run's own command line.
    with subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "SLEEP": SLEEP}) as run:
        deadline = time.monotonic() + 60
        while not _sleeping() and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.5)
        if not _sleeping():
            run.kill()  # else leaving the block waits out the run's 600 s
            _, err = run.communicate(timeout=60)
            log = (extra.root / "dockerd.log").read_text(errors="replace").splitlines()[-15:]
            pytest.fail("the run's container never started on e5\nthe run said: "
                        f"{err.strip()}\ne5's containers: "
                        f"{extra.docker('ps', '-a', check=False).stdout.strip()}\n"
                        "e5's dockerd.log ends:\n" + "\n".join(log))
        extra.kill_daemon()
        _, err = run.communicate(timeout=120)
    assert "could not remove the containers of run lost-run on host e5" in err
    assert _sleeping(), "the killed daemon's container should still be running"
    extra.restart()
    engine = _engine(extra, "e5")
    key = engine_key(engine)
    assert marker_path(cache, "lost-run", key).exists()
    assert waiting(cache, set()) == ["run lost-run on host e5"]
    with owned_run(engine, cache, "next-run", Console()):
        pass
    assert not _containers(extra, "lost-run") and not _sleeping()
    assert not marker_path(cache, "lost-run", key).exists()


def _containers(extra: ExtraEngine, run_id: str) -> list[str]:
    found = extra.docker("ps", "-aq", "--filter", f"label=oota.run={run_id}", check=False)
    return found.stdout.split()


def _sleeping() -> bool:
    """Does the lost run's container still run (its process is on this machine)?"""
    # Anchored: `docker create ... sh -c "sleep 600; : TOKEN"` holds the token in its command
    # line too, and matching it took a container not yet started for one that runs.
    found = subprocess.run(["pgrep", "-f", f"^sh -c {SLEEP}$"], capture_output=True, text=True)
    return bool(found.stdout.strip())
