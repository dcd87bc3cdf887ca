#!/usr/bin/env bash
# The soak (issue 15, item 4): bench/soak/soak.py on the release build.
#
#   bench/soak/run.sh [--short] [--rate N] [--duration SECONDS] [--interval SECONDS] [--bin DIR] [--out DIR]
#
# Builds the release programs into .build-rel unless --bin is given, installs matplotlib (for the
# plot) if python3 lacks it, and runs the soak. What it measures and when it passes:
# bench/soak/README.md, or --help.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ " $* " != *" --bin "* && -z "${SWITCHBOARD_BIN:-}" ]]; then
    swift build -c release --scratch-path .build-rel >&2
fi
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install --quiet matplotlib >&2
exec python3 bench/soak/soak.py "$@"
