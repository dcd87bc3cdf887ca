#!/usr/bin/env python3
"""The soak (issue 15, item 4): check-ins recorded at three kiosks at a steady rate for an hour
(or ten minutes with --short), through the broker, `auth` and the three workers to the emulated
FileMaker and ETO, while every process's resident memory, CPU, open files and lag are sampled
every --interval seconds into a CSV, and plotted at the end into a PNG.

Pass means flat: for every Switchboard process, memory at the end of the run no more than
--memory-growth (default 10 %, at least 8 MB) above what it used once warmed up; for every
consumer group and kiosk, the lag in the last third of the run never above --lag-bound seconds of
check-ins, and not growing (least-squares slope over the second half under 1 % of the rate);
and at the end, once the recording stops, every check-in journaled and written to FileMaker and
ETO (counted by the broker's groups: acknowledged deliveries) with no dead letter.

The deployment is the chaos run's (bench/chaos/chaos.py, imported): keys from `switchboard keys
init`, CURVE on every broker endpoint, each program with its own configuration file and
certificate, the emulators over HTTPS. Unlike the chaos run nothing is killed and no fault is
injected, and the emulator keeps its data in memory only (its state file would be rewritten
whole every second) and logs at info (no line per request).

What each column means (the CSV has one row per process per sample):
  rss_mb        VmRSS from /proc/PID/status
  cpu_percent   (utime + stime) over the interval, from /proc/PID/stat; 100 is one core
  open_files    entries in /proc/PID/fd
  lag_events    kiosk: its outbox depth (recorded, not yet journaled: switchboard_outbox_depth);
                filemaker, eto, directory: the broker's switchboard_group_lag for the group
                (journaled check-ins not yet acknowledged); broker: the kiosks' depths summed
                (what it has not journaled yet); auth, emulator: empty
  lag_seconds   lag_events divided by the recording rate
  anon_mb       RssAnon from /proc/PID/status: the part of rss_mb that is the process's own memory
                (heap, stacks), not pages of its program and libraries
"""

import argparse
import csv
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import types
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chaos"))
import chaos as harness  # noqa: E402  the chaos run's deployment, reused as it is

KIOSKS = harness.KIOSKS
WORKERS = harness.WORKERS
GROUPS = ["filemaker", "eto", "directory"]
# Switchboard's own processes: the memory rule applies to these. The emulator is the stand-in
# for the back ends: it keeps every record it is given in memory, so it grows by design.
JUDGED = ["broker", "auth", *WORKERS, *KIOSKS]
TICKS = os.sysconf("SC_CLK_TCK")
STARTED = time.monotonic()


def log(text):
    print(f"soak {time.monotonic() - STARTED:8.1f}s  {text}", flush=True)


def metrics(address):
    """A program's /metrics as {(name, labels): value}."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    values = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if match:
            values[(match.group(1), match.group(2) or "")] = float(match.group(3))
    return values


def proc_figures(pid):
    """(CPU seconds so far, RSS in MB, anonymous RSS in MB, open files) of a process, or None once
    it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime: fields 14 and 15 of stat
        with open(f"/proc/{pid}/status") as f:
            status = {line.split(":")[0]: line.split()[1] for line in f if line.startswith(("VmRSS:", "RssAnon:"))}
        files = len(os.listdir(f"/proc/{pid}/fd"))
        return cpu, int(status["VmRSS"]) / 1024, int(status["RssAnon"]) / 1024, files
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        return None


