#!/usr/bin/env bash
# Checks that release binaries carry the Swift runtime inside them, so they run on a host
# without the toolchain (the programs deploy/README.md copies): builds them with
# `swift build -c release --static-swift-stdlib` and fails if `ldd` shows any of the
# toolchain's shared libraries (libswiftCore.so, Foundation's, libdispatch, …) among what they
# load. Only the system's libraries may remain (libzmq, SQLite, jemalloc, the C library).
#
#   deploy/static-check.sh                         # every program (a release build: 20+ minutes from nothing)
#   deploy/static-check.sh switchboard             # one product
#   deploy/static-check.sh --bin-path DIR [NAME…]  # binaries already built; no build
#
# Not part of the test command (deploy/local/test.sh): a release build is too slow for it.
# The build goes to .build-static (SWITCHBOARD_STATIC_SCRATCH chooses), beside the debug one.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
programs=(switchboard switchboard-broker switchboard-auth switchboard-filemaker switchboard-eto switchboard-directory
    switchboard-kiosk switchboard-monitor switchboard-emulator)
bin=""
if [ "${1:-}" = "--bin-path" ]; then
    bin="${2:?--bin-path needs a directory}"
    shift 2
fi
[ $# -gt 0 ] && programs=("$@")
if [ -z "$bin" ]; then
    scratch="${SWITCHBOARD_STATIC_SCRATCH:-$root/.build-static}"
    cd "$root"
    started=$(date +%s)
    if [ ${#programs[@]} -eq 9 ]; then
        swift build -c release --static-swift-stdlib --scratch-path "$scratch"
    else
        for p in "${programs[@]}"; do swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product "$p"; done
    fi
    echo "static-check: built in $(( $(date +%s) - started )) s"
    bin="$(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)"
fi
failed=0
for p in "${programs[@]}"; do
    file="$bin/$p"
    if [ ! -x "$file" ]; then
        echo "static-check: $file is missing" >&2
        failed=1
        continue
    fi
    libraries="$(ldd "$file")"
    toolchain="$(printf '%s\n' "$libraries" | grep -E 'libswift|libFoundation|lib_Foundation|libdispatch|libBlocksRuntime|libicu' || true)"
    size=$(stat -c %s "$file")
    if [ -n "$toolchain" ]; then
        echo "static-check: FAILED: $p loads the toolchain's libraries:" >&2
        printf '%s\n' "$toolchain" >&2
        failed=1
    else
        echo "static-check: $p ($((size / 1048576)) MiB) loads only: $(printf '%s\n' "$libraries" | awk '{print $1}' | tr '\n' ' ')"
    fi
done
exit $failed
