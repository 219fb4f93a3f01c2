CREATE TABLE "bundling_operation" (
	"operation_id" uuid PRIMARY KEY NOT NULL,
	"kind" text DEFAULT 'data_transfer_package' NOT NULL,
	"data_transfer_package_id" uuid NOT NULL,
	"location_id" uuid NOT NULL,
	CONSTRAINT "bundling_operation_kind_check" CHECK ("bundling_operation"."kind" = 'data_transfer_package')
);
--> statement-breakpoint
CREATE TABLE "data_location" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"site" text NOT NULL,
	"name" text NOT NULL,
	"location_type" text NOT NULL,
	"storage_root" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "data_location_site_name_key" UNIQUE("site","name"),
	CONSTRAINT "data_location_type_check" CHECK ("data_location"."location_type" in ('source', 'buffer', 'long_term_archive', 'processing'))
);
--> statement-breakpoint
CREATE TABLE "data_transfer_package" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"checksum" text,
	"size" bigint,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "data_transfer_package_name_key" UNIQUE("name")
);
--> statement-breakpoint
CREATE TABLE "data_transfer_package_physical_copy" (
	"physical_copy_id" uuid PRIMARY KEY NOT NULL,
	"artifact_type" text DEFAULT 'data_transfer_package' NOT NULL,
	"data_transfer_package_id" uuid NOT NULL,
	CONSTRAINT "data_transfer_package_physical_copy_artifact_type_check" CHECK ("data_transfer_package_physical_copy"."artifact_type" = 'data_transfer_package')
);
--> statement-breakpoint
CREATE TABLE "dispatch_outbox" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "dispatch_outbox_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"operation_id" uuid NOT NULL,
	"attempt" integer NOT NULL,
	"queue" text NOT NULL,
	"operation_type" text NOT NULL,
	"location_type" text NOT NULL,
	"payload" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "dispatch_outbox_operation_attempt_key" UNIQUE("operation_id","attempt")
);
--> statement-breakpoint
CREATE TABLE "long_term_archive_operation" (
	"operation_id" uuid PRIMARY KEY NOT NULL,
	"kind" text DEFAULT 'long_term_archive' NOT NULL,
	"raw_data_package_id" uuid NOT NULL,
	"source_location_id" uuid NOT NULL,
	"destination_location_id" uuid NOT NULL,
	"archive_key" text,
	CONSTRAINT "long_term_archive_operation_kind_check" CHECK ("long_term_archive_operation"."kind" = 'long_term_archive')
);
--> statement-breakpoint
CREATE TABLE "operation" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"kind" text NOT NULL,
	"operation_type" text NOT NULL,
	"location_type" text NOT NULL,
	"status" text NOT NULL,
	"attempt" integer DEFAULT 1 NOT NULL,
	"retry_count" integer DEFAULT 0 NOT NULL,
	"max_retries" integer NOT NULL,
	"snapshot" jsonb NOT NULL,
	"machine_id" text NOT NULL,
	"machine_version" integer NOT NULL,
	"xstate_version" text NOT NULL,
	"version" integer DEFAULT 0 NOT NULL,
	"group_id" uuid,
	"not_before" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"scheduled_at" timestamp with time zone,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"last_error" jsonb,
	"worker_id" text,
	CONSTRAINT "operation_id_kind_key" UNIQUE("id","kind"),
	CONSTRAINT "operation_kind_check" CHECK ("operation"."kind" in ('raw_data_package', 'data_transfer_package', 'transfer', 'unpack', 'long_term_archive', 'staging')),
	CONSTRAINT "operation_status_check" CHECK ("operation"."status" in ('PENDING', 'SCHEDULED', 'IN_PROGRESS', 'COMPLETED', 'FAILED')),
	CONSTRAINT "operation_type_check" CHECK ("operation"."operation_type" in ('raw_data_package_creation', 'data_transfer_package_creation', 'data_transfer', 'data_transfer_unpacking', 'long_term_archive_transfer', 'staging')),
	CONSTRAINT "operation_location_type_check" CHECK ("operation"."location_type" in ('source', 'buffer', 'long_term_archive', 'processing')),
	CONSTRAINT "operation_attempt_check" CHECK ("operation"."attempt" >= 1)
);
--> statement-breakpoint
CREATE TABLE "operation_failure_event" (
	"kind" text NOT NULL,
	"operation_id" uuid NOT NULL,
	"attempt" integer NOT NULL,
	"error" jsonb NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "operation_failure_event_pkey" PRIMARY KEY("kind","operation_id","attempt"),
	CONSTRAINT "operation_failure_event_kind_check" CHECK ("operation_failure_event"."kind" in ('raw_data_package', 'data_transfer_package', 'transfer', 'unpack', 'long_term_archive', 'staging'))
);
--> statement-breakpoint
CREATE TABLE "operation_group" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text,
	"active" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"released_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "operation_input" (
	"operation_id" uuid NOT NULL,
	"physical_copy_id" uuid NOT NULL,
	CONSTRAINT "operation_input_pkey" PRIMARY KEY("operation_id","physical_copy_id")
);
--> statement-breakpoint
CREATE TABLE "operation_output" (
	"operation_id" uuid NOT NULL,
	"physical_copy_id" uuid NOT NULL,
	CONSTRAINT "operation_output_pkey" PRIMARY KEY("operation_id","physical_copy_id")
);
--> statement-breakpoint
CREATE TABLE "operation_step" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "operation_step_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"operation_id" uuid NOT NULL,
	"attempt" integer NOT NULL,
	"name" text NOT NULL,
	"state" text NOT NULL,
	"result" jsonb,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "operation_step_operation_name_key" UNIQUE("operation_id","name")
);
--> statement-breakpoint
CREATE TABLE "operation_transition" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "operation_transition_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"operation_id" uuid NOT NULL,
	"from_status" text,
	"to_status" text NOT NULL,
	"event" text NOT NULL,
	"attempt" integer NOT NULL,
	"by" text NOT NULL,
	"reason" text,
	"at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "packaging_operation" (
	"operation_id" uuid PRIMARY KEY NOT NULL,
	"kind" text DEFAULT 'raw_data_package' NOT NULL,
	"raw_data_package_id" uuid NOT NULL,
	"location_id" uuid NOT NULL,
	CONSTRAINT "packaging_operation_kind_check" CHECK ("packaging_operation"."kind" = 'raw_data_package')
);
--> statement-breakpoint
CREATE TABLE "physical_copy" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"artifact_type" text NOT NULL,
	"artifact_id" uuid NOT NULL,
	"location_id" uuid NOT NULL,
	"status" text DEFAULT 'PRESENT' NOT NULL,
	"path" text,
	"checksum" text,
	"size" bigint,
	"deletion_failure_count" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "physical_copy_id_artifact_key" UNIQUE("id","artifact_type","artifact_id"),
	CONSTRAINT "physical_copy_status_check" CHECK ("physical_copy"."status" in ('PRESENT', 'DELETION_SCHEDULED', 'DELETION_IN_PROGRESS', 'DELETED', 'DELETION_FAILED')),
	CONSTRAINT "physical_copy_artifact_type_check" CHECK ("physical_copy"."artifact_type" in ('raw_data_file', 'raw_data_package', 'data_transfer_package')),
	CONSTRAINT "physical_copy_deletion_failure_count_check" CHECK ("physical_copy"."deletion_failure_count" >= 0)
);
--> statement-breakpoint
CREATE TABLE "raw_data_file" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"raw_data_package_id" uuid,
	"checksum" text,
	"size" bigint,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "raw_data_file_physical_copy" (
	"physical_copy_id" uuid PRIMARY KEY NOT NULL,
	"artifact_type" text DEFAULT 'raw_data_file' NOT NULL,
	"raw_data_file_id" uuid NOT NULL,
	CONSTRAINT "raw_data_file_physical_copy_artifact_type_check" CHECK ("raw_data_file_physical_copy"."artifact_type" = 'raw_data_file')
);
--> statement-breakpoint
CREATE TABLE "raw_data_package" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"data_transfer_package_id" uuid,
	"checksum" text,
	"size" bigint,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "raw_data_package_name_key" UNIQUE("name")
);
--> statement-breakpoint
CREATE TABLE "raw_data_package_physical_copy" (
	"physical_copy_id" uuid PRIMARY KEY NOT NULL,
	"artifact_type" text DEFAULT 'raw_data_package' NOT NULL,
	"raw_data_package_id" uuid NOT NULL,
	CONSTRAINT "raw_data_package_physical_copy_artifact_type_check" CHECK ("raw_data_package_physical_copy"."artifact_type" = 'raw_data_package')
);
--> statement-breakpoint
CREATE TABLE "staging_operation" (
	"operation_id" uuid PRIMARY KEY NOT NULL,
	"kind" text DEFAULT 'staging' NOT NULL,
	"raw_data_package_id" uuid NOT NULL,
	"source_location_id" uuid NOT NULL,
	"destination_location_id" uuid NOT NULL,
	CONSTRAINT "staging_operation_kind_check" CHECK ("staging_operation"."kind" = 'staging')
);
--> statement-breakpoint
CREATE TABLE "transfer_operation" (
	"operation_id" uuid PRIMARY KEY NOT NULL,
	"kind" text DEFAULT 'transfer' NOT NULL,
	"data_transfer_package_id" uuid NOT NULL,
	"source_location_id" uuid NOT NULL,
	"destination_location_id" uuid NOT NULL,
	CONSTRAINT "transfer_operation_kind_check" CHECK ("transfer_operation"."kind" = 'transfer')
);
--> statement-breakpoint
CREATE TABLE "unpack_operation" (
	"operation_id" uuid PRIMARY KEY NOT NULL,
	"kind" text DEFAULT 'unpack' NOT NULL,
	"data_transfer_package_id" uuid NOT NULL,
	"location_id" uuid NOT NULL,
	CONSTRAINT "unpack_operation_kind_check" CHECK ("unpack_operation"."kind" = 'unpack')
);
--> statement-breakpoint
ALTER TABLE "bundling_operation" ADD CONSTRAINT "bundling_operation_base_fk" FOREIGN KEY ("operation_id","kind") REFERENCES "public"."operation"("id","kind") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "bundling_operation" ADD CONSTRAINT "bundling_operation_data_transfer_package_id_fk" FOREIGN KEY ("data_transfer_package_id") REFERENCES "public"."data_transfer_package"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "bundling_operation" ADD CONSTRAINT "bundling_operation_location_id_fk" FOREIGN KEY ("location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "data_transfer_package_physical_copy" ADD CONSTRAINT "data_transfer_package_physical_copy_base_fk" FOREIGN KEY ("physical_copy_id","artifact_type","data_transfer_package_id") REFERENCES "public"."physical_copy"("id","artifact_type","artifact_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "data_transfer_package_physical_copy" ADD CONSTRAINT "data_transfer_package_physical_copy_artifact_fk" FOREIGN KEY ("data_transfer_package_id") REFERENCES "public"."data_transfer_package"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "dispatch_outbox" ADD CONSTRAINT "dispatch_outbox_operation_id_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "long_term_archive_operation" ADD CONSTRAINT "long_term_archive_operation_base_fk" FOREIGN KEY ("operation_id","kind") REFERENCES "public"."operation"("id","kind") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "long_term_archive_operation" ADD CONSTRAINT "long_term_archive_operation_raw_data_package_id_fk" FOREIGN KEY ("raw_data_package_id") REFERENCES "public"."raw_data_package"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "long_term_archive_operation" ADD CONSTRAINT "long_term_archive_operation_source_location_id_fk" FOREIGN KEY ("source_location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "long_term_archive_operation" ADD CONSTRAINT "long_term_archive_operation_destination_location_id_fk" FOREIGN KEY ("destination_location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation" ADD CONSTRAINT "operation_group_id_operation_group_id_fk" FOREIGN KEY ("group_id") REFERENCES "public"."operation_group"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_failure_event" ADD CONSTRAINT "operation_failure_event_operation_fk" FOREIGN KEY ("operation_id","kind") REFERENCES "public"."operation"("id","kind") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_input" ADD CONSTRAINT "operation_input_operation_id_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_input" ADD CONSTRAINT "operation_input_physical_copy_id_physical_copy_id_fk" FOREIGN KEY ("physical_copy_id") REFERENCES "public"."physical_copy"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_output" ADD CONSTRAINT "operation_output_operation_id_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_output" ADD CONSTRAINT "operation_output_physical_copy_id_physical_copy_id_fk" FOREIGN KEY ("physical_copy_id") REFERENCES "public"."physical_copy"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_step" ADD CONSTRAINT "operation_step_operation_id_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_transition" ADD CONSTRAINT "operation_transition_operation_id_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "packaging_operation" ADD CONSTRAINT "packaging_operation_base_fk" FOREIGN KEY ("operation_id","kind") REFERENCES "public"."operation"("id","kind") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "packaging_operation" ADD CONSTRAINT "packaging_operation_raw_data_package_id_fk" FOREIGN KEY ("raw_data_package_id") REFERENCES "public"."raw_data_package"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "packaging_operation" ADD CONSTRAINT "packaging_operation_location_id_fk" FOREIGN KEY ("location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "physical_copy" ADD CONSTRAINT "physical_copy_location_id_data_location_id_fk" FOREIGN KEY ("location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "raw_data_file" ADD CONSTRAINT "raw_data_file_raw_data_package_id_raw_data_package_id_fk" FOREIGN KEY ("raw_data_package_id") REFERENCES "public"."raw_data_package"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "raw_data_file_physical_copy" ADD CONSTRAINT "raw_data_file_physical_copy_base_fk" FOREIGN KEY ("physical_copy_id","artifact_type","raw_data_file_id") REFERENCES "public"."physical_copy"("id","artifact_type","artifact_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "raw_data_file_physical_copy" ADD CONSTRAINT "raw_data_file_physical_copy_artifact_fk" FOREIGN KEY ("raw_data_file_id") REFERENCES "public"."raw_data_file"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "raw_data_package" ADD CONSTRAINT "raw_data_package_dtp_fk" FOREIGN KEY ("data_transfer_package_id") REFERENCES "public"."data_transfer_package"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "raw_data_package_physical_copy" ADD CONSTRAINT "raw_data_package_physical_copy_base_fk" FOREIGN KEY ("physical_copy_id","artifact_type","raw_data_package_id") REFERENCES "public"."physical_copy"("id","artifact_type","artifact_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "raw_data_package_physical_copy" ADD CONSTRAINT "raw_data_package_physical_copy_artifact_fk" FOREIGN KEY ("raw_data_package_id") REFERENCES "public"."raw_data_package"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "staging_operation" ADD CONSTRAINT "staging_operation_base_fk" FOREIGN KEY ("operation_id","kind") REFERENCES "public"."operation"("id","kind") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "staging_operation" ADD CONSTRAINT "staging_operation_raw_data_package_id_fk" FOREIGN KEY ("raw_data_package_id") REFERENCES "public"."raw_data_package"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "staging_operation" ADD CONSTRAINT "staging_operation_source_location_id_fk" FOREIGN KEY ("source_location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "staging_operation" ADD CONSTRAINT "staging_operation_destination_location_id_fk" FOREIGN KEY ("destination_location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "transfer_operation" ADD CONSTRAINT "transfer_operation_base_fk" FOREIGN KEY ("operation_id","kind") REFERENCES "public"."operation"("id","kind") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "transfer_operation" ADD CONSTRAINT "transfer_operation_data_transfer_package_id_fk" FOREIGN KEY ("data_transfer_package_id") REFERENCES "public"."data_transfer_package"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "transfer_operation" ADD CONSTRAINT "transfer_operation_source_location_id_fk" FOREIGN KEY ("source_location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "transfer_operation" ADD CONSTRAINT "transfer_operation_destination_location_id_fk" FOREIGN KEY ("destination_location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "unpack_operation" ADD CONSTRAINT "unpack_operation_base_fk" FOREIGN KEY ("operation_id","kind") REFERENCES "public"."operation"("id","kind") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "unpack_operation" ADD CONSTRAINT "unpack_operation_data_transfer_package_id_fk" FOREIGN KEY ("data_transfer_package_id") REFERENCES "public"."data_transfer_package"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "unpack_operation" ADD CONSTRAINT "unpack_operation_location_id_fk" FOREIGN KEY ("location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "bundling_operation_artifact_idx" ON "bundling_operation" USING btree ("data_transfer_package_id");--> statement-breakpoint
CREATE INDEX "data_transfer_package_physical_copy_artifact_idx" ON "data_transfer_package_physical_copy" USING btree ("data_transfer_package_id");--> statement-breakpoint
CREATE INDEX "long_term_archive_operation_artifact_idx" ON "long_term_archive_operation" USING btree ("raw_data_package_id");--> statement-breakpoint
CREATE INDEX "operation_due_idx" ON "operation" USING btree ("not_before" NULLS FIRST,"created_at") WHERE status = 'PENDING';--> statement-breakpoint
CREATE INDEX "operation_active_idx" ON "operation" USING btree ("status","started_at") WHERE status in ('SCHEDULED', 'IN_PROGRESS');--> statement-breakpoint
CREATE INDEX "operation_kind_status_idx" ON "operation" USING btree ("kind","status");--> statement-breakpoint
CREATE INDEX "operation_group_idx" ON "operation" USING btree ("group_id") WHERE group_id is not null;--> statement-breakpoint
CREATE INDEX "operation_failure_event_operation_idx" ON "operation_failure_event" USING btree ("operation_id");--> statement-breakpoint
CREATE INDEX "operation_input_copy_idx" ON "operation_input" USING btree ("physical_copy_id");--> statement-breakpoint
CREATE INDEX "operation_output_copy_idx" ON "operation_output" USING btree ("physical_copy_id");--> statement-breakpoint
CREATE INDEX "operation_transition_operation_idx" ON "operation_transition" USING btree ("operation_id","id");--> statement-breakpoint
CREATE INDEX "packaging_operation_artifact_idx" ON "packaging_operation" USING btree ("raw_data_package_id");--> statement-breakpoint
CREATE UNIQUE INDEX "physical_copy_live_key" ON "physical_copy" USING btree ("artifact_type","artifact_id","location_id") WHERE status <> 'DELETED';--> statement-breakpoint
CREATE INDEX "physical_copy_artifact_idx" ON "physical_copy" USING btree ("artifact_id");--> statement-breakpoint
CREATE INDEX "physical_copy_location_idx" ON "physical_copy" USING btree ("location_id");--> statement-breakpoint
CREATE INDEX "raw_data_file_package_idx" ON "raw_data_file" USING btree ("raw_data_package_id");--> statement-breakpoint
CREATE INDEX "raw_data_file_physical_copy_artifact_idx" ON "raw_data_file_physical_copy" USING btree ("raw_data_file_id");--> statement-breakpoint
CREATE INDEX "raw_data_package_dtp_idx" ON "raw_data_package" USING btree ("data_transfer_package_id");--> statement-breakpoint
CREATE INDEX "raw_data_package_physical_copy_artifact_idx" ON "raw_data_package_physical_copy" USING btree ("raw_data_package_id");--> statement-breakpoint
CREATE INDEX "staging_operation_artifact_idx" ON "staging_operation" USING btree ("raw_data_package_id");--> statement-breakpoint
CREATE INDEX "transfer_operation_artifact_idx" ON "transfer_operation" USING btree ("data_transfer_package_id");--> statement-breakpoint
CREATE INDEX "unpack_operation_artifact_idx" ON "unpack_operation" USING btree ("data_transfer_package_id");