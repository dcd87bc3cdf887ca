#!/usr/bin/env python3
"""Switchboard across hosts: one Linux network namespace per host, joined by veth pairs and a
bridge, every program started from the configuration file, environment and key bundle an
administrator would give it. Needs root and `ip netns`; run by deploy/local/test.sh (skipped with
a clear line otherwise) or by hand: `sudo deploy/netns/run.sh [--quick] [--keep]`.

Hosts (10.213.0.0/24 on a bridge in namespace <p>lan; this script's own namespace joins it as
10.213.0.1 to drive and watch):
  broker     .10  switchboard-broker (CURVE on every endpoint, bound to 0.0.0.0)
  backoffice .20  switchboard-emulator (HTTPS, ETO/FileMaker/Directory/SAP) and switchboard-auth
  workers-1  .31  switchboard-filemaker, switchboard-eto, switchboard-directory
  workers-2  .32  the same three again, with their own keys
  site-101   .41  switchboard-kiosk serve (kiosk site-101-kiosk-1)
  site-102   .42  switchboard-kiosk serve (kiosk site-102-kiosk-1)
  ops        .50  switchboard-monitor web
With --pair, a broker pair on PostgreSQL (issue 29):
  broker-b   .11  a second switchboard-broker, the same key and allow-list; the two hold the
                  database's lease in turn, every client is given both
  db-1       .61  PostgreSQL primary (TLS, verify-full from the brokers; deploy/postgres/setup.sql)
  db-2       .62  its synchronous streaming replica (replication over TLS with a password file)
Programs find each other by DNS name (broker.switchboard.test, backoffice.switchboard.test),
from each namespace's own /etc/hosts (/etc/netns/<ns>/hosts).

Scenarios, each ending with its accounting (sent, journaled, written, duplicates) and a verdict:
  1. check-ins from the two sites reach FileMaker and ETO exactly once with CURVE on every hop;
     a kiosk key from another deployment is refused.
  2. site-101's link is cut (ip link set … down) while its kiosk keeps recording, then restored;
     150 ms delay and 2 % loss each way on both kiosk links throughout: tc netem where the kernel
     has it, else deploy/netns/delay.py (NFQUEUE, user space) for the delay and nftables for the
     loss. The round trip from each site to the broker host is measured before and after.
  3. the broker host's processes are killed with -9 and restarted mid-run; then workers-2 is cut
     off while it holds deliveries: they go to workers-1.
  4. workers-1's and site-101's keys are taken off the broker's allow-list while check-ins are
     recorded, then put back: with no restart, workers-1 joins its groups again and every
     check-in lands exactly once.
With --pair (scenarios 1, 5 and 6):
  5. the active broker's host is cut off the network (not killed) while check-ins flow: it stops
     serving once its lease can no longer be renewed, the other broker takes over, every check-in
     lands exactly once; when the link returns the old one is a standby and has sent no ACK since
     it stopped serving (its own metrics, read over its loopback from inside its namespace).
  6. the PostgreSQL primary is killed with -9 mid-run and the replica promoted: every check-in
     journaled before the kill is on the new primary, and every one lands exactly once.
"""

import argparse
import base64
import collections
import csv
import hashlib
import glob
import hmac
import io
import json
import os
import pwd
import secrets
import shutil
import signal
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE_PORT = 9  # closed on the broker host: a connect there is a SYN out and a RST back
DELAYER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "delay.py")
SUBNET = "10.213.0"
HOSTS = {
    "broker": 10,
    "backoffice": 20,
    "workers-1": 31,
    "workers-2": 32,
    "site-101": 41,
    "site-102": 42,
    "ops": 50,
}
# Short names for interfaces and namespaces (an interface name has at most 15 characters).
SHORT = {"broker": "brk", "backoffice": "off", "workers-1": "w1", "workers-2": "w2", "site-101": "s101", "site-102": "s102", "ops": "ops"}
NAMES = {"broker.switchboard.test": "broker", "backoffice.switchboard.test": "backoffice"}
WORKERS = ["filemaker", "eto", "directory"]
KIOSKS = {"site-101": "site-101-kiosk-1", "site-102": "site-102-kiosk-1"}
# --pair: a second broker and two database hosts, a PostgreSQL primary and its synchronous
# replica; the brokers keep their journal there and hold its lease in turn.
PAIR_HOSTS = {"broker-b": 11, "db-1": 61, "db-2": 62}
PAIR_SHORT = {"broker-b": "brkb", "db-1": "db1", "db-2": "db2"}
PAIR_NAMES = {"broker-b.switchboard.test": "broker-b", "db-1.switchboard.test": "db-1", "db-2.switchboard.test": "db-2"}
BROKERS = ["broker"]  # with --pair, also broker-b


def log(text):
    print(f"netns: {text}", flush=True)


