-- An operation's row changes three times soon after it is written (SCHEDULE, START, the
-- completion), never as a HOT update (its status is indexed). On a full page each new version went
-- to another page, and Postgres logs a row lock on the old version before it lets go of that page:
-- a quarter of each page kept free lets the new version stay beside the old, which saves that
-- record and the new page's. Rows written before this keep their pages until rewritten; finished
-- rows take up to a third more room.
ALTER TABLE "operation" SET (fillfactor = 75);
