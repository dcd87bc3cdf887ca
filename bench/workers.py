#!/usr/bin/env python3
"""The measuring half of bench/workers.sh (issue 16); workers.sh starts the processes.

    workers.py csv PATH N TAG              a kiosk CSV of N check-ins
    workers.py fmrest URL N TAG OUT        python-fmrest writes N CheckIns records one by one
    workers.py import URL N OUT NAME=PID... -- KIOSK-COMMAND...
                                           runs the kiosk import and times it until the
                                           emulator holds N new CheckIns records
    workers.py client URL N OUT NAME=PID... -- COMMAND...
                                           runs `switchboard-bench --filemaker-writes` (our
                                           HTTP client alone, no bus) and times it
    workers.py report OUT...               the table, the ratios, and the ceiling the other
                                           processes' CPU sets

Every phase writes one JSON object to OUT. CPU seconds of the named processes are read from
/proc over the measured interval, so the report can say where the two cores went. Loopback
only: URL is the emulator's plain-HTTP address.
"""

import json
import os
import resource
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone

import requests

DATABASE = "Shelter"
LAYOUT = "CheckIns"
WRITER = ("switchboard", "fm-demo-Passw0rd!")  # the account auth holds for the workers
READER = ("reports", "fm-reports-Passw0rd!")
TICKS = os.sysconf("SC_CLK_TCK")
FIRSTS = ["Ana", "Marcus", "Li", "Fatima", "Joe", "Priya"]


def rows(n, tag):
    """The check-ins both sides write: the same names, dates and notes."""
    for i in range(n):
        yield {
            "first_name": FIRSTS[i % len(FIRSTS)],
            "last_name": f"Person{i}",
            "date_of_birth": f"19{50 + i % 50}-0{1 + i % 9}-1{i % 10}",
            "site_id": 12 + i % 3,
            "program_id": 3 + i % 2,
            "notes": f"{tag} row {i}",
        }


def cpu_seconds(pid):
    """User plus system CPU seconds of a process (and its reaped children), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(x) for x in fields[11:13]) / TICKS


def context_switches(pid):
    """Voluntary plus involuntary context switches over a process's threads (those alive), or None.
    Steadier than CPU time on this shared machine: it counts the thread hand-offs a check-in
    costs, whatever the cores' speed at the moment."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


class Reader:
    """Counts CheckIns records through the Data API on one keep-alive session."""

    def __init__(self, url):
        self.base = f"{url}/fmi/data/vLatest/databases/{DATABASE}"
        self.http = requests.Session()
        r = self.http.post(f"{self.base}/sessions", auth=READER, json={}, timeout=10)
        r.raise_for_status()
        self.token = r.json()["response"]["token"]
        self.http.headers["Authorization"] = f"Bearer {self.token}"

    def count(self):
        r = self.http.get(f"{self.base}/layouts/{LAYOUT}/records", params={"_limit": 1}, timeout=10)
        r.raise_for_status()
        return int(r.json()["response"]["dataInfo"]["totalRecordCount"])

    def close(self):
        self.http.delete(f"{self.base}/sessions/{self.token}", timeout=10)


def write_csv(path, n, tag):
    with open(path, "w") as f:
        f.write("first_name,last_name,date_of_birth,site_id,program_id,notes\n")
        for r in rows(n, tag):
            f.write(f"{r['first_name']},{r['last_name']},{r['date_of_birth']},{r['site_id']},{r['program_id']},{r['notes']}\n")


def fmrest_phase(url, n, tag, out, watch):
    import fmrest

    reader = Reader(url)
    before = reader.count()
    cpu0 = {name: cpu_seconds(pid) for name, pid in watch.items()}
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    # python-fmrest accepts plain http only on port 3000; the emulator here has a free port and
    # no TLS, so it is built with an https URL and pointed at the http one before any call.
    # verify_ssl is irrelevant over plain HTTP.
    fms = fmrest.Server(url.replace("http://", "https://", 1), user=WRITER[0], password=WRITER[1], database=DATABASE,
                        layout=LAYOUT, api_version="vLatest", verify_ssl=False)
    fms.url = url
    fms.login()
    for r in rows(n, tag):
        # The fields switchboard-filemaker writes with the default mapping (no ETO participant
        # id in a CSV check-in, so no ParticipantID), CheckedInAt in FileMaker's format in UTC.
        fms.create_record({
            "EventID": str(uuid.uuid4()),
            "FirstName": r["first_name"],
            "LastName": r["last_name"],
            "CheckedInAt": datetime.now(timezone.utc).strftime("%m/%d/%Y %H:%M:%S"),
            "Notes": r["notes"],
        })
    fms.logout()
    seconds = time.monotonic() - start
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = {name: round(cpu_seconds(pid) - cpu0[name], 2) for name, pid in watch.items() if cpu0[name] is not None}
    cpu["python-fmrest (this process)"] = round(self1.ru_utime + self1.ru_stime - self0.ru_utime - self0.ru_stime, 2)
    after = reader.count()
    reader.close()
    result = {"phase": "python-fmrest", "tag": tag, "n": n, "new_records": after - before, "seconds": round(seconds, 3),
              "per_second": round(n / seconds, 1), "cpu": cpu}
    json.dump(result, open(out, "w"))
    print(f"  python-fmrest: {n} records in {seconds:.2f} s = {n / seconds:.0f}/s")


