#!/usr/bin/env bash
# The multi-host test (deploy/netns/netns_test.py): one network namespace per host. Needs root,
# iproute2, and nftables with iptables (the loss and, through NFQUEUE and deploy/netns/delay.py,
# the delay on a kernel without tc netem); without root or `ip netns` it prints
# SKIPPED and exits 0. Arguments go to the script (--quick, --keep, --bin DIR, --limit S).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" = 0 ] && ! { command -v nft && command -v iptables; } >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 nftables iptables >/dev/null 2>&1 || true
fi
exec python3 deploy/netns/netns_test.py "$@"
