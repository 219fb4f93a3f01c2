#!/bin/sh
# The primary's first start (docker-entrypoint-initdb.d, on an empty volume): a replication role
# for the standby, the slot it streams through (the primary keeps the WAL the standby has not
# received yet), and the line of pg_hba.conf that lets the role in for replication.
set -eu
psql -v ON_ERROR_STOP=1 -v password="$OPSTATE_REPLICATION_PASSWORD" \
  --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
create role replicator with replication login password :'password';
select pg_create_physical_replication_slot('standby');
SQL
echo 'host replication replicator all scram-sha-256' >> "$PGDATA/pg_hba.conf"
