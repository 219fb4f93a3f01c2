DROP INDEX "operation_kind_status_idx";--> statement-breakpoint
ALTER TABLE "operation" ADD COLUMN "status_changed_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
UPDATE "operation" o SET "status_changed_at" = t."at" FROM (SELECT DISTINCT ON ("operation_id") "operation_id", "at" FROM "operation_transition" ORDER BY "operation_id", "id" DESC) t WHERE t."operation_id" = o."id";--> statement-breakpoint
CREATE INDEX "operation_kind_status_created_idx" ON "operation" USING btree ("kind","status","created_at","id");--> statement-breakpoint
CREATE INDEX "operation_failed_idx" ON "operation" USING btree ("finished_at","id") WHERE status = 'FAILED' and coalesce(last_error->>'code', '') <> 'CANCELLED';--> statement-breakpoint
CREATE INDEX "operation_retry_cap_idx" ON "operation" USING btree ("id") WHERE status in ('PENDING', 'SCHEDULED', 'IN_PROGRESS') and retry_count > 0 and retry_count >= max_retries;--> statement-breakpoint
CREATE INDEX "operation_pending_due_idx" ON "operation" USING btree (greatest(not_before, status_changed_at),"id") WHERE status = 'PENDING';--> statement-breakpoint
CREATE INDEX "operation_pending_target_idx" ON "operation" USING btree ("kind","target_location_id") WHERE status = 'PENDING';--> statement-breakpoint
CREATE INDEX "physical_copy_deletion_failed_idx" ON "physical_copy" USING btree ("updated_at","id") WHERE status = 'DELETION_FAILED';