"""vendor.yaml is checked at every depth: schema/vendor-v1.json (the published format) and the
loader agree, and every bad value is one located line with a fix, exit code 2.

The bad files are the repository's own vendor.yaml files with one edit each, so the tests
follow the real shape of the data.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from oota.config.vendors import SCHEMA_FILE, VENDOR_NAME, discover, load_vendor, schema
from oota.config.yamlsrc import load_yaml
from oota.errors import EXIT_BAD_INPUT, MatrixError
from tests import forkcli

REPO = Path(__file__).resolve().parents[2]
SHIPPED = discover(REPO / "vendors")
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))


def copy_vendor(tmp_path: Path, name: str, edit: tuple[str, str] | None = None,
                folder: str | None = None) -> Path:
    """vendors/<name>/ copied under tmp_path (as ``folder``), with one text replacement."""
    target = tmp_path / "vendors" / (folder or name)
    shutil.copytree(SHIPPED[name], target)
    if edit:
        file = target / "vendor.yaml"
        text = file.read_text()
        assert text.count(edit[0]) == 1, f"{edit[0]!r} is not once in {name}'s vendor.yaml"
        file.write_text(text.replace(edit[0], edit[1]))
    return target


def problems_of(folder: Path, root: Path) -> list[str]:
    with pytest.raises(MatrixError) as info:
        load_vendor(folder, root)
    assert info.value.exit_code == EXIT_BAD_INPUT
    return info.value.problems


# -- the shipped files and the published schema ----------------------------------------------
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_vendor_yaml_validates_against_the_published_schema(name: str) -> None:
    file = SHIPPED[name] / "vendor.yaml"
    assert not list(VALIDATOR.iter_errors(load_yaml(file).data))
    # A user's own YAML-to-JSON tool reads 1.0e-5 as a number, not text: still valid.
    assert not list(VALIDATOR.iter_errors(yaml.safe_load(file.read_text())))
    load_vendor(SHIPPED[name], REPO)


def test_schema_is_draft_2020_12_and_closed_and_documented() -> None:
    document = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    for path, node in _subschemas(document):
        if node.get("type") == "object" or "object" in (node.get("type") or []):
            assert node.get("additionalProperties") is False or "propertyNames" in node, path
        for key, prop in (node.get("properties") or {}).items():
            assert prop.get("description"), f"{path}.{key} has no description"
        types = node.get("type")
        checked = {"pattern", "not", "enum"} & set(node) or (isinstance(types, list)
                                                             and "null" not in types)
        if checked and not path.endswith("/not"):  # a `not` reads its parent's title
            assert node.get("title"), f"{path}: a checked value needs a title for its message"


def _subschemas(node: Any, path: str = "#") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _subschemas(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _subschemas(value, f"{path}/{i}")


def test_the_name_pattern_is_the_schemas() -> None:
    assert schema()["$defs"]["name"]["pattern"] == VENDOR_NAME.pattern


def test_schema_models_are_the_suites() -> None:
    tree = ast.parse((REPO / "verify" / "test_models.py").read_text())
    models = next(node.value for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)
                  and getattr(node.target, "id", "") == "MODELS")
    assert isinstance(models, ast.Dict)
    names = [key.value for key in models.keys if isinstance(key, ast.Constant)]
    assert schema()["$defs"]["model"]["enum"] == names


def test_schema_dtypes_are_torch_dtypes() -> None:
    torch = pytest.importorskip("torch")
    for name in schema()["$defs"]["dtype"]["enum"]:
        assert isinstance(getattr(torch, name, None), torch.dtype), name


# -- the cases -----------------------------------------------------------------------
def test_typos_in_rocm_are_both_reported_with_their_place_and_fix(tmp_path: Path) -> None:
    folder = copy_vendor(tmp_path, "rocm")
    file = folder / "vendor.yaml"
    text = file.read_text()
    file.write_text(text.replace("  devices: [/dev/kfd", "  devcies: [/dev/kfd")
                    .replace("  dtypes: [", "  dtyeps: ["))
    lines = text.splitlines()
    devices = next(i for i, line in enumerate(lines, 1) if "devices: [/dev/kfd" in line)
    dtypes = next(i for i, line in enumerate(lines, 1) if line.startswith("  dtypes: ["))
    assert problems_of(folder, tmp_path) == [
        f"vendors/rocm/vendor.yaml:{devices}:3: host.devcies: unknown key 'devcies'; "
        "did you mean 'devices'?",
        f"vendors/rocm/vendor.yaml:{dtypes}:3: verify.dtyeps: unknown key 'dtyeps'; "
        "did you mean 'dtypes'?",
    ]


RULE = 'requires: "=={major}.{minor}.*"'    # vendors/xla/vendor.yaml's requires_torch

# (vendor, (old text, new text), expected problem: path and message after file:line:col, and
# whether the published schema alone catches it (the rest needs the loader's value checks).
BAD = {
    "devices-as-string": ("rocm", ("devices: [/dev/kfd, /dev/dri]", 'devices: "/dev/kfd"'),
                          "host.devices: expected a list of strings, got a string; write it "
                          "as a list: [/dev/kfd]", True),
    "tolerances-as-string": ("rocm", ("  tolerances:\n    float32: {rtol: 1.3e-6, atol: 1.0e-5}"
                                      "\n    float16: {rtol: 1.0e-3, atol: 1.0e-5}\n    "
                                      "bfloat16: {rtol: 1.6e-2, atol: 1.0e-5}\n",
                                      '  tolerances: "tight"\n'),
                             "verify.tolerances: expected a mapping, got a string", True),
    "unknown-placeholder": ("cuda", ('local_version: "+cu{cuda_nodot}"',
                                     'local_version: "+cu{nope}"'),
                            "local_version: '+cu{nope}': unknown placeholder {nope}", False),
    "placeholder-typo": ("cuda", ('"torch=={torch}{local}"', '"torch=={trch}{local}"'),
                         "requirements[0]: 'torch=={trch}{local}': unknown placeholder "
                         "{trch}; did you mean 'torch'?", False),
    "axis-named-os": ("rocm", ("axis: rocm,", "axis: os,"),
                      "toolkit.axis: 'os' is not a toolkit axis name of its own", True),
    "requirement-with-newline": ("rocm", ('  - "torch=={torch}+rocm{rocm}"',
                                          '  - "torch=={torch}+rocm{rocm}\\nRUN curl x | sh"'),
                                 "requirements[0]: 'torch=={torch}+rocm{rocm}\\nRUN curl x | "
                                 "sh' contains a control character (U+000A, a line break)", True),
    "requirement-with-quote": ("rocm", ('  - "numpy>=1.26,<3"', '  - \'numpy" && rm -rf /\''),
                               "test_requirements[1]: 'numpy\" && rm -rf /' is not a PEP 508 "
                               "requirement once filled in", False),
    "env-key-with-space": ("reference", ('  REFDEV_DEVICE_COUNT: "2"', '  A B: "2"'),
                           "env.A B: key 'A B' is not an environment variable name", True),
    "dtype-typo": ("cpu", ("dtypes: [float32, float64,", "dtypes: [flaot32, float64,"),
                   "verify.dtypes[0]: 'flaot32' is not a torch dtype name; did you mean "
                   "'float32'?", True),
    "model-typo": ("cpu", ("models: [llama,", "models: [lama,"),
                   "verify.models[0]: 'lama' is not a model of the suite (verify/test_models.py "
                   "MODELS); did you mean 'llama'?", True),
    "apt-injection": ("reference", ("builder_apt: [g++]", 'builder_apt: ["g++ && rm -rf /"]'),
                      "builder_apt[0]: 'g++ && rm -rf /' is not a Debian package name", True),
    "image-with-space": ("rocm", ("image: rocm/dev-ubuntu-24.04:7.2,",
                                  'image: "rocm/dev-ubuntu-24.04:7.2 AS x",'),
                         "base_images.ubuntu24.04.7.2.image: 'rocm/dev-ubuntu-24.04:7.2 AS x' is "
                         "not an image reference", True),
    "tolerance-missing": ("rocm", ("    float16: {rtol: 1.0e-3, atol: 1.0e-5}\n", ""),
                          "verify.dtypes[1]: 'float16' has no entry in verify.tolerances", False),
    "tolerance-negative": ("rocm", ("float16: {rtol: 1.0e-3,", "float16: {rtol: -1.0e-3,"),
                           "verify.tolerances.float16.rtol: '-1.0e-3' is not a number from 0 "
                           "to 1", True),
    "tolerance-loosened-by-typo": ("rocm", ("float16: {rtol: 1.0e-3,", "float16: {rtol: 1.0e+3,"),
                                   "verify.tolerances.float16.rtol: '1.0e+3' is not a number "
                                   "from 0 to 1; a tolerance above 1 lets every result pass",
                                   False),
    "tolerance-above-one": ("rocm", ("float16: {rtol: 1.0e-3,", "float16: {rtol: 2,"),
                            "verify.tolerances.float16.rtol: 2 is not a number from 0 to 1",
                            True),
    "extension-torch-typo": ("ascend", ('torch: "=={torch}"}', 'torch: "=={torhc}"}'),
                             "verify.extensions[0].torch: '=={torhc}': unknown placeholder "
                             "{torhc}; did you mean 'torch'?", False),
    "bad-format-field": ("xpu", ('"torch=={torch}+xpu"', '"torch=={torch!r}+xpu"'),
                         "requirements[0]: 'torch=={torch!r}+xpu': '{torch!r}' is not a plain "
                         "placeholder", False),
    "gpus-word": ("cuda", ("gpus: all", "gpus: everything"),
                  "run.gpus: 'everything' is not 'all' or a number of GPUs", True),
    "run-flags-are-gone": ("cuda", ("  ipc: host\n", "  ipc: host\nrun_flags: [--privileged]\n"),
                           "run_flags: unknown key 'run_flags'", True),
    "relative-mount": ("xpu", ("source: /dev/dri/by-path", "source: dev/dri/by-path"),
                       "run.mounts[0].source: 'dev/dri/by-path' is not an absolute path", True),
    "probe-as-string": ("gaudi", ("probe: [hl-smi]", "probe: hl-smi --all"),
                        "host.probe: expected a list of strings, got a string", True),
    "driver-min-version": ("cuda", ('{toolkit: "12.8", min: "570.26"',
                                    '{toolkit: "12.8", min: "570.x"'),
                           "host.driver.rules[4].min: '570.x' is not a version", False),
    "compat-python": ("rocm", ('{torch: "2.13", toolkit: "7.2", python: ">=3.10,<3.15"',
                               '{torch: "2.13", toolkit: "7.2", python: "=>3.10,<3.15"'),
                      "facts.compat[2].python: '=>3.10,<3.15' is not a version specifier", False),
    "unknown-source": ("rocm", ('{torch: "2.13", toolkit: "7.2", python: ">=3.10,<3.15", '
                                'source: test-infra', '{torch: "2.13", toolkit: "7.2", '
                                'python: ">=3.10,<3.15", source: test-infr'),
                       "facts.compat[2].source: 'test-infr' is not a key of facts.sources; "
                       "did you mean 'test-infra'?", False),
    "verified-and-unverified": ("cuda", ('{toolkit: "12.9", min: "575.51.03", source: '
                                         'nvidia-notes, verified: "2026-11-21"}',
                                         '{toolkit: "12.9", min: "575.51.03", source: '
                                         'nvidia-notes, verified: "2026-11-21", unverified: x}'),
                                "host.driver.rules[5]: gives both verified and unverified; "
                                "keep one of them", True),
    "verified-not-a-date": ("cuda", ('{toolkit: "12.8", min: "570.26", source: nvidia-notes, '
                                     'verified: "2026-11-21"}', '{toolkit: "12.8", min: '
                                     '"570.26", source: nvidia-notes, verified: "yes"}'),
                            "host.driver.rules[4].verified: 'yes' is not a date YYYY-MM-DD",
                            True),
    "facts-typo": ("xpu", ("  torch_index: pypi", "  torch_idnex: pypi"),
                   "facts.torch_idnex: unknown key 'torch_idnex'; did you mean 'torch_index'?",
                   True),
    "companion-named-torch": ("cuda", ("companions: [torchvision]", "companions: [torch]"),
                              "companions[0]: 'torch' is not a companion name of its own",
                              True),
    "typed-companion-named-torch": ("cuda", ("companions: [torchvision]",
                                             'companions: {torch: {"2.15": "0.29.2"}}'),
                                    "companions.torch: key 'torch' is not a companion name of "
                                    "its own", True),
    # facts.extension.requires_torch: the torch an extension release pairs with where its
    # metadata declares none; an empty rule would read as "any torch".
    "requires-torch-empty": ("xla", (RULE, 'requires: ""'),
                             "facts.extension.requires_torch.requires: '' is not a version "
                             "specifier with {major}, {minor}, {micro}", True),
    "requires-torch-placeholder": ("xla", (RULE, 'requires: "=={major}.{minr}.*"'),
                                   "facts.extension.requires_torch.requires: "
                                   "'=={major}.{minr}.*': unknown placeholder {minr} (the "
                                   "extension release's numbers are {major}, {minor} and "
                                   "{micro}); did you mean 'minor'?", False),
    "requires-torch-not-a-specifier": ("xla", (RULE, 'requires: "{major}.{minor}"'),
                                       "facts.extension.requires_torch.requires: "
                                       "'{major}.{minor}' is not a version specifier once "
                                       "filled in (release 2.9.0 would read '2.9')", False),
    "requires-torch-source": ("xla", ("source: xla-install, verified",
                                      "source: xla-instal, verified"),
                              "facts.extension.requires_torch.source: 'xla-instal' is not a "
                              "key of facts.sources; did you mean 'xla-install'?", False),
    "compat-row-against-the-rule": ("xla", ('{torch: "2.8.0", extension: "2.8.1"',
                                            '{torch: "2.9.0", extension: "2.8.1"'),
                                    "facts.compat[1].extension: pairs torch 2.9.0 with "
                                    "torch-xla 2.8.1, but facts.extension.requires_torch says "
                                    "torch-xla 2.8.1 requires torch==2.8.*; correct the pair "
                                    "or the rule (both are this vendor's data)", False),
    "typed-companion-against-the-rule": ("xla", ('torch_xla: {"2.9": "2.9.0", "2.8": "2.8.1"}',
                                                 'torch_xla: {"2.9": "2.8.1", "2.8": "2.8.1"}'),
                                         "companions.torch_xla.2.9: pairs torch 2.9 with "
                                         "torch-xla 2.8.1, but facts.extension.requires_torch "
                                         "says torch-xla 2.8.1 requires torch==2.8.*", False),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_bad_value_is_one_located_problem(tmp_path: Path, case: str) -> None:
    name, edit, expected, _ = BAD[case]
    problems = problems_of(copy_vendor(tmp_path, name, edit), tmp_path)
    pattern = rf"vendors/{name}/vendor\.yaml:\d+:\d+: " + re.escape(expected)
    assert any(re.match(pattern, p) for p in problems), "\n".join(problems)


@pytest.mark.parametrize("case", [c for c, (*_, by_schema) in BAD.items() if by_schema])
def test_the_published_schema_rejects_what_the_loader_rejects(tmp_path: Path, case: str) -> None:
    name, edit, _, _ = BAD[case]
    folder = copy_vendor(tmp_path, name, edit)
    assert list(VALIDATOR.iter_errors(load_yaml(folder / "vendor.yaml").data)), case


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    folder = copy_vendor(tmp_path, "cuda")
    file = folder / "vendor.yaml"
    text = file.read_text()
    for case in ("unknown-placeholder", "gpus-word", "driver-min-version"):
        old, new = BAD[case][1]
        text = text.replace(old, new)
    file.write_text(text)
    problems = problems_of(folder, tmp_path)
    assert len(problems) == 3
    lines = [int(p.split(":")[1]) for p in problems]
    assert lines == sorted(lines), "problems are listed in file order"


def test_a_vendor_folder_name_must_be_a_name(tmp_path: Path) -> None:
    folder = copy_vendor(tmp_path, "cpu", ("name: cpu", "name: Bad Name"), folder="Bad Name")
    assert any("the folder name 'Bad Name' is not a vendor name" in p
               for p in problems_of(folder, tmp_path))


def test_a_vendor_without_verify_checks_float32_only(tmp_path: Path) -> None:
    folder = copy_vendor(tmp_path, "rocm")
    file = folder / "vendor.yaml"
    file.write_text(file.read_text().partition("\nverify:\n")[0] + "\n")
    vendor = load_vendor(folder, tmp_path)
    assert vendor.verify.dtypes == ("float32",)
    assert vendor.verify.tolerances["float32"].rtol == pytest.approx(1.3e-6)


# -- what a user sees ------------------------------------------------------------------------
def test_invoke_matrix_exits_2_and_names_the_typo(tmp_path: Path) -> None:
    for part in ("matrix.yaml", "tasks.py", "vendors", "templates", "verify"):
        source, target = REPO / part, tmp_path / part
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target)
    rocm = tmp_path / "vendors" / "rocm" / "vendor.yaml"
    rocm.write_text(rocm.read_text().replace("  dtypes: [", "  dtyeps: ["))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = forkcli.run([sys.executable, "-m", "invoke", "matrix"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert re.search(r"vendors/rocm/vendor\.yaml:\d+:3: verify\.dtyeps: unknown key 'dtyeps'; "
                     r"did you mean 'dtypes'\?", proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_reserved_axis_name_is_one_problem_not_a_cascade(tmp_path: Path) -> None:
    name, edit, expected, _ = BAD["axis-named-os"]
    problems = problems_of(copy_vendor(tmp_path, name, edit), tmp_path)
    assert len(problems) == 1 and expected in problems[0], problems
