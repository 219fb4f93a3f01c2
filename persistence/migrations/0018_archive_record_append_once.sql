-- An attempt appends each archive-side state of the archive record once: the archive stage's
-- appends ride a Postgres outage by running again, and an append whose reply the outage took
-- (committed, not acknowledged) must find its row rather than add a second (`insert … on conflict
-- do nothing`, which needs no UPDATE privilege on the append-only history). Deletion-side rows and
-- an operator's verifications carry no attempt and stay outside the key. The archive stage has
-- always appended each state at most once per attempt (inside journal steps, which an attempt runs
-- once), so the rows it wrote fit the key.
CREATE UNIQUE INDEX "archive_record_attempt_state_key" ON "archive_record" USING btree ("operation_id","attempt","state") WHERE attempt is not null;