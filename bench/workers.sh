#!/usr/bin/env bash
# Workers benchmark (issue 16): check-ins per second from a kiosk's outbox to FileMaker records
# through 1 and then 4 `switchboard-filemaker` processes, next to python-fmrest writing the same
# records one by one against the same emulator in the same run.
#
#   bench/workers.sh [--quick | --count N]   5,000 check-ins per measurement (--quick: 1,000)
#
# Needs the release binaries (SWITCHBOARD_BIN, default .build-rel/release), the bench among them:
#   SWITCHBOARD_BENCH=1 swift build -c release --scratch-path .build-rel
# and python3 with python-fmrest (installed with pip if missing).
#
# Everything runs on loopback: a broker (--insecure), the emulator (--port 0, plain HTTP),
# switchboard-auth with an accounts file (mode 0600), the workers, and `switchboard-kiosk
# import`. Every wait is bounded; the processes this script started are stopped on exit.
set -euo pipefail

N=5000
while (($#)); do
    case "$1" in
        --quick) N=1000 ;;
        --count) N=${2:?--count needs a number}; shift ;;
        *) echo "usage: $0 [--quick | --count N]" >&2; exit 2 ;;
    esac
    shift
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SWITCHBOARD_BIN:-$ROOT/.build-rel/release}
HELPER="$ROOT/bench/workers.py"
for program in switchboard-broker switchboard-emulator switchboard-auth switchboard-filemaker switchboard-kiosk switchboard-bench; do
    [[ -x "$BIN/$program" ]] || { echo "no $BIN/$program: run 'SWITCHBOARD_BENCH=1 swift build -c release --scratch-path .build-rel'" >&2; exit 1; }
done
if ! python3 -c 'import fmrest' 2>/dev/null; then
    echo "installing python-fmrest"
    python3 -m pip install --quiet python-fmrest
fi

DIR=$(mktemp -d /tmp/switchboard-workers-bench.XXXXXX)
chmod 700 "$DIR"
STARTED=()
cleanup() {
    local pid
    for pid in "${STARTED[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ -n "${KEEP:-}" ]]; then echo "kept $DIR"; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.1 s.
wait_for() {
    local seconds=$1 what=$2
    shift 2
    local deadline=$((SECONDS + seconds))
    until "$@"; do
        if ((SECONDS >= deadline)); then echo "timed out after ${seconds}s waiting for $what" >&2; exit 1; fi
        sleep 0.1
    done
}

# stop PID...: SIGTERM, up to 20 s to drain, then SIGKILL.
stop() {
    local pid deadline=$((SECONDS + 20))
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "$@"; do
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}

"$BIN/switchboard-broker" --data-dir "$DIR/broker" --ingest 'tcp://127.0.0.1:*' --fanout 'tcp://127.0.0.1:*' \
    --replay 'tcp://127.0.0.1:*' --service 'tcp://127.0.0.1:*' --groups 'tcp://127.0.0.1:*' --insecure \
    --log-level warning >"$DIR/broker.log" 2>&1 &
BROKER=$!
STARTED+=("$BROKER")
wait_for 30 "the broker's endpoints.json" test -s "$DIR/broker/endpoints.json"
endpoint() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$DIR/broker/endpoints.json" "$1"; }
INGEST=$(endpoint ingest)
SERVICE=$(endpoint service)
GROUPS_ENDPOINT=$(endpoint groups)

"$BIN/switchboard-emulator" --port 0 --api filemaker --log-level warning >"$DIR/emulator.log" 2>&1 &
EMULATOR=$!
STARTED+=("$EMULATOR")
wait_for 30 "the emulator's listening line" grep -q '^listening ' "$DIR/emulator.log"
URL=$(sed -n 's/^listening //p' "$DIR/emulator.log" | head -1)

(umask 077 && cat >"$DIR/accounts.json" <<EOF
{"accounts": [{"backend": "filemaker", "account": "switchboard", "password": "fm-demo-Passw0rd!", "base_url": "$URL",
  "options": {"database": "Shelter"}}]}
EOF
)
"$BIN/switchboard-auth" --accounts-file "$DIR/accounts.json" --service "$SERVICE" --ingest "$INGEST" \
    --data-dir "$DIR/auth" --keep-alive 1h >"$DIR/auth.log" 2>&1 &
AUTH=$!
STARTED+=("$AUTH")

echo "Switchboard workers benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $N check-ins per measurement"
echo "emulator $URL (plain HTTP, loopback); logs in $DIR"
COMMON_WATCH=("switchboard-broker=$BROKER" "switchboard-emulator=$EMULATOR" "switchboard-auth=$AUTH")
RESULTS=()

fmrest() {
    local tag=$1
    python3 "$HELPER" fmrest "$URL" "$N" "$tag" "$DIR/result-fmrest-$tag.json" "switchboard-emulator=$EMULATOR"
    RESULTS+=("$DIR/result-fmrest-$tag.json")
}

workers() {
    local count=$1 i pids=() watch=()
    for ((i = 1; i <= count; i++)); do
        "$BIN/switchboard-filemaker" --groups "$GROUPS_ENDPOINT" --service "$SERVICE" --ingest "$INGEST" --url "$URL" \
            --data-dir "$DIR/filemaker-$count-$i" --admin none >"$DIR/filemaker-$count-$i.log" 2>&1 &
        pids+=($!)
        STARTED+=($!)
        watch+=("switchboard-filemaker-$i=$!")
    done
    for ((i = 1; i <= count; i++)); do
        wait_for 90 "worker $i of $count to join the group" grep -q 'ready: joined the group' "$DIR/filemaker-$count-$i.log"
    done
    python3 "$HELPER" csv "$DIR/checkins-$count.csv" "$N" "workers-$count"
    python3 "$HELPER" import "$URL" "$N" "$DIR/result-workers-$count.json" "${COMMON_WATCH[@]}" "${watch[@]}" -- \
        timeout 600 "$BIN/switchboard-kiosk" import "$DIR/checkins-$count.csv" --id "bench-$count" \
        --outbox "$DIR/kiosk-$count/outbox.sqlite" --ingest "$INGEST" --wait 300s
    RESULTS+=("$DIR/result-workers-$count.json")
    stop "${pids[@]}"
}

# The bound: our HTTP client alone writing the same records, 16 at a time (the writer's
# credit), no kiosk and no bus. Its CPU per record is the least a writer spends.
client() {
    python3 "$HELPER" client "$URL" "$N" "$DIR/result-client.json" "switchboard-emulator=$EMULATOR" -- \
        timeout 600 "$BIN/switchboard-bench" --filemaker-writes "$DIR/accounts.json" "$N" 16
    RESULTS+=("$DIR/result-client.json")
}

fmrest before
workers 1
workers 4
client
fmrest after

written=$(python3 - "$DIR/broker/journal.sqlite" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = db.execute("SELECT CAST(content AS TEXT) FROM events WHERE type = 'filemaker.record.written'").fetchall()
created = sum('"created":true' in r[0] for r in rows)
print(f"{len(rows)} ({created} with created true)")
EOF
)
echo "journal: $written filemaker.record.written events (expected $((2 * N)))"
python3 "$HELPER" report "${RESULTS[@]}"
