-- Rollback up a pipeline's lineage. `pipeline_rollback`: who asked that an artifact's copies be
-- produced again from a stage on, when, and the plan shown (the operations redone, the copies
-- superseded). `operation.superseded_by`: the rollback that redoes an operation; the pipeline's pass
-- then neither reads its completion nor counts it as existing. `operation.rollback_id`: the rollback
-- an operation was created for. Both columns are new and null on every row; their foreign keys are
-- added NOT VALID, so adding them reads no existing operation under the table's lock (every write
-- from here on is checked).
CREATE TABLE "pipeline_rollback" (
	"id" uuid PRIMARY KEY NOT NULL,
	"pipeline" text NOT NULL,
	"artifact_type" text NOT NULL,
	"artifact_id" uuid NOT NULL,
	"stage" text NOT NULL,
	"requested_by" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"plan" jsonb NOT NULL,
	CONSTRAINT "pipeline_rollback_artifact_type_check" CHECK ("pipeline_rollback"."artifact_type" in ('raw_data_package', 'data_transfer_package'))
);
--> statement-breakpoint
ALTER TABLE "operation" ADD COLUMN "superseded_by" uuid;--> statement-breakpoint
ALTER TABLE "operation" ADD COLUMN "rollback_id" uuid;--> statement-breakpoint
CREATE INDEX "pipeline_rollback_artifact_idx" ON "pipeline_rollback" USING btree ("artifact_id","created_at");--> statement-breakpoint
ALTER TABLE "operation" ADD CONSTRAINT "operation_superseded_by_pipeline_rollback_id_fk" FOREIGN KEY ("superseded_by") REFERENCES "public"."pipeline_rollback"("id") ON DELETE no action ON UPDATE no action NOT VALID;--> statement-breakpoint
ALTER TABLE "operation" ADD CONSTRAINT "operation_rollback_id_pipeline_rollback_id_fk" FOREIGN KEY ("rollback_id") REFERENCES "public"."pipeline_rollback"("id") ON DELETE no action ON UPDATE no action NOT VALID;--> statement-breakpoint
CREATE INDEX "operation_rollback_idx" ON "operation" USING btree ("rollback_id") WHERE rollback_id is not null;