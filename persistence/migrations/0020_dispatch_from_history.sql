-- A dispatch no longer has a row of its own. The SCHEDULE transition already records it (the
-- operation, the attempt, the time; the queue and the message follow from the operation), so the
-- relay reads those transitions past `dispatch_relay_cursor.after_id` instead of inserting, reading
-- and deleting one outbox row per dispatch. The cursor starts just before the oldest dispatch the
-- outbox still held, so nothing queued before the upgrade is lost (an operation that has moved on
-- since is passed over, as the outbox relay dropped its row); with an empty outbox it starts at the
-- newest transition.
CREATE TABLE "dispatch_relay_cursor" (
	"id" smallint PRIMARY KEY DEFAULT 1 NOT NULL,
	"after_id" bigint NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "dispatch_relay_cursor_one_row" CHECK ("dispatch_relay_cursor"."id" = 1)
);
--> statement-breakpoint
INSERT INTO "dispatch_relay_cursor" ("id", "after_id")
SELECT 1, coalesce(
	(SELECT min(t.id) - 1 FROM "dispatch_outbox" b
		JOIN "operation_transition" t
			ON t.operation_id = b.operation_id AND t.to_status = 'SCHEDULED' AND t.attempt = b.attempt),
	(SELECT max(id) FROM "operation_transition"),
	0);
--> statement-breakpoint
DROP TABLE "dispatch_outbox" CASCADE;
--> statement-breakpoint
-- The relay's barrier, one round trip: when no transaction holds the dispatch write lock
-- (`lock_key`) shared, takes it exclusively and reads the newest transition id; while one does, it
-- returns null at once rather than wait (a waiting exclusive request would queue every claim behind
-- it, and a claim frozen mid-transaction would then stop all scheduling). A VOLATILE function's
-- every query takes a fresh snapshot, so the read sees every commit before the lock was taken; the
-- lock is the transaction's and ends with the statement that called it.
CREATE OR REPLACE FUNCTION opstate_dispatch_barrier(lock_key bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF NOT pg_try_advisory_xact_lock(lock_key) THEN
    RETURN NULL;
  END IF;
  RETURN (SELECT coalesce(max(id), 0) FROM operation_transition);
END
$$;