class Recorder:
    """Each kiosk imports, every --period seconds, a CSV of its share of the check-ins due by
    then: the seed's participants at random, as the chaos run's files (all rows or none)."""

    def __init__(self, deployment, rate, duration, period, seed, by_id=0.0):
        self.d = deployment
        self.by_id = by_id
        self.rate = rate
        self.duration = duration
        self.period = period
        self.rng = random.Random(seed)
        self.recorded = {k: 0 for k in KIOSKS}
        self.import_seconds = []
        self.failures = []
        self.stop = threading.Event()
        self.done = threading.Event()
        self.lock = threading.Lock()

    def run_kiosk(self, kiosk, started, share):
        p = self.d.processes[kiosk]
        folder = os.path.join(self.d.folder(kiosk), "batches")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        number = 0
        pick = random.Random(f"{kiosk} {self.rng.random()}")
        while not self.stop.is_set():
            elapsed = time.monotonic() - started
            if elapsed >= self.duration:
                break
            due = int(min(elapsed + self.period, self.duration) * self.rate * share) - self.recorded[kiosk]
            if due > 0:
                path = os.path.join(folder, f"batch-{number:06d}.csv")
                with open(path, "w", newline="") as f:
                    out = csv.writer(f)
                    out.writerow(["first_name", "last_name", "date_of_birth", "eto_participant_id", "site_id", "program_id", "notes"])
                    for row in range(due):
                        person = pick.choice(self.d.people)
                        # A check-in from the desk's roster carries the ETO id; one typed in, names only.
                        clid = person["id"] if self.by_id and pick.random() < self.by_id else ""
                        out.writerow([person["first"], person["last"], person["dob"], clid, person["site"], person["program"],
                                      f"soak {kiosk} batch {number} row {row}"])
                begun = time.monotonic()
                result = subprocess.run(
                    [os.path.join(self.d.bin, "switchboard-kiosk"), "import", path, "--wait", "0s"],
                    env=self.d.environment(p.config, kiosk), capture_output=True, text=True, timeout=300, cwd=p.folder,
                )
                with self.lock:
                    self.import_seconds.append(time.monotonic() - begun)
                    if result.returncode in (0, 2):
                        self.recorded[kiosk] += due
                    else:
                        self.failures.append(f"{kiosk} batch {number}: exit {result.returncode}: {(result.stderr or result.stdout).strip()[-300:]}")
                os.remove(path)
                number += 1
            # The next file is due a period after this one was: at the rate, whatever an import took.
            wait = started + (number * self.period) - time.monotonic()
            if wait > 0:
                self.stop.wait(wait)

    def run(self):
        self.seconds = harness.per_kiosk(lambda kiosk, started: self.run_kiosk(kiosk, started, 1 / len(KIOSKS)))
        self.done.set()

    @property
    def total(self):
        with self.lock:
            return sum(self.recorded.values())


class Sampler:
    def __init__(self, deployment, rate, path):
        self.d = deployment
        self.rate = rate
        self.rows = []
        self.totals = []
        self.last = {}  # name: (time, cpu seconds, pid)
        self.file = open(path, "w", newline="")
        self.out = csv.writer(self.file)
        self.out.writerow(["elapsed_s", "process", "pid", "rss_mb", "cpu_percent", "open_files", "lag_events", "lag_seconds", "anon_mb"])
        self.admin = {}  # name: its /metrics address (the emulator has none)
        for name, p in self.d.processes.items():
            with open(p.config) as f:
                config = json.load(f)
            section = config.get("kiosk" if name in KIOSKS else name)
            if isinstance(section, dict) and section.get("admin"):
                self.admin[name] = section["admin"]

    def lags(self):
        broker = metrics(self.admin["broker"])
        lag = {g: broker.get(("switchboard_group_lag", f'{{group="{g}"}}'), 0.0) for g in GROUPS}
        acked = {g: broker.get(("switchboard_group_acked_total", f'{{group="{g}"}}'), 0.0) for g in GROUPS}
        dead = sum(v for (n, _), v in broker.items() if n == "switchboard_group_dead_letters_total")
        head = broker.get(("switchboard_broker_journal_head", ""), 0.0)
        for kiosk in KIOSKS:
            lag[kiosk] = metrics(self.admin[kiosk]).get(("switchboard_outbox_depth", ""), 0.0)
        lag["broker"] = sum(lag[k] for k in KIOSKS)
        return lag, acked, dead, head

    def sample(self, elapsed, recorded):
        try:
            lag, acked, dead, head = self.lags()
        except Exception as error:
            log(f"metrics not read this time ({type(error).__name__}: {error})")
            lag, acked, dead, head = {}, {}, None, None
        now = time.monotonic()
        for name, p in self.d.processes.items():
            if p.popen is None:
                continue
            figures = proc_figures(p.popen.pid)
            if figures is None:
                continue
            cpu, rss, anon, files = figures
            previous = self.last.get(name)
            percent = ""
            if previous and previous[2] == p.popen.pid and now - previous[0] >= 1.0:
                percent = round(100 * (cpu - previous[1]) / (now - previous[0]), 1)
            if not previous or previous[2] != p.popen.pid or now - previous[0] >= 1.0:
                # A sample right after another (the end of the recording) has no CPU figure of
                # its own: over a few milliseconds one scheduler tick reads as tens of percent.
                self.last[name] = (now, cpu, p.popen.pid)
            events = lag.get(name)
            row = [round(elapsed, 1), name, p.popen.pid, round(rss, 1), percent, files,
                   "" if events is None else int(events), "" if events is None else round(events / self.rate, 2), round(anon, 1)]
            self.out.writerow(row)
            self.rows.append(row)
        self.file.flush()
        self.totals.append({"elapsed_s": round(elapsed, 1), "recorded": recorded, "journal_head": head, "dead_letters": dead,
                            **{f"acked_{g}": v for g, v in acked.items()}})
        return lag, acked, dead


