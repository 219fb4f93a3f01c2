-- A declared pipeline. `pipeline_cursor`: where a pipeline's leader pass stands in the transition
-- history (every completion at or below `after_id` has had its next stages created), written in the
-- transaction that creates them. `operation.pipeline_subject_id`: the artifact a pipeline-created
-- operation acts on, null on every other (so every existing row, and every operation a caller
-- submits, is outside the key). `operation_pipeline_live_key`: at most one live operation per
-- (kind, subject, target location) among those a pipeline created. The column is new and null on
-- every row, so the index is built over no entry.
CREATE TABLE "pipeline_cursor" (
	"name" text PRIMARY KEY NOT NULL,
	"after_id" bigint NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "pipeline_cursor_after_check" CHECK ("pipeline_cursor"."after_id" >= 0)
);
--> statement-breakpoint
ALTER TABLE "operation" ADD COLUMN "pipeline_subject_id" uuid;--> statement-breakpoint
CREATE UNIQUE INDEX "operation_pipeline_live_key" ON "operation" USING btree ("kind","pipeline_subject_id","target_location_id") WHERE pipeline_subject_id is not null and status in ('PENDING', 'SCHEDULED', 'IN_PROGRESS');
