#!/usr/bin/env bash
# The multi-host test (deploy/netns/netns_test.py): one network namespace per host. Needs root,
# iproute2 and nftables (or a kernel with tc netem); without root or `ip netns` it prints
# SKIPPED and exits 0. Arguments go to the script (--quick, --keep, --bin DIR, --limit S).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" = 0 ] && ! command -v nft >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 nftables >/dev/null 2>&1 || true
fi
exec python3 deploy/netns/netns_test.py "$@"
