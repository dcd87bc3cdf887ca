#!/usr/bin/env bash
# Switchboard's main job on one machine: builds, then runs `switchboard up` (a broker, a demo
# kiosk sending check-ins, and a monitor) with state under ./.switchboard. Ctrl-C stops it.
# Extra arguments go to `switchboard up` (see `--help`).
set -euo pipefail
cd "$(dirname "$0")/../.."
deploy/local/setup.sh
swift build
exec .build/debug/switchboard up "$@"
