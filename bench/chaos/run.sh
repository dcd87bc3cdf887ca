#!/usr/bin/env bash
# The chaos run (issue 15, item 1): bench/chaos/chaos.py at low priority, on this machine.
#
#   bench/chaos/run.sh [--quick] [--seed N] [--count N] [--kills N] [--limit SECONDS] [--bin DIR] [--keep]
#
# --quick is the test suite's form (600 check-ins, 12 kill -9s, at most 170 s). Without --bin
# the programs come from `swift build --show-bin-path` (build them first). Needs python3 (its
# standard library only). Options and what the run does: bench/chaos/README.md, or --help.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec nice -n 10 python3 bench/chaos/chaos.py "$@"
