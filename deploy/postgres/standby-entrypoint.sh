#!/bin/sh
# The streaming standby. On an empty volume it copies the primary with pg_basebackup (waiting for
# the primary to take connections), then starts Postgres in recovery: it streams the primary's WAL
# through the slot `standby` under the name `standby`, which the primary's
# synchronous_standby_names waits for at each commit. Promote it with
#   docker compose exec -u postgres postgres-standby pg_ctl promote
# once the primary is stopped (docs/deployment.md, "Beyond one machine").
set -eu
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
PASSFILE=/var/lib/postgresql/.pgpass
# .pgpass escapes ':' and '\' in a value.
printf 'postgres-primary:5432:*:replicator:%s\n' \
  "$(printf '%s' "$OPSTATE_REPLICATION_PASSWORD" | sed 's/[\\:]/\\&/g')" > "$PASSFILE"
chown postgres:postgres "$PASSFILE"
chmod 600 "$PASSFILE"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA"
  chown postgres:postgres "$PGDATA"
  chmod 700 "$PGDATA"
  until gosu postgres pg_isready -h postgres-primary -p 5432 -q; do sleep 1; done
  gosu postgres pg_basebackup -h postgres-primary -p 5432 -U replicator -D "$PGDATA" \
    -X stream -S standby --checkpoint=fast --no-password
  touch "$PGDATA/standby.signal"
  chown postgres:postgres "$PGDATA/standby.signal"
  cat >> "$PGDATA/postgresql.auto.conf" <<CONF
primary_conninfo = 'host=postgres-primary port=5432 user=replicator application_name=standby passfile=$PASSFILE'
primary_slot_name = 'standby'
# The copy holds the primary's synchronous_standby_names: promoted, this server has no standby,
# and would wait at each commit for one.
synchronous_standby_names = ''
CONF
fi
exec docker-entrypoint.sh postgres
