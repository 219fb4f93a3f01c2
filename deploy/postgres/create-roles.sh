#!/bin/sh
# opstate's database roles (docs/database-roles.md), made by the superuser before anything else
# runs: <prefix>_migrator (owns the schema; `opstate migrate --create-roles` runs as it and grants
# the other two their privileges), <prefix>_runtime (control planes, workers) and <prefix>_reader
# (the read-only dashboard), each LOGIN with its password from the environment. Harmless to
# repeat, and run at every start: a changed password is set again, and a schema that an older
# deployment migrated as the superuser is handed to the migrator with everything in it.
#
# Connects with the libpq variables (PGHOST, PGUSER, PGPASSWORD, PGDATABASE) as a superuser.
# OPSTATE_ROLE_PREFIX names the roles (default opstate), OPSTATE_SCHEMA the schema (default
# opstate); OPSTATE_MIGRATOR_PASSWORD, OPSTATE_RUNTIME_PASSWORD and OPSTATE_READER_PASSWORD are
# their passwords.
set -eu
prefix="${OPSTATE_ROLE_PREFIX:-opstate}"
schema="${OPSTATE_SCHEMA:-opstate}"
until pg_isready -q; do sleep 1; done
psql -v ON_ERROR_STOP=1 -X -q \
  -v migrator="${prefix}_migrator" -v runtime="${prefix}_runtime" -v reader="${prefix}_reader" \
  -v schema="$schema" \
  -v migrator_password="$OPSTATE_MIGRATOR_PASSWORD" \
  -v runtime_password="$OPSTATE_RUNTIME_PASSWORD" \
  -v reader_password="$OPSTATE_READER_PASSWORD" <<'SQL'
begin;
select format('create role %I login', r) from unnest(array[:'migrator', :'runtime', :'reader']) r
 where not exists (select from pg_roles where rolname = r)
\gexec
-- No more than each needs: only the migrator may create a schema in this database.
alter role :"migrator" with login nosuperuser nocreaterole nocreatedb password :'migrator_password';
alter role :"runtime" with login nosuperuser nocreaterole nocreatedb password :'runtime_password';
alter role :"reader" with login nosuperuser nocreaterole nocreatedb password :'reader_password';
select format('grant create on database %I to %I', current_database(), :'migrator')
\gexec
-- A schema migrated as another role (an older deployment ran everything as the superuser): the
-- migrator takes it over with its tables, their sequences and its functions.
select set_config('opstate_roles.schema', :'schema', true),
       set_config('opstate_roles.migrator', :'migrator', true)
\g /dev/null
do $$
declare
  s text := current_setting('opstate_roles.schema');
  m text := current_setting('opstate_roles.migrator');
  item record;
begin
  if not exists (select from pg_namespace where nspname = s and nspowner <> m::regrole) then
    return;
  end if;
  execute format('alter schema %I owner to %I', s, m);
  for item in
    select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = s and c.relkind in ('r', 'p', 'v', 'm', 'f')
  loop
    execute format('alter table %I.%I owner to %I', s, item.relname, m);
  end loop;
  -- Sequences a table owns moved with it; any other moves on its own.
  for item in
    select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = s and c.relkind = 'S' and pg_get_userbyid(c.relowner) <> m
  loop
    execute format('alter sequence %I.%I owner to %I', s, item.relname, m);
  end loop;
  for item in
    select p.oid::regprocedure as signature from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = s
  loop
    execute format('alter routine %s owner to %I', item.signature, m);
  end loop;
  raise notice 'schema % now belongs to %', s, m;
end
$$;
commit;
SQL
