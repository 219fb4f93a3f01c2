-- Site routes: an operation is queued for the site and location whose storage its handler must
-- reach (the destination for transfer, long-term archive and staging; the location for packaging,
-- bundling and unpacking: the target_location_id every row already carries), on the queue
-- <site>_<location>_<location type>_<operation type>. The columns are new and null on every row,
-- so the check is added NOT VALID (it holds for every write from here on, and skips a scan).
ALTER TABLE "operation" ADD COLUMN "route_site" text;--> statement-breakpoint
ALTER TABLE "operation" ADD COLUMN "route_location" text;--> statement-breakpoint
ALTER TABLE "operation" ADD CONSTRAINT "operation_route_check" CHECK (("operation"."route_site" is null) = ("operation"."route_location" is null)) NOT VALID;--> statement-breakpoint
-- Every operation not COMPLETED (one FAILED may be retried) is routed on its target location when
-- that location's type serves its operation type and its site and name can name a queue; the
-- others keep their legacy queue. Dispatches already queued under the legacy names are moved onto
-- the new ones by the control plane at start (docs/routing.md).
UPDATE "operation" o SET "route_site" = l."site", "route_location" = l."name", "location_type" = l."location_type"
  FROM "data_location" l
  WHERE l."id" = o."target_location_id" AND o."status" <> 'COMPLETED'
    AND l."site" ~ '^[A-Za-z0-9][A-Za-z0-9-]{0,63}$' AND l."name" ~ '^[A-Za-z0-9][A-Za-z0-9-]{0,63}$'
    AND (l."location_type", o."operation_type") IN (
      ('source', 'raw_data_package_creation'), ('source', 'data_transfer_package_creation'),
      ('source', 'data_transfer'), ('buffer', 'data_transfer'),
      ('buffer', 'data_transfer_unpacking'), ('buffer', 'data_transfer_package_creation'),
      ('long_term_archive', 'long_term_archive_transfer'), ('processing', 'staging'));--> statement-breakpoint
-- Dispatches written to the outbox and not yet published go out under the new route.
UPDATE "dispatch_outbox" b SET "location_type" = o."location_type",
    "queue" = o."route_site" || '_' || o."route_location" || '_' || o."location_type" || '_' || o."operation_type"
  FROM "operation" o
  WHERE o."id" = b."operation_id" AND o."route_site" IS NOT NULL;
