"""invoke publish against a real registry (Debian's docker-registry on loopback): the verified
CPU cell is pushed and its digest recorded; a cell without a verified image is refused."""

from __future__ import annotations

import json
import urllib.request
import uuid

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.execute.build import BuildOptions
from oota.execute.fleet import build_cells
from oota.execute.publish import publish_cells
from oota.plan import plan, select
from oota.results.store import load

from .conftest import DEFAULT_CELL, NAMESPACE, REPO


def _manifest_digest(registry: str, repository: str, tag: str) -> str:
    request = urllib.request.Request(
        f"http://{registry}/v2/{repository}/manifests/{tag}", method="HEAD",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(response.headers["Docker-Content-Digest"])


def test_the_verified_image_is_pushed_and_an_unverified_cell_refused(built, registry, engine,
                                                                    docker_client, tmp_path):
    matrix = load_matrix(REPO / "matrix.yaml")
    cpu = plan(matrix, ["cpu"])
    [default] = select(matrix, cpu, ids=[DEFAULT_CELL])
    other = next(c for c in cpu if c.id != DEFAULT_CELL)
    results = tmp_path / "results"
    # A whole verification now, so the result and the seal are this image's (other tests may
    # have re-verified it since the session built it).
    options = BuildOptions(results_dir=results, run_id=built.options.run_id,
                           namespace=NAMESPACE)
    [verified] = build_cells(matrix, [default], engine, Console(), options, build=False)
    assert verified.status == "passed", verified.message

    namespace = f"oota-test-{uuid.uuid4().hex[:8]}"
    pushed, refused = publish_cells(matrix, [default, other], engine, Console(),
                                    results_dir=results, registry=registry,
                                    namespace=namespace, local_namespace=NAMESPACE, auth=None)
    try:
        assert pushed.status == "pushed", pushed.reason
        assert pushed.ref == f"{registry}/{namespace}/cpu:{DEFAULT_CELL}"
        assert _manifest_digest(registry, f"{namespace}/cpu", DEFAULT_CELL) == pushed.digest
        recorded = load(results / DEFAULT_CELL / "result.json").image.published
        assert [(p.ref, p.digest) for p in recorded] == [(pushed.ref, pushed.digest)]
        assert json.loads((results / DEFAULT_CELL / "result.json").read_text())["status"] \
            == "passed"
        assert refused.status == "refused"
        assert refused.reason.startswith(("no image", "stale", "never verified"))
    finally:
        try:
            docker_client.images.remove(pushed.ref)
        except Exception:  # noqa: BLE001 - the push may not have tagged it
            pass
