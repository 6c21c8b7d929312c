"""More Docker Engines on this machine, to stand in for a lab's hosts (tests and benchmarks).

Each :class:`ExtraEngine` is a dockerd of its own: its own data-root, exec-root (where it starts
its own containerd) and pidfile, answering on a loopback TCP port. It shares the first engine's
``docker0`` bridge, taking its container addresses from its own slice of that subnet
(``--fixed-cidr``) and leaving iptables to the first engine, whose NAT rule already covers the
bridge: so its builds reach the package indexes like the first engine's do. It starts empty; the
base images it needs are copied in from the first engine (``docker save | docker load``).

Needs root and the first engine running (``./oota.sh`` starts it). Only loopback addresses are
used. :meth:`ExtraEngine.kill` is a host dying (SIGKILL of the daemon and its containerd).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import BinaryIO

DOCKER = shutil.which("docker") or "/usr/bin/docker"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ExtraEngine:
    def __init__(self, root: Path, index: int) -> None:
        self.root, self.index = root, index
        self.port = free_port()
        self.url = f"tcp://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def usable() -> str:
        """Why extra engines cannot run here ('' when they can)."""
        if os.geteuid() != 0:
            return "starting a dockerd needs root"
        if shutil.which("dockerd") is None:
            return "no dockerd on PATH"
        if not Path("/sys/class/net/docker0").exists():
            return "the first engine's docker0 bridge is missing"
        if shutil.which("pkill") is None:
            return "no pkill on PATH (procps) to stop a daemon's containerd"
        return ""

    def start(self, timeout_s: float = 90) -> ExtraEngine:
        data, exec_root = self.root / "data", self.root / "exec"
        data.mkdir(parents=True, exist_ok=True)
        exec_root.mkdir(parents=True, exist_ok=True)
        # A /20 of docker0's 172.17.0.0/16 per engine, away from the first engine's low addresses.
        cidr = f"172.17.{128 + 16 * self.index}.0/20"
        with (self.root / "dockerd.log").open("ab") as log:  # the daemon keeps its own copy
            self.proc = self._spawn(data, exec_root, cidr, log)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd exited with {self.proc.returncode}; see "
                                   f"{self.root / 'dockerd.log'}")
            if self.docker("info", check=False).returncode == 0:
                return self
            time.sleep(0.5)
        raise RuntimeError(f"dockerd at {self.url} did not answer within {timeout_s} s")

    def _spawn(self, data: Path, exec_root: Path, cidr: str,
               log: BinaryIO) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["dockerd", "--data-root", str(data), "--exec-root", str(exec_root),
             "--pidfile", str(self.root / "docker.pid"), "-H", self.url, "--bridge", "docker0",
             "--fixed-cidr", cidr, "--iptables=false", "--ip-forward=false",
             "--storage-driver", "overlay2"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
        return subprocess.run([DOCKER, "-H", self.url, *args], capture_output=True, text=True,
                              timeout=600, check=check, env=env)

    def load_from_first(self, *images: str) -> None:
        """Copy ``images`` from the first engine (``docker save | docker load``)."""
        save = subprocess.Popen([DOCKER, "save", *images], stdout=subprocess.PIPE)
        try:
            subprocess.run([DOCKER, "-H", self.url, "load"], stdin=save.stdout, check=True,
                           capture_output=True, timeout=600)
        finally:
            if save.stdout:
                save.stdout.close()
            save.wait(timeout=60)

    def kill(self) -> None:
        """The host dies: SIGKILL to the daemon and everything it started (its containerd and
        the containers' shims are in its session)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._kill_leftovers()

    def stop(self) -> None:
        """Stop the daemon (SIGTERM, then SIGKILL), its containerd, and unmount what it left."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self._kill_leftovers()

    def _kill_leftovers(self) -> None:
        # containerd and shims may have left the session; they name the exec-root.
        subprocess.run(["pkill", "-KILL", "-f", str(self.root / "exec")], capture_output=True)
        mounts = Path("/proc/mounts").read_text().splitlines()
        for target in sorted((line.split()[1] for line in mounts
                              if line.split()[1].startswith(str(self.root))), reverse=True):
            subprocess.run(["umount", "-l", target], capture_output=True)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
