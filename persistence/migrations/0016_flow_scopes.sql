-- Flow-limit scopes read by location first. `operation_pending_scope_idx`: PENDING work by
-- (target location, kind), each scope in claim order (priority, then due order); the claim reads
-- a scope with little room from it, only as many rows as the scope has room for, and never reads
-- the backlog of a full one. It replaces operation_pending_target_idx ((kind, target) of PENDING
-- work), whose readers name both columns, so a PENDING operation costs no more index entries.
-- `operation_target_live_idx` is rebuilt as (target location, kind): the claim counts the live
-- work of the limited locations as one range per location instead of reading every live entry.
DROP INDEX "operation_pending_target_idx";--> statement-breakpoint
DROP INDEX "operation_target_live_idx";--> statement-breakpoint
CREATE INDEX "operation_pending_scope_idx" ON "operation" USING btree ("target_location_id","kind","priority" DESC NULLS LAST,"not_before" NULLS FIRST,"created_at") WHERE status = 'PENDING';--> statement-breakpoint
CREATE INDEX "operation_target_live_idx" ON "operation" USING btree ("target_location_id","kind") WHERE status in ('SCHEDULED', 'IN_PROGRESS');