DROP INDEX "operation_kind_status_idx";--> statement-breakpoint
CREATE INDEX "operation_kind_status_created_idx" ON "operation" USING btree ("kind","status","created_at","id");--> statement-breakpoint
CREATE INDEX "operation_failed_idx" ON "operation" USING btree ("finished_at","id") WHERE status = 'FAILED' and coalesce(last_error->>'code', '') <> 'CANCELLED';--> statement-breakpoint
CREATE INDEX "operation_retry_cap_idx" ON "operation" USING btree ("id") WHERE status in ('PENDING', 'SCHEDULED', 'IN_PROGRESS') and retry_count > 0 and retry_count >= max_retries;--> statement-breakpoint
CREATE INDEX "operation_pending_target_idx" ON "operation" USING btree ("kind","target_location_id") WHERE status = 'PENDING';--> statement-breakpoint
CREATE INDEX "physical_copy_deletion_failed_idx" ON "physical_copy" USING btree ("updated_at","id") WHERE status = 'DELETION_FAILED';