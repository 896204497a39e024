# Sluice: one image for every role (sluice serve --role all|api|worker). docs/deploy.md.
# Debian 12 with Python 3.11, Node.js 20 (NodeSource's Debian packages are not reachable in
# every build network, so Node comes from the official node image), and bubblewrap for the jail
# user code runs in.
# The base images are build arguments: the official ones by default; without Docker Hub,
# deploy/local-base-images.sh builds stand-ins from Debian's packages (docs/deploy.md,
# "Building without Docker Hub").
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG NODE_IMAGE=node:20-bookworm-slim
FROM ${NODE_IMAGE} AS node

FROM ${PYTHON_IMAGE}
# bubblewrap: the sandbox; ca-certificates: npm and outbound HTTPS; tini: signals to sluice.
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules /usr/local/lib/node_modules
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && node --version && npm --version

WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . && rm -rf /src

# Everything Sluice keeps (SQLite when no SLUICE_DATABASE_URL, the secret key, components,
# the npm store) lives in /data: mount a volume there.
ENV SLUICE_DATA_DIR=/data \
    SLUICE_HOST=0.0.0.0 \
    SLUICE_PORT=8000 \
    SLUICE_LOG_FORMAT=json \
    PYTHONUNBUFFERED=1
VOLUME ["/data"]
WORKDIR /data
EXPOSE 8000
# Liveness without curl in the image: /healthz answers while the process serves.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
  CMD ["python", "-c", "import os,urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SLUICE_PORT', '8000'), timeout=2)"]
# Root in the container: the sandbox gives each account's runner its own uid and cgroup,
# which needs root here (the runners themselves never run as root: docs/runtime.md).
# The entry point runs `sluice …`, for `serve` after making sure the sandbox can mount its /proc.
COPY deploy/container-entrypoint.sh /usr/local/bin/sluice-entrypoint
ENTRYPOINT ["tini", "--", "sluice-entrypoint"]
CMD ["serve"]