def import_phase(url, n, out, watch, command, timeout=600):
    reader = Reader(url)
    before = reader.count()
    target = before + n
    cpu0 = {name: cpu_seconds(pid) for name, pid in watch.items()}
    switches0 = {name: context_switches(pid) for name, pid in watch.items()}
    start = time.monotonic()
    kiosk = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    kiosk_status = None
    kiosk_cpu = None
    count = before
    while count < target and time.monotonic() - start < timeout:
        time.sleep(0.02)
        count = reader.count()
        if kiosk_status is None:
            pid, status, usage = os.wait4(kiosk.pid, os.WNOHANG)
            if pid:
                kiosk_status = os.waitstatus_to_exitcode(status)
                kiosk_cpu = usage.ru_utime + usage.ru_stime
                kiosk_done = time.monotonic() - start
    seconds = time.monotonic() - start
    cpu = {name: round(cpu_seconds(pid) - cpu0[name], 2) for name, pid in watch.items() if cpu0[name] is not None}
    switches = {name: context_switches(pid) - switches0[name] for name, pid in watch.items() if switches0[name] is not None}
    if kiosk_status is None:
        _, status, usage = os.wait4(kiosk.pid, 0)
        kiosk_status = os.waitstatus_to_exitcode(status)
        kiosk_cpu = usage.ru_utime + usage.ru_stime
        kiosk_done = time.monotonic() - start
    cpu["switchboard-kiosk import"] = round(kiosk_cpu, 2)
    kiosk_output = kiosk.stdout.read().decode(errors="replace").strip()
    # A little longer: a record written twice would show up here.
    time.sleep(1.0)
    settled = reader.count()
    reader.close()
    result = {"phase": "workers", "workers": len([k for k in watch if k.startswith("switchboard-filemaker")]), "n": n,
              "new_records": count - before, "new_records_after_1s": settled - before, "seconds": round(seconds, 3),
              "per_second": round((count - before) / seconds, 1), "kiosk_exit": kiosk_status,
              "kiosk_seconds": round(kiosk_done, 3), "kiosk_output": kiosk_output, "cpu": cpu, "switches": switches}
    json.dump(result, open(out, "w"))
    print(f"  {result['workers']} worker(s): {count - before} of {n} records in {seconds:.2f} s = {result['per_second']:.0f}/s"
          f" (kiosk exit {kiosk_status} after {kiosk_done:.2f} s; {settled - before} new records 1 s later)")
    if count < target or kiosk_status != 0 or settled != target:
        print(f"  kiosk said: {kiosk_output}")
        sys.exit(1)


def client_phase(url, n, out, watch, command):
    reader = Reader(url)
    before = reader.count()
    cpu0 = {name: cpu_seconds(pid) for name, pid in watch.items()}
    start = time.monotonic()
    # Its output goes to a file, not a pipe: wait4 must not wait on a writer blocked on a full pipe.
    with open(out + ".log", "w+b") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.monotonic() - start
        log.seek(0)
        output = log.read().decode(errors="replace").strip()
    cpu = {name: round(cpu_seconds(pid) - cpu0[name], 2) for name, pid in watch.items() if cpu0[name] is not None}
    cpu["switchboard-bench --filemaker-writes"] = round(usage.ru_utime + usage.ru_stime, 2)
    after = reader.count()
    reader.close()
    result = {"phase": "client", "n": n, "new_records": after - before, "seconds": round(seconds, 3),
              "per_second": round(n / seconds, 1), "exit": os.waitstatus_to_exitcode(status), "cpu": cpu}
    json.dump(result, open(out, "w"))
    print(f"  FileMakerClient alone: {after - before} of {n} records in {seconds:.2f} s = {n / seconds:.0f}/s")
    if result["exit"] != 0 or after - before != n:
        print(f"  it said: {output}")
        sys.exit(1)


