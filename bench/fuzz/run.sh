#!/usr/bin/env bash
# Builds the libFuzzer targets and runs one, or all in turn, on seeds from protocol/vectors.
#
#   bench/fuzz/run.sh TARGET|all [--time SECONDS | --runs N] [-- LIBFUZZER_FLAGS...]
#
# Default --time 60. Everything runs under `nice -n 19`: a bench script, never part of the test
# command. Per target, under bench/fuzz/corpus/TARGET/ (git-ignored):
#   seeds/      rebuilt from protocol/vectors on every run (seeds.py)
#   found/      the units libFuzzer adds; kept between runs, so a run goes on where the last stopped
#   artifacts/  crash-*, timeout-*, oom-* inputs; reproduce one with SWIFT_BACKTRACE=enable=no
#               bench/fuzz/.build/release/fuzz-TARGET bench/fuzz/corpus/TARGET/artifacts/crash-…
#   last.log    libFuzzer's output
# Prints per target: executions, exec/s, coverage (cov = edges, ft = features), corpus, crashes.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# The protocol targets first (cheap to build), the emulator's find parser (three of its files and
# the protocol module), then csv (builds SwitchboardBus and its dependencies).
targets=(envelope headers groups majordomo json timestamp findparser multipart csv)

usage() { echo "usage: $0 {all|$(IFS='|'; echo "${targets[*]}")} [--time SECONDS | --runs N] [-- libFuzzer flags]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
target=$1; shift
limit=(-max_total_time=60)
extra=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --time) limit=(-max_total_time="$2"); shift 2 ;;
        --runs) limit=(-runs="$2"); shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) usage ;;
    esac
done
if [[ $target == all ]]; then selected=("${targets[@]}")
elif [[ " ${targets[*]} " == *" $target "* ]]; then selected=("$target")
else usage
fi

# -sanitize=fuzzer instruments every Swift module of the build (SwitchboardProtocol included,
# which is what gives coverage) and links libFuzzer; address adds ASan for the unsafe-pointer
# code (the JSON parser reads through an UnsafeBufferPointer). Release: the decoders as shipped.
# `nice -n 19 swift build` is not enough: SwiftPM's compiler processes were seen at nice 0
# while swift-build itself ran at 19. So the build's descendants are reniced every 0.5 s (ours
# alone, by process id) until it ends.
descendants() { local child; for child in $(pgrep -P "$1"); do echo "$child"; descendants "$child"; done; }
niced_build() {
    (cd "$here" && nice -n 19 swift build -c release --product "$1" -Xswiftc -sanitize=fuzzer,address) \
        >"$here/corpus/build.log" 2>&1 &
    local build=$! pids
    while kill -0 "$build" 2>/dev/null; do
        pids=$(descendants "$build")
        [[ -z $pids ]] || renice -n 19 -p $pids >/dev/null 2>&1 || true
        sleep 0.5
    done
    if ! wait "$build"; then grep -v "Cannot export local symbol" "$here/corpus/build.log" | tail -20; exit 1; fi
    tail -1 "$here/corpus/build.log"
}

# Only the selected products are built: the protocol targets never wait for SwitchboardBus.
mkdir -p "$here/corpus"
for name in "${selected[@]}"; do
    echo "building fuzz-$name (nice 19)…"
    niced_build "fuzz-$name"
done

# One input running 10 s is a hang (the decoders take microseconds), reported as a timeout-*
# artifact; libFuzzer's default waits 20 minutes.
timeout=10

# Inputs above these sizes only repeat the size checks; small inputs keep exec/s high. A find
# body over 1 KB only repeats criteria (our client's are under 300 bytes), and each criterion
# is matched against every stored value: at 4096, units over 1 KB took three quarters of the
# time and the rate fell to 1,578/s.
max_len() { case $1 in envelope|majordomo|multipart) echo 8192 ;; timestamp) echo 256 ;; findparser) echo 1024 ;; *) echo 4096 ;; esac; }

status=0
for name in "${selected[@]}"; do
    dir="$here/corpus/$name"
    mkdir -p "$dir/found" "$dir/artifacts"
    python3 "$here/seeds.py" "$dir/seeds" "$name" >/dev/null
    echo "== fuzz-$name: ${limit[*]} -max_len=$(max_len "$name") -timeout=$timeout ${extra[*]}"
    # SWIFT_BACKTRACE=enable=no: on a trap, the Swift runtime starts swift-backtrace, which kept
    # the output pipe open for over 10 minutes (niced) after libFuzzer had written the input.
    set +e
    SWIFT_BACKTRACE=enable=no nice -n 19 "$here/.build/release/fuzz-$name" \
        "$dir/found" "$dir/seeds" "${limit[@]}" -max_len="$(max_len "$name")" -timeout="$timeout" \
        -artifact_prefix="$dir/artifacts/" -print_final_stats=1 "${extra[@]}" >"$dir/last.log" 2>&1
    code=$?
    set -e
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/last.log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/last.log")
    progress=$(grep -E '^#[0-9]+' "$dir/last.log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' || true)
    # libFuzzer stops at the first crash, leak, timeout or OOM and ends its report with one SUMMARY line.
    crashes=$(grep -c '^SUMMARY: ' "$dir/last.log" || true)
    echo "   executions ${runs:-?}, exec/s ${rate:-?}, ${progress:-no progress line}, crashes ${crashes}, exit ${code}"
    if [[ $code -ne 0 ]]; then
        status=1
        grep -E 'fuzz property failed|Fatal error|ERROR: |SUMMARY|Test unit written' "$dir/last.log" | head -8 | sed 's/^/   /'
    fi
done
exit $status
