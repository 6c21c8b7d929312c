"""Vendor templates in a sandbox (oota/sandbox.py): a template formats data, it cannot reach
Python, write a value no quoting filter has seen, come from outside its folder, or run away.
Each hostile template is a vendor's Dockerfile.j2 as a contributor could send it; `generate`
must refuse it as bad input (exit 2) at its line, and run nothing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import jinja2
import pytest

from oota.config.matrix import load_matrix
from oota.errors import InputError
from oota.plan import plan
from oota.render import cell_fingerprint, render_all
from oota.sandbox import unquoted
from tests import forkcli

REPO = Path(__file__).resolve().parents[2]


def vendor_template(body: str) -> str:
    """A vendor template that adds ``body`` to the runtime stage, on lines of its own."""
    return f'{{% extends "base.Dockerfile.j2" %}}\n{{% block runtime_extra %}}\n{body}\n' \
           "{% endblock %}\n"


# (id, the runtime stage's extra lines, what the one-line error says after 'Dockerfile.j2:3: ')
HOSTILE = [
    ("python-through-cycler",
     "# {{ cycler.__init__.__globals__.os.system('touch MARKER') | comment }}",
     "template error: access to attribute '__init__' of 'type' object is unsafe"),
    ("python-unfiltered", "{{ cycler.__init__.__globals__.os.system('touch MARKER') }}",
     "template error: access to attribute '__init__' of 'type' object is unsafe"),
    ("python-through-a-function", "RUN {{ range.__globals__ | shell_word }}",
     "template error: access to attribute '__globals__' of 'function' object is unsafe"),
    ("unfiltered-in-a-run-line", "RUN echo {{ vendor.display }}",
     "template error: `RUN echo {{ vendor.display }}`: a value is written without a quoting "
     "filter; write it through the filter for its place: shell_word or shell_words (RUN)"),
    ("comment-filter-in-a-run-line", "RUN echo {{ vendor.display | comment }}",
     "template error: `RUN echo {{ vendor.display | comment }}`: the comment filter lets any "
     "text but a line break through, so it is for # lines only"),
    ("joined-after-quoting", "RUN echo {{ (vendor.name | shell_word) ~ vendor.display }}",
     "template error: `RUN echo {{ (vendor.name | shell_word) ~ vendor.display }}`: a value is "
     "written without a quoting filter"),
    ("unquoted-from-a-call",
     "RUN echo {{ m.apt_install(['x']) }}{{ cycler(vendor.display).next() }}",
     "template error: 'CPU' reaches the Dockerfile without a quoting filter"),
    ("method-of-a-value", "RUN echo {{ vendor.display.ljust(1000000000) | shell_word }}",
     "template error: access to attribute 'ljust' of 'str' object is unsafe"),
    ("str-format-bomb", "RUN echo {{ '{:>999999999}'.format(1) | shell_word }}",
     "template error: access to attribute 'format' of 'str' object is unsafe"),
    ("percent-format-bomb", "RUN echo {{ ('%999999999s' % 1) | shell_word }}",
     "template error: formatting text with % is not available here"),
    ("product-bomb", "RUN echo {{ ('x' * 10**10) | shell_word }}",
     "template error: a product of 1 by 10000000000 is larger than 100000"),
    ("power-bomb", "RUN echo {{ (7 ** 100000000) | shell_word }}",
     "template error: 7 ** 100000000 is too large a number"),
    ("filter-bomb", "RUN echo {{ 'x' | center(1000000000) | shell_word }}",
     "template error: No filter named 'center'."),
    ("lipsum-bomb", "# {{ lipsum(1000000000) | comment }}",
     "template error: 'lipsum' is undefined"),
    ("mutation", "# {{ [].append(1) | comment }}",
     "template error: access to attribute 'append' of 'list' object is unsafe"),
    ("include-climbing-out", '{% include "../../etc/hostname" %}',
     "template error: '../../etc/hostname': a template's name may not climb out of its folder"),
]


@pytest.mark.parametrize(("body", "says"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_a_hostile_template_is_refused_at_its_line(project, body, says):
    (project.root / "vendors/cpu/Dockerfile.j2").write_text(vendor_template(body))
    with pytest.raises(InputError) as info:
        render_all(load_matrix("matrix.yaml"), plan(load_matrix("matrix.yaml")))
    assert info.value.exit_code == 2
    assert str(info.value).startswith(f"vendors/cpu/Dockerfile.j2:3: {says}"), str(info.value)
    assert not (project.root / "MARKER").exists()


def test_a_template_that_writes_without_end_is_stopped(project):
    (project.root / "vendors/cpu/Dockerfile.j2").write_text(vendor_template(
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"))
    with pytest.raises(InputError, match="the template writes more than 1048576 characters"):
        render_all(load_matrix("matrix.yaml"), plan(load_matrix("matrix.yaml")))


def test_an_include_linked_out_of_the_vendor_folder_is_refused(project, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "evil.j2"
    outside.write_text("RUN {{ vendor.name | shell_word }}\n")
    (project.root / "vendors/cpu/evil.j2").symlink_to(outside)
    (project.root / "vendors/cpu/Dockerfile.j2").write_text(
        vendor_template('{% include "evil.j2" %}'))
    with pytest.raises(InputError) as info:
        render_all(load_matrix("matrix.yaml"), plan(load_matrix("matrix.yaml")))
    assert str(info.value).startswith(
        f"vendors/cpu/evil.j2:1: template error: evil.j2 is a symbolic link to {outside}, outside "
        "the vendor's folder and templates/dockerfile/"), str(info.value)


def test_a_vendor_folder_linked_from_outside_vendors_is_refused(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "cpu"
    (project.root / "vendors/cpu").rename(elsewhere)
    (project.root / "vendors/cpu").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(InputError) as info:
        load_matrix("matrix.yaml")
    assert f"vendors/cpu resolves to {elsewhere}, outside vendors/: a vendor's folder must " \
           "live in vendors/; copy (or move) it there instead of linking to it" in str(info.value)


def test_a_symlink_loop_in_a_vendor_folder_is_bad_input(project):
    (project.root / "vendors/cpu/a").symlink_to("b")
    (project.root / "vendors/cpu/b").symlink_to("a")
    matrix = load_matrix("matrix.yaml")
    with pytest.raises(InputError, match=r"vendors/cpu/a: the symbolic link loops"):
        cell_fingerprint(matrix, plan(matrix)[0])


def test_generate_runs_no_code_of_a_vendor_template(project):
    """What a release manager runs: `invoke generate` with a template that would run a command."""
    marker = project.root / "MARKER"
    (project.root / "vendors/cpu/Dockerfile.j2").write_text(vendor_template(
        f"# {{{{ cycler.__init__.__globals__.os.system('touch {marker}') | comment }}}}"))
    (project.root / "tasks.py").write_bytes((REPO / "tasks.py").read_bytes())
    proc = forkcli.run([sys.executable, "-m", "oota", "generate"], cwd=project.root,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                       text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: vendors/cpu/Dockerfile.j2:3: template error: access "
                                  "to attribute '__init__' of 'type' object is unsafe")
    assert "Traceback" not in proc.stderr and not marker.exists()
    assert not (project.root / "images").exists()


def test_every_expression_of_the_shipped_templates_is_quoted():
    env = jinja2.Environment()
    templates = sorted(REPO.glob("templates/dockerfile/*.j2")) + sorted(
        REPO.glob("vendors/*/*.j2"))
    assert len(templates) >= 3
    problems = {str(t.relative_to(REPO)): unquoted(env.parse(t.read_text()), t.read_text())
                for t in templates}
    assert {k: v for k, v in problems.items() if v} == {}
