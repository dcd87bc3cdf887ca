#!/usr/bin/env bash
# Checks the Prometheus and Grafana files of deploy/: the alerting rules (syntax and their unit
# tests), the example Prometheus configuration, and that the dashboard and the rules use only
# the metrics of the catalog in README.md beside this file. Installs Debian's `prometheus`
# package for promtool when promtool is missing (root only). Runs every check, prints each
# result, exits 1 if any failed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if ! command -v promtool >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "check: promtool is missing; install Debian's prometheus package as root (apt-get install prometheus), then run this again" >&2
        exit 1
    fi
    echo "check: promtool is missing: installing Debian's prometheus package"
    log="$(mktemp)"
    trap 'rm -f "$log"' EXIT
    # The package lists are read only when they do not know the package yet.
    policy="$(apt-cache policy prometheus 2>/dev/null || true)"
    if ! grep -q "Candidate: [0-9]" <<<"$policy"; then
        if ! apt-get update -qq >"$log" 2>&1; then
            cat "$log" >&2
            echo "check: apt-get update failed; cannot install promtool" >&2
            exit 1
        fi
    fi
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >"$log" 2>&1; then
        cat "$log" >&2
        echo "check: apt-get install prometheus failed; cannot install promtool" >&2
        exit 1
    fi
    # Only promtool is wanted: a server the package started is stopped and not started at boot.
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
        echo "check: stopping and disabling the prometheus service the package started"
        systemctl stop prometheus || true
        systemctl disable --quiet prometheus || true
    fi
    command -v promtool >/dev/null 2>&1 || { echo "check: the prometheus package gave no promtool" >&2; exit 1; }
fi
echo "check: $(promtool --version 2>&1 | head -1)"

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

cd "$here"
step "promtool check rules alerts.yml" promtool check rules alerts.yml
step "promtool test rules alerts_test.yml" promtool test rules alerts_test.yml
step "promtool check config prometheus.yml" promtool check config prometheus.yml
step "catalog names in the dashboard and the alerts" \
    python3 "$root/deploy/grafana/check_dashboard.py" --promtool "$(command -v promtool)"

echo "check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
