"""Registry credentials from Docker's credential helpers, as docker looks them up: config.json's
``credHelpers`` entry for the registry, else its ``credsStore``, else its ``auths``. The helpers
are real executables (``docker-credential-NAME get``, the server on stdin, JSON back) on a
temporary PATH; the last tests push to a real registry with htpasswd auth and TLS with
credentials that only a helper knows."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from oota.engine.base import RegistryAuth
from oota.errors import EnvironmentProblem
from oota.supply.registry import RegistryClient, RegistryError, docker_config_auth
from tests import registry_server

REGISTRY = "127.0.0.1:5000"
SECRET = "helper-secret-7c1d9e"

# Answers `get` for the one server it knows, says "not found" as docker's helpers do otherwise;
# every server it was asked about goes to asked.log.
HELPER = """#!/bin/sh
read -r server || true
echo "$1 $server" >> "{log}"
[ "$1" = get ] || exit 1
if [ "$server" = "{server}" ]; then
  printf '{{"ServerURL": "%s", "Username": "{user}", "Secret": "{secret}"}}' "$server"
else
  echo "credentials not found in native keychain"; exit 1
fi
"""


def _helper(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"docker-credential-{name}"
    path.write_text(body)
    path.chmod(0o755)
    return path


@pytest.fixture
def docker_home(tmp_path, monkeypatch) -> Path:
    """An empty DOCKER_CONFIG folder and a bin folder first on PATH, for the helpers."""
    home, bin_dir = tmp_path / "docker", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(home))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return home


def _config(home: Path, **config: object) -> None:
    (home / "config.json").write_text(json.dumps(config))


def _knows(home: Path, name: str, server: str, user: str = "helper-user",
           secret: str = SECRET) -> Path:
    """A helper ``name`` that knows ``server``'s credentials; the log of what it was asked."""
    log = home / f"{name}.asked.log"
    _helper(home.parent / "bin", name, HELPER.format(log=log, server=server, user=user,
                                                     secret=secret))
    return log


def _auths(registry: str, user: str, password: str) -> dict[str, object]:
    return {registry: {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}}


def test_the_registrys_own_helper_comes_before_the_store_and_auths(docker_home):
    asked = _knows(docker_home, "oota-test", REGISTRY)
    _knows(docker_home, "oota-store", REGISTRY, user="store-user")
    _config(docker_home, credHelpers={REGISTRY: "oota-test"}, credsStore="oota-store",
            auths=_auths(REGISTRY, "auths-user", "auths-password"))
    assert docker_config_auth(REGISTRY) == RegistryAuth(username="helper-user", password=SECRET)
    assert asked.read_text() == f"get {REGISTRY}\n"  # the server went on stdin


def test_the_credential_store_serves_registries_without_a_helper_of_their_own(docker_home):
    _knows(docker_home, "oota-store", REGISTRY, user="store-user")
    _config(docker_home, credHelpers={"other.lab:5000": "oota-absent"}, credsStore="oota-store")
    assert docker_config_auth(REGISTRY) == RegistryAuth(username="store-user", password=SECRET)


def test_auths_is_the_last_resort_when_the_helper_knows_nothing(docker_home):
    asked = _knows(docker_home, "oota-store", "another.lab:5000")
    _config(docker_home, credsStore="oota-store", auths=_auths(REGISTRY, "lab", "pw"))
    assert docker_config_auth(REGISTRY) == RegistryAuth(username="lab", password="pw")
    assert asked.read_text() == f"get {REGISTRY}\n"
    assert docker_config_auth("unknown.lab:5000") is None


