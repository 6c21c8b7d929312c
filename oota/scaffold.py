"""``oota init --vendor NAME``: a vendor folder (and, where there is none, a matrix.yaml) that
builds and verifies on the CPU as it is: PyTorch's CPU build from its index, the shared suite,
one cell. A vendor then swaps in its own stack (vendor.yaml ``requirements``, ``device``,
``index_url``) and adds its checks to ``vendors/NAME/verify/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from oota.config.names import name_problem
from oota.errors import InputError
from oota.files import write_atomic

VENDOR_YAML = """\
# {name}: scaffolded by `oota init`. It installs PyTorch's CPU build and verifies it on the CPU;
# make it yours: `requirements` (your extension, formatted with {{torch}}, {{python}}, {{os}}),
# `device` (the device your extension registers), `index_url`, and checks of your own in
# verify/ (schema/vendor-v1.json lists every key).
name: {name}
display: {name}
# Where the stack's facts come from: PyTorch's own for its CPU build; yours once you change it.
source: https://github.com/pytorch/pytorch/blob/main/RELEASE.md
device: cpu
toolkit: null
index_url: https://download.pytorch.org/whl/cpu
requirements:
  - "torch=={{torch}}+cpu"
test_requirements:
  - "pytest>=8,<10"
  - "numpy>=1.26,<3"
smoke_imports: [torch]
verify:
  dtypes: [float32, float64]
  tolerances:
    float32: {{rtol: 1.0e-5, atol: 1.0e-5}}
    float64: {{rtol: 1.0e-7, atol: 1.0e-7}}
  models: []
ci:
  runs-on: [ubuntu-latest]
"""

DOCKERFILE = """\
{% extends "base.Dockerfile.j2" %}
{# The shared stages install the vendor's requirements; add the stack's own steps here. #}
"""

SKIPS = """\
# Tests this vendor knowingly skips, as data: a list of {id, reason, owner, expires}.
[]
"""

VENDOR_TEST = '''\
"""{name}'s own checks, run inside the image beside oota's suite (one layer per module)."""

import torch

LAYER = "vendor"


def test_a_tensor_on_the_device_adds_up():
    x = torch.ones(4, device="cpu")
    assert (x + x).sum().item() == 8.0
'''

MATRIX_YAML = """\
# Which stacks oota builds and verifies: `oota matrix` lists the cells, `oota build` builds
# and verifies them (scaffolded by `oota init`).
version: 1

os:
  debian12:
    image: debian:bookworm-slim
    python: ["3.11"]
    bootstrap: {{tool: debootstrap, suite: bookworm, mirror: "http://deb.debian.org/debian"}}

vendors:
  {name}:
    os: [debian12]
    python: ["3.11"]
    torch: ["2.13.0"]
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class Scaffolded:
    """The files ``oota init`` wrote."""

    written: tuple[Path, ...]
    matrix_written: bool


def scaffold(root: Path, name: str, matrix_file: Path) -> Scaffolded:
    """``vendors/NAME/`` in ``root`` and, when ``matrix_file`` does not exist, a matrix of
    that vendor's one cell. An existing vendor folder is never touched (InputError)."""
    problem = name_problem(name)
    if problem:
        raise InputError(f"--vendor {name!r}: {problem}")
    folder = root / "vendors" / name
    if folder.exists():
        raise InputError(f"{folder} already exists; `oota init` writes a new vendor folder only "
                         "(pick another name, or edit that one)")
    files = {folder / "vendor.yaml": VENDOR_YAML.format(name=name),
             folder / "Dockerfile.j2": DOCKERFILE, folder / "skips.yaml": SKIPS,
             folder / "verify" / f"test_{name.replace('-', '_')}.py":
                 VENDOR_TEST.format(name=name)}
    if not matrix_file.exists():
        files[matrix_file] = MATRIX_YAML.format(name=name)
    for path, text in files.items():
        write_atomic(path, text)
    return Scaffolded(written=tuple(files), matrix_written=matrix_file in files)
