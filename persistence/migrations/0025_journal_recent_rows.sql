-- The journal prune's check that a span holds nothing recent read both of its partitions whole,
-- once before its lock and once more under it, while every status change waited: a stall that
-- grew with the span (a writer waited 211–325 ms at two million steps). A block-range index on `at` of both
-- tables answers "is any row at or after the cutoff" from its summaries and the few block ranges
-- not yet summarized, which hold any row written since; autosummarize keeps that tail short.
CREATE INDEX "operation_failure_event_at_brin" ON "operation_failure_event" USING brin ("at") WITH (autosummarize=true);--> statement-breakpoint
CREATE INDEX "operation_step_at_brin" ON "operation_step" USING brin ("at") WITH (autosummarize=true);--> statement-breakpoint
-- Whether a span of the journal holds a step or breadcrumb recorded at or after `cutoff`, read
-- through the block-range indexes: ranges whose summary ends before the cutoff are not read; a
-- range not yet summarized is read whole, so a row written since the last summary is never missed.
CREATE OR REPLACE FUNCTION opstate_journal_recent(part_suffix text, cutoff timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  recent boolean;
  seqscan text := current_setting('enable_seqscan');
BEGIN
  -- The plan must be the index's: a sequential scan would read the span whole.
  PERFORM set_config('enable_seqscan', 'off', true);
  EXECUTE format('SELECT EXISTS (SELECT 1 FROM %1$I WHERE at >= $1) OR EXISTS (SELECT 1 FROM %2$I WHERE at >= $1)',
                 'operation_step_' || part_suffix, 'operation_failure_event_' || part_suffix)
    INTO recent USING cutoff;
  PERFORM set_config('enable_seqscan', seqscan, true);
  RETURN recent;
END
$$;
--> statement-breakpoint
-- Summarizes the block ranges of a span's partitions that are not yet summarized (the tail written
-- since autovacuum last did), so the check under the prune's lock reads summaries only.
CREATE OR REPLACE FUNCTION opstate_journal_summarize(part_suffix text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  ix regclass;
BEGIN
  FOR ix IN SELECT x.indexrelid::regclass FROM pg_index x JOIN pg_inherits i ON i.inhrelid = x.indexrelid
             WHERE i.inhparent IN ('operation_step_at_brin'::regclass, 'operation_failure_event_at_brin'::regclass)
               AND x.indrelid IN (to_regclass(quote_ident('operation_step_' || part_suffix)),
                                  to_regclass(quote_ident('operation_failure_event_' || part_suffix))) LOOP
    PERFORM brin_summarize_new_values(ix);
  END LOOP;
END
$$;
--> statement-breakpoint
-- Why a span's journal must stay, or NULL: an operation in its range of ids is live (found from
-- the partial indexes of the live statuses; one IN over all three would read every operation), or
-- a step or breadcrumb in it was recorded at or after `cutoff`. The prune asks before its lock and
-- again under it.
CREATE OR REPLACE FUNCTION opstate_journal_held(part_suffix text, lower uuid, upper uuid,
                                                cutoff timestamptz, keep_for interval) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  live bigint;
  -- Run as dynamic SQL, planned for the span's own bounds each time (as in 0024).
  LIVE_IN constant text := 'SELECT (SELECT count(*) FROM operation o WHERE o.status = ''PENDING'''
    ' AND ($1 IS NULL OR o.id >= $1) AND o.id < $2)'
    ' + (SELECT count(*) FROM operation o WHERE o.status IN (''SCHEDULED'', ''IN_PROGRESS'')'
    ' AND ($1 IS NULL OR o.id >= $1) AND o.id < $2)';
BEGIN
  EXECUTE LIVE_IN INTO live USING lower, upper;
  IF live > 0 THEN
    RETURN format('holds the journal of %s live operation(s)', live);
  END IF;
  IF opstate_journal_recent(part_suffix, cutoff) THEN
    RETURN 'holds steps or failures recorded in the last ' || keep_for::text;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
-- As in 0024, with the recent-rows checks read through the block-range indexes: before the lock
-- (a span held by a recent row is passed over without being read), and under it, where only
-- what was written since the summaries is read. The span is counted whole once, before the lock,
-- and only when it is about to go.
CREATE OR REPLACE FUNCTION opstate_journal_prune(now_at timestamptz DEFAULT now())
RETURNS TABLE (suffix text, lower_id uuid, upper_id uuid, rows_in bigint, newest timestamptz,
               dropped boolean, reason text)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  keep_for interval;
  cutoff timestamptz;
  p record;
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
    reason := opstate_journal_held(p.suffix, p.lower_id, p.upper_id, cutoff, keep_for);
    IF reason IS NOT NULL THEN
      RETURN NEXT;
      RETURN;
    END IF;
    EXECUTE format(COUNT_SQL, 'operation_step_' || p.suffix, 'operation_failure_event_' || p.suffix)
      INTO rows_in, newest;
    PERFORM opstate_journal_summarize(p.suffix);
    PERFORM set_config('lock_timeout', '2s', true);
    -- operation first, as writers take it (see opstate_history_prune).
    LOCK TABLE operation IN SHARE ROW EXCLUSIVE MODE;
    LOCK TABLE operation_step, operation_failure_event IN ACCESS EXCLUSIVE MODE;
    -- What changed since the read: a status change committed before the lock, or a breadcrumb
    -- (a failure recorded as its operation finished, or by a handler at any time), in a range
    -- summarized since or in one not yet summarized.
    reason := opstate_journal_held(p.suffix, p.lower_id, p.upper_id, cutoff, keep_for);
    IF reason IS NOT NULL THEN
      RETURN NEXT;
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
REVOKE EXECUTE ON FUNCTION opstate_journal_recent(text, timestamptz) FROM PUBLIC;
--> statement-breakpoint
REVOKE EXECUTE ON FUNCTION opstate_journal_summarize(text) FROM PUBLIC;
--> statement-breakpoint
REVOKE EXECUTE ON FUNCTION opstate_journal_held(text, uuid, uuid, timestamptz, interval) FROM PUBLIC;
