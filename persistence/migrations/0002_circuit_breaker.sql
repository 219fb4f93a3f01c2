CREATE TABLE "circuit_breaker" (
	"kind" text NOT NULL,
	"location_id" uuid NOT NULL,
	"state" text DEFAULT 'CLOSED' NOT NULL,
	"consecutive_failures" integer DEFAULT 0 NOT NULL,
	"opened_at" timestamp with time zone,
	"last_failure" jsonb,
	"version" integer DEFAULT 1 NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "circuit_breaker_pkey" PRIMARY KEY("kind","location_id"),
	CONSTRAINT "circuit_breaker_kind_check" CHECK ("circuit_breaker"."kind" in ('raw_data_package', 'data_transfer_package', 'transfer', 'unpack', 'long_term_archive', 'staging')),
	CONSTRAINT "circuit_breaker_state_check" CHECK ("circuit_breaker"."state" in ('CLOSED', 'OPEN', 'HALF_OPEN')),
	CONSTRAINT "circuit_breaker_failures_check" CHECK ("circuit_breaker"."consecutive_failures" >= 0),
	CONSTRAINT "circuit_breaker_opened_check" CHECK (("circuit_breaker"."state" = 'CLOSED') = ("circuit_breaker"."opened_at" is null))
);
--> statement-breakpoint
ALTER TABLE "operation" ADD COLUMN "target_location_id" uuid;--> statement-breakpoint
ALTER TABLE "circuit_breaker" ADD CONSTRAINT "circuit_breaker_location_id_data_location_id_fk" FOREIGN KEY ("location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation" ADD CONSTRAINT "operation_target_location_id_data_location_id_fk" FOREIGN KEY ("target_location_id") REFERENCES "public"."data_location"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "operation_target_live_idx" ON "operation" USING btree ("kind","target_location_id") WHERE status in ('SCHEDULED', 'IN_PROGRESS');