-- The list index of operations per kind and status leaves out the live statuses (SCHEDULED,
-- IN_PROGRESS): every operation passes through both, and each entry cost SCHEDULE and START an
-- index write. Lists of live work read operation_active_idx. Building the new index holds writes
-- to operation until it is built (a few seconds at millions of operations).
DROP INDEX "operation_kind_status_created_idx";--> statement-breakpoint
CREATE INDEX "operation_kind_status_created_idx" ON "operation" USING btree ("kind","status","created_at","id") WHERE status not in ('SCHEDULED', 'IN_PROGRESS');