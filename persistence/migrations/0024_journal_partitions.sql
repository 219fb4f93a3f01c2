-- Years of history, the journal's part: the step journal and the failure breadcrumbs are
-- partitioned by ranges of their operation's id. Operation ids are time-ordered (version-7 UUIDs:
-- the first 48 bits are the creating clock's milliseconds), so a range of ids is a span of days of
-- operations created, each partition `history_retention.journal_days` wide (default 30), and every
-- unique key of both tables already holds the operation's id, as a partitioned table's must. A
-- retention policy then drops a span's partitions of both tables whole, oldest first, once every
-- operation in it is finished and older than the policy keeps. What was written before this
-- migration becomes the first partition of each table, as it is.
--
-- The re-plans (`operation_replan`) stay one table: an archive record's generation is read from
-- them, so they are part of what an archive record means, and there is one row per operator
-- re-plan. Operations, lineage, copies, archive records and deletions are never pruned.
ALTER TABLE "history_retention" ADD COLUMN "journal_days" integer DEFAULT 30 NOT NULL;
--> statement-breakpoint
ALTER TABLE "history_retention" ADD COLUMN "journal_pruned_below" uuid;
--> statement-breakpoint
ALTER TABLE "history_retention" ADD COLUMN "journal_pruned_at" timestamp with time zone;
--> statement-breakpoint
ALTER TABLE "history_retention" ADD CONSTRAINT "history_retention_journal_days_check" CHECK ("history_retention"."journal_days" between 1 and 3660);
--> statement-breakpoint
-- The lowest time-ordered id of a time's millisecond: ids of operations created at or after it
-- sort at or after it.
CREATE OR REPLACE FUNCTION opstate_uuid_floor(t timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
  SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-0000-0000-000000000000')::uuid
    FROM (SELECT lpad(to_hex(floor(extract(epoch FROM t) * 1000)::bigint), 12, '0') AS h) x
$$;
--> statement-breakpoint
-- The millisecond a time-ordered id was made at (its first 48 bits).
CREATE OR REPLACE FUNCTION opstate_uuid_time(id uuid) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
  SELECT to_timestamp(('x' || lpad(replace(substr(id::text, 1, 13), '-', ''), 16, '0'))::bit(64)::bigint / 1000.0)
$$;
--> statement-breakpoint
ALTER TABLE "operation_step" RENAME TO "operation_step_j0";
--> statement-breakpoint
ALTER TABLE "operation_step_j0" RENAME CONSTRAINT "operation_step_operation_generation_name_key" TO "operation_step_j0_operation_generation_name_key";
--> statement-breakpoint
ALTER TABLE "operation_step_j0" RENAME CONSTRAINT "operation_step_pkey" TO "operation_step_j0_id_key";
--> statement-breakpoint
DROP TRIGGER "operation_step_append_only" ON "operation_step_j0";
--> statement-breakpoint
CREATE TABLE "operation_step" (
	"id" bigint NOT NULL,
	"operation_id" uuid NOT NULL,
	"attempt" integer NOT NULL,
	"name" text NOT NULL,
	"state" text NOT NULL,
	"result" jsonb,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	"generation" integer DEFAULT 1 NOT NULL,
	CONSTRAINT "operation_step_pkey" PRIMARY KEY ("operation_id", "id"),
	CONSTRAINT "operation_step_operation_generation_name_key" UNIQUE ("operation_id", "generation", "name")
) PARTITION BY RANGE ("operation_id");
--> statement-breakpoint
ALTER TABLE "operation_step" ADD CONSTRAINT "operation_step_operation_id_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
CREATE TRIGGER operation_step_append_only BEFORE UPDATE ON operation_step
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
--> statement-breakpoint
ALTER TABLE "operation_failure_event" RENAME TO "operation_failure_event_j0";
--> statement-breakpoint
ALTER TABLE "operation_failure_event_j0" RENAME CONSTRAINT "operation_failure_event_pkey" TO "operation_failure_event_j0_pkey";
--> statement-breakpoint
ALTER INDEX "operation_failure_event_operation_idx" RENAME TO "operation_failure_event_j0_operation_idx";
--> statement-breakpoint
DROP TRIGGER "operation_failure_event_append_only" ON "operation_failure_event_j0";
--> statement-breakpoint
DROP TRIGGER "operation_failure_event_kind" ON "operation_failure_event_j0";
--> statement-breakpoint
CREATE TABLE "operation_failure_event" (
	"kind" text NOT NULL,
	"operation_id" uuid NOT NULL,
	"attempt" integer NOT NULL,
	"error" jsonb NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "operation_failure_event_pkey" PRIMARY KEY ("kind", "operation_id", "attempt"),
	CONSTRAINT "operation_failure_event_kind_check" CHECK ("operation_failure_event"."kind" in ('raw_data_package', 'data_transfer_package', 'transfer', 'unpack', 'long_term_archive', 'staging'))
) PARTITION BY RANGE ("operation_id");
--> statement-breakpoint
CREATE INDEX "operation_failure_event_operation_idx" ON "operation_failure_event" USING btree ("operation_id");
--> statement-breakpoint
ALTER TABLE "operation_failure_event" ADD CONSTRAINT "operation_failure_event_operation_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
CREATE TRIGGER operation_failure_event_append_only BEFORE UPDATE ON operation_failure_event
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
--> statement-breakpoint
CREATE TRIGGER "operation_failure_event_kind" AFTER INSERT OR UPDATE ON "operation_failure_event"
FOR EACH ROW EXECUTE FUNCTION opstate_row_kind_matches_operation();
--> statement-breakpoint
-- The kind check names the table a row was written to, not the partition it landed in.
CREATE OR REPLACE FUNCTION opstate_row_kind_matches_operation() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  base text;
  root text;
BEGIN
  SELECT o.kind INTO base FROM operation o WHERE o.id = new.operation_id;
  IF base IS DISTINCT FROM new.kind THEN
    SELECT c.relname INTO root FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent
     WHERE i.inhrelid = TG_RELID;
    RAISE EXCEPTION 'insert or update on table "%" violates the operation''s kind', coalesce(root, TG_TABLE_NAME)
      USING ERRCODE = 'foreign_key_violation',
        DETAIL = format('Operation %s is of kind %s, not %s.', new.operation_id,
          coalesce(base, '(none: no such operation)'), new.kind),
        TABLE = coalesce(root, TG_TABLE_NAME);
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
-- The first partitions hold everything written so far: up to the day after the latest of now and
-- the newest operation id in either table (a clock ahead of this server's made it).
DO $$
DECLARE
  last_id bigint;
  newest timestamptz;
  bound uuid;
BEGIN
  SELECT greatest(coalesce(pg_sequence_last_value('operation_step_id_seq'), 0),
                  coalesce((SELECT max(id) FROM operation_step_j0), 0))
    INTO last_id;
  ALTER TABLE operation_step_j0 ALTER COLUMN id DROP IDENTITY;
  ALTER TABLE operation_step_j0 DROP CONSTRAINT operation_step_j0_id_key;
  ALTER TABLE operation_step_j0 ADD CONSTRAINT operation_step_j0_pkey PRIMARY KEY (operation_id, id);
  CREATE SEQUENCE operation_step_id_seq AS bigint OWNED BY operation_step.id;
  PERFORM setval('operation_step_id_seq', last_id + 1, false);
  ALTER TABLE operation_step ALTER COLUMN id SET DEFAULT nextval('operation_step_id_seq'::regclass);
  SELECT greatest(now(),
                  opstate_uuid_time((SELECT operation_id FROM operation_step_j0 ORDER BY 1 DESC LIMIT 1)),
                  opstate_uuid_time((SELECT operation_id FROM operation_failure_event_j0 ORDER BY 1 DESC LIMIT 1)))
    INTO newest;
  bound := opstate_uuid_floor(date_trunc('day', newest, 'UTC') + interval '1 day');
  EXECUTE format('ALTER TABLE operation_step ATTACH PARTITION operation_step_j0 FOR VALUES FROM (MINVALUE) TO (%L)', bound);
  EXECUTE format('ALTER TABLE operation_failure_event ATTACH PARTITION operation_failure_event_j0 FOR VALUES FROM (MINVALUE) TO (%L)', bound);
END
$$;
--> statement-breakpoint
-- Rows past every partition made ahead (a leader down for long, a clock far ahead) land here
-- rather than fail; the next partition is then made above them.
CREATE TABLE "operation_step_default" PARTITION OF "operation_step" DEFAULT;
--> statement-breakpoint
CREATE TABLE "operation_failure_event_default" PARTITION OF "operation_failure_event" DEFAULT;
--> statement-breakpoint
-- The journal's spans, lowest first: each is one partition of operation_step and one of
-- operation_failure_event with the same suffix and bounds (null: open below, or the default).
CREATE OR REPLACE FUNCTION opstate_journal_partitions()
RETURNS TABLE (suffix text, lower_id uuid, upper_id uuid, is_default boolean)
LANGUAGE sql STABLE AS $$
  SELECT substr(c.relname::text, length('operation_step_') + 1),
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([0-9a-f-]+)''\)'))[1]::uuid,
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([0-9a-f-]+)''\)'))[1]::uuid,
         pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT'
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE i.inhparent = 'operation_step'::regclass
   ORDER BY 4, 3 NULLS FIRST
