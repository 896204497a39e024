#!/bin/sh
# The image's entry point (under tini): runs `sluice "$@"`. For `serve`, first make sure the
# sandbox can start here. bubblewrap mounts a fresh /proc for each jail, and the kernel refuses
# that while the container's own /proc has paths masked over, as Docker does by default
# (`bwrap: Can't mount proc on /newroot/proc: Operation not permitted`). `docker run
# --security-opt systempaths=unconfined` removes the masks, but Compose v1 (docker-compose 1.x)
# cannot pass that option. So, when the jail cannot start and this container has CAP_SYS_ADMIN
# (which compose.yaml grants for the sandbox anyway), Sluice runs in a mount namespace of its
# own with an unmasked /proc; the container's other processes (docker exec) keep the masked one.
# docs/deploy.md, "The sandbox in a container".
set -e
if [ "${1:-}" = serve ] && [ "${SLUICE_SANDBOX:-on}" != off ] && [ "$(id -u)" = 0 ] \
   && command -v bwrap >/dev/null \
   && ! bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev true 2>/dev/null \
   && unshare --mount -- sh -c 'mount -t proc proc /proc' 2>/dev/null; then
  echo "sluice-entrypoint: /proc is masked (Docker's default); serving from a mount namespace with an unmasked /proc so the sandbox can start" >&2
  exec unshare --mount -- sh -c 'mount -t proc proc /proc && exec sluice "$@"' sluice "$@"
fi
exec sluice "$@"
