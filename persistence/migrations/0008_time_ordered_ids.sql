-- A time-ordered id (UUID version 7, RFC 9562): the first 48 bits are the Unix time in
-- milliseconds, the rest random (with the version and variant bits set). Rows keyed by it land
-- at the right edge of their indexes instead of on a random page, so the pages a write touches
-- stay few however many rows are stored. The runtime makes the same kind in Node
-- (timeOrderedId) for the operations it creates.
CREATE OR REPLACE FUNCTION opstate_uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid())
        placing substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
        from 1 for 6),
      52, 1), 53, 1),
    'hex')::uuid
$$;
--> statement-breakpoint
ALTER TABLE "copy_deletion" ALTER COLUMN "id" SET DEFAULT opstate_uuid_v7();--> statement-breakpoint
ALTER TABLE "data_location" ALTER COLUMN "id" SET DEFAULT opstate_uuid_v7();--> statement-breakpoint
ALTER TABLE "data_transfer_package" ALTER COLUMN "id" SET DEFAULT opstate_uuid_v7();--> statement-breakpoint
ALTER TABLE "operation" ALTER COLUMN "id" SET DEFAULT opstate_uuid_v7();--> statement-breakpoint
ALTER TABLE "operation_group" ALTER COLUMN "id" SET DEFAULT opstate_uuid_v7();--> statement-breakpoint
ALTER TABLE "physical_copy" ALTER COLUMN "id" SET DEFAULT opstate_uuid_v7();--> statement-breakpoint
ALTER TABLE "raw_data_file" ALTER COLUMN "id" SET DEFAULT opstate_uuid_v7();--> statement-breakpoint
ALTER TABLE "raw_data_package" ALTER COLUMN "id" SET DEFAULT opstate_uuid_v7();