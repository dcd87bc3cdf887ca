#!/usr/bin/env bash
# Installs what Switchboard needs on a fresh Debian machine, when it is missing:
# libzmq3-dev (ZeroMQ), libsqlite3-dev (SQLite for GRDB), libjemalloc-dev (the broker's malloc), pkg-config, python3's jsonschema
# (to check the protocol vectors), and with --tests chromium with chromium-driver (the
# dashboard's browser test), iproute2 with nftables and iptables (the multi-host test;
# deploy/prometheus/check.sh installs promtool itself) and postgresql (the server the
# journal-store tests start themselves). Safe to run
# again: it only installs what is absent.
set -euo pipefail

need=()
dpkg -s libzmq3-dev >/dev/null 2>&1 || need+=(libzmq3-dev)
dpkg -s libsqlite3-dev >/dev/null 2>&1 || need+=(libsqlite3-dev)
dpkg -s libjemalloc-dev >/dev/null 2>&1 || need+=(libjemalloc-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if [ "${1:-}" = "--tests" ]; then
    [ -x /usr/bin/chromium ] || need+=(chromium)
    [ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
    # The multi-host test (deploy/netns): namespaces and links, packet loss on them (nftables)
    # and, where the kernel has no netem, their delay (iptables NFQUEUE rules and delay.py).
    command -v ip >/dev/null 2>&1 || need+=(iproute2)
    command -v nft >/dev/null 2>&1 || need+=(nftables)
    command -v iptables >/dev/null 2>&1 || need+=(iptables)
    # The PostgreSQL journal store's tests run their own server (initdb, pg_ctl).
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
fi
if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}"
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! python3 -c "import jsonschema" >/dev/null 2>&1; then
    echo "setup: installing python jsonschema"
    python3 -m pip install --quiet jsonschema
fi
command -v swift >/dev/null 2>&1 || { echo "setup: swift is not on PATH (Swift 6.1 or newer is needed)" >&2; exit 1; }
