#!/usr/bin/env bash
# Checks the deployment files of deploy/ that no test runs: the systemd units, their
# environment files, the container files and the Kubernetes manifests. Runs every check, prints
# each result, exits 1 if any failed. Installs what it needs from PyPI when missing (pip, quiet):
# kubernetes-validate (bundles the Kubernetes JSON schemas: works offline), check-jsonschema
# (bundles the compose-spec schema), PyYAML. Needs systemd-analyze (Debian's systemd).
#
# What each check proves, and what it does not:
#  - units: `systemd-analyze verify` on every unit of deploy/systemd (and the broker's unit with
#    the PostgreSQL pair's drop-in of deploy/postgres/systemd) in a throw-away root that
#    holds a copy of this machine's system units (so targets and dependencies resolve) and
#    stand-in executables at exactly the install paths of the design (/usr/local/bin/switchboard*,
#    /bin/kill). That checks each directive's name and value, the specifiers (%d, %S, %i), the
#    dependencies and the install section, and that every Exec*= path is one we install: a
#    misspelt program path has no stand-in and fails. verify exits 0 on unknown or unparsable
#    directives (it only warns), so any line it prints fails the check. Not proved: how the
#    sandbox behaves when the programs run (that needs a booted systemd), that the credentials
#    exist on a host.
#  - environment files (systemd/env and postgres/env): every line is a comment, blank, or
#    NAME=value with a NAME the configuration design allows, and none sets a path the units or
#    drop-ins own (credentials, data dirs).
#  - YAML: every .yaml of container/, kubernetes/ and postgres/kubernetes/ parses (all documents).
#  - compose: compose.yaml against the compose-spec JSON schema.
#  - Kubernetes: every manifest against the Kubernetes JSON schemas of 1.30 and 1.37, strict
#    (unknown fields fail).
#  - the broker pair on PostgreSQL: its manifest keeps what the guide promises (two pods that
#    update only when deleted, the standby's name published, readiness and liveness probes, a
#    password only as a 0600 file copied from its Secret, TLS verify-full, design names only),
#    its JSON example names only the broker's keys, and the guide makes each Secret it mounts.
#  - Containerfile: its stages, and that it installs every program the units start.
#  - the checkers themselves: a unit with a misspelt directive, a drop-in with one, a manifest
#    with a misspelt field and a compose file with a wrong type must each FAIL; if one passes,
#    the check that let it through is worthless and this script fails.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Bound the whole run: a hung tool must not hang the test command.
if [ -z "${SWITCHBOARD_DEPLOY_CHECK_CHILD:-}" ]; then
    SWITCHBOARD_DEPLOY_CHECK_CHILD=1 exec timeout --kill-after=10 "${SWITCHBOARD_DEPLOY_CHECK_LIMIT:-300}" "$0" "$@"
fi

command -v systemd-analyze >/dev/null 2>&1 || {
    echo "check: systemd-analyze is missing (Debian package systemd)" >&2
    exit 1
}
need=()
command -v kubernetes-validate >/dev/null 2>&1 || need+=(kubernetes-validate)
command -v check-jsonschema >/dev/null 2>&1 || need+=(check-jsonschema)
python3 -c "import yaml" 2>/dev/null || need+=(pyyaml)
if [ "${#need[@]}" -gt 0 ]; then
    echo "check: installing ${need[*]} with pip"
    python3 -m pip install --quiet --disable-pip-version-check "${need[@]}" >"$work/pip.log" 2>&1 || {
        cat "$work/pip.log" >&2
        echo "check: pip install ${need[*]} failed" >&2
        exit 1
    }
fi
echo "check: $(systemd-analyze --version | head -1), kubernetes-validate $(kubernetes-validate --version), $(check-jsonschema --version 2>&1 | head -1)"

passed=0
failed=0
step() {
    local name="$1"
    shift
    echo "== $name"
    if "$@"; then
        passed=$((passed + 1))
    else
        echo "check: FAILED: $name" >&2
        failed=$((failed + 1))
    fi
}

