-- The prunes of the history (0024) and of the journal (0025) again, with the lock on operation
-- they end up needing taken at once. Dropping a partition removes its foreign key's triggers from
-- operation, and removing a trigger takes operation ACCESS EXCLUSIVE. The prunes took SHARE ROW
-- EXCLUSIVE first, which lets a transaction holding ROW SHARE (a claim that has locked its rows
-- FOR UPDATE) run on, and upgraded at the drop: the claim, writing its rows next, waited on the
-- prune's lock while the prune's upgrade waited on the claim's, and the server rolled one back
-- (a claim, in the test suite's logs). Asked for whole, the lock lets such a transaction ahead of
-- it (Postgres grants a lock to a transaction whose held locks conflict with a waiting request
-- before that request), so the claim finishes and the prune goes on. Readers of operation wait
-- for it as they waited for the drop; they now also wait through the few probes made under it.
--
-- A reader of the history or the journal that then reads operation may hold what the prune asks
-- for next while it waits on operation: that second wait gives up after 200 ms, well before the
-- server looks for a deadlock (deadlock_timeout, 1 s by default), and the prune is refused as
-- before (CONFLICT, retried at the next pass).
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
    -- Dropping the partition removes its foreign key's triggers from operation, which takes
    -- operation ACCESS EXCLUSIVE: that lock is taken first and whole (see the header).
    PERFORM set_config('lock_timeout', '2s', true);
    LOCK TABLE operation IN ACCESS EXCLUSIVE MODE;
    PERFORM set_config('lock_timeout', '200ms', true);
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
    -- As in opstate_history_prune: operation whole first, then the journal, briefly.
    PERFORM set_config('lock_timeout', '2s', true);
    LOCK TABLE operation IN ACCESS EXCLUSIVE MODE;
    PERFORM set_config('lock_timeout', '200ms', true);
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
