#!/usr/bin/env bash
# The README's test command (`npm test`): makes sure the system tools the tests use are present
# (installing them where it can: root on Debian), type-checks, lints, then runs the suite with vitest
# (vitest.config.ts). Arguments go to `vitest run`: file paths to run only those, or its options.
# It runs on the runtime the image ships (scripts/runtime.sh: this host when it has Node 24 and
# glibc 2.38+, else a Debian 13 root made once), so the suite loads production's uWS binary.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${SGW_RUNTIME:-}" ] || exec bash scripts/runtime.sh bash scripts/test.sh "$@"

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v ffmpeg >/dev/null 2>&1 || need+=(ffmpeg)
[ -x /usr/bin/chromium ] || need+=(chromium)  # the browser demo test drives Debian's chromium
[ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ] || need+=(prometheus)  # the dashboard/alerts test runs Prometheus and promtool
[ -x /usr/bin/tini ] || need+=(tini)  # the Dockerfile recipe test runs its ENTRYPOINT (tini)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "npm test: installing ${need[*]} (apt-get)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "npm test: missing ${need[*]}. Run: sudo apt-get update && sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
fi

npx tsc -p tsconfig.json --noEmit
# The whole suite (no file or name filter among the arguments) starts with the lint: eslint (import
# cycles, one way into each folder of src/) and the formatter's check, over the whole tree.
files=0
for a in "$@"; do case "$a" in -*) ;; *) files=1 ;; esac; done
if [ "$files" = 0 ]; then
  npx eslint . || { echo "npm test: eslint found problems (above); fix them, or run 'npx eslint . --fix' where it can" >&2; exit 1; }
  npx prettier --check . >/dev/null || { echo "npm test: files not formatted: run 'npm run format'" >&2; npx prettier --list-different . >&2; exit 1; }
fi
exec npx vitest run "$@"
