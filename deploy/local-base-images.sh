#!/usr/bin/env bash
# Build stand-ins for the three Docker Hub images Sluice's Dockerfile and compose.yaml use, from
# Debian's own packages, for machines whose network reaches Debian's mirror, PyPI and npm but
# no container registry (docs/deploy.md, "Building without Docker Hub (air-gapped)").
#
#   sudo deploy/local-base-images.sh            # builds the three sluice-local/* images
#   source deploy/local-base-images.env         # then: docker compose up -d --build
#
# Images made (tags overridable with the variables below):
#   sluice-local/debian:bookworm           debootstrap --variant=minbase bookworm, imported
#   sluice-local/python:3.11-bookworm      + Debian's python3 (3.11) and pip, like python:3.11-slim-bookworm
#   sluice-local/node:20-bookworm          + this machine's node (20+) and npm in /usr/local, like node:20-bookworm-slim
#   sluice-local/postgres:15-bookworm      + Debian's PostgreSQL 15 with the official image's
#                                          POSTGRES_USER/PASSWORD/DB start-up (Debian 12 has no 16)
#
# Variables:
#   DEBIAN_MIRROR      default http://deb.debian.org/debian
#   SLUICE_BASE_CA_DIR a folder of extra CA certificates (*.crt) to trust inside the images, for
#                      a network whose HTTPS goes through an inspecting proxy (e.g.
#                      /usr/local/share/ca-certificates). Unset: only Debian's CAs.
#   WORK               scratch folder (default: a new temp dir, removed at the end)
#   REBUILD_ROOTFS=1   debootstrap again even if sluice-local/debian:bookworm exists
# Needs root (debootstrap), docker, debootstrap (apt-get install debootstrap).
set -euo pipefail

MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DEBIAN_TAG="${DEBIAN_TAG:-sluice-local/debian:bookworm}"
PYTHON_TAG="${PYTHON_TAG:-sluice-local/python:3.11-bookworm}"
NODE_TAG="${NODE_TAG:-sluice-local/node:20-bookworm}"
POSTGRES_TAG="${POSTGRES_TAG:-sluice-local/postgres:15-bookworm}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