def ceiling(results, base):
    """What the processes other than the writer leave for it on this machine's cores.

    The emulator's CPU per record is taken at its cheapest (the 1-writer row or the client row,
    where requests come back to back); the broker's and the kiosk's as the 1-writer row measured
    them; our HTTP client's per record from the client row, the least a writer built on it
    spends. The cores divided by the sum is the most check-ins per second such a pipeline could
    reach here; divided by python-fmrest's rate, the most it could show against the target."""
    one = next((r for r in results if r["phase"] == "workers" and r["workers"] == 1), None)
    client = next((r for r in results if r["phase"] == "client"), None)
    if one is None or client is None:
        return
    def per(r, name):
        return r["cpu"].get(name, 0) / r["n"]
    emulator = min(per(one, "switchboard-emulator"), per(client, "switchboard-emulator"))
    rest = sum(v for k, v in one["cpu"].items() if k.startswith("switchboard-") and not k.startswith("switchboard-filemaker")
               and k != "switchboard-emulator") / one["n"]
    writer = sum(v for k, v in one["cpu"].items() if k.startswith("switchboard-filemaker")) / one["n"]
    measured = sum(one["cpu"].values()) / one["n"]
    http = per(client, "switchboard-bench --filemaker-writes")
    cores = os.cpu_count()
    print()
    print(f"Ceiling on {cores} cores: CPU per check-in, emulator at its cheapest per record "
          f"({emulator * 1000:.3f} ms), broker, auth and kiosk as in the 1-writer row ({rest * 1000:.3f} ms):")
    print()
    print("| the pipeline with… | CPU ms per check-in | most check-ins/s | vs python-fmrest |")
    print("|---|---|---|---|")
    for name, cost in [
        ("the writer as measured (and the emulator as measured)", measured),
        (f"a writer that spends only its HTTP call ({http * 1000:.3f} ms, our client alone)", http + emulator + rest),
        ("a writer that costs nothing", emulator + rest),
    ]:
        print(f"| {name} | {cost * 1000:.3f} | {cores / cost:,.0f}/s | {cores / cost / base:.2f}× |")
    print()
    switches = sum(v for k, v in one.get("switches", {}).items() if k.startswith("switchboard-filemaker")) / one["n"]
    print(f"(the writer: {writer * 1000:.3f} ms and {switches:.1f} context switches per check-in; python-fmrest: "
          f"{base:,.0f}/s, mean of its runs)")


def report(paths):
    results = [json.load(open(p)) for p in paths]
    baseline = [r for r in results if r["phase"] == "python-fmrest"]
    base = sum(r["per_second"] for r in baseline) / len(baseline)
    print()
    print("| measurement | check-ins/s | seconds | vs python-fmrest (mean of its runs) |")
    print("|---|---|---|---|")
    for r in results:
        if r["phase"] == "python-fmrest":
            name = f"python-fmrest, one by one ({r['tag']})"
        elif r["phase"] == "client":
            name = "FileMakerClient alone, 16 in flight (no kiosk, no bus: the bound, not a result)"
        else:
            name = f"kiosk import → broker → {r['workers']} × switchboard-filemaker → emulator"
        print(f"| {name} | {r['per_second']:,.0f}/s | {r['seconds']:.2f} | {r['per_second'] / base:.2f}× |")
    print()
    print("CPU seconds used during each measurement (2 cores: at most 2 s per wall-clock second):")
    print()
    print("| measurement | wall s | CPU s, all listed | per process |")
    print("|---|---|---|---|")
    for r in results:
        name = {"python-fmrest": lambda: f"python-fmrest ({r['tag']})", "client": lambda: "FileMakerClient alone"}.get(
            r["phase"], lambda: f"{r['workers']} worker(s)")()
        cpu = r["cpu"]
        workers = sum(v for k, v in cpu.items() if k.startswith("switchboard-filemaker"))
        parts = [f"{k} {v:.1f}" for k, v in cpu.items() if not k.startswith("switchboard-filemaker")]
        if workers:
            parts.insert(0, f"filemaker workers {workers:.1f}")
        print(f"| {name} | {r['seconds']:.1f} | {sum(cpu.values()):.1f} | {', '.join(parts)} |")
    ceiling(results, base)


def parse_watch(args):
    return {name: int(pid) for name, pid in (a.split("=", 1) for a in args)}


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "csv":
        write_csv(args[0], int(args[1]), args[2])
    elif command == "fmrest":
        fmrest_phase(args[0], int(args[1]), args[2], args[3], parse_watch(args[4:]))
    elif command == "import":
        split = args.index("--")
        import_phase(args[0], int(args[1]), args[2], parse_watch(args[3:split]), args[split + 1:])
    elif command == "client":
        split = args.index("--")
        client_phase(args[0], int(args[1]), args[2], parse_watch(args[3:split]), args[split + 1:])
    elif command == "report":
        report(args)
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
