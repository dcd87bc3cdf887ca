#!/bin/bash
# CPU per event of each thread of switchboard-broker, and of the bench process, while
# `switchboard-bench --ingest-only N` runs 4 producers (window 1000) against it. Per-thread CPU
# from /proc is repeatable enough on this shared machine where throughput moves by a third.
#
#   bench/thread-cpu.sh BUILD_DIR [N] [--single-acks]
#
# BUILD_DIR holds switchboard-bench and switchboard-broker (a release build:
# SWITCHBOARD_BENCH=1 swift build -c release --product switchboard-bench, and switchboard-broker).
# Prints the ingest rate, then ticks (1/100 s) and µs per event for the busiest threads.
set -u
dir=$(cd "${1:?BUILD_DIR}" && pwd -P)
count=${2:-300000}
shift $(( $# >= 2 ? 2 : 1 ))
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$dir/switchboard-bench" --ingest-only "$count" "$@" > "$out" 2>&1 &
bench=$!
broker=""
for _ in $(seq 1 200); do
    broker=$(pgrep -f "^$dir/switchboard-broker" | head -1)
    [ -n "$broker" ] && break
    sleep 0.05
done
[ -n "$broker" ] || { echo "thread-cpu: no broker started" >&2; exit 1; }
declare -A ticks
benchTicks=0
while kill -0 "$bench" 2>/dev/null; do
    for task in /proc/"$broker"/task/*; do
        value=$(awk '{print $14 + $15}' "$task/stat" 2>/dev/null) && [ -n "$value" ] && ticks[$(basename "$task")]=$value
    done
    value=$(awk '{print $14 + $15}' /proc/"$bench"/stat 2>/dev/null) && [ -n "$value" ] && benchTicks=$value
    sleep 0.2
done
tail -1 "$out"
for tid in "${!ticks[@]}"; do
    echo "${ticks[$tid]} $tid"
done | sort -rn | head -4 | while read -r value tid; do
    printf '  broker thread %s: %s ticks, %s µs/event\n' "$tid" "$value" "$(echo "scale=1; $value * 10000 / $count" | bc)"
done
printf '  bench process: %s ticks, %s µs/event\n' "$benchTicks" "$(echo "scale=1; $benchTicks * 10000 / $count" | bc)"
