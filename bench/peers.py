#!/usr/bin/env python3
"""Durable-acked ingest against Redis Streams, in the same run (issue 30, item 1: peers in the
bench; the Redis part).

Starts its own redis-server (Debian's package; `apt-get install redis-server`) on a free
loopback port with an append-only file fsynced on every write (`appendonly yes`,
`appendfsync always`, no RDB snapshots), and times XADD of the same bytes an EVENT carries (the
bench's header and check-in content) with redis-benchmark: 4 clients, pipelined 64 deep and
unpipelined. Between two Redis rounds it runs `switchboard-bench --journal` (4 producers with a
window of 1000 each against the real switchboard-broker on SQLite, synchronous=FULL; and on
PostgreSQL) and prints the ratios of the best figures.

    SWITCHBOARD_BENCH=1 swift build -c release
    python3 bench/peers.py [--bin .build/release] [--events 100000]
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The bytes of one EVENT's header and content, as bench/SwitchboardBench's Sample makes them.
HEADER = json.dumps(
    {
        "event_id": "019375a2-3c4d-7e8f-9a0b-1c2d3e4f5a6b", "producer": "p0", "producer_seq": 1, "schema": "checkin.recorded/1",
        "session": "bench", "time": "2026-11-22T21:04:00.120Z", "type": "checkin.recorded",
    },
    separators=(",", ":"),
)
CONTENT = json.dumps(
    {
        "participant": {"first_name": "Ana", "last_name": "Diaz", "date_of_birth": "1990-04-01"}, "site_id": 12, "program_id": 3,
        "kiosk_id": "riverside-1", "checked_in_at": "2026-11-22T21:04:00.000Z",
    },
    separators=(",", ":"),
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_round(port, events, pipeline):
    """XADD rate from redis-benchmark (4 clients), its CSV line parsed."""
    out = subprocess.run(
        [
            "redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "4", "-n", str(events), "-P", str(pipeline), "--csv",
            "XADD", "bench", "*", "header", HEADER, "content", CONTENT,
        ],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout
    rows = [line for line in out.splitlines() if line.startswith('"XADD')]
    if not rows:
        raise SystemExit(f"peers: redis-benchmark printed no XADD line: {out[-400:]}")
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",
    # "p99_latency_ms","max_latency_ms": the test's name holds the command, commas and all.
    return float(rows[-1].rsplit(",", 7)[1].strip('"'))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("--events", type=int, default=100_000, help="XADDs per Redis round (default 100,000)")
    args = parser.parse_args()
    for tool in ("redis-server", "redis-benchmark"):
        if shutil.which(tool) is None:
            print(f"peers: {tool} is missing: apt-get install redis-server")
            return 1
    bench = os.path.join(args.bin, "switchboard-bench")
    if not os.access(bench, os.X_OK):
        print(f"peers: no {bench}: build it first (SWITCHBOARD_BENCH=1 swift build -c release)")
        return 1
    work = tempfile.mkdtemp(prefix="switchboard-peers-")
    port = free_port()
    server = subprocess.Popen(
        [
            "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", work, "--appendonly", "yes", "--appendfsync", "always",
            "--save", "", "--protected-mode", "yes", "--daemonize", "no", "--logfile", os.path.join(work, "redis.log"),
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() != "PONG":
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"peers: redis-server did not start (see {work}/redis.log)")
            time.sleep(0.1)
        version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()
        print(f"peers: {version}; appendonly yes, appendfsync always; XADD of a {len(HEADER)} B header and {len(CONTENT)} B content")
        redis = {"pipelined": [], "unpipelined": []}
        for _ in range(2):
            redis["pipelined"].append(redis_round(port, args.events, 64))
            redis["unpipelined"].append(redis_round(port, args.events // 5, 1))
            subprocess.run(["redis-cli", "-p", str(port), "del", "bench"], capture_output=True)
        # Between the Redis rounds: ours, the same hour.
        ours = subprocess.run([bench, "--journal"], capture_output=True, text=True, timeout=1800, env={**os.environ, "SWITCHBOARD_BENCH": "1"})
        print(ours.stdout.strip())
        redis["pipelined"].append(redis_round(port, args.events, 64))
        redis["unpipelined"].append(redis_round(port, args.events // 5, 1))
        match = re.search(r"^SQLite \(journal\.sqlite.*?\s([0-9]+)/s", ours.stdout, re.M)
        if ours.returncode != 0 or not match:
            raise SystemExit(f"peers: switchboard-bench --journal failed ({ours.returncode}): {ours.stderr[-400:]}")
        switchboard = float(match.group(1))
        best = {kind: max(rates) for kind, rates in redis.items()}
        print()
        print("durable-acked appends, 4 clients or producers, best of the run")
        print(f"  Redis XADD, pipelined x64        {best['pipelined']:>10,.0f}/s  rounds: {', '.join(f'{r:,.0f}' for r in redis['pipelined'])}")
        print(f"  Redis XADD, unpipelined          {best['unpipelined']:>10,.0f}/s  rounds: {', '.join(f'{r:,.0f}' for r in redis['unpipelined'])}")
        print(f"  Switchboard, SQLite journal      {switchboard:>10,.0f}/s  (window 1000 per producer)")
        print(f"  Switchboard / Redis pipelined:   {switchboard / best['pipelined']:.2f}x")
        print(f"  Switchboard / Redis unpipelined: {switchboard / best['unpipelined']:.2f}x")
        return 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
