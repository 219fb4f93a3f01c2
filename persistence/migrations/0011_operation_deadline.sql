-- An operation may carry its own deadline (ms from an attempt's START; null: its kind's). The
-- column is new and null on every row, so the check is added NOT VALID: it holds for every write
-- from here on, and skips a scan of the table (under its exclusive lock) that could find nothing.
ALTER TABLE "operation" ADD COLUMN "deadline_ms" integer;--> statement-breakpoint
ALTER TABLE "operation" ADD CONSTRAINT "operation_deadline_ms_check" CHECK ("operation"."deadline_ms" between 1 and 604800000) NOT VALID;
