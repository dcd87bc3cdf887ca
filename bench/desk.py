#!/usr/bin/env python3
"""The front desk's journey, timed: check-ins made through the desk's HTTP interface (as its page
posts them) against `switchboard up`'s processes, and for each the time from the POST until the
page's event stream says "in FileMaker" and "in ETO". p50 and p99 over --count check-ins.

Baseline, measured in the same run from the broker's journal: for the same check-ins, the time
from the check-in's header `time` (the desk's clock when it saved it) to the `time` of the
worker's `filemaker.record.written` / `eto.response.recorded` (the worker's clock when the
back end had it). That is what the bus and the workers take; the page's figure adds the desk's
outbox, its replay polling and its event stream. The ratio says what the desk's own path costs.

    bench/desk.py [--bin .build/debug] [--count 200] [--rate 10]
"""
import argparse, http.cookiejar, json, os, re, signal, socket, sqlite3, statistics, subprocess
import sys, tempfile, threading, time, urllib.parse, urllib.request

SEED = [(1000, "Ana", "Ortiz", "1976-02-23"), (1003, "Devon", "Hart", ""), (1006, "Keisha", "Brooks", ""),
        (1009, "Omar", "Haddad", "")]


def free_port(count=1):
    for _ in range(100):
        base = 20000 + int.from_bytes(os.urandom(2), "big") % 12000
        ok = True
        for port in range(base, base + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
        if ok:
            return base
    raise SystemExit("no free port")


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def ms(t):
    return f"{t * 1000:.0f} ms"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=".build/debug")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--rate", type=float, default=10.0, help="check-ins per second through the page")
    args = parser.parse_args()
    binaries = os.path.abspath(args.bin)
    work = tempfile.mkdtemp(prefix="desk-bench-")
    port, emulator, desk = free_port(5), free_port(), free_port()
    log = open(os.path.join(work, "up.log"), "w+")
    up = subprocess.Popen(
        [os.path.join(binaries, "switchboard"), "up", "--no-demo", "--port", str(port), "--emulator-port", str(emulator),
         "--desk-port", str(desk), "--admin-port", "0"], cwd=work, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{desk}"
    try:
        deadline = time.time() + 120
        output = ""
        while time.time() < deadline:
            output = open(log.name).read()
            if "Ctrl-C stops everything." in output:
                break
            if up.poll() is not None:
                raise SystemExit("up exited:\n" + output)
            time.sleep(0.2)
        password = re.search(r"password ([a-z0-9-]+) ", output).group(1)
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.addheaders = [("Origin", base)]

        def get(path):
            return opener.open(base + path, timeout=10).read().decode()

        def post(path, fields):
            return opener.open(base + path, urllib.parse.urlencode(fields).encode(), timeout=10).read().decode()

        while True:
            try:
                get("/signin")
                break
            except OSError:
                time.sleep(0.2)
        post("/signin", {"name": "demo", "password": password})
        page = get("/")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        while "Check in Ana Ortiz" not in get("/?name=Ortiz"):  # the roster has come
            time.sleep(0.5)

        # The page's event stream, read as the browser reads it.
        seen = {"filemaker": {}, "eto": {}}
        order = []
        lock = threading.Lock()

        def stream():
            request = urllib.request.Request(base + "/events")
            with opener.open(request, timeout=600) as response:
                for raw in response:
                    line = raw.decode().rstrip("\n")
                    if not line.startswith("data: "):
                        continue
                    now = time.monotonic()
                    data = json.loads(line[6:])
                    with lock:
                        order[:] = list(reversed(data.get("order", [])))
                        for event, state in data.get("rows", {}).items():
                            if state["kind"] in ("filemaker", "done"):
                                seen["filemaker"].setdefault(event, now)
                            if state["kind"] in ("eto", "done"):
                                seen["eto"].setdefault(event, now)

        threading.Thread(target=stream, daemon=True).start()
        time.sleep(1)
        posted = []
        started = time.monotonic()
        for index in range(args.count):
            pid, first, last, dob = SEED[index % len(SEED)]
            wait = started + index / args.rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            posted.append(time.monotonic())
            post("/checkin", {"csrf": csrf, "participant_id": pid, "first_name": first, "last_name": last, "date_of_birth": dob})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with lock:
                if len(order) >= args.count and all(e in seen["eto"] and e in seen["filemaker"] for e in order[-args.count:]):
                    break
            time.sleep(0.2)
        with lock:
            events = order[-args.count:]
            page = {kind: [seen[kind][e] - posted[i] for i, e in enumerate(events) if e in seen[kind]] for kind in seen}

        # The baseline, from the journal: check-in header time → the worker's outcome time.
        journal = sqlite3.connect(os.path.join(work, ".switchboard/broker/journal.sqlite"))
        made = {}
        outcome = {"filemaker.record.written": {}, "eto.response.recorded": {}}

        def instant(text):
            return time.mktime(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) + float("0." + (text[20:23] or "0"))

        for kind, header, content in journal.execute("SELECT type, CAST(header AS TEXT), CAST(content AS TEXT) FROM events"):
            h = json.loads(header)
            if kind == "checkin.recorded":
                made[h["event_id"]] = instant(h["time"])
            elif kind in outcome:
                outcome[kind].setdefault(json.loads(content)["event_id"], instant(h["time"]))
        floor = {name: [outcome[kind][e] - made[e] for e in events if e in outcome[kind] and e in made]
                 for name, kind in (("filemaker", "filemaker.record.written"), ("eto", "eto.response.recorded"))}

        print(f"front desk journey: {len(events)} check-ins through the page at {args.rate:g}/s ({binaries})")
        print("| to | page p50 | page p99 | journal p50 | journal p99 | page / journal (p50) |")
        print("|---|---|---|---|---|---|")
        for kind, label in (("filemaker", "in FileMaker"), ("eto", "in ETO")):
            p, f = page[kind], floor[kind]
            if not p or not f:
                print(f"| {label} | missing ({len(p)} page, {len(f)} journal) | | | | |")
                continue
            print(f"| {label} | {ms(pct(p, .5))} | {ms(pct(p, .99))} | {ms(pct(f, .5))} | {ms(pct(f, .99))} | "
                  f"{statistics.median(p) / max(statistics.median(f), 1e-3):.1f}x |")
        missing = args.count - min(len(page["filemaker"]), len(page["eto"]))
        if missing:
            print(f"{missing} check-ins did not show both outcomes within 120 s")
            return 1
        return 0
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()


if __name__ == "__main__":
    sys.exit(main())
