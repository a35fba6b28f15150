#!/usr/bin/env bash
# What this machine needs before podman runs a container, done only where it is missing (root; `make stack-test`
# runs it). Each step is one of the walls the stack test met on a 2-core Debian 12 VM (docs/guides/container.md):
#
# 1. podman, mmdebstrap (the stand-in base images) and slirp4netns/uidmap from Debian, when absent;
# 2. podman's default per-container ulimits (nofile 1048576, nproc) above this host's hard limits: crun's
#    setrlimit fails with "Operation not permitted", so containers.conf keeps the host's limits instead;
# 3. a hybrid cgroup host whose cgroup v2 tree still holds a controller (hugetlb): crun refuses to run ("cgroups in
#    hybrid mode not supported, drop all controllers from cgroupv2"); mounting that controller's v1 hierarchy
#    moves it out of v2.
set -euo pipefail
SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)

missing=()
command -v podman >/dev/null || missing+=(podman)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
        uidmap slirp4netns crun netavark aardvark-dns >/dev/null
fi

probe() { podman run --rm --network none docker.io/library/python:3.11.14-slim-bookworm true 2>&1 || true; }

conf=/etc/containers/containers.conf
if ! grep -qs '^default_ulimits' "$conf"; then
    hard_nofile=$(ulimit -Hn)
    if [ "$hard_nofile" != unlimited ] && [ "$hard_nofile" -lt 1048576 ]; then
        echo "podman: keeping the host's ulimits (hard nofile $hard_nofile < podman's default 1048576)" >&2
        $SUDO mkdir -p /etc/containers
        printf '[containers]\n# The host hard limits are below podman'"'"'s defaults: crun cannot raise them.\ndefault_ulimits = []\n' \
            | $SUDO tee -a "$conf" >/dev/null
    fi
fi

v2=/sys/fs/cgroup/unified/cgroup.controllers
if [ -s "$v2" ]; then
    for controller in $(cat "$v2"); do
        echo "cgroups: moving $controller from the hybrid host's cgroup v2 tree to v1 (crun refuses otherwise)" >&2
        $SUDO mkdir -p "/sys/fs/cgroup/$controller"
        $SUDO mount -t cgroup -o "$controller" cgroup "/sys/fs/cgroup/$controller"
    done
fi
echo "podman $(podman --version | awk '{print $3}') ready" >&2
