-- operation_transition and operation_failure_event are history: rows are added, never changed.
-- (Deletes stay possible so that removing an operation cascades to its history.)
CREATE OR REPLACE FUNCTION opstate_refuse_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only: rows are never updated', TG_TABLE_NAME
    USING ERRCODE = 'restrict_violation';
END;
$$;
--> statement-breakpoint
CREATE TRIGGER operation_transition_append_only BEFORE UPDATE ON operation_transition
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
--> statement-breakpoint
CREATE TRIGGER operation_failure_event_append_only BEFORE UPDATE ON operation_failure_event
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
--> statement-breakpoint
CREATE TRIGGER operation_step_append_only BEFORE UPDATE ON operation_step
  FOR EACH ROW EXECUTE FUNCTION opstate_refuse_update();
