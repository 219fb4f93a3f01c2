-- Years of history: the transition history is partitioned by ranges of its id, so that a retention
-- policy drops whole partitions instead of deleting rows one by one. Ids come from one sequence and
-- so follow time; ranging by id keeps the primary key on `id` alone (a range by time would have to
-- put the time into every unique key), and the relay's and the pipelines' reads past a cursor
-- touch only the partitions above it. The history written before this migration becomes the first
-- partition, as it is (the attach reads it once to check its bound).
CREATE TABLE "history_retention" (
	"id" smallint PRIMARY KEY DEFAULT 1 NOT NULL,
	"keep" interval,
	"partition_ids" bigint DEFAULT 5000000 NOT NULL,
	"set_by" text DEFAULT 'migration' NOT NULL,
	"set_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "history_retention_one_row" CHECK ("history_retention"."id" = 1),
	CONSTRAINT "history_retention_keep_check" CHECK ("history_retention"."keep" is null or "history_retention"."keep" >= interval '1 day'),
	CONSTRAINT "history_retention_partition_ids_check" CHECK ("history_retention"."partition_ids" >= 1000)
);
--> statement-breakpoint
INSERT INTO "history_retention" DEFAULT VALUES;
--> statement-breakpoint
ALTER TABLE "operation_transition" RENAME TO "operation_transition_p0";
--> statement-breakpoint
ALTER TABLE "operation_transition_p0" RENAME CONSTRAINT "operation_transition_pkey" TO "operation_transition_p0_pkey";
--> statement-breakpoint
ALTER INDEX "operation_transition_operation_idx" RENAME TO "operation_transition_p0_operation_idx";
--> statement-breakpoint
DROP TRIGGER "operation_transition_append_only" ON "operation_transition_p0";
--> statement-breakpoint
CREATE TABLE "operation_transition" (
	"id" bigint NOT NULL,
	"operation_id" uuid NOT NULL,
	"from_status" text,
	"to_status" text NOT NULL,
	"event" text NOT NULL,
	"attempt" integer NOT NULL,
	"by" text NOT NULL,
	"reason" text,
	"at" timestamp with time zone NOT NULL,
	CONSTRAINT "operation_transition_pkey" PRIMARY KEY ("id")
) PARTITION BY RANGE ("id");
--> statement-breakpoint
CREATE INDEX "operation_transition_operation_idx" ON "operation_transition" USING btree ("operation_id","id");
--> statement-breakpoint
-- Made on the parent before the first partition is attached, so the attach adopts the partition's
-- own equal constraint instead of checking every row against operation again.
ALTER TABLE "operation_transition" ADD CONSTRAINT "operation_transition_operation_id_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
CREATE TRIGGER operation_transition_append_only BEFORE UPDATE ON operation_transition
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
--> statement-breakpoint
-- A partitioned table can have no identity column (before Postgres 17): the ids go on from a
-- sequence of the same name, owned by the column, past every id handed out so far.
DO $$
DECLARE
  last_id bigint;
BEGIN
  SELECT greatest(coalesce(pg_sequence_last_value('operation_transition_id_seq'), 0),
                  coalesce((SELECT max(id) FROM operation_transition_p0), 0))
    INTO last_id;
  ALTER TABLE operation_transition_p0 ALTER COLUMN id DROP IDENTITY;
  CREATE SEQUENCE operation_transition_id_seq AS bigint OWNED BY operation_transition.id;
  PERFORM setval('operation_transition_id_seq', last_id + 1, false);
  ALTER TABLE operation_transition ALTER COLUMN id SET DEFAULT nextval('operation_transition_id_seq'::regclass);
  EXECUTE format('ALTER TABLE operation_transition ATTACH PARTITION operation_transition_p0 FOR VALUES FROM (MINVALUE) TO (%s)', last_id + 1);
END
$$;
--> statement-breakpoint
-- Rows past every partition made ahead (a leader down for long) land here rather than fail; the
-- next partition is then made above them.
CREATE TABLE "operation_transition_default" PARTITION OF "operation_transition" DEFAULT;
--> statement-breakpoint
-- The append-only refusal names the history, not the partition a row happens to be in.
CREATE OR REPLACE FUNCTION opstate_refuse_update() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  root text;
BEGIN
  SELECT c.relname INTO root FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent
   WHERE i.inhrelid = TG_RELID;
  RAISE EXCEPTION '% is append-only: rows are never updated', coalesce(root, TG_TABLE_NAME)
    USING ERRCODE = 'restrict_violation';
