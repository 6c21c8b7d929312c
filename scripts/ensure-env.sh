#!/usr/bin/env bash
# Make this host ready for oota, idempotently: a running Docker Engine with a BuildKit-capable
# CLI, debootstrap (to build base images where no registry answers), Chromium (report tests),
# docker-registry (registry-mirror tests), procps (fleet tests), PostgreSQL's server (history
# tests) and the project's virtual environment in .venv.
# On a host that already has all of it, this does nothing.
#
# OOTA_SETUP says what the host is for, so that it gets only what that needs:
#   test    (default) all of the above: building, verifying and the test suite
#   build   a host that builds, verifies and publishes cells (a CI runner's cell job, a lab's
#           GPU host): the Docker Engine, debootstrap and .venv with oota alone
#   report  a host that only reads results (report --merge, history, the HUD): .venv with
#           oota alone, no Docker
#
# OOTA_EMULATION=1 (with test or build, never by default) also makes the host build and verify
# linux/arm64 cells on x86_64: QEMU registered with binfmt, with the F flag (see step 8).
#
# Installs only on Debian/Ubuntu as root (apt-get); elsewhere it says what is missing.
# OOTA_NO_INSTALL=1 turns installing off (then a missing piece is an error).
set -euo pipefail
cd "$(dirname "$0")/.."

setup=${OOTA_SETUP:-test}
case "$setup" in
  test|build|report) ;;
  *) printf 'setup: OOTA_SETUP=%s: give test, build or report\n' "$setup" >&2; exit 2 ;;
esac

case "${OOTA_EMULATION:-0}" in
  0|1) ;;
  *) printf 'setup: OOTA_EMULATION=%s: give 1 (QEMU for arm64 cells) or 0\n' "$OOTA_EMULATION" >&2
     exit 2 ;;
esac

say() { printf 'setup: %s\n' "$*" >&2; }
can_install() { [ "${OOTA_NO_INSTALL:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
apt_updated=0
apt_install() {
  if ! can_install; then say "missing: $* (install it, or run as root on Debian/Ubuntu)"; exit 3; fi
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  say "installing $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

docker_answers() {
  for cli in docker /usr/bin/docker; do
    if command -v "$cli" >/dev/null && timeout 20 "$cli" info >/dev/null 2>&1; then return 0; fi
  done
  return 1
}

# 1. Docker Engine (Debian's docker.io also brings a CLI that runs BuildKit builds).
if [ "$setup" != report ] && ! docker_answers; then
  if ! command -v dockerd >/dev/null; then
    apt_install docker.io
  fi
  if ! docker_answers; then
    # An Engine this script starts keeps BuildKit's cache within 30 GB: left alone it only
    # grows (docker.io 20.10 collects no garbage unless told to), by a few GB for every test
    # run, until a build fails for want of disk. A daemon.json someone wrote is left as it is.
    if [ ! -e /etc/docker/daemon.json ] && [ "$(id -u)" = 0 ]; then
      mkdir -p /etc/docker
      printf '%s\n' '{"builder": {"gc": {"enabled": true, "defaultKeepStorage": "30GB"}}}' \
        >/etc/docker/daemon.json
      say "wrote /etc/docker/daemon.json: BuildKit's cache kept within 30 GB"
    fi
    say "starting dockerd (log: /var/log/oota-dockerd.log)"
    if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
      systemctl start docker
    else
      nohup dockerd >/var/log/oota-dockerd.log 2>&1 &
    fi
    for _ in $(seq 1 60); do docker_answers && break; sleep 1; done
    docker_answers || { say "dockerd did not answer within 60 s; see /var/log/oota-dockerd.log"; exit 3; }
  fi
fi

# 2. debootstrap: only needed when a base image can be neither found nor pulled.
if [ "$setup" != report ] && ! command -v debootstrap >/dev/null && can_install; then
  apt_install debootstrap
fi

# 3. Chromium, for the test that opens the HTML report in a real headless browser.
if [ "$setup" = test ] && ! command -v chromium >/dev/null && can_install; then
  apt_install chromium
fi

# 4. Debian's docker-registry: the tests start one on loopback as a lab's registry mirror.
if [ "$setup" = test ] && ! command -v docker-registry >/dev/null && can_install; then
  apt_install docker-registry
fi

# 5. procps (pkill): the fleet tests start more dockerds on loopback and stop each with its
#    containerd.
if [ "$setup" = test ] && ! command -v pkill >/dev/null && can_install; then
  apt_install procps
fi

# 6. Debian's postgresql: the history tests start a throw-away server (initdb, pg_ctl) to
#    check the shared store the same way as the default SQLite file.
if [ "$setup" = test ] && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null \
    && can_install; then
  apt_install postgresql
fi

# 7. The virtual environment, reinstalled when pyproject.toml changes; the test tools only
#    where the tests run (a .venv with them serves every use).
stamp=.venv/.oota-installed
package=.; [ "$setup" = test ] && package='.[test]'
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $package"
have=$(cat "$stamp" 2>/dev/null || true)
case "$have" in *" "*) ;; ?*) have="$have .[test]" ;; esac   # an older stamp: the test extra
if [ ! -x .venv/bin/python ] || [ ! -x .venv/bin/oota ] \
    || { [ "$have" != "$want" ] && [ "$have" != "${want% *} .[test]" ]; }; then
  say "creating .venv and installing oota${package#.}"
  python3 -m venv .venv
  if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -e "$package"; } \
      >.venv/install.log 2>&1; then
    tail -n 30 .venv/install.log >&2; say "pip install failed; full log: .venv/install.log"; exit 3
  fi
  echo "$want" >"$stamp"
