"""More Docker Engines on this machine, to stand in for a lab's hosts (tests and benchmarks).

Each :class:`ExtraEngine` is a dockerd of its own: its own data-root, exec-root (where it starts
its own containerd) and pidfile, answering on a loopback TCP port. It shares the first engine's
default bridge (``docker0``), taking its container addresses from its own slice of that subnet
(``--fixed-cidr``) and leaving iptables to the first engine, whose NAT rule already covers the
bridge: so its builds reach the package indexes like the first engine's do. It starts empty; the
base images it needs are copied in from the first engine (``docker save | docker load``).

Needs root and the first engine running (``./oota.sh`` starts it). Only loopback addresses are
used. :meth:`ExtraEngine.kill` is a host dying (SIGKILL of the daemon and its containerd).
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import zlib
from pathlib import Path
from typing import Any, BinaryIO

DOCKER = shutil.which("docker") or "/usr/bin/docker"
BRIDGE_NAME_OPTION = "com.docker.network.bridge.name"
_SIOCGIFADDR, _SIOCGIFNETMASK = 0x8915, 0x891B  # linux/sockios.h


def interface_address(name: str) -> ipaddress.IPv4Interface:
    """The IPv4 address and prefix the kernel gives interface ``name`` (OSError if none)."""
    request = struct.pack("256s", name.encode()[:15])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        address = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)[20:24]
        netmask = fcntl.ioctl(sock.fileno(), _SIOCGIFNETMASK, request)[20:24]
    return ipaddress.IPv4Interface(f"{socket.inet_ntoa(address)}/{socket.inet_ntoa(netmask)}")


def bridge_interface(network: dict[str, Any]) -> str:
    """The Linux interface of Docker's ``bridge`` network, from its inspect output."""
    return str((network.get("Options") or {}).get(BRIDGE_NAME_OPTION) or "docker0")


def host_address(network: dict[str, Any] | None = None) -> ipaddress.IPv4Interface:
    """Where a container or a build step on the default bridge reaches this host: the bridge
    interface's own address, as the kernel has it.

    Not the network's ``IPAM.Config[0].Gateway``: some Engines (Debian's docker.io 20.10.24)
    list only the subnet there. The interface's name is the one thing every Engine's inspect
    output gives (``Options``, ``docker0`` when absent); the address is read from the kernel."""
    if network is None:
        out = subprocess.run([DOCKER, "network", "inspect", "bridge"], capture_output=True,
                             text=True, timeout=60, check=True).stdout
        network = json.loads(out)[0]
    return interface_address(bridge_interface(network))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def steady_port(name: str) -> int:
    """A port for the server ``name`` that stays the same from run to run on any machine, for
    whichever worker runs it (the caller takes any free port when this one is taken). An index
    a build installs from is named, with its port, in the Dockerfile's RUN line, which is part
    of BuildKit's cache key: on a port chosen afresh each run, a warm machine built that
    layer, and every one after it, again every run."""
    return 20000 + zlib.crc32(name.encode()) % 20000


CGROUP_ROOT = Path("/sys/fs/cgroup")


