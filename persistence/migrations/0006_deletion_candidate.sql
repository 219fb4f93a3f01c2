CREATE TABLE "deletion_candidate" (
	"physical_copy_id" uuid NOT NULL,
	"archive_operation_id" uuid NOT NULL,
	"location_type" text NOT NULL,
	CONSTRAINT "deletion_candidate_pkey" PRIMARY KEY("physical_copy_id","archive_operation_id")
);
--> statement-breakpoint
-- The deleters read their list now; no query looks up live copies by location alone.
DROP INDEX "physical_copy_live_location_idx";--> statement-breakpoint
ALTER TABLE "deletion_candidate" ADD CONSTRAINT "deletion_candidate_physical_copy_id_physical_copy_id_fk" FOREIGN KEY ("physical_copy_id") REFERENCES "public"."physical_copy"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "deletion_candidate" ADD CONSTRAINT "deletion_candidate_archive_operation_id_operation_id_fk" FOREIGN KEY ("archive_operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "deletion_candidate_location_type_idx" ON "deletion_candidate" USING btree ("location_type");
--> statement-breakpoint
-- Written by hand below this line (drizzle-kit does not model triggers).
-- The copies a long-term archive consumed, unless already DELETED, join the deleters' work list.
CREATE OR REPLACE FUNCTION opstate_enlist_archived_copies_of(archive uuid) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO deletion_candidate (physical_copy_id, archive_operation_id, location_type)
    SELECT c.id, o.id, l.location_type
    FROM operation o
    JOIN operation_input i ON i.operation_id = o.id
    JOIN physical_copy c ON c.id = i.physical_copy_id AND c.status <> 'DELETED'
    JOIN data_location l ON l.id = c.location_id
    WHERE o.id = archive AND o.kind = 'long_term_archive'
    ON CONFLICT DO NOTHING;
$$;
--> statement-breakpoint
-- A VERIFIED row of an archive's record enlists them; the deleters look for work there instead of
-- in the whole archive history.
CREATE OR REPLACE FUNCTION opstate_enlist_archived_copies() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM opstate_enlist_archived_copies_of(NEW.operation_id);
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER archive_record_enlists_copies AFTER INSERT ON archive_record
  FOR EACH ROW WHEN (NEW.state = 'VERIFIED') EXECUTE FUNCTION opstate_enlist_archived_copies();
--> statement-breakpoint
-- DELETED is final: a deleted copy leaves the list for good.
CREATE OR REPLACE FUNCTION opstate_strike_deleted_copy() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM deletion_candidate WHERE physical_copy_id = NEW.id;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER physical_copy_deleted_leaves_candidates AFTER UPDATE OF status ON physical_copy
  FOR EACH ROW WHEN (NEW.status = 'DELETED' AND OLD.status <> 'DELETED')
  EXECUTE FUNCTION opstate_strike_deleted_copy();
--> statement-breakpoint
-- Archives verified before this migration: their copies not yet DELETED join the list.
SELECT opstate_enlist_archived_copies_of(o.id) FROM operation o
  WHERE o.kind = 'long_term_archive'
    AND EXISTS (SELECT 1 FROM archive_record r WHERE r.operation_id = o.id AND r.state = 'VERIFIED');