# --- systemd ----------------------------------------------------------------------------------
# The root: this machine's system units, and stand-ins at the paths the design installs.
root="$work/root"
mkdir -p "$root/usr/lib/systemd" "$root/etc/systemd/system" "$root/usr/local/bin" "$root/bin"
cp -a "$(systemd-analyze unit-paths | grep -m1 -E '^/(usr/)?lib/systemd/system$')" "$root/usr/lib/systemd/system"
for program in switchboard switchboard-broker switchboard-auth switchboard-filemaker switchboard-eto \
    switchboard-directory switchboard-kiosk switchboard-monitor switchboard-emulator; do
    printf '#!/bin/sh\nexit 0\n' >"$root/usr/local/bin/$program"
    chmod 755 "$root/usr/local/bin/$program"
done
printf '#!/bin/sh\nexit 0\n' >"$root/bin/kill"
chmod 755 "$root/bin/kill"

# verify_units DIR [DROPINS]: verifies every unit file of DIR in the root (a template as one
# instance), with the drop-in directories (UNIT.service.d/) of DROPINS installed beside them;
# fails on a non-zero exit or on any line verify prints.
verify_units() {
    local dir="$1" dropins="${2:-}" names=() unit out status
    rm -rf "$root"/etc/systemd/system/switchboard*
    if [ -n "$dropins" ]; then
        cp -R "$dropins"/*.service.d "$root/etc/systemd/system/"
    fi
    for unit in "$dir"/*.service; do
        cp "$unit" "$root/etc/systemd/system/"
        case "$(basename "$unit")" in
            *@.service) names+=("$(basename "$unit" .service)site-101-kiosk-1.service") ;;
            *) names+=("$(basename "$unit")") ;;
        esac
    done
    status=0
    out="$(systemd-analyze verify --man=no --root="$root" "${names[@]}" 2>&1)" || status=$?
    if [ "$status" -ne 0 ] || [ -n "$out" ]; then
        printf '%s\n' "$out" | sed "s|$root||g" >&2
        echo "check: systemd-analyze verify exited $status and printed the lines above" >&2
        return 1
    fi
    echo "verified: ${names[*]}"
}
step "systemd-analyze verify deploy/systemd/*.service" verify_units "$here/systemd"

# The broker of a pair on PostgreSQL: the broker's unit with the drop-in. verify reads drop-ins
# from the root's /etc/systemd/system/UNIT.service.d/ like systemd; the broken copy below shows
# that a bad line in the drop-in fails.
pair_unit() {
    rm -rf "$work/pair" && mkdir "$work/pair" && cp "$here/systemd/switchboard-broker.service" "$work/pair/"
    verify_units "$work/pair" "${1:-$here/postgres/systemd}"
}
step "systemd-analyze verify the broker with deploy/postgres/systemd's drop-in" pair_unit

# A deliberately broken copy must fail: a misspelt directive (verify only warns about it) and a
# program path that is not installed.
broken_units_fail() {
    mkdir -p "$work/broken"
    sed -e 's/^ProtectSystem=strict/ProtectSytem=strict/' "$here/systemd/switchboard-broker.service" \
        >"$work/broken/switchboard-broker.service"
    sed -e 's|/usr/local/bin/switchboard-eto|/usr/local/bin/switchbaord-eto|' "$here/systemd/switchboard-eto.service" \
        >"$work/broken/switchboard-eto.service"
    local unit
    for unit in "$work"/broken/*.service; do
        rm -rf "$work/one" && mkdir "$work/one" && cp "$unit" "$work/one/"
        if verify_units "$work/one" >/dev/null 2>&1; then
            echo "check: a broken $(basename "$unit") passed verify" >&2
            return 1
        fi
    done
    # A misspelt directive in the pair's drop-in.
    mkdir -p "$work/broken-dropin"
    cp -R "$here/postgres/systemd/switchboard-broker.service.d" "$work/broken-dropin/"
    sed -i -e 's/^Type=exec/Typ=exec/' "$work/broken-dropin/switchboard-broker.service.d/postgres.conf"
    if pair_unit "$work/broken-dropin" >/dev/null 2>&1; then
        echo "check: a broken postgres.conf drop-in passed verify" >&2
        return 1
    fi
    echo "the three broken copies failed, as they must"
}
step "the unit check fails on broken units" broken_units_fail

# Environment files: only the configuration design's names, none the units own.
check_env_files() {
    python3 - "$here/systemd/env" "$here/systemd" "$here/postgres/env" "$here/postgres/systemd" <<'PY'
import glob, os, re, sys
env_dirs, unit_dirs = [sys.argv[1], sys.argv[3]], [sys.argv[2], sys.argv[4]]
programs = ["BROKER", "AUTH", "FILEMAKER", "ETO", "DIRECTORY", "KIOSK", "MONITOR", "EMULATOR"]
# The names of the configuration design (docs: deploy/README.md, "Configuration"): shared
# client keys; data_dir and admin of every program; the broker's keys; the workers', auth's and
# the kiosk's own. Emulator and monitor names below follow the design's rule (flag --foo-bar of
# program P is SWITCHBOARD_P_FOO_BAR).
shared = ["BROKER_HOST", "INGEST", "FANOUT", "REPLAY", "SERVICE", "GROUPS", "CERTIFICATE", "BROKER_KEY",
          "CA_FILE", "LOG_FORMAT", "LOG_LEVEL", "CONFIG"]
allowed = {"SWITCHBOARD_" + k for k in shared}
for p in programs:
    allowed |= {f"SWITCHBOARD_{p}_DATA_DIR", f"SWITCHBOARD_{p}_ADMIN", f"SWITCHBOARD_{p}_LOG_FORMAT", f"SWITCHBOARD_{p}_LOG_LEVEL"}
    if p != "BROKER":
        allowed |= {f"SWITCHBOARD_{p}_{k}" for k in shared if k not in ("CONFIG", "BROKER_HOST", "BROKER_KEY")}
broker = ["INGEST", "FANOUT", "REPLAY", "SERVICE", "GROUPS", "SECURITY_KEY", "SECURITY_CERTIFICATES", "HEARTBEAT",
          "RETENTION_MAX_AGE", "RETENTION_MAX_BYTES", "RETENTION_INTERVAL", "GROUPS_ACK_WAIT", "GROUPS_MAX_DELIVER",
          "GROUPS_BACKOFF", "GROUPS_LIVENESS", "MIN_VERSION", "BATCH_LIMIT", "HWM", "MAX_FRAME_BYTES", "MAX_PENDING_BYTES",
          "JOURNAL_STORE", "JOURNAL_POSTGRES_HOST", "JOURNAL_POSTGRES_PORT", "JOURNAL_POSTGRES_DATABASE", "JOURNAL_POSTGRES_USER",
          "JOURNAL_POSTGRES_PASSWORD_FILE", "JOURNAL_POSTGRES_TLS", "JOURNAL_POSTGRES_CA_FILE", "JOURNAL_POSTGRES_TIMEOUT",
          "LEASE_TTL", "LEASE_HOLDER"]
allowed |= {"SWITCHBOARD_BROKER_" + k for k in broker}
for w in ["FILEMAKER", "ETO", "DIRECTORY"]:
    allowed |= {f"SWITCHBOARD_{w}_{k}" for k in ["URL", "ACCOUNT", "CREDIT", "MEMBER"]}
allowed |= {"SWITCHBOARD_FILEMAKER_DATABASE", "SWITCHBOARD_FILEMAKER_MAPPING", "SWITCHBOARD_AUTH_ACCOUNTS_FILE", "SWITCHBOARD_AUTH_CREDENTIALS_KEY_FILE",
            "SWITCHBOARD_KIOSK_ID", "SWITCHBOARD_KIOSK_OUTBOX", "SWITCHBOARD_DASHBOARD_TOKEN", "SWITCHBOARD_MONITOR_LISTEN"}
allowed |= {f"SWITCHBOARD_EMULATOR_{k}" for k in ["HOST", "PORT", "STATE", "SEED", "TLS_GENERATE", "TLS_HOST"]}
# What the units and drop-ins set from credentials and StateDirectory: an env file would
# override them.
owned = set()
for unit_dir in unit_dirs:
    for path in glob.glob(os.path.join(unit_dir, "*.service")) + glob.glob(os.path.join(unit_dir, "*.service.d", "*.conf")):
        for line in open(path):
            m = re.match(r"Environment=([A-Z0-9_]+)=", line)
            if m:
                owned.add(m.group(1))
bad = []
for env_dir, name in sorted((d, n) for d in env_dirs for n in os.listdir(d)):
    for number, line in enumerate(open(os.path.join(env_dir, name)), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Z][A-Z0-9_]*)=(\S.*)", text)
        if not m:
            bad.append(f"{name}:{number}: not NAME=value: {text}")
        elif m.group(1) not in allowed:
            bad.append(f"{name}:{number}: {m.group(1)} is not a name of the configuration design")
        elif m.group(1) in owned:
            bad.append(f"{name}:{number}: {m.group(1)} is set by the unit (credential or state path)")
for line in bad:
    print(line, file=sys.stderr)
# The unit-owned names must be design names too.
for name in sorted(owned - allowed):
    print(f"a unit sets {name}, which is not a name of the configuration design", file=sys.stderr)
    bad.append(name)
sys.exit(1 if bad else 0)
PY
}
step "environment files use only the design's names" check_env_files

# --- YAML, compose, Kubernetes -----------------------------------------------------------------
yaml_files=("$here"/container/*.yaml "$here"/kubernetes/*.yaml "$here"/kubernetes/examples/*.yaml
    "$here"/postgres/kubernetes/*.yaml "$here"/postgres/kubernetes/examples/*.yaml)
check_yaml() {
    python3 - "$@" <<'PY'
import sys, yaml
bad = 0
for path in sys.argv[1:]:
    try:
        docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
        print(f"{path.split('/deploy/')[-1]}: {len(docs)} document(s)")
    except yaml.YAMLError as error:
        print(f"{path}: {error}", file=sys.stderr)
        bad = 1
sys.exit(bad)
PY
}
step "YAML well formed" check_yaml "${yaml_files[@]}"
step "compose.yaml against the compose-spec schema" \
    check-jsonschema --builtin-schema vendor.compose-spec "$here/container/compose.yaml"
k8s_files=("$here"/kubernetes/*.yaml "$here"/kubernetes/examples/secrets.yaml
    "$here"/postgres/kubernetes/*.yaml "$here"/postgres/kubernetes/examples/secrets.yaml)
for version in 1.30.0 1.37.0; do
    step "Kubernetes manifests against the $version schemas (strict)" \
        kubernetes-validate --strict --quiet -k "$version" "${k8s_files[@]}"
done

checkers_fail_on_broken_input() {
    # A misspelt field in a container and a replica count of the wrong type.
    sed -e 's/readOnlyRootFilesystem: true/readOnlyRootFileSystem: true/' -e 's/replicas: 2/replicas: "two"/' \
        "$here/kubernetes/workers.yaml" >"$work/workers-broken.yaml"
    if kubernetes-validate --strict --quiet -k 1.30.0 "$work/workers-broken.yaml" >/dev/null 2>&1; then
        echo "check: kubernetes-validate passed a broken manifest" >&2
        return 1
    fi
    sed -e 's/restart: on-failure/restart: [on-failure]/' "$here/container/compose.yaml" >"$work/compose-broken.yaml"
    if check-jsonschema --builtin-schema vendor.compose-spec "$work/compose-broken.yaml" >/dev/null 2>&1; then
        echo "check: check-jsonschema passed a broken compose file" >&2
        return 1
    fi
    echo "the broken manifest and the broken compose file failed, as they must"
}
step "the manifest checks fail on broken input" checkers_fail_on_broken_input

# --- the broker pair on PostgreSQL -----------------------------------------------------------------
# What deploy/postgres/README.md promises of its manifest and examples, read from the files.
# The broker's keys come from the code (BrokerConfiguration.keys), so a key the broker does not
# know, which it would refuse at start, fails here.
check_postgres_pair() {
    python3 - "$here" "$here/../Sources/SwitchboardBroker/BrokerConfiguration.swift" <<'PY'
import json, os, re, sys, yaml
here, source = sys.argv[1], sys.argv[2]
bad = []
listing = re.search(r"public static let keys = \[(.*?)\]", open(source).read(), re.S).group(1)
keys = set(re.findall(r'"([a-z_.]+)"', listing))
variables = {"SWITCHBOARD_BROKER_" + k.upper().replace(".", "_") for k in keys}
docs = [d for d in yaml.safe_load_all(open(os.path.join(here, "postgres/kubernetes/broker-pair.yaml"))) if d]
by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
sts = by.get(("StatefulSet", "broker-pair"))
if not sts:
    print("postgres/kubernetes/broker-pair.yaml has no StatefulSet broker-pair", file=sys.stderr)
    sys.exit(1)
spec, pod = sts["spec"], sts["spec"]["template"]["spec"]
if spec.get("replicas") != 2:
    bad.append(f"the pair has {spec.get('replicas')} replicas, not 2")
if spec.get("podManagementPolicy") != "Parallel" or spec.get("updateStrategy", {}).get("type") != "OnDelete":
    bad.append("the pair must be podManagementPolicy Parallel and updateStrategy OnDelete (a standby is never ready)")
headless = by.get(("Service", spec["serviceName"]), {}).get("spec", {})
if headless.get("clusterIP") != "None" or headless.get("publishNotReadyAddresses") is not True:
    bad.append(f"Service {spec['serviceName']} must be headless and publish not-ready addresses (the standby's name)")
labels = sts["spec"]["template"]["metadata"]["labels"]
if labels.get("app.kubernetes.io/component") != "broker":
    bad.append("the pair's pods lack app.kubernetes.io/component: broker, which the NetworkPolicies select")
anti = pod.get("affinity", {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
if not any(term.get("topologyKey") == "kubernetes.io/hostname" for term in anti):
    bad.append("the pair's pods are not kept on two nodes (podAntiAffinity on kubernetes.io/hostname)")
broker = next(c for c in pod["containers"] if c["name"] == "broker")
if broker.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/health/ready":
    bad.append("the broker's readinessProbe does not ask /health/ready")
if broker.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/health/live":
    bad.append("the broker's livenessProbe does not ask /health/live")
settings = {}
for ref in broker.get("envFrom", []):
    settings.update(by.get(("ConfigMap", ref["configMapRef"]["name"]), {}).get("data", {}))
settings.update({e["name"]: e.get("value", "(from the pod)") for e in broker.get("env", [])})
for name in sorted(settings):
    if name.startswith("SWITCHBOARD_BROKER_") and name not in variables:
        bad.append(f"the pair's {name} is not a broker setting (BrokerConfiguration.keys): the broker would refuse to start")
if settings.get("SWITCHBOARD_BROKER_JOURNAL_STORE") != "postgres":
    bad.append("the pair's journal store is not postgres")
if settings.get("SWITCHBOARD_BROKER_JOURNAL_POSTGRES_TLS") != "verify-full":
    bad.append("the pair's TLS is not verify-full")
password = settings.get("SWITCHBOARD_BROKER_JOURNAL_POSTGRES_PASSWORD_FILE", "")
mounts = {m["mountPath"]: m["name"] for m in broker["volumeMounts"]}
volumes = {v["name"]: v for v in pod["volumes"]}
holder = mounts.get(os.path.dirname(password))
if not holder or volumes[holder].get("emptyDir", {}).get("medium") != "Memory":
    bad.append(f"the password file {password or '(none)'} is not in a memory volume of the broker's")
elif not any(re.search(rf"install -m 0600 \S+ {re.escape(password)}(\s|$)", a) for c in pod.get("initContainers", []) for a in c.get("args", [])):
    bad.append(f"no init container installs {password} with mode 0600")
if broker.get("env") and any("PASSWORD" in e["name"] and not e["name"].endswith("_FILE") for e in broker["env"]):
    bad.append("a password in the broker's environment")
# Every Secret and ConfigMap the pods mount: its shape in an examples/secrets.yaml, made by the guides.
guides = open(os.path.join(here, "README.md")).read() + open(os.path.join(here, "postgres/README.md")).read()
shapes = set()
for path in ["kubernetes/examples/secrets.yaml", "postgres/kubernetes/examples/secrets.yaml"]:
    shapes |= {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(open(os.path.join(here, path))) if d}
for volume in volumes.values():
    for kind, field, made in [("Secret", "secret", "create secret generic"), ("ConfigMap", "configMap", "create configmap")]:
        name = (volume.get(field) or {}).get("secretName" if kind == "Secret" else "name")
        if name:
            if (kind, name) not in shapes:
                bad.append(f"{kind} {name}, mounted by the pair, has no shape in an examples/secrets.yaml")
            if not re.search(rf"{made} {re.escape(name)} ", guides):
                bad.append(f"no guide makes {kind} {name} (`kubectl … {made} {name} …`)")
if not any(d["kind"] == "NetworkPolicy" and any(p.get("port") == 5432 for r in d["spec"].get("egress", []) for p in r.get("ports", []))
           for d in docs):
    bad.append("no NetworkPolicy lets the pair reach PostgreSQL's port 5432")
# The clients' names for the pods: the headless Service's, in kubernetes/config.yaml and the guide.
names = [f"{spec['serviceName']}-{i}.{spec['serviceName']}.switchboard.svc" for i in range(2)]
for path in ["kubernetes/config.yaml", "postgres/README.md"]:
    if ",".join(names) not in open(os.path.join(here, path)).read():
        bad.append(f"{path} does not list the pods' names {','.join(names)}")
# The JSON example: the broker's keys only, shared keys at the top, no password.
example = json.load(open(os.path.join(here, "postgres/switchboard.json")))
def flatten(obj, prefix=""):
    for k, v in obj.items():
        yield from flatten(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"]
for key in flatten(example.get("broker", {})):
    if key not in keys:
        bad.append(f"postgres/switchboard.json: broker.{key} is not a broker key")
for key in example:
    if key not in ("broker", "broker_host"):
        bad.append(f"postgres/switchboard.json: {key} at the top is not expected")
pg = example.get("broker", {}).get("journal", {}).get("postgres", {})
if "password" in pg or pg.get("tls") != "verify-full":
    bad.append("postgres/switchboard.json: a password inline, or TLS other than verify-full")
for line in bad:
    print(line, file=sys.stderr)
print(f"{len(docs)} documents; {len(settings)} broker settings checked against the broker's {len(keys)} keys; "
      f"mounts {sorted(n for n in volumes)}; JSON example checked")
sys.exit(1 if bad else 0)
PY
}
step "the broker pair on PostgreSQL: manifest, examples, guide" check_postgres_pair

# --- Containerfile --------------------------------------------------------------------------------
check_containerfile() {
    python3 - "$here/container/Containerfile" "$here/systemd" <<'PY'
import os, re, sys
text = open(sys.argv[1]).read()
stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M)
bad = []
if [s[1] for s in stages] != ["build", "runtime"]:
    bad.append(f"expected stages build and runtime, found {stages}")
if not re.search(r"^USER\s+10001", text, re.M):
    bad.append("the runtime stage does not switch to the non-root user 10001")
for needed in ["libzmq3-dev", "libsqlite3-dev", "libjemalloc-dev", "libzmq5", "libsqlite3-0", "libjemalloc2", "swift build -c release --static-swift-stdlib",
               "*.resources", "curl"]:
    if needed not in text:
        bad.append(f"{needed} is missing")
started = set()
for name in os.listdir(sys.argv[2]):
    if name.endswith(".service"):
        started |= set(re.findall(r"^ExecStart=/usr/local/bin/(\S+)", open(os.path.join(sys.argv[2], name)).read(), re.M))
if not re.search(r"^HEALTHCHECK\s.*\n?.*CMD curl -fsS .*/health/ready", text, re.M):
    bad.append("no HEALTHCHECK asking /health/ready with curl")
installed = set(re.search(r"for p in (.*?); do", text, re.S).group(1).replace("\\", " ").split())
for program in sorted(started - installed):
    bad.append(f"a unit starts {program}, which the image does not install")
for line in bad:
    print(line, file=sys.stderr)
print(f"stages {[s[1] for s in stages]}; installs {len(installed)} programs, the units start {sorted(started)}")
sys.exit(1 if bad else 0)
PY
}
step "Containerfile stages and programs" check_containerfile

