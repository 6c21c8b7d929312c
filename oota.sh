#!/usr/bin/env bash
# Entry point for newcomers: prepares the host (scripts/ensure-env.sh), then runs a task of
# tasks.py through the `oota` command (oota/cli.py: invoke's program, a bad flag exits 2).
#   ./oota.sh build --vendor=cpu      ./oota.sh test      ./oota.sh --list
set -euo pipefail
cd "$(dirname "$0")"
scripts/ensure-env.sh
exec .venv/bin/oota "$@"
