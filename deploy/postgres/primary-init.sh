#!/bin/sh
# The primary's first start (docker-entrypoint-initdb.d, on an empty volume): a replication role
# for the standby, the slot it streams through (the primary keeps the WAL the standby has not
# received yet), the line of pg_hba.conf that lets the role in for replication, and the synchronous
# standby: from the server's next start (the real one, after this setup), a commit returns once the
# standby named `standby` has it (synchronous_commit is on by default). Not on the command line:
# the setup's own server would then wait at each commit for a standby that cannot exist yet.
set -eu
psql -v ON_ERROR_STOP=1 -v password="$OPSTATE_REPLICATION_PASSWORD" \
  --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
create role replicator with replication login password :'password';
select pg_create_physical_replication_slot('standby');
alter system set synchronous_standby_names = 'FIRST 1 (standby)';
SQL
echo 'host replication replicator all scram-sha-256' >> "$PGDATA/pg_hba.conf"
