"""Build the Docker tests' session images while the unit tests run (``./oota.sh test``).

The Docker session builds the default CPU, reference and CUDA cells for real (``built``,
``reference_built`` and ``cuda_built`` in conftest.py). With a cold BuildKit cache those builds
are most of the session's first minutes, and much of them waits on the network: the CUDA cell
downloads about 6 GB of wheels, the base image is bootstrapped from Debian's archive. So
``oota test`` runs this module beside the unit and browser tests, and starts the Docker session
only once it has ended. The session's builds then find their steps in BuildKit's cache, as they
do on any warm machine, and still build, verify and are checked exactly as before.

The images made here are removed again (their layers stay in BuildKit's cache). Stopped with
SIGTERM (the unit tests failed), it stops its builds and removes what it made, as any oota run
does. It is no test and never fails the run: a build that fails here is built again, and
reported, by the session. Nothing is written outside a temporary folder it removes.

    python -m tests.docker.prewarm     # what ./oota.sh test starts
"""

from __future__ import annotations

import io
import sys
import tempfile
import uuid
from pathlib import Path

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import RUN_LABEL
from oota.engine.docker import DockerEngine
from oota.execute.build import BuildOptions
from oota.execute.fleet import build_cells
from oota.execute.interrupts import signals_as_interrupts
from oota.plan import plan, select

REPO = Path(__file__).resolve().parents[2]
# The session's cells, the slowest first: with two at once the CUDA cell's download runs
# beside the CPU cell's build and then refdev's compile.
VENDORS = ("cuda", "cpu", "reference")


def main() -> int:
    try:
        engine = DockerEngine()
    except Exception as exc:  # noqa: BLE001 - no Engine: the Docker session says so itself
        print(f"prewarm: no Docker Engine ({exc}); nothing built", file=sys.stderr)
        return 0
    matrix = load_matrix(REPO / "matrix.yaml")
    cells = [cell for vendor in VENDORS for cell in select(matrix, plan(matrix, [vendor]))]
    run_id = f"prewarm-{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory(prefix="oota-prewarm-") as results, \
            signals_as_interrupts():
        options = BuildOptions(results_dir=Path(results), run_id=run_id, verify=False,
                               namespace="oota-test-prewarm",
                               extra_labels=(("oota.test", "true"), (RUN_LABEL, run_id)))
        try:
            # Its progress would interleave with the unit tests' output: only the outcome is said.
            done = build_cells(matrix, cells, engine, Console(io.StringIO(), live=False),
                               options, jobs=2)
            failed = [f"{r.cell.id}: {r.message}" for r in done if r.status == "error"]
            print(f"prewarm: {len(done) - len(failed)} of {len(cells)} session images built "
                  "into BuildKit's cache", *failed, sep="\n  ", file=sys.stderr)
        except KeyboardInterrupt:
            print("prewarm: stopped", file=sys.stderr)
        finally:
            engine.cleanup(run_id, images=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
