#!/usr/bin/env python3
"""Switchboard against the peers a user would pick instead, in the same run (issue 30, item 1).

Redis Streams (durable-acked appends):
Starts its own redis-server (Debian's package; `apt-get install redis-server`) on a free
loopback port with an append-only file fsynced on every write (`appendonly yes`,
`appendfsync always`, no RDB snapshots), and times XADD of the same bytes an EVENT carries (the
bench's header and check-in content) with redis-benchmark: 4 clients, pipelined 64 deep and
unpipelined. Between two Redis rounds it runs `switchboard-bench --journal` (4 producers with a
window of 1000 each against the real switchboard-broker on SQLite, synchronous=FULL; and on
PostgreSQL) and prints the ratios of the best figures.

Majordomo (request/reply through a broker): majortomo (PyPI, installed into a virtual
environment of its own under ~/.cache/switchboard-bench) with its own broker, 4 of its echo
workers and 8 client processes written with its own Client, each making one round trip at a
time with a body of the bench's size; against `switchboard-bench --service` (the same shape
through switchboard-broker: 8 clients, 4 workers), run right after it.

    SWITCHBOARD_BENCH=1 swift build -c release
    python3 bench/peers.py [--bin .build/release] [--events 100000] [--only redis|majordomo]
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


MAJORTOMO_CLIENT = r"""
import sys, time
from majortomo import Client
url, count, header, content = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode(), sys.argv[4].encode()
with Client(url) as client:
    client.send(b"mdp-echo", header, content)
    client.recv_all_as_list(timeout=30)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    start = time.perf_counter()
    for _ in range(count):
        client.send(b"mdp-echo", header, content)
        client.recv_all_as_list(timeout=30)
    print(time.perf_counter() - start)
"""


def majortomo_python():
    """The virtual environment's python with majortomo installed (made once)."""
    home = os.path.join(os.path.expanduser("~"), ".cache", "switchboard-bench", "majortomo")
    python = os.path.join(home, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", home], check=True)
    if subprocess.run([python, "-c", "import majortomo"], capture_output=True).returncode != 0:
        # six: majortomo imports it without declaring it.
        subprocess.run([python, "-m", "pip", "install", "-q", "majortomo", "six"], check=True, timeout=600)
    return python


def majortomo_round(python, clients, per_client):
    """Round trips per second through majortomo's broker with 4 of its echo workers."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    processes = [subprocess.Popen([python, "-m", "majortomo.broker", "-b", url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for _ in range(4):
            processes.append(
                subprocess.Popen([python, "-m", "majortomo.echo", "-b", url, "worker"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        drivers = [
            subprocess.Popen(
                [python, "-c", MAJORTOMO_CLIENT, url, str(per_client), HEADER, CONTENT],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )
            for _ in range(clients)
        ]
        processes += drivers
        for driver in drivers:
            if driver.stdout.readline().strip() != "ready":
                raise SystemExit("peers: a majortomo client did not get its first reply")
        for driver in drivers:
            driver.stdin.write("go\n")
            driver.stdin.flush()
        elapsed = [float(driver.communicate(timeout=600)[0].strip()) for driver in drivers]
        return clients * per_client / max(elapsed)
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def majordomo(bench):
    python = majortomo_python()
    rounds = [majortomo_round(python, 8, 2_000) for _ in range(2)]
    ours = subprocess.run([bench, "--service"], capture_output=True, text=True, timeout=1800, env={**os.environ, "SWITCHBOARD_BENCH": "1"})
    print(ours.stdout.strip())
    rounds.append(majortomo_round(python, 8, 2_000))
    match = re.search(r"^through the broker, MDP/0\.2, 4 workers, 8 clients\s+([0-9]+)/s", ours.stdout, re.M)
    if ours.returncode != 0 or not match:
        raise SystemExit(f"peers: switchboard-bench --service failed ({ours.returncode}): {ours.stderr[-400:]}")
    switchboard = float(match.group(1))
    # The same echo through libzmq's zmq_proxy, a forwarder with no logic: what any broker on
    # this machine could reach at best, in the same run.
    floor = re.search(r"^through zmq_proxy \(no logic: the floor\), 4 workers, 8 clients\s+([0-9]+)/s", ours.stdout, re.M)
    print()
    print("Majordomo round trips, 8 clients, 4 echo workers, best of the run")
    print(f"  majortomo (its broker, workers and client)  {max(rounds):>10,.0f}/s  rounds: {', '.join(f'{r:,.0f}' for r in rounds)}")
    print(f"  switchboard-broker (MDP/0.2)                {switchboard:>10,.0f}/s")
    if floor:
        print(f"  zmq_proxy, no logic (the floor)             {float(floor.group(1)):>10,.0f}/s")
    print(f"  Switchboard / majortomo:                    {switchboard / max(rounds):.2f}x")
    if floor:
        print(f"  zmq_proxy / majortomo:                      {float(floor.group(1)) / max(rounds):.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("--events", type=int, default=100_000, help="XADDs per Redis round (default 100,000)")
    parser.add_argument("--only", choices=["redis", "majordomo"], help="one of the two comparisons")
    args = parser.parse_args()
    bench = os.path.join(args.bin, "switchboard-bench")
    if not os.access(bench, os.X_OK):
        print(f"peers: no {bench}: build it first (SWITCHBOARD_BENCH=1 swift build -c release)")
        return 1
    if args.only != "redis":
        majordomo(bench)
        if args.only == "majordomo":
            return 0
        print()
    for tool in ("redis-server", "redis-benchmark"):
        if shutil.which(tool) is None:
            print(f"peers: {tool} is missing: apt-get install redis-server")
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