# --- the image's tag, compose's healthchecks, the Kubernetes principals ------------------------
# Static: no container engine or cluster runs here (deploy/README.md, "What was and was not run").
check_images_health_principals() {
    python3 - "$here" <<'PY'
import json, os, re, sys, yaml
here = sys.argv[1]
bad = []
readme = open(os.path.join(here, "README.md")).read()
# One tag everywhere: build.sh's documented example, compose's default, every manifest's image.
build = open(os.path.join(here, "container/build.sh")).read()
tags = set(re.findall(r"build\.sh (\d+\.\d+\.\d+)", build + readme))
if len(tags) != 1:
    bad.append(f"build.sh and deploy/README.md document tags {sorted(tags)}, not one")
tag = next(iter(tags), "?")
compose = yaml.safe_load(open(os.path.join(here, "container/compose.yaml")))
image = compose["x-program"]["image"]
if image != "${SWITCHBOARD_IMAGE:-switchboard:%s}" % tag:
    bad.append(f"compose's image is {image}, not switchboard:{tag} (build.sh)")
for folder in ["kubernetes", "postgres/kubernetes"]:
    for name in sorted(os.listdir(os.path.join(here, folder))):
        if not name.endswith(".yaml"):
            continue
        for found in re.findall(r"^\s*image:\s*(\S+)", open(os.path.join(here, folder, name)).read(), re.M):
            if found != f"registry.example/switchboard:{tag}":
                bad.append(f"{folder}/{name}: image {found}, not registry.example/switchboard:{tag} (build.sh {tag} registry.example)")
# Every compose service has a healthcheck: its admin port's /health/ready, the port it sets.
ports = {"emulator": None, "monitor": None}
for service, spec in compose["services"].items():
    check = spec.get("healthcheck")
    if not check or not check.get("test"):
        bad.append(f"compose service {service} has no healthcheck")
        continue
    test = " ".join(check["test"])
    env = spec.get("environment", {})
    admin = next((v for k, v in env.items() if k.endswith("_ADMIN")), None)
    if admin:
        port = admin.rsplit(":", 1)[1]
        if f"http://127.0.0.1:{port}/health/ready" not in test:
            bad.append(f"compose service {service}: healthcheck '{test}' does not ask /health/ready on its admin port {port}")
    elif service == "emulator":
        if "/_emulator/health" not in test:
            bad.append("compose service emulator: healthcheck does not ask /_emulator/health")
    elif service == "monitor":
        if ":9570/" not in test:
            bad.append("compose service monitor: healthcheck does not ask the dashboard's port")
    else:
        bad.append(f"compose service {service} sets no admin address for its healthcheck")
# The compose set-up's command makes what compose mounts.
setup = open(os.path.join(here, "container/setup.sh")).read()
for secret, spec in compose["secrets"].items():
    path = spec["file"].removeprefix("./keys/")
    made = "keys init" in setup if path.startswith(("bundles/", "public/")) else path in setup
    if not made:
        bad.append(f"compose secret {secret} ({spec['file']}) is not made by setup.sh")
# Kubernetes: every principal of the inventory that runs in the cluster has a Secret holding its
# key, in examples/secrets.yaml and in the guide's `kubectl create secret` lines; admin is there,
# kept on the operator's machine, and the guide's dlq command uses its bundle.
inventory = json.load(open(os.path.join(here, "kubernetes/examples/inventory.kubernetes.json")))
secrets = {d["metadata"]["name"]: d for d in yaml.safe_load_all(open(os.path.join(here, "kubernetes/examples/secrets.yaml")))
           if d and d.get("kind") == "Secret"}
guide = readme[readme.index("## Kubernetes"):]
principals = []
for host, spec in inventory["hosts"].items():
    for program in spec.get("programs", []):
        principals.append((host, program))
        if program == "admin":
            if f"keys/bundles/{host}/admin.secret" not in guide or "switchboard dlq" not in guide:
                bad.append(f"the Kubernetes guide has no `switchboard dlq` with keys/bundles/{host}/admin.secret")
            continue
        secret = secrets.get(f"switchboard-{re.sub(r'-[0-9]+$', '', program)}-keys")
        keys = set((secret or {}).get("stringData", {}))
        wanted = f"{host}.secret" if re.search(r"-[0-9]+$", host) else f"{program}.secret"
        if wanted not in keys:
            bad.append(f"principal {host}/{program}: no {wanted} in Secret switchboard-{program}-keys (examples/secrets.yaml)")
        if f"bundles/{host}/{program}.secret" not in guide and f"bundles/{host.rsplit('-', 1)[0]}-$w" not in guide \
                and f"bundles/$w-{host.rsplit('-', 1)[-1]}/$w.secret" not in guide:
            bad.append(f"principal {host}/{program}: the guide's kubectl lines do not make its secret from keys/bundles/{host}/")
if not any(p == "admin" for _, p in principals):
    bad.append("no admin principal in the Kubernetes inventory: dead letters could not be handled")
for line in bad:
    print(line, file=sys.stderr)
print(f"tag {tag}; {len(compose['services'])} compose services with healthchecks; {len(principals)} cluster principals")
sys.exit(1 if bad else 0)
PY
}
step "image tag, compose healthchecks, Kubernetes principals and their secrets" check_images_health_principals

scripts_refuse_bad_input() {
    bash -n "$here/container/build.sh" && bash -n "$here/container/setup.sh" || return 1
    if "$here/container/build.sh" "not a tag" >/dev/null 2>&1; then
        echo "check: build.sh took 'not a tag'" >&2
        return 1
    fi
    echo "build.sh and setup.sh parse; build.sh refuses a bad tag"
}
step "the container scripts" scripts_refuse_bad_input

echo "check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
