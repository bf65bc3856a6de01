#!/usr/bin/env bash
# Installs (if needed) and starts a local PostgreSQL cluster for the store tests, then prints its URL.
set -euo pipefail
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi
ver=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
pg_lsclusters -h 2>/dev/null | grep -q "^$ver main" || pg_createcluster "$ver" main >&2
pg_ctlcluster "$ver" main start >&2 2>/dev/null || true
for _ in $(seq 1 30); do su postgres -c "psql -qAtc 'select 1'" >/dev/null 2>&1 && break; sleep 1; done
su postgres -c "psql -qAtc \"do \\\$\\\$ begin if not exists (select from pg_roles where rolname='selfplay') then create role selfplay login password 'selfplay' superuser; end if; end \\\$\\\$;\"" >&2
su postgres -c "psql -qAtc \"select 1 from pg_database where datname='selfplay_test'\"" | grep -q 1 \
  || su postgres -c "createdb -O selfplay selfplay_test" >&2
port=$(pg_lsclusters -h | awk -v v="$ver" '$1==v && $2=="main" {print $3}')
echo "postgresql+psycopg://selfplay:selfplay@127.0.0.1:${port}/selfplay_test"
