"""What the engine reads out of BuildKit's plain progress output (no Docker needed)."""

from __future__ import annotations

import pytest

from oota.engine.cli import build_error_cause

PIP_FAILURE = """\
#10 [builder 4/7] RUN /opt/venv/bin/pip install "torch==2.14.1+cpu"
#10 0.580 Looking in links: /wheelhouse
#10 0.756 ERROR: Could not find a version that satisfies the requirement torch==2.14.1+cpu
#10 0.756 ERROR: No matching distribution found for torch==2.14.1+cpu
#10 ERROR: executor failed running [/bin/bash -o pipefail -c pip install]: exit code: 1
------
executor failed running [/bin/bash -o pipefail -c pip install]: exit code: 1
"""


@pytest.mark.parametrize(("tail", "cause"), [
    (PIP_FAILURE, "No matching distribution found for torch==2.14.1+cpu"),
    ("#7 0.5 E: Unable to locate package python3.99\n#7 ERROR: executor failed running [x]\n",
     "Unable to locate package python3.99"),
    ("#9 12.3 ModuleNotFoundError: No module named 'torch'\n", "ModuleNotFoundError: No module "
     "named 'torch'"),
    ("#4 ERROR: failed to compute cache key: \"/vendor/ext\" not found\n",
     'failed to compute cache key: "/vendor/ext" not found'),
], ids=["pip", "apt", "python", "buildkit-only"])
def test_the_cause_of_a_failed_build_is_the_last_step_error(tail, cause):
    assert build_error_cause(tail) == cause
