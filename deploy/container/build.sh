#!/usr/bin/env bash
# Builds the image every guide uses and tags it switchboard:VERSION; with a registry, also tags
# REGISTRY/switchboard:VERSION and pushes it (what deploy/kubernetes/ pulls).
#
#   deploy/container/build.sh 1.0.0                      # switchboard:1.0.0 (compose.yaml's default)
#   deploy/container/build.sh 1.0.0 registry.example     # and registry.example/switchboard:1.0.0, pushed
#
# Uses podman when it is installed, else docker (SWITCHBOARD_ENGINE=docker chooses). Runs from
# any directory: the build context is the repository's root. The binaries inside are built
# with --static-swift-stdlib (Containerfile).
set -euo pipefail

usage() { echo "usage: $0 VERSION [REGISTRY]   (e.g. $0 1.0.0 registry.example)" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
version="$1"
registry="${2:-}"
# A tag: letters, digits, '.', '_' and '-', not starting with '.' or '-', at most 128 characters.
[[ "$version" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || { echo "build: '$version' is not an image tag" >&2; usage; }
if [ -n "$registry" ] && [[ ! "$registry" =~ ^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*$ ]]; then
    echo "build: '$registry' is not a registry (host[:port][/path])" >&2
    usage
fi
engine="${SWITCHBOARD_ENGINE:-}"
if [ -z "$engine" ]; then
    if command -v podman >/dev/null 2>&1; then engine=podman
    elif command -v docker >/dev/null 2>&1; then engine=docker
    else echo "build: neither podman nor docker is installed" >&2; exit 1
    fi
fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
image="switchboard:$version"
echo "build: $engine build -f deploy/container/Containerfile -t $image $root"
"$engine" build -f "$root/deploy/container/Containerfile" -t "$image" "$root"
if [ -n "$registry" ]; then
    "$engine" tag "$image" "$registry/$image"
    "$engine" push "$registry/$image"
    echo "build: pushed $registry/$image"
fi
echo "build: $image is ready"
