#!/usr/bin/env bash
# What this machine needs before podman runs a container, done only where it is missing (root; `make stack-test`
# runs it). Each step is one of the walls the stack test met on a 2-core Debian 12 VM (docs/guides/container.md):
#
# 1. the Debian packages below, each only when it is not installed. The install takes no recommends, so what podman
#    merely recommends but the stack needs is named: iptables (netavark sets up a bridge network with it; without
#    it the image build's first RUN fails with "netavark: No such file or directory") and catatonit (the init of
#    compose's `init: true`; without it "container-init binary not found");
# 2. podman's default per-container ulimits (nofile 1048576, nproc) above this host's hard limits: crun's
#    setrlimit fails with "Operation not permitted", so containers.conf keeps the host's limits instead;
# 3. a hybrid cgroup host whose cgroup v2 tree still holds a controller (hugetlb): crun refuses to run ("cgroups in
#    hybrid mode not supported, drop all controllers from cgroupv2"); mounting that controller's v1 hierarchy
#    moves it out of v2. cgroupfs reports every file's size as 0, so the controllers file is read, never tested
#    with `-s`.
#
# Run again, it changes nothing. rag_pipeline_tests/unit/deploy/test_host_setup.py sources it (nothing runs
# then) to check the package list and the cgroup reading; HOST_SETUP_CGROUP_ROOT names another cgroup tree.
set -euo pipefail

PACKAGES=(
    podman crun uidmap slirp4netns netavark aardvark-dns
    iptables  # netavark's firewall driver calls it
    catatonit # podman's --init (compose `init: true`)
    mmdebstrap # the stand-in base images (deploy/container/standin_bases.sh)
)

SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)

# The packages of PACKAGES that are not installed, one a line.
missing_packages() {
    local package
    for package in "${PACKAGES[@]}"; do
        dpkg-query -W -f '${db:Status-Status}\n' "$package" 2>/dev/null | grep -qx installed || echo "$package"
    done
}

install_packages() {
    local missing
    mapfile -t missing < <(missing_packages)
    [ ${#missing[@]} -gt 0 ] || return 0
    echo "apt: installing ${missing[*]}" >&2
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

keep_host_ulimits() {
    local conf=/etc/containers/containers.conf hard_nofile
    grep -qs '^default_ulimits' "$conf" && return 0
    hard_nofile=$(ulimit -Hn)
    if [ "$hard_nofile" != unlimited ] && [ "$hard_nofile" -lt 1048576 ]; then
        echo "podman: keeping the host's ulimits (hard nofile $hard_nofile < podman's default 1048576)" >&2
        $SUDO mkdir -p /etc/containers
        printf '[containers]\n# The host hard limits are below podman'"'"'s defaults: crun cannot raise them.\ndefault_ulimits = []\n' \
            | $SUDO tee -a "$conf" >/dev/null
    fi
}

# The controllers a hybrid host's cgroup v2 tree (<root>/unified) still holds, one a line; nothing on a pure v1 or
# pure v2 host. Read, not tested with `[ -s ]`: cgroupfs files all stat as size 0, whatever they hold.
hybrid_v2_controllers() {
    local root=${HOST_SETUP_CGROUP_ROOT:-/sys/fs/cgroup} line
    [ -r "$root/unified/cgroup.controllers" ] || return 0
    line=$(cat "$root/unified/cgroup.controllers")
    [ -n "$line" ] || return 0
    # shellcheck disable=SC2086 # one controller a word
    printf '%s\n' $line
}

move_v2_controllers_to_v1() {
    local root=${HOST_SETUP_CGROUP_ROOT:-/sys/fs/cgroup} controller
    for controller in $(hybrid_v2_controllers); do
        echo "cgroups: moving $controller from the hybrid host's cgroup v2 tree to v1 (crun refuses otherwise)" >&2
        $SUDO mkdir -p "$root/$controller"
        $SUDO mount -t cgroup -o "$controller" cgroup "$root/$controller"
    done
}

main() {
    install_packages
    keep_host_ulimits
    move_v2_controllers_to_v1
    echo "podman $(podman --version | awk '{print $3}') ready" >&2
}

# Sourced (by its test), it only defines the above.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    main "$@"
fi