def slope(points):
    """Least-squares slope of (x, y) points, or 0 with fewer than two."""
    if len(points) < 2:
        return 0.0
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    den = sum((x - mx) ** 2 for x, _ in points)
    return 0.0 if den == 0 else sum((x - mx) * (y - my) for x, y in points) / den


def judge(rows, args, warmup, duration):
    """The pass rules of the docstring; returns (figures per process, problems)."""
    problems = []
    figures = {}
    by_process = {}
    for t, name, _pid, rss, cpu, files, lag, *_ in rows:
        by_process.setdefault(name, []).append((t, rss, cpu, files, lag))
    for name, samples in by_process.items():
        warm = [s for s in samples if warmup <= s[0] <= duration]
        if not warm:
            continue
        settled = warm[: max(1, len(warm) // 4)]
        end = warm[-max(1, len(warm) // 4):]
        start_rss = sum(s[1] for s in settled) / len(settled)
        end_rss = sum(s[1] for s in end) / len(end)
        cpus = [s[2] for s in warm if s[2] != ""]
        lags = [(s[0], s[4]) for s in warm if s[4] != ""]
        last_third = [y for x, y in lags if x >= duration * 2 / 3]
        second_half = [(x, y) for x, y in lags if x >= duration / 2]
        f = {
            "rss_first_quarter_mb": round(start_rss, 1), "rss_last_quarter_mb": round(end_rss, 1),
            "rss_peak_mb": round(max(s[1] for s in warm), 1),
            "rss_slope_mb_per_hour": round(slope([(s[0], s[1]) for s in warm]) * 3600, 1),
            "cpu_mean_percent": round(sum(cpus) / len(cpus), 1) if cpus else None,
            "open_files_min_max": [min(s[3] for s in warm), max(s[3] for s in warm)],
        }
        if lags:
            f["lag_max_last_third"] = max(last_third) if last_third else None
            f["lag_slope_per_s_second_half"] = round(slope(second_half), 3)
        figures[name] = f
        if name in JUDGED:
            allowed = max(start_rss * args.memory_growth, 8.0)
            if end_rss - start_rss > allowed:
                problems.append(f"{name}: memory grew from {start_rss:.1f} MB to {end_rss:.1f} MB (allowed {allowed:.1f} MB)")
        if lags:
            bound = args.lag_bound * args.rate
            if last_third and max(last_third) > bound:
                problems.append(f"{name}: lag reached {max(last_third):.0f} events in the last third (bound {bound:.0f}: "
                                f"{args.lag_bound:g} s of check-ins)")
            if slope(second_half) > 0.01 * args.rate:
                problems.append(f"{name}: lag grew {slope(second_half):.2f} events/s over the second half "
                                f"(bound {0.01 * args.rate:.2f}: 1 % of the rate)")
    return figures, problems


def plot(rows, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_process = {}
    for t, name, _pid, rss, cpu, files, lag, *_ in rows:
        by_process.setdefault(name, []).append((t / 60, rss, cpu, files, lag))
    fig, axes = plt.subplots(4, 1, figsize=(11, 13), sharex=True)
    # One colour per process in every panel (the lag panel has fewer lines than the others).
    colours = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(by_process)}
    panels = [(1, "resident memory (MB), without the emulator"), (2, "CPU (% of a core)"), (3, "open files"), (4, "lag (events)")]
    for ax, (column, label) in zip(axes, panels):
        for name, samples in by_process.items():
            if column == 1 and name == "emulator":
                continue  # the stand-in keeps every record it is given: it would flatten the rest
            # CPU over less than a second (two samples at the end of the recording) is noise.
            points = [(s[0], s[column]) for i, s in enumerate(samples)
                      if s[column] != "" and (column != 2 or i == 0 or s[0] - samples[i - 1][0] >= 1 / 60)]
            if points:
                ax.plot([x for x, _ in points], [y for _, y in points], label=name, linewidth=1.2, color=colours[name])
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].legend(ncol=5, fontsize=8, loc="upper left")
    axes[0].set_title(title)
    axes[-1].set_xlabel("minutes")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def replot(folder):
    """The plot of an earlier run, from its files (as the run drew it, with this script's plot)."""
    with open(os.path.join(folder, "summary.json")) as f:
        summary = json.load(f)
    rows = []
    with open(os.path.join(folder, "samples.csv"), newline="") as f:
        reader = csv.reader(f)
        next(reader)
        for r in reader:
            number = lambda text, kind=float: kind(text) if text != "" else ""
            rows.append([float(r[0]), r[1], int(r[2]), float(r[3]), number(r[4]), int(r[5]), number(r[6], int), number(r[7]),
                         *(number(x) for x in r[8:])])
    verdict = "PASS" if not summary["problems"] else "FAIL"
    plot(rows, os.path.join(folder, "soak.png"),
         f"{summary['command']}: {summary['recorded']} check-ins, {summary['recorded_per_s']:.0f}/s {verdict}")
    print(f"plot: {os.path.join(folder, 'soak.png')}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.environ.get("SWITCHBOARD_BIN"), help="the built programs (default: the release build in .build-rel)")
    parser.add_argument("--rate", type=float, default=1000, help="check-ins recorded per second, all kiosks together (default 1000)")
    parser.add_argument("--duration", type=int, default=3600, help="seconds of recording (default 3600)")
    parser.add_argument("--short", action="store_true", help="the 10-minute setting: --duration 600 unless given")
    parser.add_argument("--interval", type=float, default=30, help="seconds between samples (default 30)")
    parser.add_argument("--period", type=float, default=1.0, help="seconds between a kiosk's imported files (default 1)")
    parser.add_argument("--people", type=int, default=1100, help="ETO participants added to the seed at each site (default 1100)")
    parser.add_argument("--warmup", type=float, default=120, help="seconds left out of the memory comparison (default 120)")
    parser.add_argument("--memory-growth", type=float, default=0.10, help="allowed memory growth after warm-up, a fraction (default 0.10)")
    parser.add_argument("--lag-bound", type=float, default=30, help="seconds of check-ins a lag may reach in the last third (default 30)")
    parser.add_argument("--drain", type=int, default=600, help="seconds to wait, after the recording, for everything to be written (default 600)")
    parser.add_argument("--out", default=None, help="where the CSV, PNG and JSON go (default bench/soak/results/soak-<rate>-<duration>s)")
    parser.add_argument("--seed", type=int, default=1, help="the participants' and picks' seed (default 1)")
    parser.add_argument("--by-id", type=float, default=0.0, metavar="FRACTION",
                        help="the share of check-ins that carry the participant's ETO id, as the desk's roster sends them; "
                             "the others give names and date of birth only (default 0)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, journal, outboxes)")
    parser.add_argument("--replot", metavar="DIR", help="draw DIR/soak.png again from DIR/samples.csv and DIR/summary.json, and stop")
    args = parser.parse_args()
    if args.replot:
        return replot(args.replot)
    if args.short and "--duration" not in sys.argv:
        args.duration = 600
    if args.bin is None:
        args.bin = os.path.join(harness.ROOT, ".build-rel", "release")
    for program in ["switchboard", "switchboard-broker", "switchboard-auth", "switchboard-emulator", "switchboard-kiosk",
                    *("switchboard-" + w for w in WORKERS)]:
        if not os.access(os.path.join(args.bin, program), os.X_OK):
            print(f"soak: no {program} in {args.bin} (bench/soak/run.sh builds them; or give --bin)", file=sys.stderr)
            return 2
    out = args.out or os.path.join(harness.ROOT, "bench", "soak", "results", f"soak-{args.rate:g}-{args.duration}s")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="switchboard-soak-")
    os.chmod(work, 0o700)
    command = (f"bench/soak/run.sh --rate {args.rate:g} --duration {args.duration} --interval {args.interval:g} "
               f"--people {args.people} --seed {args.seed}")
    log(f"{args.rate:g} check-ins/s for {args.duration}s from {len(KIOSKS)} kiosks, sampled every {args.interval:g}s; "
        f"binaries {args.bin}; work {work}; results {out}")

    # The chaos run's Deployment reads these of its arguments.
    d = harness.Deployment(work, args.bin, types.SimpleNamespace(people=args.people, seed=args.seed, backoff=None, no_faults=True, pair=False))
    stop = threading.Event()
    status = 1
    sampler = None
    try:
        d.make_keys()
        d.configure()
        # The emulator in memory and at info: its state file is rewritten whole every second, and
        # its debug log is a line per request; neither is what is measured.
        emulator = d.processes["emulator"]
        with open(emulator.config) as f:
            config = json.load(f)
        config["emulator"].pop("state", None)
        with open(emulator.config, "w") as f:
            json.dump(config, f, indent=2)
        emulator.argv = ["switchboard-emulator"]
        d.start("broker")
        harness.wait_until("the broker ready", harness.ready_or_exited(d.processes["broker"]), 60)
        d.start("emulator")
        d.after_emulator_start()
        d.start("auth")
        harness.wait_until("auth ready", harness.ready_or_exited(d.processes["auth"]), 90)
        for name in [*WORKERS, *KIOSKS]:
            d.start(name)
        for name in [*WORKERS, *KIOSKS]:
            harness.wait_until(f"{name} ready", harness.ready_or_exited(d.processes[name]), 120)
        threading.Thread(target=d.supervise, args=(stop,), daemon=True).start()
        log(f"every program is ready; recording starts ({len(d.people)} participants to pick from)")

        sampler = Sampler(d, args.rate, os.path.join(out, "samples.csv"))
        recorder = Recorder(d, args.rate, args.duration, args.period, args.seed, args.by_id)
        origin = time.monotonic()
        threading.Thread(target=recorder.run, daemon=True).start()
        sampler.sample(0.0, 0)
        next_sample = args.interval
        while not recorder.done.is_set():
            recorder.done.wait(max(0.0, origin + next_sample - time.monotonic()))
            if time.monotonic() - origin >= next_sample:
                elapsed = time.monotonic() - origin
                lag, acked, dead = sampler.sample(elapsed, recorder.total)
                log(f"{elapsed:6.0f}s recorded {recorder.total}, acked " + ", ".join(f"{g} {int(v)}" for g, v in acked.items())
                    + "; lag " + ", ".join(f"{k} {int(v)}" for k, v in lag.items() if k in GROUPS or k == "broker")
                    + (f"; dead letters {int(dead)}" if dead else ""))
                next_sample += args.interval
        recorded = recorder.total
        log(f"recording done: {recorded} check-ins in {recorder.seconds:.0f}s ({recorded / recorder.seconds:.1f}/s); "
            f"imports took {min(recorder.import_seconds):.2f}–{max(recorder.import_seconds):.2f}s; {len(recorder.failures)} failed")

        # Then everything recorded must come out: journaled, and acknowledged by the filemaker and
        # eto groups (each acknowledgement is a record written, or found already there).
        deadline = time.monotonic() + args.drain
        drained = False
        while time.monotonic() < deadline:
            lag, acked, dead = sampler.sample(time.monotonic() - origin, recorded)
            if all(lag.get(k, 1) == 0 for k in [*GROUPS, *KIOSKS]):
                drained = True
                break
            time.sleep(min(args.interval, 5))
        drain_seconds = time.monotonic() - origin - recorder.seconds
        totals = sampler.totals[-1]
        (journaled, distinct), = harness.read_sqlite(
            d.journal_path, "SELECT COUNT(*), COUNT(DISTINCT event_id) FROM events WHERE type = 'checkin.recorded'")
        stops = {}
        for name in reversed(list(d.processes)):
            stops[name] = d.terminate(name, timeout=30)

        figures, problems = judge(sampler.rows, args, args.warmup, args.duration)
        problems += recorder.failures[:5]
        if len(recorder.failures) > 5:
            problems.append(f"{len(recorder.failures)} imports failed in all")
        if not drained:
            problems.append(f"not drained {args.drain}s after the recording: lag {lag}")
        if journaled != recorded or distinct != journaled:
            problems.append(f"{recorded} check-ins recorded, {journaled} journaled under {distinct} event ids")
        # The filemaker group also takes the Directory's person.* events (its Staff mirror).
        (people,), = harness.read_sqlite(d.journal_path, "SELECT COUNT(*) FROM events WHERE type LIKE 'person.%'")
        for g, expected in (("filemaker", recorded + people), ("eto", recorded)):
            if totals.get(f"acked_{g}") != expected:
                problems.append(f"group {g} acknowledged {totals.get(f'acked_{g}')} deliveries for {recorded} check-ins"
                                + (f" and {people} person events" if g == "filemaker" else ""))
        if totals.get("dead_letters"):
            problems.append(f"{int(totals['dead_letters'])} dead letters")
        crashes = [(round(t), n, s) for t, n, s, _ in d.crashes]
        if crashes:
            problems.append(f"processes exited by themselves: {crashes}")
        for name, code in stops.items():
            if code not in (0, None):
                problems.append(f"{name} stopped with {code} after SIGTERM")

        summary = {
            "command": command, "rate": args.rate, "duration_s": args.duration, "recorded": recorded,
            "recorded_per_s": round(recorded / recorder.seconds, 1), "journaled": journaled, "drain_s": round(drain_seconds, 1),
            "totals": totals, "processes": figures, "problems": problems,
        }
        with open(os.path.join(out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        plot(sampler.rows, os.path.join(out, "soak.png"),
             f"{command}: {recorded} check-ins, {recorded / recorder.seconds:.0f}/s " + ("PASS" if not problems else "FAIL"))
        print(f"\nSoak: {recorded} check-ins recorded in {recorder.seconds:.0f}s, {journaled} journaled; acknowledged "
              + ", ".join(f"{g} {int(totals.get(f'acked_{g}') or 0)}" for g in GROUPS) + f"; drained {drain_seconds:.0f}s after")
        print(f"{'process':<16}{'RSS warm → end MB':>20}{'slope MB/h':>12}{'CPU %':>8}{'files':>10}{'lag max (last ⅓)':>18}{'lag slope/s':>12}")
        for name, f in figures.items():
            print(f"{name:<16}{f['rss_first_quarter_mb']:>9.1f} → {f['rss_last_quarter_mb']:<8.1f}{f['rss_slope_mb_per_hour']:>12}"
                  f"{f['cpu_mean_percent'] if f['cpu_mean_percent'] is not None else '':>8}"
                  f"{'%d–%d' % tuple(f['open_files_min_max']):>10}{str(f.get('lag_max_last_third', '')):>18}"
                  f"{str(f.get('lag_slope_per_s_second_half', '')):>12}")
        print(f"samples: {os.path.join(out, 'samples.csv')}; plot: {os.path.join(out, 'soak.png')}")
        if problems:
            print("FAIL:")
            for p in problems:
                print(f"  - {p}")
        else:
            print("PASS: memory and lag flat, everything recorded journaled and written, no dead letter")
            status = 0
    except harness.Failure as error:
        log(f"FAILED: {error}")
    finally:
        stop.set()
        d.stop_all()
        if status == 0 and not args.keep:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"work directory kept: {work}")
    return status


if __name__ == "__main__":
    sys.exit(main())
