-- A subtype row and a failure breadcrumb name their operation's kind; the composite foreign key
-- to operation (id, kind) that checked it needed a second unique index on operation, and every
-- status change (never a HOT update: the status is indexed) wrote an entry into it again. The kind
-- is now checked once per statement that writes such rows, by a trigger reading the base rows at
-- the statement's end (so a base row inserted by the same statement is seen), and the base row's
-- kind can no longer change, so the check cannot be undone later. Both refuse with 23503, as the
-- foreign key did.
ALTER TABLE "bundling_operation" DROP CONSTRAINT "bundling_operation_base_fk";
--> statement-breakpoint
ALTER TABLE "long_term_archive_operation" DROP CONSTRAINT "long_term_archive_operation_base_fk";
--> statement-breakpoint
ALTER TABLE "operation_failure_event" DROP CONSTRAINT "operation_failure_event_operation_fk";
--> statement-breakpoint
ALTER TABLE "packaging_operation" DROP CONSTRAINT "packaging_operation_base_fk";
--> statement-breakpoint
ALTER TABLE "staging_operation" DROP CONSTRAINT "staging_operation_base_fk";
--> statement-breakpoint
ALTER TABLE "transfer_operation" DROP CONSTRAINT "transfer_operation_base_fk";
--> statement-breakpoint
ALTER TABLE "unpack_operation" DROP CONSTRAINT "unpack_operation_base_fk";
--> statement-breakpoint
ALTER TABLE "operation" DROP CONSTRAINT "operation_id_kind_key";--> statement-breakpoint
ALTER TABLE "bundling_operation" ADD CONSTRAINT "bundling_operation_base_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "long_term_archive_operation" ADD CONSTRAINT "long_term_archive_operation_base_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_failure_event" ADD CONSTRAINT "operation_failure_event_operation_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "packaging_operation" ADD CONSTRAINT "packaging_operation_base_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "staging_operation" ADD CONSTRAINT "staging_operation_base_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "transfer_operation" ADD CONSTRAINT "transfer_operation_base_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "unpack_operation" ADD CONSTRAINT "unpack_operation_base_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operation"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION opstate_kind_matches_operation() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  bad record;
BEGIN
  SELECT n.operation_id, n.kind, o.kind AS base_kind INTO bad
  FROM written n LEFT JOIN operation o ON o.id = n.operation_id
  WHERE o.kind IS DISTINCT FROM n.kind
  LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'insert or update on table "%" violates the operation''s kind', TG_TABLE_NAME
      USING ERRCODE = 'foreign_key_violation',
        DETAIL = format('Operation %s is of kind %s, not %s.', bad.operation_id,
          coalesce(bad.base_kind, '(none: no such operation)'), bad.kind),
        TABLE = TG_TABLE_NAME;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
-- A breadcrumb is written by the statement of every transition (its insert often writes none),
-- and a statement trigger runs even for no row: its check is per row, so a write without a
-- breadcrumb runs none.
CREATE OR REPLACE FUNCTION opstate_row_kind_matches_operation() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  base text;
BEGIN
  SELECT o.kind INTO base FROM operation o WHERE o.id = new.operation_id;
  IF base IS DISTINCT FROM new.kind THEN
    RAISE EXCEPTION 'insert or update on table "%" violates the operation''s kind', TG_TABLE_NAME
      USING ERRCODE = 'foreign_key_violation',
        DETAIL = format('Operation %s is of kind %s, not %s.', new.operation_id,
          coalesce(base, '(none: no such operation)'), new.kind),
        TABLE = TG_TABLE_NAME;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION opstate_operation_kind_fixed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'an operation''s kind never changes (operation %: % to %)', old.id, old.kind, new.kind
    USING ERRCODE = 'foreign_key_violation', TABLE = TG_TABLE_NAME;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "operation_kind_fixed" BEFORE UPDATE OF "kind" ON "operation"
FOR EACH ROW WHEN (old.kind IS DISTINCT FROM new.kind) EXECUTE FUNCTION opstate_operation_kind_fixed();
--> statement-breakpoint
CREATE TRIGGER "bundling_operation_kind_insert" AFTER INSERT ON "bundling_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "bundling_operation_kind_update" AFTER UPDATE ON "bundling_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "long_term_archive_operation_kind_insert" AFTER INSERT ON "long_term_archive_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "long_term_archive_operation_kind_update" AFTER UPDATE ON "long_term_archive_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "packaging_operation_kind_insert" AFTER INSERT ON "packaging_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "packaging_operation_kind_update" AFTER UPDATE ON "packaging_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "staging_operation_kind_insert" AFTER INSERT ON "staging_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "staging_operation_kind_update" AFTER UPDATE ON "staging_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "transfer_operation_kind_insert" AFTER INSERT ON "transfer_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "transfer_operation_kind_update" AFTER UPDATE ON "transfer_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "unpack_operation_kind_insert" AFTER INSERT ON "unpack_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "unpack_operation_kind_update" AFTER UPDATE ON "unpack_operation"
REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION opstate_kind_matches_operation();
--> statement-breakpoint
CREATE TRIGGER "operation_failure_event_kind" AFTER INSERT OR UPDATE ON "operation_failure_event"
FOR EACH ROW EXECUTE FUNCTION opstate_row_kind_matches_operation();