step() { printf '\n==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (debootstrap needs it)"
command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "the Docker daemon is not running (service docker start, or dockerd &)"
command -v debootstrap >/dev/null || die "debootstrap is not installed: apt-get install debootstrap"

own_work=""
if [ -z "${WORK:-}" ]; then WORK="$(mktemp -d)"; own_work=1; fi
cleanup() { if [ -n "$own_work" ]; then rm -rf "$WORK"; fi; }
trap cleanup EXIT

# --- 1. Debian 12, minimal, from the mirror ------------------------------------------------
if [ -n "${REBUILD_ROOTFS:-}" ] || ! docker image inspect "$DEBIAN_TAG" >/dev/null 2>&1; then
  step "debootstrap bookworm from $MIRROR (a few minutes)"
  rootfs="$WORK/rootfs"
  rm -rf "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
  cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb ${MIRROR%/debian}/debian-security bookworm-security main
EOF
  # As in Debian's official images: no recommends, no docs or caches kept.
  printf 'APT::Install-Recommends "false";\n' >"$rootfs/etc/apt/apt.conf.d/90sluice-norecommends"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  step "importing the root filesystem as $DEBIAN_TAG"
  tar -C "$rootfs" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'ENV LANG=C.UTF-8' -c 'CMD ["bash"]' - "$DEBIAN_TAG" >/dev/null
  rm -rf "$rootfs"
else
  step "$DEBIAN_TAG exists (REBUILD_ROOTFS=1 to make it again)"
fi

# Extra CA certificates, shared by the images below (an empty folder when none).
ctx="$WORK/ctx"
rm -rf "$ctx" && mkdir -p "$ctx/ca"
if [ -n "${SLUICE_BASE_CA_DIR:-}" ]; then
  shopt -s nullglob
  certs=("$SLUICE_BASE_CA_DIR"/*.crt)
  shopt -u nullglob
  [ "${#certs[@]}" -gt 0 ] || die "no *.crt in SLUICE_BASE_CA_DIR=$SLUICE_BASE_CA_DIR"
  cp "${certs[@]}" "$ctx/ca/"
  step "trusting ${#certs[@]} extra CA certificate(s) from $SLUICE_BASE_CA_DIR in the images"
fi
# Used by every image below: Debian's CAs plus the extra ones, and Node/npm/pip pointed at them
# (Node has its own CA list and ignores the system's unless told).
ca_layer='COPY ca/ /usr/local/share/ca-certificates/
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && update-ca-certificates \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt'

# --- 2. python:3.11-slim-bookworm ----------------------------------------------------------
step "building $PYTHON_TAG (Debian's python3 3.11, pip)"
# As in the official image, pip installs into the system Python (the PEP 668 marker goes) and
# python/pip are on PATH by those names.
cat >"$ctx/Dockerfile.python" <<EOF
FROM $DEBIAN_TAG
$ca_layer
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 python3-pip python3-venv \\
 && rm -rf /var/lib/apt/lists/* \\
 && rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED \\
 && ln -s /usr/bin/python3 /usr/local/bin/python \\
 && ln -s /usr/bin/pip3 /usr/local/bin/pip \\
 && python --version && pip --version
ENV PYTHONDONTWRITEBYTECODE=1
CMD ["python3"]
EOF
docker build -q -f "$ctx/Dockerfile.python" -t "$PYTHON_TAG" "$ctx" >/dev/null

# --- 3. node:20-bookworm-slim ---------------------------------------------------------------
# Debian 12's nodejs is 18; NodeSource's repository is not always reachable, so the node binary
# (NodeSource's builds link only glibc and libstdc++) and npm are copied from this machine.
node_bin="$(command -v node || true)"
[ -n "$node_bin" ] || die "no node on PATH to copy (Sluice needs Node.js 20+)"
node_bin="$(readlink -f "$node_bin")"
node_major="$("$node_bin" -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "node on PATH is $("$node_bin" --version); Sluice needs 20+"
npm_dir="$(npm root -g 2>/dev/null)/npm"
[ -f "$npm_dir/bin/npm-cli.js" ] || die "npm not found at $npm_dir"
step "building $NODE_TAG (node $("$node_bin" --version) from $node_bin, npm from $npm_dir)"
mkdir -p "$ctx/node/bin" "$ctx/node/lib/node_modules"
cp "$node_bin" "$ctx/node/bin/node"
cp -a "$npm_dir" "$ctx/node/lib/node_modules/npm"
cat >"$ctx/Dockerfile.node" <<EOF
FROM $DEBIAN_TAG
$ca_layer
COPY node/bin/node /usr/local/bin/node
COPY node/lib/node_modules /usr/local/lib/node_modules
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
 && node --version && npm --version
CMD ["node"]
EOF
docker build -q -f "$ctx/Dockerfile.node" -t "$NODE_TAG" "$ctx" >/dev/null

# --- 4. postgres (Debian's 15) ----------------------------------------------------------------
step "building $POSTGRES_TAG (Debian's PostgreSQL 15)"
cp "$here/local-postgres-entrypoint.sh" "$ctx/docker-entrypoint.sh"
cat >"$ctx/Dockerfile.postgres" <<EOF
FROM $DEBIAN_TAG
RUN apt-get update \\
 && apt-get install -y --no-install-recommends postgresql-15 postgresql-client-15 \\
 && rm -rf /var/lib/apt/lists/* \\
 && mkdir -p /var/lib/postgresql/data /var/run/postgresql \\
 && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:\$PATH PGDATA=/var/lib/postgresql/data
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /var/lib/postgresql/data
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
EOF
chmod +x "$ctx/docker-entrypoint.sh"
docker build -q -f "$ctx/Dockerfile.postgres" -t "$POSTGRES_TAG" "$ctx" >/dev/null

env_file="$here/local-base-images.env"
cat >"$env_file" <<EOF
# Written by deploy/local-base-images.sh: the local stand-ins for compose.yaml and the Dockerfile.
export SLUICE_PYTHON_IMAGE=$PYTHON_TAG
export SLUICE_NODE_IMAGE=$NODE_TAG
export SLUICE_POSTGRES_IMAGE=$POSTGRES_TAG
EOF
step "done"
docker image ls --format '  {{.Repository}}:{{.Tag}}  {{.Size}}' | grep -F sluice-local/ >&2
cat >&2 <<EOF

Use them:
  source $env_file
  docker compose up -d --build          # or docker-compose
or, for the image alone:
  docker build --build-arg PYTHON_IMAGE=$PYTHON_TAG --build-arg NODE_IMAGE=$NODE_TAG -t sluice:local .
EOF