def run(*args, check=True, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


class Failure(Exception):
    pass


class Topology:
    """The namespaces, the bridge and the links; torn down on exit whatever happened."""

    def __init__(self, prefix, work):
        self.prefix = prefix
        self.work = work
        self.lan = prefix + "lan"
        self.created = []
        self.delayers = {}  # host: the delay.py process on its link, where there is no netem

    def ns(self, host):
        return self.prefix + SHORT[host]

    def veth(self, host):
        return "v" + self.prefix + SHORT[host]

    def build(self):
        run("ip", "netns", "add", self.lan)
        self.created.append(self.lan)
        run("ip", "-n", self.lan, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.lan, "link", "set", "br0", "up")
        run("ip", "-n", self.lan, "link", "set", "lo", "up")
        hosts_file = "127.0.0.1 localhost\n" + "".join(
            f"{SUBNET}.{HOSTS[host]} {name}\n" for name, host in NAMES.items()
        )
        for host, octet in HOSTS.items():
            ns = self.ns(host)
            run("ip", "netns", "add", ns)
            self.created.append(ns)
            os.makedirs(f"/etc/netns/{ns}", exist_ok=True)
            with open(f"/etc/netns/{ns}/hosts", "w") as f:
                f.write(hosts_file)
            outside = self.veth(host)
            run("ip", "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns)
            run("ip", "link", "set", outside, "netns", self.lan)
            run("ip", "-n", self.lan, "link", "set", outside, "master", "br0")
            run("ip", "-n", self.lan, "link", "set", outside, "up")
            run("ip", "-n", ns, "addr", "add", f"{SUBNET}.{octet}/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
        # This script's namespace joins as 10.213.0.1 to drive the emulator and read health.
        self.console = ("c" + self.prefix)[:15]
        run("ip", "link", "add", self.console, "type", "veth", "peer", "name", "vconsole", "netns", self.lan)
        run("ip", "-n", self.lan, "link", "set", "vconsole", "master", "br0")
        run("ip", "-n", self.lan, "link", "set", "vconsole", "up")
        run("ip", "addr", "add", f"{SUBNET}.1/24", "dev", self.console)
        run("ip", "link", "set", self.console, "up")

    def cut(self, host):
        run("ip", "-n", self.lan, "link", "set", self.veth(host), "down")

    def restore(self, host):
        run("ip", "-n", self.lan, "link", "set", self.veth(host), "up")

    def impair(self, host, delay_ms, loss_percent):
        """Delay and loss on the host's link, both directions (each packet into and out of the host
        is delayed delay_ms and dropped with loss_percent %), so a round trip gains 2 × delay_ms.
        Returns what was applied. With tc netem where the kernel has it; else the delay with
        deploy/netns/delay.py, a user-space delay line fed by iptables NFQUEUE rules on the
        host's eth0, and the loss with nftables. That delay fails closed: if the delayer dies,
        the link's traffic is dropped, never let through undelayed (delayer_problem says so)."""
        spec = ["delay", f"{delay_ms}ms", "loss", f"{loss_percent}%"]
        applied = run("ip", "netns", "exec", self.ns(host), "tc", "qdisc", "replace", "dev", "eth0", "root", "netem", *spec, check=False)
        if applied.returncode == 0:
            run("ip", "netns", "exec", self.lan, "tc", "qdisc", "replace", "dev", self.veth(host), "root", "netem", *spec)
            return f"tc netem {delay_ms} ms delay and {loss_percent} % loss each way"
        missing = [tool for tool in ("nft", "iptables") if shutil.which(tool) is None]
        if missing:
            raise Failure(f"this kernel has no tc netem ({applied.stderr.strip()}) and {' and '.join(missing)} is missing to impair {host}'s link otherwise")
        ns = self.ns(host)
        run("ip", "netns", "exec", ns, "nft", "add", "table", "inet", "impair")
        # Only the host's link (eth0): its loopback traffic is not the kiosk link's.
        for chain, hook, match in (("in", "input", "iifname"), ("out", "output", "oifname")):
            run("ip", "netns", "exec", ns, "nft", "add", "chain", "inet", "impair", chain, f"{{ type filter hook {hook} priority 0; }}")
            run(
                "ip", "netns", "exec", ns, "nft", "add", "rule", "inet", "impair", chain, match, "eth0",
                "numgen", "random", "mod", "100", "<", str(loss_percent), "drop")
        self.start_delayer(host, delay_ms)
        return (
            f"{delay_ms} ms delay each way (every IPv4 packet out of and into eth0) with an NFQUEUE delayer in user space "
            f"(deploy/netns/delay.py), and {loss_percent} % loss each way with nftables: this kernel has no netem ({applied.stderr.strip()})"
        )

    def start_delayer(self, host, delay_ms):
        """deploy/netns/delay.py in the host's namespace on NFQUEUE queue 0 (queues are per
        namespace), then the iptables rules that send eth0's traffic to it: no --queue-bypass, so
        while no delayer reads the queue the link carries nothing."""
        ns = self.ns(host)
        folder = os.path.join(self.work, "hosts", host)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        stats = os.path.join(folder, "delay-stats.json")
        log_path = os.path.join(folder, "delay.log")
        with open(log_path, "a") as log_file:
            process = subprocess.Popen(
                ["ip", "netns", "exec", ns, sys.executable, DELAYER, "--queue", "0", "--delay-ms", str(delay_ms), "--stats", stats],
                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self.delayers[host] = {"process": process, "stats": stats, "log": log_path}
        deadline = time.monotonic() + 15
        while not os.path.exists(stats):
            if process.poll() is not None or time.monotonic() > deadline:
                with open(log_path) as f:
                    raise Failure(f"the delayer for {host} did not start (exit {process.poll()}): {f.read().strip()[-500:]}")
            time.sleep(0.05)
        for chain, direction in (("OUTPUT", "-o"), ("INPUT", "-i")):
            run("ip", "netns", "exec", ns, "iptables", "-w", "-A", chain, direction, "eth0", "-j", "NFQUEUE", "--queue-num", "0")

    def delayer_report(self, host):
        """The delayer's statistics (delay.py --stats), with whether it still runs."""
        delayer = self.delayers[host]
        try:
            with open(delayer["stats"]) as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = {}
        report["alive"] = delayer["process"].poll() is None
        report["exit"] = delayer["process"].poll()
        return report

    def delayer_problem(self):
        """Why the delay did not hold throughout, or None: a delayer that stopped left its link
        carrying nothing from then on (it fails closed)."""
        for host, delayer in self.delayers.items():
            code = delayer["process"].poll()
            if code is not None:
                with open(delayer["log"]) as f:
                    tail = f.read().strip()[-500:]
                return f"the delayer for {host} exited ({code}): from then on its link dropped every packet, so the run was not under the stated delay ({tail})"
        return None

    def stop_delayers(self):
        for host, delayer in self.delayers.items():
            process = delayer["process"]
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=5)

    def rtt(self, hosts, target, port, count):
        """Round trips from each host to target, measured in parallel with `delay.py --probe`
        (TCP connect times: SYN out, SYN-ACK or RST back). {host: {"median_ms": …, …}}."""
        probes = {
            host: subprocess.Popen(
                ["ip", "netns", "exec", self.ns(host), sys.executable, DELAYER, "--probe", f"{SUBNET}.{HOSTS[target]}:{port}", "--count", str(count)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for host in hosts
        }
        results = {}
        for host, probe in probes.items():
            out, err = probe.communicate(timeout=60)
            try:
                results[host] = json.loads(out)
            except ValueError:
                raise Failure(f"the round-trip probe from {host} failed ({probe.returncode}): {out}{err}")
        return results

    def teardown(self):
        self.stop_delayers()
        if getattr(self, "console", None):
            run("ip", "link", "del", self.console, check=False)
        for ns in reversed(self.created):
            # Whatever still runs in a host's namespace goes with it.
            pids = run("ip", "netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            run("ip", "netns", "del", ns, check=False)
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)


class Databases:
    """PostgreSQL on db-1 (the primary) and db-2 (its synchronous replica, streaming over the
    LAN), set up as deploy/postgres/README.md says: deploy/postgres/setup.sql, TLS with a CA of
    the test's own (verify-full from the brokers), the role's password given as a SCRAM verifier
    on standard input (never on a command line), replication over TLS with a password file."""

    PORT = 5432

    def __init__(self, topology, work):
        self.topology = topology
        self.binaries = self.find_binaries()
        # The servers run as postgres: their directory is theirs, outside the 0700 work directory.
        self.dir = tempfile.mkdtemp(prefix="switchboard-netns-pg-")
        account = pwd.getpwnam("postgres")
        self.uid, self.gid = account.pw_uid, account.pw_gid
        os.chown(self.dir, self.uid, self.gid)
        os.chmod(self.dir, 0o700)
        self.work = work
        self.primary = "db-1"
        self.password = secrets.token_hex(16)
        self.replication_password = secrets.token_hex(16)

    @staticmethod
    def find_binaries():
        root = "/usr/lib/postgresql"
        versions = sorted((int(v) for v in os.listdir(root) if v.isdigit()), reverse=True) if os.path.isdir(root) else []
        for version in versions:
            if os.access(f"{root}/{version}/bin/initdb", os.X_OK):
                return f"{root}/{version}/bin"
        raise Failure("--pair needs PostgreSQL's server (Debian's postgresql package): no /usr/lib/postgresql/*/bin/initdb")

    def data(self, host):
        return os.path.join(self.dir, host, "data")

    def socket_dir(self, host):
        return os.path.join(self.dir, host)

    def as_postgres(self, host, *arguments, stdin=None, timeout=120):
        """A command as the postgres user in the host's namespace."""
        result = subprocess.run(
            ["ip", "netns", "exec", self.topology.ns(host), "runuser", "-u", "postgres", "--", *arguments],
            input=stdin, capture_output=True, text=True, timeout=timeout, cwd="/",
        )
        if result.returncode != 0:
            raise Failure(f"{host}: {os.path.basename(arguments[0])} failed ({result.returncode}): {(result.stderr or result.stdout).strip()[-600:]}")
        return result.stdout

    def psql(self, host, sql, database="postgres"):
        """SQL on standard input over the host's socket (trusted there), unaligned output."""
        return self.as_postgres(
            host, f"{self.binaries}/psql", "-h", self.socket_dir(host), "-p", str(self.PORT), "-U", "postgres", "-d", database,
            "-v", "ON_ERROR_STOP=1", "-X", "-q", "-t", "-A", stdin=sql, timeout=60,
        ).strip()

    def owned_file(self, path, text, mode=0o600):
        with open(path, "w") as f:
            f.write(text)
        os.chown(path, self.uid, self.gid)
        os.chmod(path, mode)

    @staticmethod
    def scram_verifier(password):
        """What PostgreSQL stores for a SCRAM-SHA-256 password (RFC 5802, RFC 7677): given to
        ALTER ROLE instead of the password, which then never reaches the server or its logs."""
        salt, iterations = os.urandom(16), 4096
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
        stored = hashlib.sha256(hmac.new(salted, b"Client Key", hashlib.sha256).digest()).digest()
        server = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
        b64 = lambda raw: base64.b64encode(raw).decode()
        return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored)}:{b64(server)}"

    def certificates(self):
        """A CA, and one server certificate naming both database hosts."""
        tls = os.path.join(self.dir, "tls")
        os.makedirs(tls)
        os.chown(tls, self.uid, self.gid)
        ca_key, self.ca = os.path.join(tls, "ca.key"), os.path.join(tls, "ca.pem")
        key, csr, self.cert = os.path.join(tls, "server.key"), os.path.join(tls, "server.csr"), os.path.join(tls, "server.pem")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        run("openssl", "req", "-x509", *ec, "-keyout", ca_key, "-out", self.ca, "-days", "2", "-subj", "/CN=switchboard netns test PostgreSQL CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        run("openssl", "req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=db-1.switchboard.test")
        extensions = os.path.join(tls, "server.ext")
        with open(extensions, "w") as f:
            f.write("subjectAltName=DNS:db-1.switchboard.test,DNS:db-2.switchboard.test\nbasicConstraints=CA:FALSE\n"
                    "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
        run("openssl", "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key, "-CAcreateserial", "-out", self.cert,
            "-days", "2", "-extfile", extensions)
        os.remove(ca_key)
        self.key = key
        for path in (key, self.cert, self.ca):
            os.chown(path, self.uid, self.gid)
        os.chmod(key, 0o600)
        os.chmod(self.ca, 0o644)

    def server_options(self, host, extra):
        return (
            f"-c listen_addresses={SUBNET}.{HOSTS[host]} -p {self.PORT} -c unix_socket_directories={self.socket_dir(host)}"
            f" -c ssl=on -c ssl_cert_file={self.cert} -c ssl_key_file={self.key} -c max_connections=100 {extra}"
        )

    def start_server(self, host, extra):
        self.as_postgres(
            host, f"{self.binaries}/pg_ctl", "-D", self.data(host), "-l", os.path.join(self.socket_dir(host), "server.log"),
            "-w", "-t", "60", "-o", self.server_options(host, extra), "start",
        )

    def start(self, replica=True):
        """The primary, and (with `replica`) its synchronous replica on db-2."""
        self.certificates()
        for host in ("db-1", "db-2") if replica else ("db-1",):
            os.makedirs(self.socket_dir(host))
            os.chown(self.socket_dir(host), self.uid, self.gid)
        superuser = os.path.join(self.dir, "superuser-password")
        self.owned_file(superuser, secrets.token_hex(16))
        self.as_postgres(
            "db-1", f"{self.binaries}/initdb", "-D", self.data("db-1"), "-U", "postgres", f"--pwfile={superuser}", "--auth-local=trust",
            "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync",
        )
        with open(os.path.join(self.data("db-1"), "pg_hba.conf"), "a") as f:
            # The role reaches only the databases it may connect to (setup.sql's, or the bench's).
            f.write(f"hostssl all switchboard {SUBNET}.0/24 scram-sha-256\nhostssl replication replicator {SUBNET}.0/24 scram-sha-256\n")
        # Synchronous only once the replica is there: until then every commit would wait for it.
        self.start_server("db-1", "-c wal_level=replica -c max_wal_senders=5 -c synchronous_commit=on")
        with open(os.path.join(ROOT, "deploy/postgres/setup.sql")) as f:
            self.psql("db-1", f.read())
        self.psql("db-1", f"ALTER ROLE switchboard PASSWORD '{self.scram_verifier(self.password)}';\n"
                  f"CREATE ROLE replicator REPLICATION LOGIN PASSWORD '{self.scram_verifier(self.replication_password)}';\n")
        if replica:
            self.start_replica()

    def start_replica(self):
        """db-2: a base backup of db-1 over the LAN, then it follows db-1 as its synchronous
        standby; db-1 is made to wait for it from then on."""
        passfile = os.path.join(self.dir, "replication.pgpass")
        self.owned_file(passfile, f"*:{self.PORT}:*:replicator:{self.replication_password}\n")
        conninfo = (
            f"host=db-1.switchboard.test port={self.PORT} user=replicator passfile={passfile} sslmode=verify-full "
            f"sslrootcert={self.ca} application_name=db2"
        )
        self.as_postgres(
            "db-2", "/usr/bin/timeout", "-k", "5", "120", f"{self.binaries}/pg_basebackup", "-d", conninfo, "-D", self.data("db-2"),
            "-X", "stream", "-c", "fast", "--no-sync",
        )
        with open(os.path.join(self.data("db-2"), "postgresql.auto.conf"), "a") as f:
            f.write(f"primary_conninfo = '{conninfo}'\n")
        self.owned_file(os.path.join(self.data("db-2"), "standby.signal"), "")
        self.start_server("db-2", "-c hot_standby=on")
        self.psql("db-1", "ALTER SYSTEM SET synchronous_standby_names = 'db2';\nSELECT pg_reload_conf();\n")
        wait_until(
            "db-2 streaming to db-1 as its synchronous standby",
            lambda: self.psql("db-1", "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'db2'") == "sync", 60,
        )

    def broker_settings(self, host_dir):
        """The broker's journal section; the password file is put in the broker host's directory."""
        password_file = os.path.join(host_dir, "postgres-password")
        with open(password_file, "w") as f:
            f.write(self.password + "\n")
        os.chmod(password_file, 0o600)
        ca = os.path.join(host_dir, "postgres-ca.pem")
        shutil.copy(self.ca, ca)
        return {
            "store": "postgres",
            "postgres": {
                "host": "db-1.switchboard.test,db-2.switchboard.test",
                "port": self.PORT,
                "database": "switchboard",
                "user": "switchboard",
                "password_file": password_file,
                "tls": "verify-full",
                "ca_file": ca,
                "timeout": "5s",
            },
        }

    def check_ins(self):
        """(event_id, producer, producer_seq) of every check-in in the journal, from the primary."""
        out = self.psql(self.primary, "SELECT event_id, producer, producer_seq FROM switchboard.events WHERE type = 'checkin.recorded'", "switchboard")
        return [tuple(line.split("|")) for line in out.splitlines() if line]

    def lease(self):
        return self.psql(self.primary, "SELECT epoch, holder FROM switchboard.broker_lease", "switchboard")

    def kill_primary(self):
        """kill -9 of db-1's postmaster (no shutdown), then its backends are waited for."""
        with open(os.path.join(self.data("db-1"), "postmaster.pid")) as f:
            pid = int(f.readline())
        os.kill(pid, signal.SIGKILL)
        wait_until("db-1's postmaster gone", lambda: not os.path.exists(f"/proc/{pid}"), 20, interval=0.05)
        wait_until(
            "db-1's backends gone",
            lambda: run("ip", "netns", "pids", self.topology.ns("db-1"), check=False).stdout.strip() == "", 30, interval=0.1,
        )

    def promote(self):
        self.as_postgres("db-2", f"{self.binaries}/pg_ctl", "-D", self.data("db-2"), "-w", "-t", "60", "promote")
        self.primary = "db-2"

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class Deployment:
    """What an administrator would hand each host: keys, a configuration file, an environment."""

    def __init__(self, topology, work, bin_dir):
        self.topology = topology
        self.work = work
        self.bin = bin_dir
        self.processes = {}

    def host_dir(self, host):
        path = os.path.join(self.work, "hosts", host)
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    def keys(self):
        """One key per principal and the broker's allow-list, then one bundle per host."""
        inventory = {
            "deployment": "netns-test",
            "broker_host": "broker.switchboard.test",
            "hosts": {
                "broker": {"programs": ["broker"]},
                "backoffice": {"programs": ["auth"]},
                "workers-1": {"programs": WORKERS},
                "workers-2": {"programs": WORKERS},
                "site-101": {"kiosks": [KIOSKS["site-101"]]},
                "site-102": {"kiosks": [KIOSKS["site-102"]]},
                "ops": {"programs": ["monitor", "admin"]},
            },
        }
        path = os.path.join(self.work, "inventory.json")
        with open(path, "w") as f:
            json.dump(inventory, f, indent=2)
        self.keydir = os.path.join(self.work, "keys")
        result = run(os.path.join(self.bin, "switchboard"), "keys", "init", "--inventory", path, "--dir", self.keydir, check=False)
        if result.returncode == 0:
            self.bundles = os.path.join(self.keydir, "bundles")
            return "switchboard keys init"
        # Without `switchboard keys`: the same layout from `switchboard keygen`.
        self.bundles = os.path.join(self.keydir, "bundles")
        secrets = os.path.join(self.keydir, "secret")
        allowed = os.path.join(self.keydir, "allowed")
        os.makedirs(allowed, mode=0o700, exist_ok=True)
        roles = {"broker": "broker", "auth": "auth", "monitor": "monitor", "admin": "admin"}
        for host, entry in inventory["hosts"].items():
            bundle = os.path.join(self.bundles, host)
            os.makedirs(bundle, mode=0o700, exist_ok=True)
            principals = [(p, "broker" if p == "broker" else f"{host}-{p}", roles.get(p, f"worker:{p}")) for p in entry.get("programs", [])]
            principals += [(k, k, "kiosk") for k in entry.get("kiosks", [])]
            for program, name, role in principals:
                run(os.path.join(self.bin, "switchboard"), "keygen", "--name", name, "--role", role, "--out", secrets)
                shutil.copy(os.path.join(secrets, name + ".secret"), os.path.join(bundle, program + ".secret"))
                os.chmod(os.path.join(bundle, program + ".secret"), 0o600)
                if role != "broker":
                    shutil.copy(os.path.join(secrets, name + ".cert"), allowed)
        for host in inventory["hosts"]:
            shutil.copy(os.path.join(secrets, "broker.cert"), os.path.join(self.bundles, host, "broker.cert"))
        shutil.copytree(allowed, os.path.join(self.bundles, "broker", "allowed"))
        return "switchboard keygen (switchboard keys is not built)"

    def bundle(self, host, name):
        return os.path.join(self.bundles, host, name)

    def config(self, host, document):
        path = os.path.join(self.host_dir(host), "switchboard.json")
        with open(path, "w") as f:
            json.dump(document, f, indent=2)
        os.chmod(path, 0o600)
        return path

    def start(self, host, program, arguments, name=None, environment=None):
        name = name or program
        config = os.path.join(self.host_dir(host), "switchboard.json")
        env = {"PATH": "/usr/bin:/bin", "SWITCHBOARD_CONFIG": config, "SWITCHBOARD_LOG_FORMAT": "text", "HOME": self.host_dir(host)}
        env.update(environment or {})
        log_path = os.path.join(self.host_dir(host), name + ".log")
        log_file = open(log_path, "a")
        process = subprocess.Popen(
            ["ip", "netns", "exec", self.topology.ns(host), os.path.join(self.bin, "switchboard-" + program), *arguments],
            env=env, stdout=log_file, stderr=subprocess.STDOUT, cwd=self.host_dir(host), start_new_session=True,
        )
        self.processes[(host, name)] = process
        return process

    def kill9(self, host, name):
        process = self.processes.pop((host, name))
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def stop_all(self):
        for (host, name), process in list(self.processes.items()):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)

    def read_log(self, host, name):
        with open(os.path.join(self.host_dir(host), name + ".log")) as f:
            return f.read()


def wait_until(what, check, timeout, interval=0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            errors = "; ".join(f"{url}: {error}" for url, error in LAST_ERROR.items())
            raise Failure(f"timed out after {timeout:.0f}s waiting for {what}" + (f" (last errors: {errors})" if errors else ""))
        time.sleep(interval)


# The emulators' test CA, once they made it: HTTPS is checked against it, never skipped.
TRUST = {}


def http(url, method="GET", body=None, cafile=None):
    context = ssl.create_default_context(cafile=cafile or TRUST.get("ca")) if url.startswith("https") else None
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=5, context=context) as response:
        return response.status, response.read()


LAST_ERROR = {}


def ready(url):
    try:
        return http(url)[0] == 200
    except Exception as error:
        LAST_ERROR[url] = repr(error)
        return False


class Stack:
    def __init__(self, deployment, quick, databases=None):
        self.d = deployment
        self.quick = quick
        # --pair: two brokers on PostgreSQL; every client is given both (protocol section 1).
        self.databases = databases
        self.broker_host = ",".join(f"{host}.switchboard.test" for host in BROKERS)
        self.sent = 0
        self.batches = 0
        self.emulator = f"https://{SUBNET}.{HOSTS['backoffice']}:8480"

    def start(self):
        d = self.d
        # broker: binds every interface (the service endpoint by interface name, eth0), CURVE with
        # the allow-list from its bundle. With --pair, two of them, their journal on PostgreSQL.
        if self.databases:
            self.databases.start()
        for host in BROKERS:
            broker_dir = d.host_dir(host)
            section = {
                "ingest": "tcp://0.0.0.0:5560",
                "fanout": "tcp://0.0.0.0:5561",
                "replay": "tcp://0.0.0.0:5562",
                "service": "tcp://eth0:5563",  # by interface name
                "groups": "tcp://0.0.0.0:5564",
                "data_dir": os.path.join(broker_dir, "state"),
                "admin": "0.0.0.0:9560",
                "security": {"key": d.bundle(host, "broker.secret"), "certificates": d.bundle(host, "allowed")},
                "groups.liveness": "3s",
            }
            if self.databases:
                section["journal"] = self.databases.broker_settings(broker_dir)
                section["lease"] = {"holder": host}
            d.config(host, {"broker": section})
        self.start_broker()
        # back office: the emulators (their certificate names the DNS name) and auth.
        office = d.host_dir("backoffice")
        tls = os.path.join(office, "tls")
        base = "https://backoffice.switchboard.test:8480"
        accounts = os.path.join(office, "accounts.json")
        with open(accounts, "w") as f:
            json.dump(
                {
                    "accounts": [
                        {"backend": "filemaker", "account": "switchboard", "password": "fm-demo-Passw0rd!", "base_url": base, "options": {"database": "Shelter"}},
                        {"backend": "eto", "account": "intake@riverside.example", "password": "eto-demo-Passw0rd!", "base_url": base + "/API", "options": {"site": "101", "program": "792", "time_zone": "UTC"}},
                        {"backend": "directory", "account": "outreach-team", "password": "dir-demo-Passw0rd!", "base_url": base + "/directory"},
                    ]
                },
                f,
            )
        os.chmod(accounts, 0o600)
        d.config(
            "backoffice",
            {
                "broker_host": self.broker_host,
                "broker_key": d.bundle("backoffice", "broker.cert"),
                "emulator": {
                    "host": "0.0.0.0",
                    "port": 8480,
                    "state": os.path.join(office, "emulator-state.json"),
                    "tls_generate": tls,
                    "tls_host": ["backoffice.switchboard.test", f"{SUBNET}.{HOSTS['backoffice']}"],
                },
                "auth": {
                    "certificate": d.bundle("backoffice", "auth.secret"),
                    "accounts_file": accounts,
                    "data_dir": os.path.join(office, "auth"),
                    "ca_file": os.path.join(tls, "ca.pem"),
                    "admin": "0.0.0.0:9563",
                },
            },
        )
        d.start("backoffice", "emulator", [])
        self.ca = os.path.join(tls, "ca.pem")
        TRUST["ca"] = self.ca
        wait_until("the emulator", lambda: os.path.exists(self.ca) and ready(self.emulator + "/_emulator/health"), 30)
        fm, eto = self.written_all()
        self.seeded = (set(fm), set(eto))
        self.seeded_deleted_eto = self.deleted_eto
        d.start("backoffice", "auth", [])
        wait_until("auth ready", lambda: ready(f"http://{SUBNET}.{HOSTS['backoffice']}:9563/health/ready"), 60)
        for host in ("workers-1", "workers-2"):
            self.start_workers(host)
        for host, kiosk in KIOSKS.items():
            d.config(
                host,
                {
                    "broker_host": self.broker_host,
                    "broker_key": d.bundle(host, "broker.cert"),
                    "kiosk": {
                        "certificate": d.bundle(host, kiosk + ".secret"),
                        "outbox": os.path.join(d.host_dir(host), "outbox.sqlite"),
                        "admin": "0.0.0.0:9561",
                    },
                },
            )
            d.start(host, "kiosk", ["serve"])
        d.config(
            "ops",
            {
                "broker_host": self.broker_host,
                "broker_key": d.bundle("ops", "broker.cert"),
                "monitor": {"certificate": d.bundle("ops", "monitor.secret"), "listen": "0.0.0.0:9570"},
            },
        )
        d.start("ops", "monitor", ["web"], environment={"SWITCHBOARD_DASHBOARD_TOKEN": "netns-test-dashboard-token"})
        for host in KIOSKS:
            wait_until(f"{host}'s kiosk ready", lambda host=host: ready(f"http://{SUBNET}.{HOSTS[host]}:9561/health/ready"), 60)
        for host in ("workers-1", "workers-2"):
            for offset, worker in enumerate(WORKERS):
                wait_until(
                    f"{worker} on {host} ready", lambda host=host, offset=offset: ready(f"http://{SUBNET}.{HOSTS[host]}:{9564 + offset}/health/ready"), 90
                )
        wait_until("the dashboard", self.dashboard_up, 30)

    def dashboard_up(self):
        try:
            http(f"http://{SUBNET}.{HOSTS['ops']}:9570/")
            return True
        except urllib.error.HTTPError:
            return True  # it answers (with 401 without the token)
        except Exception:
            return False

    def start_broker(self, hosts=None):
        """Starts the brokers (all, or those of `hosts`); waits until one of them serves and the
        others started are live (a standby is live and not ready)."""
        for host in hosts or BROKERS:
            self.d.start(host, "broker", [])
        wait_until("a broker serving", lambda: self.active_broker() is not None, 60)
        for host in hosts or BROKERS:
            wait_until(f"{host}'s broker live", lambda host=host: ready(f"http://{SUBNET}.{HOSTS[host]}:9560/health/live"), 60)

    def inside(self, host, path):
        """(status, body) of the host's admin endpoint over its own loopback, from inside its
        namespace: answers while the host is cut off the network."""
        probe = (
            "import sys, urllib.request, urllib.error\n"
            "try:\n"
            f"    r = urllib.request.urlopen('http://127.0.0.1:9560{path}', timeout=5)\n"
            "    print(r.status); sys.stdout.write(r.read().decode())\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code)\n"
        )
        result = run("ip", "netns", "exec", self.d.topology.ns(host), sys.executable, "-c", probe, check=False, timeout=30)
        lines = result.stdout.splitlines()
        if result.returncode != 0 or not lines:
            return None, result.stderr.strip()[-300:]
        return int(lines[0]), "\n".join(lines[1:])

    def acks(self, host):
        """How many EVENTs the host's broker has acknowledged since its process started (the
        count of switchboard_broker_ack_seconds), read from inside its namespace."""
        status, body = self.inside(host, "/metrics")
        if status != 200:
            raise Failure(f"{host}'s broker metrics cannot be read ({status}: {body})")
        return int(sum(float(line.split()[-1]) for line in body.splitlines() if line.startswith("switchboard_broker_ack_seconds_count")))

    def active_broker(self):
        """The broker host whose broker is ready (serving), or None."""
        for host in BROKERS:
            if ready(f"http://{SUBNET}.{HOSTS[host]}:9560/health/ready"):
                return host
        return None

    def start_workers(self, host):
        d = self.d
        tls_ca = os.path.join(d.host_dir(host), "ca.pem")
        shutil.copy(self.ca, tls_ca)
        sections = {}
        for offset, worker in enumerate(WORKERS):
            sections[worker] = {
                "certificate": d.bundle(host, worker + ".secret"),
                "data_dir": os.path.join(d.host_dir(host), worker),
                "admin": f"0.0.0.0:{9564 + offset}",
                "member": f"{worker}:{host}",
            }
        sections["filemaker"]["url"] = "https://backoffice.switchboard.test:8480"
        sections["eto"]["url"] = "https://backoffice.switchboard.test:8480/API"
        sections["directory"]["url"] = "https://backoffice.switchboard.test:8480/directory"
        d.config(host, {"broker_host": self.broker_host, "broker_key": d.bundle(host, "broker.cert"), "ca_file": tls_ca, **sections})
        for worker in WORKERS:
            d.start(host, worker, [])

    # What was recorded, journaled and written.

    def record(self, site, count, tag):
        """`count` check-ins of the seed's participants, saved in the site kiosk's outbox."""
        people = self.participants()
        self.batches += 1
        path = os.path.join(self.d.host_dir(site), f"batch-{self.batches}.csv")
        with open(path, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["first_name", "last_name", "date_of_birth", "site_id", "program_id", "notes"])
            for i in range(count):
                p = people[(self.sent + i) % len(people)]
                out.writerow([p["first"], p["last"], p["dob"], p["site"], p["program"], f"{tag} {site} row {i}"])
        kiosk = subprocess.run(
            ["ip", "netns", "exec", self.d.topology.ns(site), os.path.join(self.d.bin, "switchboard-kiosk"), "import", path, "--wait", "0s"],
            env={"PATH": "/usr/bin:/bin", "SWITCHBOARD_CONFIG": os.path.join(self.d.host_dir(site), "switchboard.json")},
            capture_output=True, text=True, cwd=self.d.host_dir(site), timeout=120,
        )
        if kiosk.returncode not in (0, 2):
            raise Failure(f"import at {site} failed ({kiosk.returncode}): {kiosk.stdout}{kiosk.stderr}")
        self.sent += count

    _people = None

    def participants(self):
        if Stack._people is None:
            with open(os.path.join(ROOT, "Sources/SwitchboardEmulators/Resources/seed.json")) as f:
                seed = json.load(f)
            enabled = {p["id"] for e in seed["eto"]["enterprises"] for s in e["sites"] for p in s["programs"] if not p.get("disabled")}
            people = []
            for p in seed["eto"]["participants"]:
                programs = [e["programID"] for e in p["enrollments"] if e["programID"] in enabled]
                if p.get("disabled") or not programs:
                    continue
                dob = time.strftime("%Y-%m-%d", time.gmtime(p["dateOfBirth"] / 1000))
                people.append({"first": p["firstName"], "last": p["lastName"], "dob": dob, "site": p["siteID"], "program": programs[0]})
            Stack._people = people
        return Stack._people

    def groups(self):
        """The broker's groups as an operator lists them (`switchboard groups list --json`, run on
        the ops host with its admin key)."""
        listing = subprocess.run(
            [
                "ip", "netns", "exec", self.d.topology.ns("ops"), os.path.join(self.d.bin, "switchboard"), "groups", "list", "--json",
                "--broker-host", self.broker_host, "--certificate", self.d.bundle("ops", "admin.secret"),
                "--broker-key", self.d.bundle("ops", "broker.cert"), "--timeout", "2s",
            ],
            env={"PATH": "/usr/bin:/bin", "HOME": self.d.host_dir("ops")}, capture_output=True, text=True, timeout=30,
            cwd=self.d.host_dir("ops"),
        )
        if listing.returncode != 0:
            return []
        return json.loads(listing.stdout).get("groups", [])

    def journal(self):
        if self.databases:
            return self.databases.check_ins()
        path = os.path.join(self.d.host_dir("broker"), "state", "journal.sqlite")
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            rows = db.execute("SELECT event_id, producer, producer_seq FROM events WHERE type = 'checkin.recorded'").fetchall()
        finally:
            db.close()
        return rows

    def written(self):
        """The event ids of the check-ins in FileMaker and ETO, leaving out what the seed holds."""
        fm, eto = self.written_all()
        seeded_fm, seeded_eto = self.seeded
        return [e for e in fm if e not in seeded_fm], [e for e in eto if e not in seeded_eto]

    def written_all(self):
        http(self.emulator + "/_emulator/save", method="POST", body={}, cafile=self.ca)
        with open(os.path.join(self.d.host_dir("backoffice"), "emulator-state.json")) as f:
            state = json.load(f)
        fm = []
        for database in state["filemaker"]["databases"]:
            for table in database["tables"]:
                if table["name"] == "CheckIns":
                    fm += [r["fieldData"].get("EventID") for r in table["records"] if r["fieldData"].get("EventID")]
        # A response the ETO worker deleted (the later of two written at once: its look after a
        # write, ETOCheckInRecorder step 5) is kept in the saved state marked `deleted`, as the
        # seed's are; ETO's API no longer shows it, so neither does the accounting.
        # `deleted_eto` counts them for the figures.
        responses = [r for r in state["eto"]["responses"] if r.get("elements")]
        eto = [r["elements"][0]["value"] for r in responses if not r.get("deleted")]
        self.deleted_eto = len(responses) - len(eto)
        return fm, eto

    def accounting(self, scenario, timeout, watch=None):
        """Waits until every recorded check-in is written twice over, then prints the figures.
        `watch`, if given, is asked at each look: a reason it returns ends the wait at once."""

        def complete(watching=True):
            problem = watch() if watch and watching else None
            if problem:
                raise Failure(problem)
            journal = self.journal()
            fm, eto = self.written()
            ids = {row[0] for row in journal}
            return (len(journal) >= self.sent and ids <= set(fm) and ids <= set(eto)), journal, fm, eto

        try:
            wait_until(f"{self.sent} check-ins in FileMaker and ETO", lambda: complete()[0], timeout, interval=1)
        except Failure as failure:
            problem = str(failure)
        else:
            problem = None
        _, journal, fm, eto = complete(watching=False)
        ids = {row[0] for row in journal}
        figures = {
            "sent": self.sent,
            "journaled": len(journal),
            "journaled_distinct_producer_seq": len({(r[1], r[2]) for r in journal}),
            "filemaker_written": len(fm),
            "filemaker_distinct": len(set(fm)),
            "eto_written": len(eto),
            "eto_distinct": len(set(eto)),
            "eto_deleted": self.deleted_eto - self.seeded_deleted_eto,
            "duplicates": (len(fm) - len(set(fm))) + (len(eto) - len(set(eto))) + (len(journal) - len({(r[1], r[2]) for r in journal})),
            "missing_filemaker": len(ids - set(fm)),
            "missing_eto": len(ids - set(eto)),
        }
        log(f"{scenario}: accounting " + ", ".join(f"{k} {v}" for k, v in figures.items()))
        ok = (
            problem is None
            and figures["journaled"] == self.sent
            and figures["duplicates"] == 0
            and figures["missing_filemaker"] == 0
            and figures["missing_eto"] == 0
            and figures["filemaker_distinct"] == figures["eto_distinct"] == self.sent
        )
        if not ok:
            self.explain(scenario, journal, fm, eto)
            raise Failure(f"{scenario}: {problem or 'the accounting does not balance'}")
        log(f"{scenario}: PASS (nothing lost, nothing duplicated)")

    def explain(self, scenario, journal, fm, eto, most=4, lines=30):
        """For a failed accounting: what every program logged about a few of the check-ins
        written twice or missing (event ids and record ids only: the logs hold no names), so
        that CI's output alone says what happened."""
        ids = {row[0] for row in journal}
        suspects = [("twice in ETO", e) for e, n in sorted(collections.Counter(eto).items()) if n > 1]
        suspects += [("twice in FileMaker", e) for e, n in sorted(collections.Counter(fm).items()) if n > 1]
        suspects += [("missing from ETO", e) for e in sorted(ids - set(eto))]
        suspects += [("missing from FileMaker", e) for e in sorted(ids - set(fm))]
        logs = sorted(glob.glob(os.path.join(self.d.work, "hosts", "*", "*.log")))
        for why, event_id in suspects[:most]:
            log(f"{scenario}: {why}: {event_id}; what the logs say of it:")
            found = []
            for path in logs:
                host = os.path.basename(os.path.dirname(path))
                with open(path, errors="replace") as f:
                    found += [f"{host}/{os.path.basename(path)}: {line.rstrip()}" for line in f if event_id in line]
            for line in sorted(found, key=lambda text: text.split(": ", 1)[1])[:lines]:
                log(f"    {line[:400]}")


def scenario_exactly_once(stack, count):
    name = "scenario 1 (two sites, CURVE on every hop)"
    log(f"{name}: {count} check-ins from each site")
    for site in KIOSKS:
        stack.record(site, count, "s1")
    stack.accounting(name, timeout=300)
    # A kiosk key made for another deployment: its own broker key, never on this allow-list.
    d = stack.d
    foreign = os.path.join(d.work, "foreign")
    run(os.path.join(d.bin, "switchboard"), "keygen", "--name", "site-101-kiosk-1", "--role", "kiosk", "--out", foreign)
    run(os.path.join(d.bin, "switchboard"), "keygen", "--name", "broker", "--role", "broker", "--out", foreign)
    outbox = os.path.join(d.host_dir("site-101"), "foreign-outbox.sqlite")
    attempt = subprocess.run(
        [
            "ip", "netns", "exec", d.topology.ns("site-101"), os.path.join(d.bin, "switchboard-kiosk"), "checkin",
            "--first", "Ana", "--last", "Ortiz", "--site", "101", "--program", "792", "--wait", "5s", "--lookup-wait", "0s",
            "--certificate", os.path.join(foreign, "site-101-kiosk-1.secret"), "--broker-key", d.bundle("site-101", "broker.cert"),
            "--outbox", outbox, "--broker-host", stack.broker_host,
        ],
        env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60,
    )
    journaled = len(stack.journal())
    if journaled != stack.sent:
        raise Failure(f"{name}: the foreign key's check-in was journaled ({journaled} events, {stack.sent} sent)")
    log(f"{name}: a kiosk key from another deployment is refused (its check-in stays in its outbox: {attempt.stdout.strip().splitlines()[-1] if attempt.stdout.strip() else attempt.returncode})")


def scenario_link_cut(stack, count, cut_seconds, probes, delay_ms=150, loss_percent=2):
    name = f"scenario 2 (site-101 cut for {cut_seconds}s; kiosk links impaired throughout)"
    topology = stack.d.topology
    sites = list(KIOSKS)
    # Round trips from each site to the broker host (a closed port: SYN out, RST back), before
    # the impairment, once it is on, and at the end: the delay must show in them.
    before = topology.rtt(sites, "broker", PROBE_PORT, probes)
    for site in sites:
        log(f"{name}: {site}: {topology.impair(site, delay_ms, loss_percent)}")
    check_delay(name, "once impaired", before, topology.rtt(sites, "broker", PROBE_PORT, probes), delay_ms)
    def from_site():
        return sum(1 for row in stack.journal() if row[1] == KIOSKS["site-101"])

    earlier = from_site()
    stack.record("site-101", count // 2, "s2-before")
    stack.record("site-102", count, "s2")
    # Cut the link while the kiosk is sending that batch: once the first of it is journaled.
    wait_until("site-101 sending its batch", lambda: from_site() > earlier, 60, interval=0.02)
    topology.cut("site-101")
    at_cut = from_site() - earlier
    log(f"{name}: site-101's link is down with {at_cut} of its {count // 2} queued check-ins journaled; its kiosk keeps recording")
    start = time.monotonic()
    stack.record("site-101", count // 2, "s2-during")
    time.sleep(max(0, cut_seconds - (time.monotonic() - start)))
    journaled_during = from_site() - earlier - at_cut
    topology.restore("site-101")
    log(f"{name}: link restored ({journaled_during} of site-101's check-ins journaled while it was down)")
    # A delayer that stops ends the wait at once (its link has carried nothing since).
    stack.accounting(name, timeout=300, watch=topology.delayer_problem)
    problem = topology.delayer_problem()
    if problem:
        raise Failure(f"{name}: {problem}")
    check_delay(name, "at the end", before, topology.rtt(sites, "broker", PROBE_PORT, probes), delay_ms)
    for site in topology.delayers:
        r = topology.delayer_report(site)
        log(
            f"{name}: {site}'s delayer ran throughout: {r.get('released', 0)} packets held and released, "
            f"held {r.get('hold_ms_min')}/{r.get('hold_ms_mean')}/{r.get('hold_ms_max')} ms (min/mean/max), "
            f"longest queue {r.get('longest_queue')}, {r.get('overruns')} overruns (packets the kernel dropped beyond the stated loss), "
            f"{r.get('errors')} refused verdicts"
        )


def check_delay(name, when, before, after, delay_ms):
    """Each site's round trip must have grown by the delay both ways (5 % leeway)."""
    for site in before:
        if "median_ms" not in before[site] or "median_ms" not in after[site]:
            raise Failure(f"{name}: no round trip from {site} to the broker host got through ({before[site]}; {after[site]} {when})")
        added = after[site]["median_ms"] - before[site]["median_ms"]
        log(
            f"{name}: {site} to the broker host, round trip (median of {len(after[site]['rtt_ms'])}, {after[site]['lost']} lost) "
            f"{before[site]['median_ms']:.2f} ms before the impairment, {after[site]['median_ms']:.2f} ms {when}: "
            f"+{added:.1f} ms ({2 * delay_ms} ms expected, {delay_ms} each way)"
        )
        if added < 0.95 * 2 * delay_ms:
            raise Failure(f"{name}: {site}'s link is not delayed as stated {when} (+{added:.1f} ms, {2 * delay_ms} ms expected)")


def scenario_broker_kill_and_worker_cut(stack, count):
    name = "scenario 3 (broker killed -9 and restarted; workers-2 cut off)"
    d = stack.d
    before = len(stack.journal())
    for site in KIOSKS:
        stack.record(site, count, "s3")
    # Kill it mid-run: once some of this batch is journaled (and so being delivered), not before.
    wait_until("the first of the batch journaled", lambda: len(stack.journal()) > before, 60, interval=0.1)
    d.kill9("broker", "broker")
    log(f"{name}: broker killed with -9; restarting it")
    stack.start_broker()
    for site in KIOSKS:
        stack.record(site, count, "s3-after")
    # Cut workers-2 off while it holds deliveries (the broker's own count, as an operator sees
    # it with `switchboard groups`), then see the broker give them to workers-1.
    held = {}

    def workers2_holds():
        held.clear()
        for group in stack.groups():
            for member in group.get("members", []):
                if member.get("name", "").endswith(":workers-2") and member.get("in_flight", 0) > 0:
                    held[member["name"]] = member["in_flight"]
        return bool(held)

    wait_until("workers-2 holding deliveries", workers2_holds, 120, interval=0.05)
    stack.d.topology.cut("workers-2")
    log(f"{name}: workers-2 cut off holding {sum(held.values())} deliveries ({', '.join(f'{k} {v}' for k, v in sorted(held.items()))})")
    broker_log = os.path.join(d.host_dir("broker"), "broker.log")

    def taken_back():
        with open(broker_log, errors="replace") as f:
            silent = [line for line in f if "fell silent" in line]
        return all(any(f"member={member} " in line or line.rstrip().endswith(f"member={member}") for line in silent) for member in held)

    wait_until("the broker taking workers-2's deliveries back", taken_back, 60, interval=0.2)
    log(f"{name}: the broker found workers-2's members silent and gave what they held to workers-1")
    # The kiosk links stay impaired from scenario 2 on, when it ran.
    stack.accounting(name, timeout=300, watch=d.topology.delayer_problem)
    stack.d.topology.restore("workers-2")


def scenario_key_refused_then_allowed(stack, count):
    name = "scenario 4 (workers-1's and site-101's keys revoked, then allowed again)"
    d = stack.d
    allowed = d.bundle("broker", "allowed")
    held = os.path.join(d.work, "held-certificates")
    os.makedirs(held, exist_ok=True)
    chosen = sorted(f for f in os.listdir(allowed) if f.endswith(".cert") and ("workers-1" in f or KIOSKS["site-101"] in f))
    if len(chosen) < len(WORKERS) + 1:
        raise Failure(f"{name}: expected workers-1's and {KIOSKS['site-101']}'s certificates in {allowed}, found {chosen}")
    broker_log = os.path.join(d.host_dir("broker"), "broker.log")

    def log_lines(text):
        with open(broker_log, errors="replace") as f:
            return sum(1 for line in f if text in line)

    reloads, refusals = log_lines("allow-list reloaded"), log_lines("unknown-key")
    for certificate in chosen:
        shutil.move(os.path.join(allowed, certificate), os.path.join(held, certificate))
    wait_until("the broker reloading its allow-list without them", lambda: log_lines("allow-list reloaded") > reloads, 30)
    # Check-ins recorded while site-101's key is refused wait in its outbox; workers-1 is refused
    # as it reconnects, and libzmq never reconnects a refused connection by itself.
    for site in KIOSKS:
        stack.record(site, count, "s4")
    wait_until("the broker refusing the revoked keys", lambda: log_lines("unknown-key") > refusals, 60, interval=0.2)
    reloads = log_lines("allow-list reloaded")
    for certificate in chosen:
        shutil.move(os.path.join(held, certificate), os.path.join(allowed, certificate))
    wait_until("the broker reloading its allow-list with them", lambda: log_lines("allow-list reloaded") > reloads, 30)
    log(f"{name}: {len(chosen)} keys revoked and allowed again; no program restarted")

    def workers1_back():
        groups = stack.groups()
        return bool(groups) and all(
            any(m.get("name", "").endswith(":workers-1") for m in g.get("members", [])) for g in groups if g.get("name") in WORKERS
        )

    wait_until("workers-1 joining its groups again by itself", workers1_back, 120, interval=0.5)
    stack.accounting(name, timeout=300)


def scenario_active_broker_cut(stack, count):
    """Issue 29: the active broker's whole host cut off the network, not killed."""
    name = "scenario 5 (the active broker's host cut off the network; the standby takes over)"
    d = stack.d
    topology = d.topology
    active = stack.active_broker()
    if active is None:
        raise Failure(f"{name}: no broker serves")
    other = next(host for host in BROKERS if host != active)
    standby_lines = lambda: d.read_log(active, "broker").count("standby: another broker holds the lease")
    standby_before = standby_lines()
    before = len(stack.journal())
    for site in KIOSKS:
        stack.record(site, count, "s5")
    wait_until("the first of the batch journaled", lambda: len(stack.journal()) > before, 60, interval=0.05)
    topology.cut(active)
    cut_at = time.monotonic()
    acks_at_cut = stack.acks(active)
    log(f"{name}: {active} (active) cut off with {len(stack.journal()) - before} of {2 * count} check-ins journaled; it had sent {acks_at_cut} ACKs")
    # It stops serving once its lease can no longer be renewed (its own deadline, lease.ttl);
    # the other takes over once the lease has ended. Both watched at once, each timed on its own.
    seen = {}

    def watch():
        if "stopped" not in seen and stack.inside(active, "/health/ready")[0] == 503:
            seen["stopped"] = time.monotonic() - cut_at
            seen["acks"] = stack.acks(active)
        if "took_over" not in seen and ready(f"http://{SUBNET}.{HOSTS[other]}:9560/health/ready"):
            seen["took_over"] = time.monotonic() - cut_at
        return "stopped" in seen and "took_over" in seen

    wait_until(f"{active} to stop serving and {other} to serve", watch, 30, interval=0.05)
    stopped, took_over, acks_at_stop = seen["stopped"], seen["took_over"], seen["acks"]
    log(
        f"{name}: {active} stopped serving {stopped:.2f}s after the cut ({acks_at_stop - acks_at_cut} ACKs between the cut and then); "
        f"{other} serves {took_over:.2f}s after the cut; lease {stack.databases.lease()}"
    )
    for site in KIOSKS:
        stack.record(site, count, "s5-during")
    stack.accounting(name, timeout=300)
    topology.restore(active)
    wait_until(f"{active}, back on the network, a standby", lambda: standby_lines() > standby_before, 60, interval=0.2)
    acks_after = stack.acks(active)
    if acks_after != acks_at_stop:
        raise Failure(f"{name}: {active} acknowledged {acks_after - acks_at_stop} EVENTs after it stopped serving")
    if stack.active_broker() != other:
        raise Failure(f"{name}: {other} is not the one serving after {active} came back")
    log(f"{name}: {active} is back as a standby: 0 ACKs from it since it stopped serving ({acks_after} in all)")


def scenario_database_failover(stack, count):
    """Issue 29: the PostgreSQL primary killed with -9 mid-run, its synchronous replica promoted."""
    name = "scenario 6 (the PostgreSQL primary killed -9 mid-run; the replica promoted)"
    databases = stack.databases
    before = len(stack.journal())
    # A batch four times the scenario's size, so the kill comes while it flows (the kiosks send
    # a small batch whole before the first look at the journal sees it).
    for site in KIOSKS:
        stack.record(site, 4 * count, "s6")
    wait_until("the first of the batch journaled", lambda: len(stack.journal()) > before, 60, interval=0.05)
    acknowledged = {row[0] for row in stack.journal()}
    databases.kill_primary()
    killed_at = time.monotonic()
    databases.promote()
    log(
        f"{name}: db-1 killed with {len(acknowledged) - before} of {8 * count} check-ins journaled; "
        f"db-2 promoted {time.monotonic() - killed_at:.2f}s later"
    )
    for site in KIOSKS:
        stack.record(site, count, "s6-after")
    stack.accounting(name, timeout=300)
    lost = acknowledged - {row[0] for row in stack.journal()}
    if lost:
        raise Failure(f"{name}: {len(lost)} check-ins journaled on db-1 before its kill are not on db-2")
    log(f"{name}: every check-in journaled before the kill is on the promoted replica; lease {databases.lease()}")


def main():
    global SUBNET
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.environ.get("SWITCHBOARD_BIN", os.path.join(ROOT, ".build/debug")))
    parser.add_argument("--quick", action="store_true", help="fewer check-ins and a 10 s cut (the figures are the same kind)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, journal, state)")
    parser.add_argument("--limit", type=int, default=1200, help="seconds before the whole run gives up")
    parser.add_argument(
        "--pair", action="store_true",
        help="two brokers on PostgreSQL (a primary and its synchronous replica, on hosts of their own): scenarios 1, 5 and 6")
    parser.add_argument(
        "--scenarios", default=None,
        help="which scenarios to run (default 1,2,3,4; with --pair 1,5,6)")
    parser.add_argument(
        "--subnet", default=SUBNET,
        help=f"the hosts' /24, as its first three octets (default {SUBNET}; two runs at once need two subnets)")
    args = parser.parse_args()
    SUBNET = args.subnet
    chosen = {part.strip() for part in (args.scenarios or ("1,5,6" if args.pair else "1,2,3,4")).split(",")}
    single, paired = {"2", "3", "4"}, {"5", "6"}
    if args.pair and chosen & single or not args.pair and chosen & paired:
        parser.error("scenarios 2, 3 and 4 run on one broker, 5 and 6 with --pair (1 with either)")
    if args.pair:
        HOSTS.update(PAIR_HOSTS)
        SHORT.update(PAIR_SHORT)
        NAMES.update(PAIR_NAMES)
        BROKERS.append("broker-b")
    if os.geteuid() != 0 or shutil.which("ip") is None or run("ip", "netns", "list", check=False).returncode != 0:
        print("netns: SKIPPED: needs root and `ip netns` (iproute2)")
        return 0
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(Failure(f"the run exceeded --limit {args.limit}s")))
    signal.alarm(args.limit)
    work = tempfile.mkdtemp(prefix="switchboard-netns-")
    os.chmod(work, 0o700)
    topology = Topology(f"sb{os.getpid() % 100000}", work)
    deployment = Deployment(topology, work, args.bin)
    started = time.monotonic()
    status = 1
    databases = None
    try:
        try:
            topology.build()
        except RuntimeError as error:
            # No right to make namespaces or links here (a container without CAP_NET_ADMIN):
            # the same as having no `ip netns`.
            print(f"netns: SKIPPED: cannot build the hosts' namespaces here: {error}")
            status = 0
            return 0
        log(f"{len(HOSTS)} hosts on {SUBNET}.0/24 (work directory {work})")
        log(f"keys: {deployment.keys()}")
        if args.pair:
            # The pair is one principal: the second broker host gets the first one's bundle
            # (deploy/postgres/README.md), key and allow-list alike.
            shutil.copytree(os.path.join(deployment.bundles, "broker"), os.path.join(deployment.bundles, "broker-b"))
            databases = Databases(topology, work)
        stack = Stack(deployment, args.quick, databases)
        stack.start()
        log("every program is ready")
        if "1" in chosen:
            scenario_exactly_once(stack, 100 if args.quick else 1000)
        if "2" in chosen:
            scenario_link_cut(stack, 50 if args.quick else 200, 10 if args.quick else 60, 5 if args.quick else 10)
        if "3" in chosen:
            scenario_broker_kill_and_worker_cut(stack, 50 if args.quick else 200)
        if "4" in chosen:
            scenario_key_refused_then_allowed(stack, 30 if args.quick else 100)
        if "5" in chosen:
            scenario_active_broker_cut(stack, 50 if args.quick else 200)
        if "6" in chosen:
            scenario_database_failover(stack, 50 if args.quick else 200)
        log(f"all scenarios passed in {time.monotonic() - started:.0f}s")
        status = 0
    except Failure as failure:
        log(f"FAIL: {failure}")
    except Exception as error:  # a broken set-up: say what, keep the logs
        log(f"FAIL: {type(error).__name__}: {error}")
    finally:
        signal.alarm(0)
        deployment.stop_all()
        topology.teardown()
        if databases:
            if status != 0 or args.keep:
                log(f"database servers' logs kept in {databases.dir}/db-*/server.log")
            else:
                databases.remove()
        if status != 0 or args.keep:
            log(f"logs kept in {work}/hosts/*/*.log")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