class CpuSet:
    """A cgroup that holds a dockerd, its containerd and every container and build step it
    starts to the CPUs ``cpus`` (e.g. "0"): one Engine as a host of that many cores. cgroup v1
    (a cpuset hierarchy) and v2 (the cpuset controller of the unified hierarchy)."""

    def __init__(self, name: str, cpus: str) -> None:
        v1 = CGROUP_ROOT / "cpuset"
        self.v2 = not v1.is_dir()
        self.top = CGROUP_ROOT if self.v2 else v1
        self.name, self.cpus = name, cpus
        self.path = self.top / name

    def create(self) -> CpuSet:
        if self.v2:
            control = self.top / "cgroup.subtree_control"
            if "cpuset" not in control.read_text().split():
                control.write_text("+cpuset")
        self.path.mkdir(exist_ok=True)
        (self.path / "cpuset.cpus").write_text(self.cpus)
        mems = self.top / ("cpuset.mems.effective" if self.v2 else "cpuset.mems")
        (self.path / "cpuset.mems").write_text(mems.read_text().strip() or "0")
        return self

    def join(self) -> None:
        """Move the calling process in (a child's preexec: dockerd and all it starts)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def parent_flag(self) -> list[str]:
        """dockerd's --cgroup-parent: its containers' cgroups go under this one."""
        return ["--cgroup-parent", f"/{self.name}"]

    def remove(self) -> None:
        """The cgroup and what dockerd made under it (empty once the daemon stopped)."""
        for top in [self.top] if self.v2 else [p for p in CGROUP_ROOT.iterdir() if p.is_dir()]:
            folder = top / self.name
            for child in sorted(folder.glob("**/"), key=lambda p: len(p.parts), reverse=True) \
                    if folder.is_dir() else []:
                try:
                    child.rmdir()
                except OSError:
                    pass


# Where a removed Engine's data root goes to be deleted in the background: the folder that holds
# the session's own (tests/conftest.py sets it; the session's folder is deleted at its end).
TRASH_VARIABLE = "OOTA_TEST_TRASH"


class ExtraEngine:
    def __init__(self, root: Path, index: int, *, cpus: str | None = None) -> None:
        self.root, self.index = root, index
        self.port = free_port()
        self.url = f"tcp://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        # cpus: the Engine is a host of those CPUs only (tests/engines.CpuSet).
        self.cpuset = CpuSet(f"oota-engine-{root.name}-{index}", cpus) if cpus else None

    @staticmethod
    def usable() -> str:
        """Why extra engines cannot run here ('' when they can)."""
        if os.geteuid() != 0:
            return "starting a dockerd needs root"
        if shutil.which("dockerd") is None:
            return "no dockerd on PATH"
        try:
            host_address()
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            return f"the first engine's bridge has no address here: {exc}"
        if shutil.which("pkill") is None:
            return "no pkill on PATH (procps) to stop a daemon's containerd"
        return ""

    def start(self, timeout_s: float = 90) -> ExtraEngine:
        data, exec_root = self.root / "data", self.root / "exec"
        data.mkdir(parents=True, exist_ok=True)
        exec_root.mkdir(parents=True, exist_ok=True)
        network = json.loads(subprocess.run(
            [DOCKER, "network", "inspect", "bridge"], capture_output=True, text=True, timeout=60,
            check=True).stdout)[0]
        bridge, cidr = bridge_interface(network), self.slice_of(host_address(network).network)
        with (self.root / "dockerd.log").open("ab") as log:  # the daemon keeps its own copy
            self.proc = self._spawn(data, exec_root, bridge, cidr, log)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd exited with {self.proc.returncode}; see "
                                   f"{self.root / 'dockerd.log'}")
            if self.docker("info", check=False).returncode == 0:
                return self
            time.sleep(0.5)
        raise RuntimeError(f"dockerd at {self.url} did not answer within {timeout_s} s")

    def slice_of(self, network: ipaddress.IPv4Network) -> str:
        """This engine's share of the bridge's subnet for its containers: the upper half split
        in 64, away from the first engine's low addresses (a /16 gives each a /23). Test
        sessions that run at once on one machine set ``OOTA_TEST_ENGINE_BASE`` apart (0, 24,
        48: each of a session's three Docker workers adds 8), so that their engines never hand
        out the same addresses."""
        upper = list(network.subnets(prefixlen_diff=1))[1]
        base = int(os.environ.get("OOTA_TEST_ENGINE_BASE", "0") or 0)
        return str(list(upper.subnets(prefixlen_diff=6))[(base + self.index) % 64])

    def _spawn(self, data: Path, exec_root: Path, bridge: str, cidr: str,
               log: BinaryIO) -> subprocess.Popen[bytes]:
        cpuset = self.cpuset.create() if self.cpuset else None
        return subprocess.Popen(
            ["dockerd", "--data-root", str(data), "--exec-root", str(exec_root),
             "--pidfile", str(self.root / "docker.pid"), "-H", self.url, "--bridge", bridge,
             "--fixed-cidr", cidr, "--iptables=false", "--ip-forward=false",
             "--storage-driver", "overlay2", *(cpuset.parent_flag() if cpuset else [])],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=cpuset.join if cpuset else None)

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

    def kill_daemon(self) -> None:
        """The daemon alone is killed (SIGKILL): its containerd goes with it, but the shims
        keep the containers running, as on a host whose dockerd was OOM-killed."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def restart(self, timeout_s: float = 90, attempts: int = 3) -> ExtraEngine:
        """The daemon again, on the same port, data-root and exec-root (after kill_daemon).
        Right after a kill, a new dockerd may give up waiting for its containerd (the killed
        one's is still going): it is started again, as systemd's Restart= would."""
        for attempt in range(1, attempts + 1):
            try:
                return self.start(timeout_s)
            except RuntimeError:
                if attempt == attempts:
                    raise
                time.sleep(3)
        raise AssertionError("unreachable")

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
        """Stop the daemon and delete its data. An Engine's data root holds every image it
        pulled or built (tens of thousands of files): it is moved out of the session's folder
        and deleted by a detached ``rm -rf`` that nothing waits for (deleting it in place held
        the end of the session for over a minute on a 2-core machine)."""
        self.stop()
        if self.cpuset is not None:
            self.cpuset.remove()
        outside = os.environ.get(TRASH_VARIABLE)
        trash = Path(outside or "/nonexistent") / f"oota-engine-trash-{os.urandom(6).hex()}"
        try:
            self.root.rename(trash)
        except OSError:  # no session folder's parent, or another file system: delete it here
            shutil.rmtree(self.root, ignore_errors=True)
            return
        rm = subprocess.Popen(["rm", "-rf", "--one-file-system", str(trash)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
        # Reaped in the background: a Popen collected while its process runs is a
        # ResourceWarning, which fails the test that removed the Engine (warnings are errors).
        threading.Thread(target=rm.wait, daemon=True, name="oota-engine-trash").start()
