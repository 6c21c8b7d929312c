#!/usr/bin/env bash
# Remake docs/images/report.png, the picture of the report that README.md and the docs show:
# the report of a real CPU build (reports/index.html), opened from the file system in headless
# Chromium (Debian's chromium, which scripts/ensure-env.sh installs) at a 1400-pixel window,
# the width the report's pages are laid out for.
#
#   ./oota.sh build --vendor=cpu && scripts/screenshot_report.sh [REPORT_DIR] [HEIGHT]
set -euo pipefail
cd "$(dirname "$0")/.."
report=${1:-reports}
height=${2:-1000}
[ -f "$report/index.html" ] || { echo "no $report/index.html: run ./oota.sh build --vendor=cpu" >&2; exit 2; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
HOME="$profile" chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" --window-size="1400,$height" \
  --screenshot="$PWD/docs/images/report.png" "file://$PWD/$report/index.html" 2>/dev/null
echo "wrote docs/images/report.png from $report/index.html"
