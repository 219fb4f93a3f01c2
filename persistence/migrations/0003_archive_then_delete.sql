CREATE TABLE "archive_record" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "archive_record_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"operation_id" uuid NOT NULL,
	"attempt" integer,
	"generation" integer DEFAULT 1 NOT NULL,
	"state" text NOT NULL,
	"by" text NOT NULL,
	"archive_key" text,
	"object_version" text,
	"object_sha256" text,
	"content_sha256" text,
	"size" bigint,
	"encrypted" boolean,
	"key_id" text,
	"manifest" jsonb,
	"deletion_id" uuid,
	"detail" jsonb,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "archive_record_state_check" CHECK ("archive_record"."state" in ('PLANNED', 'UPLOADED', 'READ_BACK', 'VERIFIED', 'SOURCE_REVALIDATED', 'DELETED', 'RECEIPTED', 'CONFLICT', 'VERIFY_FAILED', 'DELETION_FAILED'))
);
--> statement-breakpoint
CREATE TABLE "copy_deletion" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"physical_copy_id" uuid NOT NULL,
	"plan" integer NOT NULL,
	"archive_operation_id" uuid NOT NULL,
	"archive_copy_id" uuid NOT NULL,
	"archive_digest" text NOT NULL,
	"archive_object_sha256" text NOT NULL,
	"path" text NOT NULL,
	"folder" boolean NOT NULL,
	"root_path" text NOT NULL,
	"root_device" text NOT NULL,
	"root_inode" text NOT NULL,
	"holder" text NOT NULL,
	"epoch" integer DEFAULT 1 NOT NULL,
	"lease_until" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "copy_deletion_copy_plan_key" UNIQUE("physical_copy_id","plan")
);
--> statement-breakpoint
CREATE TABLE "copy_deletion_member" (
	"deletion_id" uuid NOT NULL,
	"seq" integer NOT NULL,
	"name" text NOT NULL,
	"path" text NOT NULL,
	"device" text NOT NULL,
	"inode" text NOT NULL,
	"size" bigint NOT NULL,
	"mtime_ns" text NOT NULL,
	"sha256" text NOT NULL,
	CONSTRAINT "copy_deletion_member_pkey" PRIMARY KEY("deletion_id","seq")
);
--> statement-breakpoint
CREATE TABLE "copy_deletion_outcome" (
	"deletion_id" uuid NOT NULL,
	"seq" integer NOT NULL,
	"outcome" text NOT NULL,
	"reason" text,
	"epoch" integer NOT NULL,
	"by" text NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "copy_deletion_outcome_pkey" PRIMARY KEY("deletion_id","seq"),
	CONSTRAINT "copy_deletion_outcome_check" CHECK ("copy_deletion_outcome"."outcome" in ('DELETED', 'KEPT', 'MISSING'))
);
--> statement-breakpoint
CREATE TABLE "copy_deletion_receipt" (
	"deletion_id" uuid PRIMARY KEY NOT NULL,
	"physical_copy_id" uuid NOT NULL,
	"members_deleted" integer NOT NULL,
	"members_missing" integer NOT NULL,
	"bytes" bigint NOT NULL,
	"archive_operation_id" uuid NOT NULL,
	"archive_key" text,
	"archive_object_version" text,
	"archive_object_sha256" text NOT NULL,
	"archive_digest" text NOT NULL,
	"detail" jsonb,
	"by" text NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "deletion_policy" (
	"name" text PRIMARY KEY NOT NULL,
	"clean_location_types" text[] NOT NULL,
	"grace_seconds" integer NOT NULL,
	"protected_prefixes" text[] NOT NULL,
	"max_failures" integer NOT NULL,
	"updated_by" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "deletion_policy_grace_check" CHECK ("deletion_policy"."grace_seconds" >= 0),
	CONSTRAINT "deletion_policy_max_failures_check" CHECK ("deletion_policy"."max_failures" >= 1)
);
--> statement-breakpoint
CREATE TABLE "operation_replan" (
	"operation_id" uuid NOT NULL,
	"generation" integer NOT NULL,
	"by" text NOT NULL,
	"reason" text,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "operation_replan_pkey" PRIMARY KEY("operation_id","generation"),
	CONSTRAINT "operation_replan_generation_check" CHECK ("operation_replan"."generation" >= 2)
);
--> statement-breakpoint
CREATE TABLE "physical_copy_transition" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "physical_copy_transition_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"physical_copy_id" uuid NOT NULL,
	"from_status" text NOT NULL,
	"to_status" text NOT NULL,
	"event" text NOT NULL,
	"version" integer NOT NULL,
	"by" text NOT NULL,
	"reason" text,
	"at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "operation_step" DROP CONSTRAINT "operation_step_operation_name_key";--> statement-breakpoint
ALTER TABLE "operation_step" ADD COLUMN "generation" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "physical_copy" ADD COLUMN "version" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "archive_record" ADD CONSTRAINT "archive_record_operation_id_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "copy_deletion" ADD CONSTRAINT "copy_deletion_physical_copy_id_physical_copy_id_fk" FOREIGN KEY ("physical_copy_id") REFERENCES "public"."physical_copy"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "copy_deletion" ADD CONSTRAINT "copy_deletion_archive_operation_id_operation_id_fk" FOREIGN KEY ("archive_operation_id") REFERENCES "public"."operation"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "copy_deletion" ADD CONSTRAINT "copy_deletion_archive_copy_id_physical_copy_id_fk" FOREIGN KEY ("archive_copy_id") REFERENCES "public"."physical_copy"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "copy_deletion_member" ADD CONSTRAINT "copy_deletion_member_deletion_id_copy_deletion_id_fk" FOREIGN KEY ("deletion_id") REFERENCES "public"."copy_deletion"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "copy_deletion_outcome" ADD CONSTRAINT "copy_deletion_outcome_deletion_id_copy_deletion_id_fk" FOREIGN KEY ("deletion_id") REFERENCES "public"."copy_deletion"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "copy_deletion_receipt" ADD CONSTRAINT "copy_deletion_receipt_deletion_id_copy_deletion_id_fk" FOREIGN KEY ("deletion_id") REFERENCES "public"."copy_deletion"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_replan" ADD CONSTRAINT "operation_replan_operation_id_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "physical_copy_transition" ADD CONSTRAINT "physical_copy_transition_physical_copy_id_physical_copy_id_fk" FOREIGN KEY ("physical_copy_id") REFERENCES "public"."physical_copy"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "archive_record_operation_idx" ON "archive_record" USING btree ("operation_id","id");--> statement-breakpoint
CREATE INDEX "copy_deletion_archive_operation_idx" ON "copy_deletion" USING btree ("archive_operation_id");--> statement-breakpoint
CREATE INDEX "physical_copy_transition_copy_idx" ON "physical_copy_transition" USING btree ("physical_copy_id","id");--> statement-breakpoint
CREATE INDEX "physical_copy_live_location_idx" ON "physical_copy" USING btree ("location_id") WHERE status <> 'DELETED';--> statement-breakpoint
CREATE INDEX "physical_copy_deleting_idx" ON "physical_copy" USING btree ("status") WHERE status in ('DELETION_SCHEDULED', 'DELETION_IN_PROGRESS');--> statement-breakpoint
ALTER TABLE "operation_step" ADD CONSTRAINT "operation_step_operation_generation_name_key" UNIQUE("operation_id","generation","name");--> statement-breakpoint
-- Written by hand below this line (drizzle-kit does not model triggers or seed rows).
-- The archive-then-delete history is append-only, like operation_transition.
CREATE TRIGGER physical_copy_transition_append_only BEFORE UPDATE ON physical_copy_transition
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
--> statement-breakpoint
CREATE TRIGGER archive_record_append_only BEFORE UPDATE ON archive_record
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
--> statement-breakpoint
CREATE TRIGGER copy_deletion_member_append_only BEFORE UPDATE ON copy_deletion_member
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
--> statement-breakpoint
CREATE TRIGGER copy_deletion_outcome_append_only BEFORE UPDATE ON copy_deletion_outcome
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
--> statement-breakpoint
CREATE TRIGGER copy_deletion_receipt_append_only BEFORE UPDATE ON copy_deletion_receipt
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
--> statement-breakpoint
CREATE TRIGGER operation_replan_append_only BEFORE UPDATE ON operation_replan
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
--> statement-breakpoint
-- A retention claim on a copy and a deletion of that copy serialise on the copy row: taking a claim
-- bumps the version of every copy it holds (so a deletion decided before it fails its
-- compare-and-set) and is refused while a held copy is being deleted (so a claim can never hold a
-- copy a deletion already won). A deleted copy holds nothing and is passed over.
CREATE OR REPLACE FUNCTION opstate_hold_copies(held uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  blocked record;
BEGIN
  IF held IS NULL OR cardinality(held) = 0 THEN
    RETURN;
  END IF;
  UPDATE physical_copy SET version = version + 1 WHERE id = ANY(held) AND status = 'PRESENT';
  SELECT id, status INTO blocked FROM physical_copy
    WHERE id = ANY(held) AND status NOT IN ('PRESENT', 'DELETED') LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'retention claim refused: copy % is %, and a copy whose deletion was decided cannot be held; cancel the deletion (it removed nothing yet) or claim the archive copy instead', blocked.id, blocked.status
      USING ERRCODE = 'OPS01';
  END IF;
END;
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION opstate_hold_linked_copies() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM opstate_hold_copies(ARRAY(
    SELECT DISTINCT a.physical_copy_id FROM added a
    JOIN operation o ON o.id = a.operation_id
    JOIN operation_group g ON g.id = o.group_id AND g.active));
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER operation_input_holds_copies AFTER INSERT ON operation_input
  REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION opstate_hold_linked_copies();
--> statement-breakpoint
CREATE TRIGGER operation_output_holds_copies AFTER INSERT ON operation_output
  REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION opstate_hold_linked_copies();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION opstate_hold_group_copies() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM opstate_hold_copies(ARRAY(
    SELECT i.physical_copy_id FROM operation o
      JOIN operation_input i ON i.operation_id = o.id WHERE o.group_id = NEW.id
    UNION
    SELECT x.physical_copy_id FROM operation o
      JOIN operation_output x ON x.operation_id = o.id WHERE o.group_id = NEW.id));
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER operation_group_claim_holds_copies AFTER UPDATE OF active ON operation_group
  FOR EACH ROW WHEN (NEW.active AND NOT OLD.active) EXECUTE FUNCTION opstate_hold_group_copies();
--> statement-breakpoint
-- The default policy: buffer copies are cleaned after a verified archive, one hour after it
-- completed; source copies are kept; no protected prefix; three interruptions before an operator.
INSERT INTO deletion_policy (name, clean_location_types, grace_seconds, protected_prefixes, max_failures, updated_by)
  VALUES ('default', '{buffer}', 3600, '{}', 3, 'migration') ON CONFLICT DO NOTHING;