@pytest.mark.parametrize("body, said", [
    ("#!/bin/sh\necho 'the password store is locked' >&2\necho 'store locked'\nexit 3\n",
     "it exited with 3 (run `echo 127.0.0.1:5000 | docker-credential-oota-broken get` to see "
     "what it says)"),
    (f"#!/bin/sh\necho 'not json {SECRET}'\n", "its answer is not the JSON"),
    (f"#!/bin/sh\necho '{{\"Secret\": \"{SECRET}\"}}'\n", "its answer is not the JSON"),
    # A helper that prints the secret it then fails to hand over: never quoted.
    (f"#!/bin/sh\necho '{{\"Username\": \"u\", \"Secret\": \"{SECRET}\"}}'\nexit 1\n",
     "it exited with 1"),
    (f"#!/bin/sh\necho 'wrong password {SECRET}'\necho '{SECRET}' >&2\nexit 1\n",
     "it exited with 1"),
    ("#!/bin/sh\nexec cat /dev/zero\n", "it answered more than 1 MiB"),
], ids=["fails", "answers-garbage", "answers-without-username", "prints-secret-and-fails",
        "says-the-secret-and-fails", "answers-without-end"])
def test_a_failing_helper_is_an_environment_problem_naming_it(docker_home, body, said):
    _helper(docker_home.parent / "bin", "oota-broken", body)
    _config(docker_home, credHelpers={REGISTRY: "oota-broken"})
    with pytest.raises(EnvironmentProblem) as info:
        docker_config_auth(REGISTRY)
    message = str(info.value)
    assert "docker-credential-oota-broken" in message and REGISTRY in message
    assert said in message and "--registry-auth" in message
    assert SECRET not in message and info.value.exit_code == 3


def test_a_missing_helper_is_named(docker_home):
    _config(docker_home, credsStore="oota-nowhere")
    with pytest.raises(EnvironmentProblem, match="docker-credential-oota-nowhere .*not "
                                                 "installed or not available in PATH"):
        docker_config_auth(REGISTRY)


def test_a_config_that_is_not_json_is_named(docker_home):
    (docker_home / "config.json").write_text("{credsStore: desktop")
    with pytest.raises(EnvironmentProblem, match=r"config\.json: not a readable JSON file"):
        docker_config_auth(REGISTRY)


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    if not registry_server.available():
        pytest.skip("docker-registry is not installed (scripts/ensure-env.sh installs it)")
    started = registry_server.start(tmp_path_factory.mktemp("registry"), secure=True)
    yield started
    started.stop()


def test_a_blob_is_pushed_with_credentials_only_a_helper_has(docker_home, secure):
    asked = _knows(docker_home, "oota-test", secure.host, user=registry_server.USER,
                   secret=registry_server.PASSWORD)
    _config(docker_home, credHelpers={secure.host: "oota-test"})
    client = RegistryClient(secure.host, auth=None, ca=secure.ca)
    digest = client.push_blob("helped/cpu", b"a blob pushed with a helper's credentials")
    assert client.blob("helped/cpu", digest) == b"a blob pushed with a helper's credentials"
    assert asked.read_text() == f"get {secure.host}\n"  # asked once, on the first challenge


def test_without_a_helper_the_registry_still_wants_credentials(docker_home, secure):
    _config(docker_home, credHelpers={"other.lab:5000": "oota-test"})
    with pytest.raises(RegistryError, match="wants credentials"):
        RegistryClient(secure.host, auth=None, ca=secure.ca).push_blob("helped/cpu", b"x")


def test_a_registry_that_wants_no_credentials_never_runs_a_helper(docker_home, tmp_path):
    if not registry_server.available():
        pytest.skip("docker-registry is not installed (scripts/ensure-env.sh installs it)")
    _helper(docker_home.parent / "bin", "oota-broken", "#!/bin/sh\nexit 1\n")
    _config(docker_home, credsStore="oota-broken")
    (tmp_path / "plain").mkdir()
    plain = registry_server.start(tmp_path / "plain")
    try:
        client = RegistryClient(plain.host, auth=None)
        digest = client.push_blob("open/cpu", b"no credentials needed")
        assert client.blob("open/cpu", digest) == b"no credentials needed"
    finally:
        plain.stop()
