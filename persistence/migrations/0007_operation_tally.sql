CREATE TABLE "operation_tally" (
	"kind" text NOT NULL,
	"status" text NOT NULL,
	"n" bigint NOT NULL
);
--> statement-breakpoint
-- Writers wait here until the count below is taken with the triggers in place: no change is
-- counted twice or missed.
LOCK TABLE operation IN SHARE ROW EXCLUSIVE MODE;
--> statement-breakpoint
-- One row per kind and status a statement changed: + for the rows it brought into that status,
-- − for those it took out; the counts are the sums per kind and status. Inserts and deletes share
-- one function (both triggers name their rows opstate_rows).
CREATE OR REPLACE FUNCTION opstate_tally_added_or_removed_operations() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO operation_tally (kind, status, n)
    SELECT kind, status, CASE TG_OP WHEN 'DELETE' THEN -count(*) ELSE count(*) END
    FROM opstate_rows GROUP BY kind, status;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER operation_tally_on_insert AFTER INSERT ON operation
  REFERENCING NEW TABLE AS opstate_rows
  FOR EACH STATEMENT EXECUTE FUNCTION opstate_tally_added_or_removed_operations();
--> statement-breakpoint
CREATE TRIGGER operation_tally_on_delete AFTER DELETE ON operation
  REFERENCING OLD TABLE AS opstate_rows
  FOR EACH STATEMENT EXECUTE FUNCTION opstate_tally_added_or_removed_operations();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION opstate_tally_updated_operations() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO operation_tally (kind, status, n)
    SELECT kind, status, sum(n) FROM (
      SELECT kind, status, -1 AS n FROM opstate_before
      UNION ALL
      SELECT kind, status, 1 AS n FROM opstate_after
    ) AS moved
    GROUP BY kind, status
    HAVING sum(n) <> 0;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER operation_tally_on_update AFTER UPDATE ON operation
  REFERENCING OLD TABLE AS opstate_before NEW TABLE AS opstate_after
  FOR EACH STATEMENT EXECUTE FUNCTION opstate_tally_updated_operations();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION opstate_tally_truncated_operations() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM operation_tally;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER operation_tally_on_truncate AFTER TRUNCATE ON operation
  FOR EACH STATEMENT EXECUTE FUNCTION opstate_tally_truncated_operations();
--> statement-breakpoint
-- Folds the rows into one per kind and status (none for a pair that adds up to 0), in one
-- statement: rows a writer has not committed yet are not seen, so they stay as they are. Returns
-- how many rows it folded.
CREATE OR REPLACE FUNCTION opstate_fold_operation_tally() RETURNS bigint
LANGUAGE sql AS $$
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
-- The operations stored before this migration.
INSERT INTO operation_tally (kind, status, n)
  SELECT kind, status, count(*) FROM operation GROUP BY kind, status;
