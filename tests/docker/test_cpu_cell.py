"""The default CPU cell, built and verified for real, and what a user can check of the image."""

from __future__ import annotations

import json
import re

from testcontainers.core.container import DockerContainer

from oota.config.matrix import load_matrix
from oota.execute.verify import EXPECTED_IN_IMAGE, expected_results, forwarded_env
from oota.plan import plan, select
from oota.results.store import load, validation_errors
from oota.vocab import UNRUN_KEY
from tests import image_scan

from .conftest import DEFAULT_CELL, REPO


def test_default_cell_builds_and_verifies(built):
    (result,) = built.results
    assert result["status"] == "passed", result.get("message")
    assert result["stages"]["build"]["status"] == "passed"
    assert result["stages"]["verify"]["status"] == "passed"
    layers = {t["layer"] for t in result["tests"] if t["status"] == "passed"}
    assert {"install", "device"} <= layers
    assert result["installed"]["torch"]["version"] == "2.13.0+cpu"
    assert result["installed"]["torch"]["cuda"] is None


def test_result_files_validate_against_the_schema(built):
    folder = built.results_dir / DEFAULT_CELL
    data = json.loads((folder / "result.json").read_text())
    assert validation_errors(data) == []
    junit = (folder / "junit.xml").read_text()
    assert "<testsuite" in junit and DEFAULT_CELL in junit
    assert (folder / "build.log").stat().st_size > 0
    assert (folder / "verify.log").stat().st_size > 0


def test_report_states_where_torch_came_from(built):
    torch = built.results[0]["installed"]["torch"]
    # Whichever source won (the host's wheelhouse here, an index elsewhere), it is named.
    assert torch["source"].endswith(".whl")
    assert "torch-2.13.0+cpu" in torch["source"] or "torch-2.13.0%2Bcpu" in torch["source"]


def test_image_carries_oci_and_cell_labels(built, docker_client):
    labels = docker_client.images.get(built.tag).labels
    assert labels["oota.cell"] == DEFAULT_CELL
    assert labels["oota.torch"] == "2.13.0" and labels["oota.python"] == "3.11"
    assert labels["oota.fingerprint"] == built.results[0]["cell"]["fingerprint"]
    for key in ("title", "created", "revision", "source", "base.name"):
        assert f"org.opencontainers.image.{key}" in labels


def test_ca_bundle_is_in_no_layer_and_no_history(built, docker_client, marker_ca):
    bundle, marker_pem = marker_ca
    body = "".join(marker_pem.strip().splitlines()[1:-1]).encode()
    needle_lines = [line.encode() for line in marker_pem.strip().splitlines()[1:-1]][:3]
    assert built.results[0]["stages"]["build"]["status"] == "passed"
    hits = image_scan.holding(built.tag, [*needle_lines, body])
    assert hits == [], f"the CA bundle leaked into: {hits}"
    history = json.dumps(docker_client.images.get(built.tag).history())
    assert "marker" not in history and str(bundle) not in history
    assert "PIP_CERT=/" not in history.replace("PIP_CERT=/run/secrets/ca", "")


def test_runtime_image_is_non_root_with_a_compiler_only_as_declared(built, engine):
    """A compiler is in the runtime image only where the vendor's data asks for one
    (verify.compile.compiler: Inductor's CPU code generator compiles C++ when the suite runs),
    which the CPU vendor does; the reference image, which does not, has none
    (test_reference.py)."""
    cell = json.loads(engine.read_file(built.tag, "/opt/oota/cell.json"))
    assert cell["verify"]["compile"]["compiler"] is True
    with DockerContainer(built.tag).with_command("sleep 120") as container:
        code, out = container.exec(["id", "-u"])
        assert code == 0 and out.decode().strip() != "0"
        code, out = container.exec(["bash", "-c", "command -v gcc cc g++ c++ clang || true"])
        assert out.decode().split() == ["/usr/bin/gcc", "/usr/bin/cc", "/usr/bin/g++",
                                        "/usr/bin/c++"], out.decode()
        code, _ = container.exec(["test", "-e", "/run/secrets/ca"])
        assert code != 0
        # Inductor's vector-ISA probes came with the image (verify/oota_isacache.py): a cache
        # seeded as oota-verify seeds one gets no probe compiled, and Inductor still picks
        # the instruction sets this CPU has (each probe loaded here).
        code, out = container.exec(["/opt/venv/bin/python", "-c", PROBES_USED])
        assert code == 0, out.decode()
        compiled, chosen = out.decode().split("\n", 1)
        assert compiled == "compiled 0", out.decode()
        assert "INVALID_VEC_ISA" not in chosen and chosen.strip(), out.decode()


