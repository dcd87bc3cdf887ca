#!/usr/bin/env python3
"""Durable-acked ingest with the journal in PostgreSQL on another host (issue 29's benchmark,
"across a netns link"), against SQLite and PostgreSQL on loopback in the same run.

Two network namespaces on a bridge (deploy/netns/netns_test.py's Topology): `bench` (.10), where
switchboard-bench runs and starts its brokers, and `db-1` (.61), a PostgreSQL server from
Debian's package set up as deploy/postgres/README.md says (setup.sql, TLS verify-full, the
role's password as a SCRAM verifier; netns_test.py's Databases, without the replica). Three
databases, one per round. The brokers reach it by name, db-1.switchboard.test, across the veth
link and the bridge. Needs root and `ip netns`; prints SKIPPED otherwise.

    sudo bench/journal-link.py [--bin .build/release] [--quick] [--keep]

The figures are the release build's: `SWITCHBOARD_BENCH=1 swift build -c release` first.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "deploy", "netns"))
import netns_test as netns  # noqa: E402  (the hosts, links and PostgreSQL set-up of the netns test)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"), help="where switchboard-bench and switchboard-broker are")
    parser.add_argument("--quick", action="store_true", help="a tenth of the events per run")
    parser.add_argument("--keep", action="store_true", help="keep the database server's directory and log")
    parser.add_argument("--subnet", default="10.214.0", help="the /24 of the two hosts (default 10.214.0)")
    args = parser.parse_args()
    bench = os.path.join(args.bin, "switchboard-bench")
    if not os.access(bench, os.X_OK):
        print(f"journal-link: no {bench}: build it first (SWITCHBOARD_BENCH=1 swift build -c release)")
        return 1
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("journal-link: SKIPPED: needs root and `ip netns` (iproute2)")
        return 0
    netns.SUBNET = args.subnet
    netns.HOSTS.clear()
    netns.HOSTS.update({"bench": 10, "db-1": 61})
    netns.SHORT.update({"bench": "bch", "db-1": "db1"})
    netns.NAMES.clear()
    netns.NAMES.update({"db-1.switchboard.test": "db-1"})
    work = tempfile.mkdtemp(prefix="switchboard-journal-link-")
    os.chmod(work, 0o700)
    topology = netns.Topology(f"sj{os.getpid() % 100000}", work)
    databases = None
    status = 1
    try:
        topology.build()
        databases = netns.Databases(topology, work)
        databases.start(replica=False)
        names = [f"switchboard_{round}" for round in (1, 2, 3)]
        for name in names:
            databases.psql(
                "db-1",
                f"CREATE DATABASE {name} OWNER switchboard ENCODING 'UTF8' TEMPLATE template0;\n"
                f"REVOKE ALL ON DATABASE {name} FROM PUBLIC;\n"
                f"\\connect {name}\nCREATE SCHEMA switchboard AUTHORIZATION switchboard;\nREVOKE ALL ON SCHEMA public FROM PUBLIC;\n",
            )
        host_dir = os.path.join(work, "bench")
        os.makedirs(host_dir, mode=0o700)
        journal = databases.broker_settings(host_dir)["postgres"]
        netns.log("durable-acked ingest: SQLite, PostgreSQL on loopback, and PostgreSQL at db-1 across the link")
        result = subprocess.run(
            [
                "ip", "netns", "exec", topology.ns("bench"), bench, "--journal", *(["--quick"] if args.quick else []),
                "--link-host", "db-1.switchboard.test", "--link-user", journal["user"],
                "--link-password-file", journal["password_file"], "--link-ca-file", journal["ca_file"],
                "--link-databases", ",".join(names),
            ],
            env={"PATH": "/usr/bin:/bin", "SWITCHBOARD_BENCH": "1", "HOME": host_dir}, cwd=host_dir, timeout=1800,
        )
        status = result.returncode
    except (netns.Failure, RuntimeError, subprocess.TimeoutExpired) as error:
        netns.log(f"FAIL: {error}")
    finally:
        topology.teardown()
        if databases:
            if args.keep or status != 0:
                netns.log(f"the database server's directory is kept: {databases.dir}")
            else:
                databases.remove()
        shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