$$;
--> statement-breakpoint
-- Rows in the journal's default partitions, as the schema's owner.
CREATE OR REPLACE FUNCTION opstate_journal_spilled() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER AS $$
  SELECT (SELECT count(*) FROM operation_step_default) + (SELECT count(*) FROM operation_failure_event_default)
$$;
--> statement-breakpoint
-- Makes the journal's spans ahead of the server's clock until `ahead` whole spans of
-- `journal_days` lie past today; returns how many it made. Rows in the default partitions past
-- the last span are stepped over (the next span starts the day after the newest of them).
CREATE OR REPLACE FUNCTION opstate_journal_extend(ahead integer DEFAULT 2) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  width interval;
  top uuid;
  spilled uuid;
  horizon timestamptz;
  upper_at timestamptz;
  suffix text;
  made integer := 0;
BEGIN
  -- One at a time with the history's own care ('opsthist').
  PERFORM pg_advisory_xact_lock(8030045079406736244);
  SELECT make_interval(days => journal_days) INTO width FROM history_retention WHERE id = 1;
  horizon := date_trunc('day', now(), 'UTC') + ahead * width;
  SELECT j.upper_id INTO top FROM opstate_journal_partitions() j WHERE NOT j.is_default
   ORDER BY j.upper_id DESC LIMIT 1;
  SELECT greatest((SELECT operation_id FROM operation_step_default ORDER BY 1 DESC LIMIT 1),
                  (SELECT operation_id FROM operation_failure_event_default ORDER BY 1 DESC LIMIT 1))
    INTO spilled;
  IF spilled IS NOT NULL AND spilled >= top THEN
    top := opstate_uuid_floor(date_trunc('day', opstate_uuid_time(spilled), 'UTC') + interval '1 day');
  END IF;
  IF opstate_uuid_time(top) >= horizon THEN
    RETURN 0;
  END IF;
  -- Attaching adds the partitions' foreign-key triggers to operation: that lock first, in the
  -- writers' order (see opstate_history_extend).
  PERFORM set_config('lock_timeout', '2s', true);
  LOCK TABLE operation IN SHARE ROW EXCLUSIVE MODE;
  WHILE opstate_uuid_time(top) < horizon LOOP
    upper_at := date_trunc('day', opstate_uuid_time(top), 'UTC') + width;
    suffix := 'j' || to_char(opstate_uuid_time(top) AT TIME ZONE 'UTC', 'YYYYMMDD');
    EXECUTE format('CREATE TABLE %I (LIKE operation_step INCLUDING DEFAULTS)', 'operation_step_' || suffix);
    EXECUTE format('ALTER TABLE operation_step ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   'operation_step_' || suffix, top, opstate_uuid_floor(upper_at));
    EXECUTE format('CREATE TABLE %I (LIKE operation_failure_event INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', 'operation_failure_event_' || suffix);
    EXECUTE format('ALTER TABLE operation_failure_event ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   'operation_failure_event_' || suffix, top, opstate_uuid_floor(upper_at));
    top := opstate_uuid_floor(upper_at);
    made := made + 1;
  END LOOP;
  RETURN made;
END
$$;
--> statement-breakpoint
-- Drops the oldest span of the journal that the retention policy lets go, and reports the spans it
-- looked at (`dropped` true for the one it dropped; one per call). Spans go oldest first and
-- pruning stops at the first one kept, so everything below `journal_pruned_below` is gone. A span
-- is dropped only when every operation its ids can hold was created before `now - keep`, every
-- step and breadcrumb in it is older than that, and no operation in its range of ids is PENDING,
-- SCHEDULED or IN_PROGRESS: checked again under a lock on operation against writes (no status
-- change passes it) and an ACCESS EXCLUSIVE lock on both tables, waited for at most 2 s.
CREATE OR REPLACE FUNCTION opstate_journal_prune(now_at timestamptz DEFAULT now())
RETURNS TABLE (suffix text, lower_id uuid, upper_id uuid, rows_in bigint, newest timestamptz,
               dropped boolean, reason text)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  keep_for interval;
  cutoff timestamptz;
  p record;
  live bigint;
  -- Live operations in the span's range of ids, found from the partial indexes of the live
  -- statuses (one IN over all three would read every operation).
  LIVE_IN constant text := 'SELECT (SELECT count(*) FROM operation o WHERE o.status = ''PENDING'''
    ' AND ($1 IS NULL OR o.id >= $1) AND o.id < $2)'
    ' + (SELECT count(*) FROM operation o WHERE o.status IN (''SCHEDULED'', ''IN_PROGRESS'')'
    ' AND ($1 IS NULL OR o.id >= $1) AND o.id < $2)';
  COUNT_SQL constant text := 'SELECT (SELECT count(*) FROM %1$I) + (SELECT count(*) FROM %2$I),'
    ' greatest((SELECT max(at) FROM %1$I), (SELECT max(at) FROM %2$I))';
BEGIN
  PERFORM pg_advisory_xact_lock(8030045079406736244);
  SELECT r.keep INTO keep_for FROM history_retention r WHERE r.id = 1;
  IF keep_for IS NULL THEN
    RETURN;
  END IF;
  cutoff := now_at - keep_for;
  FOR p IN SELECT j.suffix, j.lower_id, j.upper_id FROM opstate_journal_partitions() j
            WHERE NOT j.is_default ORDER BY j.upper_id LOOP
    suffix := p.suffix; lower_id := p.lower_id; upper_id := p.upper_id; dropped := false;
    rows_in := NULL; newest := NULL;
    IF opstate_uuid_time(p.upper_id) > cutoff THEN
      reason := 'holds operations created in the last ' || keep_for::text; RETURN NEXT;
      RETURN;
    END IF;
    EXECUTE LIVE_IN INTO live USING p.lower_id, p.upper_id;
    IF live > 0 THEN
      reason := format('holds the journal of %s live operation(s)', live); RETURN NEXT;
      RETURN;
    END IF;
    EXECUTE format(COUNT_SQL, 'operation_step_' || p.suffix, 'operation_failure_event_' || p.suffix)
      INTO rows_in, newest;
    IF newest IS NOT NULL AND newest >= cutoff THEN
      reason := 'holds steps or failures recorded in the last ' || keep_for::text; RETURN NEXT;
      RETURN;
    END IF;
    PERFORM set_config('lock_timeout', '2s', true);
    -- operation first, as writers take it (see opstate_history_prune).
    LOCK TABLE operation IN SHARE ROW EXCLUSIVE MODE;
    LOCK TABLE operation_step, operation_failure_event IN ACCESS EXCLUSIVE MODE;
    EXECUTE LIVE_IN INTO live USING p.lower_id, p.upper_id;
    IF live > 0 THEN
      reason := format('holds the journal of %s live operation(s)', live); RETURN NEXT;
      RETURN;
    END IF;
    -- A breadcrumb committed since the read (a failure recorded as its operation finished).
    EXECUTE format(COUNT_SQL, 'operation_step_' || p.suffix, 'operation_failure_event_' || p.suffix)
      INTO rows_in, newest;
    IF newest IS NOT NULL AND newest >= cutoff THEN
      reason := 'holds steps or failures recorded in the last ' || keep_for::text; RETURN NEXT;
      RETURN;
    END IF;
    EXECUTE format('ALTER TABLE operation_step DETACH PARTITION %I', 'operation_step_' || p.suffix);
    EXECUTE format('DROP TABLE %I', 'operation_step_' || p.suffix);
    EXECUTE format('ALTER TABLE operation_failure_event DETACH PARTITION %I', 'operation_failure_event_' || p.suffix);
    EXECUTE format('DROP TABLE %I', 'operation_failure_event_' || p.suffix);
    UPDATE history_retention SET journal_pruned_below = greatest(journal_pruned_below, p.upper_id),
                                 journal_pruned_at = clock_timestamp()
     WHERE id = 1;
    dropped := true;
    reason := CASE WHEN rows_in = 0 THEN 'empty'
                   ELSE 'every operation in it finished, and is older than ' || keep_for::text END;
    RETURN NEXT;
    RETURN;
  END LOOP;
END
$$;
--> statement-breakpoint
-- A FAILED operation whose journal was dropped cannot be retried as it is: its next attempt would
-- find none of the steps it took, and take them again. An operator retries it with a new plan
-- (`opstate retry <id> --replan`): a re-plan made after the drop starts a new plan generation,
-- which knows no steps.
CREATE OR REPLACE FUNCTION opstate_refuse_retry_without_journal() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  below uuid;
  pruned_at timestamptz;
BEGIN
  SELECT journal_pruned_below, journal_pruned_at INTO below, pruned_at
    FROM history_retention WHERE id = 1;
  IF below IS NOT NULL AND new.id < below AND NOT EXISTS (
       SELECT 1 FROM operation_replan r WHERE r.operation_id = new.id AND r.at > pruned_at) THEN
    RAISE EXCEPTION 'operation % cannot be retried: the retention policy dropped its step journal, so its next attempt would repeat steps it already took; retry it with a new plan (opstate retry % --replan)', new.id, new.id
      USING ERRCODE = 'OPS02';
  END IF;
  RETURN new;
END
$$;
--> statement-breakpoint
CREATE TRIGGER operation_retry_needs_journal BEFORE UPDATE ON operation
  FOR EACH ROW WHEN (old.status = 'FAILED' AND new.status <> 'FAILED')
  EXECUTE FUNCTION opstate_refuse_retry_without_journal();
--> statement-breakpoint
-- The history's prune again, its live check now split by status: an IN over the three live
-- statuses matches none of their partial indexes, and read every operation at each pass while an
-- old partition was held by a live one.
CREATE OR REPLACE FUNCTION opstate_history_prune(now_at timestamptz DEFAULT now())
RETURNS TABLE (name text, lower_id bigint, upper_id bigint, rows_in bigint, newest timestamptz,
               dropped boolean, reason text)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  keep_for interval;
  next_id bigint;
  p record;
  last_seen bigint;
  later_id bigint;
  live bigint;
  behind text;
  -- Live operations with a row in a partition: probed from the few live ones, by the partition's
  -- (operation_id, id) index.
  LIVE_IN constant text := 'SELECT (SELECT count(*) FROM operation o WHERE o.status = ''PENDING'''
    ' AND EXISTS (SELECT 1 FROM %1$I t WHERE t.operation_id = o.id))'
    ' + (SELECT count(*) FROM operation o WHERE o.status IN (''SCHEDULED'', ''IN_PROGRESS'')'
    ' AND EXISTS (SELECT 1 FROM %1$I t WHERE t.operation_id = o.id))';
BEGIN
  -- One at a time, whichever leader or operator calls ('opsthist').
  PERFORM pg_advisory_xact_lock(8030045079406736244);
  SELECT r.keep INTO keep_for FROM history_retention r WHERE r.id = 1;
  IF keep_for IS NULL THEN
    RETURN;
  END IF;
  SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END INTO next_id
    FROM operation_transition_id_seq;
  FOR p IN SELECT h.name, h.lower_id, h.upper_id FROM opstate_history_partitions() h
            WHERE NOT h.is_default AND h.upper_id <= next_id ORDER BY h.upper_id LOOP
    name := p.name; lower_id := p.lower_id; upper_id := p.upper_id; dropped := false;
    rows_in := NULL; newest := NULL; last_seen := NULL;
    -- The time of the newest id first (one probe of the key): a young partition is passed over
    -- without reading it. Times are the writers' and follow the ids only roughly, so each
    -- partition is judged on its own rows, and an old one after a young one may go.
    EXECUTE format('SELECT at FROM %I ORDER BY id DESC LIMIT 1', p.name) INTO newest;
    IF newest IS NOT NULL AND newest >= now_at - keep_for THEN
      rows_in := NULL; reason := 'holds transitions of the last ' || keep_for::text; RETURN NEXT;
      CONTINUE;
    END IF;
    -- Checked first without the lock (a probe per live operation, before the partition is read
    -- whole), so a partition a live operation holds is stepped over without stopping the writers
    -- or reading it at every pass; then again under the lock, which decides.
    EXECUTE format(LIVE_IN, p.name) INTO live;
    IF live > 0 THEN
      reason := format('holds the history of %s live operation(s)', live); RETURN NEXT;
      CONTINUE;
    END IF;
    EXECUTE format('SELECT count(*), max(at), max(id) FROM %I', p.name) INTO rows_in, newest, last_seen;
    IF newest IS NOT NULL AND newest >= now_at - keep_for THEN
      reason := 'holds transitions of the last ' || keep_for::text; RETURN NEXT;
      CONTINUE;
    END IF;
    SELECT string_agg(c.name, ', ' ORDER BY c.name) INTO behind
      FROM pipeline_cursor c WHERE c.after_id < last_seen;
    IF behind IS NOT NULL THEN
      reason := format('the cursor of pipeline(s) %s has not yet passed it', behind); RETURN NEXT;
      RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM dispatch_relay_cursor c WHERE c.after_id < last_seen) THEN
      reason := 'the dispatch relay has not yet passed it'; RETURN NEXT;
      RETURN;
    END IF;
    PERFORM set_config('lock_timeout', '2s', true);
    -- Dropping the partition drops its foreign key's trigger on operation: that lock first, in
    -- the writers' order (operation, then the history), so no writer and this wait on each other.
    LOCK TABLE operation IN SHARE ROW EXCLUSIVE MODE;
    LOCK TABLE operation_transition IN ACCESS EXCLUSIVE MODE;
    -- Under the lock, what was not yet committed when the partition was read is: a row past
    -- the last one read (an id drawn before, committed since) was judged by nothing above, so
    -- the partition waits for the next pass.
    EXECUTE format('SELECT max(id) FROM %I WHERE id > $1', p.name) INTO later_id
      USING coalesce(last_seen, -9223372036854775808);
    IF later_id IS NOT NULL THEN
      reason := 'rows were still being written into it'; RETURN NEXT;
      RETURN;
    END IF;
    EXECUTE format(LIVE_IN, p.name) INTO live;
    IF live > 0 THEN
      reason := format('holds the history of %s live operation(s)', live); RETURN NEXT;
      RETURN;
    END IF;
    EXECUTE format('ALTER TABLE operation_transition DETACH PARTITION %I', p.name);
    EXECUTE format('DROP TABLE %I', p.name);
    dropped := true;
    reason := CASE WHEN rows_in = 0 THEN 'empty'
                   ELSE 'every transition in it is older than ' || keep_for::text END;
    RETURN NEXT;
    RETURN;
  END LOOP;
END
$$;
--> statement-breakpoint
REVOKE EXECUTE ON FUNCTION opstate_journal_extend(integer) FROM PUBLIC;
--> statement-breakpoint
REVOKE EXECUTE ON FUNCTION opstate_journal_prune(timestamptz) FROM PUBLIC;
--> statement-breakpoint
SELECT opstate_journal_extend();
