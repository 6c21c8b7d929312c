#!/usr/bin/env bash
# Entry point for newcomers: prepares the host (scripts/ensure-env.sh), then runs an invoke task.
#   ./oota.sh build --vendor=cpu      ./oota.sh test      ./oota.sh --list
set -euo pipefail
cd "$(dirname "$0")"
scripts/ensure-env.sh
exec .venv/bin/invoke "$@"
