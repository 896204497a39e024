#!/usr/bin/env bash
# Entry point of the local PostgreSQL stand-in (deploy/local-base-images.sh): the subset of the
# official postgres image's start-up that compose.yaml uses. On an empty $PGDATA: initdb with
# POSTGRES_USER as the superuser and POSTGRES_PASSWORD as its password, create POSTGRES_DB, and
# accept password (scram-sha-256) connections from any address; then run postgres as the
# postgres user, listening on every address.
set -euo pipefail
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}" "${PGDATA:=/var/lib/postgresql/data}"
if [ "${1:-}" != postgres ]; then exec "$@"; fi
as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; }
mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "error: set POSTGRES_PASSWORD" >&2; exit 1; }
  pwfile="$(mktemp)"; printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"; chown postgres "$pwfile"
  as_pg initdb -D "$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  as_pg pg_ctl -D "$PGDATA" -w -o "-c listen_addresses=''" start >/dev/null
  if [ "$POSTGRES_DB" != postgres ]; then
    as_pg psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres -q \
      -c "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\""
  fi
  as_pg pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "PostgreSQL initialised: user $POSTGRES_USER, database $POSTGRES_DB" >&2
fi
shift
exec setpriv --reuid=postgres --regid=postgres --init-groups -- \
  postgres -D "$PGDATA" -c listen_addresses='*' "$@"
