#!/usr/bin/env bash
# Makes what compose.yaml mounts, in deploy/container/keys/: the key bundles of
# inventory.compose.json, auth's accounts file (the emulator's demo accounts), the dashboard's
# token; every secret file 0600 and owned by the containers' user (10001), as compose
# bind-mounts secret files as they are.
#
#   deploy/container/setup.sh 1.0.0      # after deploy/container/build.sh 1.0.0
#
# Runs `switchboard keys init` from the image switchboard:VERSION (so no local build is needed;
# a `switchboard` on PATH is used when no VERSION is given). Refuses to overwrite an existing
# keys/ (remove it first to start again: every bundle changes). Changing the owner to 10001
# needs root: it runs `podman unshare chown` with rootless podman, else `sudo chown`.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
keys="$here/keys"
version="${1:-}"
engine="${SWITCHBOARD_ENGINE:-}"
if [ -z "$engine" ]; then
    if command -v podman >/dev/null 2>&1; then engine=podman; else engine=docker; fi
fi
if [ -e "$keys" ]; then
    echo "setup: $keys exists; remove it to make new keys (every bundle changes)" >&2
    exit 1
fi
umask 077
mkdir -p "$keys"

# 1. The bundles: keys/bundles/<host>/, keys/public/, keys/allowed/ (switchboard keys --help).
if [ -n "$version" ]; then
    "$engine" run --rm --user "$(id -u):$(id -g)" --entrypoint /usr/local/bin/switchboard \
        -v "$here:/work:z" -w /work "switchboard:$version" keys init --inventory inventory.compose.json --dir keys
else
    command -v switchboard >/dev/null 2>&1 || { echo "setup: give the image's VERSION, or put switchboard on PATH" >&2; exit 1; }
    (cd "$here" && switchboard keys init --inventory inventory.compose.json --dir keys)
fi

# 2. auth's accounts file (protocol/README.md 14.5): the emulator's demo accounts, which open
# nothing real. For real back ends, write yours here instead (same format).
cat >"$keys/auth-accounts.json" <<'JSON'
{
  "accounts": [
    {"backend": "filemaker", "account": "switchboard", "password": "fm-demo-Passw0rd!", "base_url": "https://emulator:8480", "options": {"database": "Shelter"}},
    {"backend": "eto", "account": "intake@riverside.example", "password": "eto-demo-Passw0rd!", "base_url": "https://emulator:8480/API", "options": {"site": "101", "program": "792", "time_zone": "UTC"}},
    {"backend": "directory", "account": "outreach-team", "password": "dir-demo-Passw0rd!", "base_url": "https://emulator:8480/directory"},
    {"backend": "sap", "account": "outreach1", "password": "sap-demo-Passw0rd!", "base_url": "https://emulator:8480", "options": {"application": "org.riverside.outreach"}}
  ]
}
JSON

# 3. The dashboard's token: one line, no newline.
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$keys/monitor-token"

# 4. Modes and owner: secrets 0600, owned by the containers' user.
find "$keys" -type f \( -name '*.secret' -o -name 'auth-accounts.json' -o -name 'monitor-token' \) -exec chmod 0600 {} +
if [ "$engine" = podman ] && [ "$(id -u)" -ne 0 ]; then
    podman unshare chown -R 10001:10001 "$keys"
elif [ "$(id -u)" -eq 0 ]; then
    chown -R 10001:10001 "$keys"
else
    sudo chown -R 10001:10001 "$keys"
fi
echo "setup: $keys is ready; start with: cd $here && $engine compose up -d"
