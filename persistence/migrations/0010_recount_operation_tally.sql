-- Re-bases operation_tally on the rows: for when the counts no longer match what is stored,
-- because something wrote to operation with its triggers off (ALTER TABLE … DISABLE TRIGGER, or a
-- session under session_replication_role = replica). The scheduler's backpressure reads the tally,
-- so a count of SCHEDULED work that is too high holds scheduling back until this runs.
--
-- Writers do not wait for it. It counts the rows and replaces the tally rows in one statement,
-- so in one snapshot: the tally rows it deletes are exactly those of the writes it counted, and
-- the rows of writes that commit meanwhile stay, as the changes they count. Only a fold, which
-- also replaces tally rows, must not run beside it: both take the same transaction-level advisory
-- lock first, and each then reads in a snapshot taken after the other committed.
CREATE OR REPLACE FUNCTION opstate_fold_operation_tally() RETURNS bigint
LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(122528764032108); -- 'opsttl'
  WITH gone AS (
    DELETE FROM operation_tally RETURNING kind, status, n
  ), folded AS (
    INSERT INTO operation_tally (kind, status, n)
      SELECT kind, status, sum(n) FROM gone GROUP BY kind, status HAVING sum(n) <> 0
      RETURNING 1
  )
  SELECT count(*) FROM gone;
$$;
--> statement-breakpoint
-- Returns the kinds and statuses whose sum was wrong: what the tally said and what is stored.
CREATE OR REPLACE FUNCTION opstate_recount_operation_tally()
RETURNS TABLE (kind text, status text, tallied bigint, stored bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  PERFORM pg_advisory_xact_lock(122528764032108);
  RETURN QUERY
    WITH recounted AS (
      SELECT o.kind, o.status, count(*)::bigint AS n FROM operation o GROUP BY o.kind, o.status
    ), tallied AS (
      SELECT x.kind, x.status, sum(x.n)::bigint AS n FROM operation_tally x
      GROUP BY x.kind, x.status
    ), gone AS (
      DELETE FROM operation_tally
    ), rebased AS (
      INSERT INTO operation_tally (kind, status, n) SELECT r.kind, r.status, r.n FROM recounted r
    )
    SELECT coalesce(r.kind, t.kind), coalesce(r.status, t.status),
           coalesce(t.n, 0)::bigint, coalesce(r.n, 0)::bigint
    FROM recounted r FULL JOIN tallied t ON t.kind = r.kind AND t.status = r.status
    WHERE coalesce(t.n, 0) <> coalesce(r.n, 0)
    ORDER BY 1, 2;
END;
$$;
