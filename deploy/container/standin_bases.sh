#!/usr/bin/env bash
# Base images for the stack test (docs/guides/container.md): each is the official image when `podman pull` gets
# it, else a stand-in bootstrapped from Debian 12's own packages with mmdebstrap, with the same interface as the
# official one. The stack test's images are named by role (localhost/rag-stack/<role>): the official image
# re-tagged where one was pulled, the stand-in otherwise; `podman image inspect` shows which (a stand-in carries
# the label below).
#
# - python:3.11.14-slim-bookworm  Debian's python3 (3.11.2) with python3-venv, `python` and `python3` in
#                                 /usr/local/bin like the official image; tagged with the official name, so the
#                                 Dockerfile builds unchanged, and labelled as a stand-in;
# - $POSTGRES_IMAGE (rag-stack/postgres; official postgres:17.6-bookworm)  the stand-in: postgresql-15 with an entrypoint honouring POSTGRES_USER,
#                                 POSTGRES_PASSWORD and POSTGRES_DB on an empty /var/lib/postgresql/data, like
#                                 the official image's, and pg_isready on PATH;
# - $REDIS_IMAGE (rag-stack/redis; official redis:7.4.6-alpine)  the stand-in: redis-server and redis-cli (7.0);
# - $PROMETHEUS_IMAGE (rag-stack/prometheus; official prom/prometheus:v3.5.0)  the stand-in: Debian's Prometheus
#                                 2.42 as the entrypoint (the official
#                                 image's interface: the command is its arguments) and wget for its health check.
# Grafana has no Debian package: the stack test leaves it out.
#
# Usage: deploy/container/standin_bases.sh [python|postgres|redis|prometheus ...]   (default: all four)
set -euo pipefail

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PYTHON_IMAGE=docker.io/library/python:3.11.14-slim-bookworm
POSTGRES_IMAGE=${POSTGRES_IMAGE:-localhost/rag-stack/postgres:latest}
REDIS_IMAGE=${REDIS_IMAGE:-localhost/rag-stack/redis:latest}
PROMETHEUS_IMAGE=${PROMETHEUS_IMAGE:-localhost/rag-stack/prometheus:latest}
STANDIN_LABEL='org.opencontainers.image.description=stand-in built from Debian 12 packages by deploy/container/standin_bases.sh'
HERE=$(cd "$(dirname "$0")" && pwd)

have() { podman image exists "$1"; }

# The official image when a registry gives it (within a minute), else false.
pulled() {
    timeout 60 podman pull -q "$1" >/dev/null 2>&1
}

# The official image $1 under the role name $2, when it can be pulled.
official_as() {
    pulled "$1" || return 1
    podman tag "$1" "$2"
    echo "using the official image $1 as $2" >&2
}

bootstrap() {  # name, packages, then mmdebstrap hooks; writes the image $name from a minbase root
    local name=$1 packages=$2
    shift 2
    echo "building stand-in $name from Debian packages ($packages)" >&2
    mmdebstrap --quiet --variant=minbase --include="$packages" \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
        "$@" bookworm - "$MIRROR" \
        | podman import --change "LABEL $STANDIN_LABEL" --change 'ENV LANG=C.UTF-8' \
            "${IMPORT_CHANGES[@]}" - "$name" >/dev/null
}

python_base() {
    have "$PYTHON_IMAGE" && return 0
    pulled "$PYTHON_IMAGE" && return 0
    IMPORT_CHANGES=(--change 'CMD ["python3"]')
    bootstrap "$PYTHON_IMAGE" python3,python3-venv,ca-certificates,netbase \
        --customize-hook='ln -sf /usr/bin/python3 "$1"/usr/local/bin/python && ln -sf /usr/bin/python3 "$1"/usr/local/bin/python3'
}

postgres_base() {
    have "$POSTGRES_IMAGE" && return 0
    official_as docker.io/library/postgres:17.6-bookworm "$POSTGRES_IMAGE" && return 0
    IMPORT_CHANGES=(--change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' --change 'CMD ["postgres"]'
        --change 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
        --change 'ENV PGDATA=/var/lib/postgresql/data' --change 'EXPOSE 5432')
    bootstrap "$POSTGRES_IMAGE" postgresql-15,gosu \
        --customize-hook="upload $HERE/postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh" \
        --customize-hook='chmod 755 "$1"/usr/local/bin/docker-entrypoint.sh && mkdir -p "$1"/var/lib/postgresql/data "$1"/var/run/postgresql && chroot "$1" chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql'
}

redis_base() {
    have "$REDIS_IMAGE" && return 0
    official_as docker.io/library/redis:7.4.6-alpine "$REDIS_IMAGE" && return 0
    IMPORT_CHANGES=(--change 'CMD ["redis-server"]' --change 'WORKDIR /data' --change 'EXPOSE 6379')
    bootstrap "$REDIS_IMAGE" redis-server,redis-tools \
        --customize-hook='mkdir -p "$1"/data'
}

prometheus_base() {
    have "$PROMETHEUS_IMAGE" && return 0
    official_as docker.io/prom/prometheus:v3.5.0 "$PROMETHEUS_IMAGE" && return 0
    IMPORT_CHANGES=(--change 'ENTRYPOINT ["/usr/bin/prometheus"]'
        --change 'CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]'
        --change 'WORKDIR /prometheus' --change 'EXPOSE 9090')
    bootstrap "$PROMETHEUS_IMAGE" prometheus,wget \
        --customize-hook='mkdir -p "$1"/prometheus'
}

for what in "${@:-python postgres redis prometheus}"; do
    for one in $what; do
        "${one}_base"
    done
done
