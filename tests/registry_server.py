"""A throw-away registry on loopback (Debian's docker-registry), plain or with htpasswd auth and
TLS from a test CA made here with ``cryptography``; shared by the unit tests of the registry
client and the Docker tests of publish/pull."""

from __future__ import annotations

import datetime as dt
import ipaddress
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# docker-registry's htpasswd takes bcrypt only; the standard library's crypt makes it
# (deprecated, still in 3.11/3.12) without adding a test dependency.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt  # noqa: E402

BINARY = shutil.which("docker-registry") or "/usr/bin/docker-registry"
USER, PASSWORD = "oota-tester", "s3cret-registry-password-0f5e"


@dataclass
class Server:
    host: str                 # 127.0.0.1:PORT
    process: subprocess.Popen[bytes]
    ca: Path | None = None    # the test CA's certificate (TLS variant)
    auth_file: Path | None = None  # --registry-auth JSON (htpasswd variant)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def available() -> bool:
    return bool(shutil.which(BINARY))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _name(text: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def make_tls(folder: Path) -> tuple[Path, Path, Path]:
    """A test CA and a server certificate for 127.0.0.1 signed by it: (ca, cert, key)."""
    now = dt.datetime.now(dt.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("oota test CA")).issuer_name(
        _name("oota test CA")).public_key(ca_key.public_key()).serial_number(
        x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(_name("127.0.0.1")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


def _bcrypt(password: str) -> str:
    # The lowest cost (2^4): the registry checks it on every request, and this is a test.
    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))


def start(folder: Path, *, secure: bool = False) -> Server:
    """A registry in ``folder``; ``secure``: htpasswd auth and TLS from a test CA."""
    port = free_port()
    config = (f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {folder / 'data'}\n"
              f"  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n")
    ca = auth_file = None
    if secure:
        ca, cert, key = make_tls(folder)
        config += f"  tls:\n    certificate: {cert}\n    key: {key}\n"
        (folder / "htpasswd").write_text(f"{USER}:{_bcrypt(PASSWORD)}\n")
        config += (f"auth:\n  htpasswd:\n    realm: oota-test\n"
                   f"    path: {folder / 'htpasswd'}\n")
        auth_file = folder / "auth.json"
        auth_file.write_text(f'{{"username": "{USER}", "password": "{PASSWORD}"}}')
    (folder / "config.yml").write_text(config)
    proc = subprocess.Popen([BINARY, "serve", str(folder / "config.yml")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    server = Server(host=f"127.0.0.1:{port}", process=proc, ca=ca, auth_file=auth_file)
    _wait(server)
    return server


def _wait(server: Server) -> None:
    scheme = "https" if server.ca else "http"
    context = ssl.create_default_context(cafile=str(server.ca)) if server.ca else None
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{scheme}://{server.host}/v2/", timeout=2,
                                   context=context).close()
            return
        except urllib.error.HTTPError:
            return  # it answers (401 without credentials)
        except OSError:
            if time.monotonic() > deadline or server.process.poll() is not None:
                server.process.kill()
                raise RuntimeError(f"docker-registry did not answer on {server.host}") from None
            time.sleep(0.3)
