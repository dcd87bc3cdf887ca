#!/usr/bin/env bash
# The whole test run: set-up, the protocol vectors against their JSON Schemas, a build that
# fails on any warning in our own code, then every Swift test (unit, integration with real
# sockets and SQLite files, end-to-end with real processes).
set -euo pipefail
cd "$(dirname "$0")/../.."
deploy/local/setup.sh
python3 protocol/check_vectors.py
log=$(mktemp)
swift build --build-tests 2>&1 | tee "$log" | grep -E "error|warning: |Compiling|Build complete" | grep -v "^\[" || true
if grep -E "^$(pwd)/(Sources|Tests|bench)/.*(warning|error):" "$log" | sort -u | grep .; then
    echo "test: the build has warnings or errors in our code (above)" >&2
    exit 1
fi
grep -q "Build complete" "$log" || { echo "test: the build failed" >&2; tail -40 "$log" >&2; exit 1; }
swift test
