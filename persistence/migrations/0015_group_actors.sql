-- Who created an operation group and who released its retention claim: a staging on request
-- (`opstate stage`) records the operator or service that asked, and `opstate release` the one
-- who let the claim go. Null on every existing row (those were created by code that named no one).
ALTER TABLE "operation_group" ADD COLUMN "created_by" text;--> statement-breakpoint
ALTER TABLE "operation_group" ADD COLUMN "released_by" text;
