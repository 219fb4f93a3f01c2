-- Flow control. `flow_limit`: how many operations may be live (SCHEDULED or IN_PROGRESS) at once on
-- a location, of one kind or of any kind (a null kind); the scheduler locks the rows that apply to a
-- claim and counts live work under that lock. `operation.priority`: higher is claimed first. The
-- column's default fills every existing row without a rewrite, and the check, which 0 passes, is
-- added NOT VALID: it holds for every write from here on without a scan under the table's lock.
CREATE TABLE "flow_limit" (
	"location_id" uuid NOT NULL,
	"kind" text,
	"max_live" integer NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_by" text NOT NULL,
	CONSTRAINT "flow_limit_scope_key" UNIQUE NULLS NOT DISTINCT("location_id","kind"),
	CONSTRAINT "flow_limit_kind_check" CHECK ("flow_limit"."kind" is null or "flow_limit"."kind" in ('raw_data_package', 'data_transfer_package', 'transfer', 'unpack', 'long_term_archive', 'staging')),
	CONSTRAINT "flow_limit_max_live_check" CHECK ("flow_limit"."max_live" between 0 and 1000000)
);
--> statement-breakpoint
ALTER TABLE "operation" ADD COLUMN "priority" smallint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "flow_limit" ADD CONSTRAINT "flow_limit_location_id_data_location_id_fk" FOREIGN KEY ("location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "operation_priority_due_idx" ON "operation" USING btree ("priority" DESC NULLS LAST,"not_before" NULLS FIRST,"created_at") WHERE status = 'PENDING';--> statement-breakpoint
ALTER TABLE "operation" ADD CONSTRAINT "operation_priority_check" CHECK ("operation"."priority" between -100 and 100) NOT VALID;