END;
$$;
--> statement-breakpoint
-- The history's partitions with their bounds (null: open, or the default partition), lowest first.
CREATE OR REPLACE FUNCTION opstate_history_partitions()
RETURNS TABLE (name text, lower_id bigint, upper_id bigint, is_default boolean)
LANGUAGE sql STABLE AS $$
  SELECT c.relname::text,
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''(-?\d+)''\)'))[1]::bigint,
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''(-?\d+)''\)'))[1]::bigint,
         pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT'
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE i.inhparent = 'operation_transition'::regclass
   ORDER BY 4, 3 NULLS FIRST
$$;
--> statement-breakpoint
-- Rows in the default partition: there only when no partition had been made for their ids. As the
-- schema's owner, since the roles reach the history through its parent alone.
CREATE OR REPLACE FUNCTION opstate_history_spilled() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER AS $$
  SELECT count(*) FROM operation_transition_default
$$;
--> statement-breakpoint
-- Makes partitions ahead of the id sequence until `ahead` whole partitions are left above the next
-- id, each `history_retention.partition_ids` wide; returns how many it made. Rows that landed in
-- the default partition are stepped over: the next partition starts above them. Called by the
-- control plane's leader at every pass of its history loop, so the default partition stays empty;
-- runs as the schema's owner (the runtime's role may not create tables).
CREATE OR REPLACE FUNCTION opstate_history_extend(ahead integer DEFAULT 2) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  width bigint;
  next_id bigint;
  top bigint;
  spilled bigint;
  made integer := 0;
BEGIN
  -- One at a time, whichever leader or operator calls ('opsthist').
  PERFORM pg_advisory_xact_lock(8030045079406736244);
  SELECT partition_ids INTO width FROM history_retention WHERE id = 1;
  SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END INTO next_id
    FROM operation_transition_id_seq;
  SELECT max(upper_id) INTO top FROM opstate_history_partitions() WHERE NOT is_default;
  SELECT max(id) + 1 INTO spilled FROM operation_transition_default;
  top := greatest(top, spilled, 1);
  IF top - next_id >= ahead::bigint * width THEN
    RETURN 0;
  END IF;
  -- Attaching a partition adds its foreign key's trigger to operation, which needs a lock there.
  -- Writers lock operation, then the history; taking operation first keeps that order (taken the
  -- other way round, a writer whose row goes into the new partition and this attach wait on each
  -- other). Writes to operation wait the few milliseconds the attach takes.
  PERFORM set_config('lock_timeout', '2s', true);
  LOCK TABLE operation IN SHARE ROW EXCLUSIVE MODE;
  WHILE top - next_id < ahead::bigint * width LOOP
    EXECUTE format('CREATE TABLE %I (LIKE operation_transition INCLUDING DEFAULTS)', 'operation_transition_p' || top);
    EXECUTE format('ALTER TABLE operation_transition ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)',
                   'operation_transition_p' || top, top, top + width);
    top := top + width;
    made := made + 1;
  END LOOP;
  RETURN made;
END
$$;
--> statement-breakpoint
-- Drops the oldest partition of the history that the retention policy lets go, and reports every
-- partition it looked at on the way (`dropped` true for the one it dropped; at most one per call,
-- so a long pruning never holds the history's lock for more than one partition). A partition is
-- dropped only when it is whole (the sequence has passed its end), every row in it is older than
-- `now - keep`, every pipeline's cursor and the dispatch relay's have read its last row, and not one of
-- its rows belongs to an operation that is PENDING, SCHEDULED or IN_PROGRESS. That last check runs
-- under an ACCESS EXCLUSIVE lock on the history (waited for at most `lock_timeout` 2 s; operation
-- is locked against writes first, as the drop needs): every
-- status change writes its transition in the same statement, so while the lock is held no
-- operation can become live, and one that did before it is seen. With no policy (`keep` null) it
-- does nothing. Lineage, archive records and deletions are other tables and are never touched.
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
  LIVE_IN constant text := 'SELECT count(*) FROM operation o'
    ' WHERE o.status IN (''PENDING'', ''SCHEDULED'', ''IN_PROGRESS'')'
    ' AND EXISTS (SELECT 1 FROM %I t WHERE t.operation_id = o.id)';
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
REVOKE EXECUTE ON FUNCTION opstate_history_extend(integer) FROM PUBLIC;
--> statement-breakpoint
REVOKE EXECUTE ON FUNCTION opstate_history_prune(timestamptz) FROM PUBLIC;
--> statement-breakpoint
SELECT opstate_history_extend();