fi

# 8. OOTA_EMULATION=1: QEMU user-mode emulation for linux/arm64 cells on an x86_64 host
#    (BuildKit's --platform linux/arm64, then the verify container). Debian 12's own QEMU, 7.2,
#    builds the CPU arm64 cell but its torch segfaults on import ("Can't open MIDR_EL1 sysfs
#    entry", then SIGSEGV); bookworm-backports' 10.0 runs it. The binfmt entry needs the F
#    flag: the kernel opens the interpreter when it is registered, so that it runs inside
#    containers, which do not have it; the entry is therefore registered again after an upgrade.
qemu_entry=/proc/sys/fs/binfmt_misc/qemu-aarch64
qemu_major() {
  local interpreter
  # Debian's entry names a link (aarch64-binfmt-P) whose name makes QEMU take its first
  # argument for the program: ask the binary it links to.
  interpreter=$(readlink -f "$(sed -n 's/^interpreter //p' "$qemu_entry" 2>/dev/null)" || true)
  [ -x "$interpreter" ] || return 0
  { "$interpreter" --version 2>/dev/null || true; } \
    | sed -n '1s/^qemu-aarch64 version \([0-9]*\)\..*/\1/p'
}
if [ "${OOTA_EMULATION:-0}" = 1 ] && [ "$setup" != report ] && [ "$(uname -m)" = x86_64 ]; then
  major=$(qemu_major)
  if [ "${major:-0}" -lt 10 ]; then
    codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
    if [ "$codename" = bookworm ] && can_install; then
      if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
        printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' \
          'Suites: bookworm-backports' 'Components: main' \
          'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
          >/etc/apt/sources.list.d/oota-bookworm-backports.sources
        say "added Debian's bookworm-backports (for QEMU 10)"
      fi
      apt_updated=0
      apt_install qemu-user-static/bookworm-backports binfmt-support
    else
      apt_install qemu-user-static binfmt-support
    fi
    update-binfmts --disable qemu-aarch64 >/dev/null 2>&1 || true
    update-binfmts --enable qemu-aarch64 || true
    major=$(qemu_major)
  fi
  if ! grep -qs '^flags: .*F' "$qemu_entry"; then
    say "emulation: $qemu_entry is missing or lacks the F flag; register qemu-aarch64" \
      "with binfmt (update-binfmts --enable qemu-aarch64) on this host"
    exit 3
  fi
  [ "${major:-0}" -ge 10 ] || say "emulation: QEMU ${major:-of unknown version} is older than" \
    "10.0, the one the arm64 CPU cell was verified with; 7.2 crashes importing torch"
fi
