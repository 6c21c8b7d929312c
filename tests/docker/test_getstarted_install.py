"""The get-started page's pip command, run as written in a clean container.

What this proves: the command the page shows for the verified default CPU cell, byte for byte
(read back from reports/start/cpu.html, with the requirements file the page links), installs
torch 2.13.0+cpu and exactly the packages of the page's file into a fresh virtual environment
of a fresh Debian 12 container, and nothing of oota's test suite.

What it does not prove, and why: this machine cannot reach download.pytorch.org, so the page's
``https://download.pytorch.org/whl/cpu`` is answered by a local mirror inside the container
(``--add-host download.pytorch.org:127.0.0.1``, a TLS certificate for that name trusted through
``PIP_CERT``, neither of which is part of the command). The mirror serves one file: the wheel of
the host's wheelhouse whose sha256 is the lock's hash for torch, the same file the verified
build installed. Whether PyTorch's real index serves a file with that hash is not checked here;
if it did not, ``--require-hashes`` would make pip refuse it rather than install another build.
torch's dependencies come from PyPI, as they would for a user.

Cost: 45 to 100 s on a 2-core machine (apt-get python3.11-venv, then pip unpacking the
190 MB wheel); it reuses the session's built CPU cell and its base image.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from oota.engine.base import RUN_LABEL
from oota.net import find_ca_bundle, host_pip_config
from oota.report.write import write_report
from tests.conftest import skip_for_host
from tests.docker.conftest import DEFAULT_CELL

INDEX = "https://download.pytorch.org/whl/cpu"
SUITE = {"pytest", "transformers", "numpy", "huggingface-hub", "pluggy"}
# Serves the mirror folder over TLS on 127.0.0.1:443 inside the container.
MIRROR = """\
import functools, http.server, ssl, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
server = http.server.ThreadingHTTPServer(("127.0.0.1", 443), handler)
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(sys.argv[2], sys.argv[3])
server.socket = tls.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""
# Runs in the container: a Python like a Debian 12 user's, the page's command in a fresh venv
# (COMMAND.sh, the page's text as is), then what is installed.
SCRIPT = """\
set -euo pipefail
apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends \
    python3.11-venv >/dev/null 2>&1
python3.11 /work/mirror.py /work/mirror /work/tls.pem /work/tls.key 2>/work/mirror.log &
python3.11 -m venv /tmp/user && source /tmp/user/bin/activate && cd /work/page
bash /work/COMMAND.sh >/work/pip.log 2>&1 || { tail -n 30 /work/pip.log; exit 1; }
python - <<'EOF'
import importlib.metadata as md, json, re
print(json.dumps({re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version
                  for d in md.distributions()}))
EOF
"""


def _page_command(reports: Path) -> tuple[str, Path]:
    """The pip command of the default cell's block, as the page shows it, and its file."""
    page = (reports / "start" / "cpu.html").read_text(encoding="utf-8")
    block = re.search(rf'<section class="start-cell" id="{DEFAULT_CELL}">(.*?)</section>',
                      page, re.S)
    assert block, f"no block for {DEFAULT_CELL} on the get-started page"
    command = re.search(r'<pre class="command">(.*?)</pre>', block.group(1), re.S)
    link = re.search(r'<a href="([^"]+-requirements\.txt)"', block.group(1))
    assert command and link, block.group(1)
    return html.unescape(command.group(1)), reports / "start" / html.unescape(link.group(1))


def _wheel_with_hash(sha256: set[str]) -> Path | None:
    """The wheel of the host's wheelhouses (pip's find-links) whose sha256 the lock names."""
    for folder in host_pip_config().get("find-links", "").split():
        path = Path(folder.removeprefix("file://"))
        for wheel in sorted(path.glob("torch-*.whl")) if path.is_dir() else ():
            if hashlib.sha256(wheel.read_bytes()).hexdigest() in sha256:
                return wheel
    return None


def _tls(folder: Path) -> None:
    """A certificate for download.pytorch.org, and a bundle trusting it and the host's CAs."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=download.pytorch.org",
                    "-addext", "subjectAltName=DNS:download.pytorch.org",
                    "-keyout", str(folder / "tls.key"), "-out", str(folder / "tls.pem")],
                   check=True, capture_output=True, timeout=60)
    host = find_ca_bundle(None)
    (folder / "bundle.pem").write_bytes((host.read_bytes() + b"\n" if host else b"")
                                        + (folder / "tls.pem").read_bytes())


def test_the_pages_pip_command_installs_the_verified_torch_in_a_clean_container(
        built, docker_client, run_id, tmp_path):
    reports = tmp_path / "reports"
    write_report(built.results_dir, reports)
    command, requirements = _page_command(reports)
    assert command == (f"pip install --require-hashes --extra-index-url {INDEX} "
                       f"-r {DEFAULT_CELL}-requirements.txt")
    locked = built.results[0]["requirements"]["locked"]
    torch_hashes = next(set(p["hashes"]) for p in locked if p["name"] == "torch")
    wheel = _wheel_with_hash(torch_hashes)
    if wheel is None:
        skip_for_host("the local wheel folders", "no wheel with the lock's torch hash in the "
                      "host's pip find-links, and download.pytorch.org is not reachable here: "
                      "nothing can serve the index")
    work = tmp_path / "work"
    (work / "page").mkdir(parents=True)
    shutil.copy(requirements, work / "page" / requirements.name)
    served = work / "mirror" / "whl" / "cpu" / "torch"
    served.mkdir(parents=True)
    try:  # a link, not a 190 MB copy
        os.link(wheel, served / wheel.name)
    except OSError:
        shutil.copy(wheel, served / wheel.name)
    _tls(work)
    (work / "mirror.py").write_text(MIRROR)
    (work / "COMMAND.sh").write_text(command + "\n")
    base = built.results[0]["image"]["base"]["ref"]
    output = docker_client.containers.run(
        base, ["bash", "-c", SCRIPT], remove=True, labels={RUN_LABEL: run_id},
        extra_hosts={"download.pytorch.org": "127.0.0.1"},
        # None of these settings is part of the command. PIP_NO_COMPILE spares pip
        # byte-compiling torch and its dependencies (about 20 s of CPU here), which this test
        # does not look at; pip reads it as the value of its `compile` setting, so "0" is
        # --no-compile ("1" would compile).
        environment={"PIP_CERT": "/work/bundle.pem", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                     "PIP_NO_COMPILE": "0"},
        volumes={str(work): {"bind": "/work", "mode": "rw"}})
    installed = json.loads(output.decode().strip().splitlines()[-1])
    assert installed["torch"] == "2.13.0+cpu"
    wanted = {p["name"]: p["version"] for p in locked}
    assert {name: installed.get(name) for name in wanted} == wanted
    assert not SUITE & installed.keys(), SUITE & installed.keys()
    assert set(installed) - set(wanted) <= {"pip"}, set(installed) - set(wanted)
    assert "GET /whl/cpu/torch/" in (work / "mirror.log").read_text()
