-- A raw data package's files are all registered at a location: the fact a declared pipeline's entry
-- stage (its packaging) is created from. One row per package, written once by the caller;
-- `packaging_operation_id` is set by the pipeline's pass in the transaction that creates that
-- packaging (or adopts one that exists), so an unconsumed fact is what a pass has left to do. The
-- partial index holds only those.
CREATE TABLE "package_files_complete" (
	"raw_data_package_id" uuid PRIMARY KEY NOT NULL,
	"location_id" uuid NOT NULL,
	"declared_by" text NOT NULL,
	"declared_at" timestamp with time zone DEFAULT now() NOT NULL,
	"packaging_operation_id" uuid
);
--> statement-breakpoint
ALTER TABLE "package_files_complete" ADD CONSTRAINT "package_files_complete_raw_data_package_id_raw_data_package_id_fk" FOREIGN KEY ("raw_data_package_id") REFERENCES "public"."raw_data_package"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "package_files_complete" ADD CONSTRAINT "package_files_complete_location_id_data_location_id_fk" FOREIGN KEY ("location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "package_files_complete" ADD CONSTRAINT "package_files_complete_packaging_operation_id_operation_id_fk" FOREIGN KEY ("packaging_operation_id") REFERENCES "public"."operation"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "package_files_complete_due_idx" ON "package_files_complete" USING btree ("location_id","declared_at") WHERE packaging_operation_id is null;