# Run in the CPU image: the probes compiled when a seeded cache serves Inductor's ISA check.
PROBES_USED = """
import os, subprocess, sys
sys.path.insert(0, "/opt/oota/verify")
from oota_isacache import seeded_cache
env = dict(os.environ)
folder = seeded_cache(env)
before = set(folder.rglob("*.so"))
check = "from torch._inductor.cpu_vec_isa import pick_vec_isa; print(pick_vec_isa())"
chosen = subprocess.run([sys.executable, "-c", check], env=env, check=True,
                        capture_output=True, text=True).stdout
print("compiled", len(set(folder.rglob("*.so")) - before))
print(chosen.strip())
"""


def test_user_can_reverify_the_image_by_hand(built, engine, docker_client, run_id):
    """The image carries its verification; re-running the suite by hand prints the cell's
    report and says how this run compares with it. By hand, a user runs a layer or two (so does
    the pull test, test_publish.py, with ``oota pull --layer``; a whole re-verification that
    keeps its seal is test_fleet.py's --reverify: one of the CPU cell cost about 90 s of a
    loaded CI run and tested nothing those do not)."""
    expected = json.loads(engine.read_file(built.tag, "/opt/oota/expected.json"))
    result = built.results[0]
    assert expected["cell"] == DEFAULT_CELL and expected["status"] == result["status"]
    assert [(t["id"], t["status"]) for t in expected["tests"]] == \
        [(t["id"], t["status"]) for t in result["tests"]]
    assert result["image"]["sealed"]["id"] == docker_client.images.get(built.tag).id
    output = docker_client.containers.run(built.tag, ["oota-verify", "-q", "--layer",
                                                      "device,models"],
                                          remove=True, stderr=False,
                                          labels={"oota.run": run_id},
                                          environment=forwarded_env())
    text = output.decode()
    assert f"oota-verify report: {DEFAULT_CELL} (torch 2.13.0, Python 3.11, device cpu): ✓" in text
    assert "| device | ✓ |" in text and "| llama | ✓ |" in text
    ran = [t for t in result["tests"] if t["layer"] in ("device", "models", "skips")]
    same = re.search(r"every one of the (\d+) tests ended the same way \((\d+) of its tests "
                     r"did not run this time", text)
    assert same, text[-3000:]
    assert int(same.group(1)) == len(ran)
    # the other layers' tests are not compared: counted, less the entries a budget left unrun
    assert 0 < int(same.group(2)) <= len(result["tests"]) - len(ran)


def test_a_run_that_differs_from_the_verification_says_which_tests(built, docker_client,
                                                                   run_id):
    """On a host where a test ends differently (here: a deliberately broken cell file), the
    comparison names the test and both outcomes."""
    script = ("python -c \"import json; c = json.load(open('/opt/oota/cell.json')); "
              "c['python'] = '3.99'; json.dump(c, open('/tmp/cell.json', 'w'))\" && "
              "OOTA_CELL_FILE=/tmp/cell.json oota-verify -q --layer install; true")
    text = docker_client.containers.run(built.tag, ["bash", "-c", script], remove=True,
                                        stderr=False,
                                        labels={"oota.run": run_id}).decode()
    assert "test_install.py::test_python_version_matches_cell: passed then, failed now" in text


def test_the_sealed_bytes_are_those_a_reseal_elsewhere_makes(built, engine):
    """The session's real verification (the ops layer's folded entry included) is sealed in
    canonical bytes: made again from result.json, as a reuse on another Engine seals it, they
    are the same bytes, so the same sealed image id. (A --reverify that finds the same outcome
    keeps the seal: test_fleet.py shows it on a fleet cell, whose suite is the same and whose
    verification costs a quarter of this cell's.)"""
    carried = engine.read_file(built.tag, EXPECTED_IN_IMAGE)
    result = load(built.results_dir / DEFAULT_CELL / "result.json")
    assert any(UNRUN_KEY in t.data for t in result.tests)  # the budget's folded entry
    sealed = result.image.sealed if result.image else None
    assert sealed is not None and sealed.at and sealed.run_id
    document = json.loads(carried)
    assert (document["verified_at"], document["run_id"]) == (sealed.at, sealed.run_id)
    matrix = load_matrix(REPO / "matrix.yaml")
    cell = select(matrix, plan(matrix, ["cpu"]), ids=[DEFAULT_CELL])[0]
    again = expected_results(cell, result.tests, result.installed, result.host, sealed.run_id,
                             verified_at=sealed.at)
    assert again.to_bytes() == carried
