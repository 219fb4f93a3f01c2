import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArchiveState } from '../../machines/ArchiveState.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { queueName } from '../../machines/routing.ts';
import { TransitionCursor } from '../../observe/TransitionCursor.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import { CircuitBreakerRepository } from '../../persistence/CircuitBreakerRepository.ts';
import { DeletionPolicyRepository } from '../../persistence/DeletionPolicyRepository.ts';
import { DeletionRepository } from '../../persistence/DeletionRepository.ts';
import { MIGRATIONS_FOLDER, migrate } from '../../persistence/migrate.ts';
import type { OperationRecord } from '../../persistence/OperationRecord.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import {
  selectLatestTransitionId,
  selectTransitionsAfter,
} from '../../persistence/reads/selectTransitions.ts';
import { dispatchesAhead } from '../helpers/dispatches.ts';
import { waitForLockWait } from '../helpers/lockWaits.ts';
import { copiedColumns } from '../helpers/operationRows.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { artifactSuite } from './artifactSuite.ts';
import { contractSuite } from './contractSuite.ts';
import { archivedPackage } from './copyFixtures.ts';
import { copySuite } from './copySuite.ts';
import { inputFor, MIGRATIONS, makeWorld } from './fixtures.ts';
import { storeSuite } from './storeSuite.ts';
import { verifiedArchiveOutput } from './verifiedArchive.ts';

// The suite needs the real Postgres: createTestDatabase throws when it is unreachable, so the
// run fails instead of skipping.
describe('persistence on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
  });

  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  storeSuite({
    database: () => database,
    peer: () => openDatabase({ databaseUrl: testDb.url, max: 4 }),
  });

  copySuite({
    database: () => database,
    peer: () => openDatabase({ databaseUrl: testDb.url, max: 4 }),
  });

  contractSuite({
    database: () => database,
    peer: () => openDatabase({ databaseUrl: testDb.url, max: 4 }),
  });

  artifactSuite({
    database: () => database,
    peer: () => openDatabase({ databaseUrl: testDb.url, max: 4 }),
  });

  it('migrations racing from two connections apply each migration exactly once', async () => {
    const fresh = await createTestDatabase();
    const a = await openDatabase({ databaseUrl: fresh.url, max: 2 });
    const b = await openDatabase({ databaseUrl: fresh.url, max: 2 });
    try {
      const results = await Promise.all([migrate(a), migrate(b), migrate(a), migrate(b)]);
      expect(results.map((r) => r.applied).sort()).toEqual([0, 0, 0, MIGRATIONS]);
      const [row] = await a.execute('select count(*)::int as n from opstate.__drizzle_migrations');
      expect(row?.n).toBe(MIGRATIONS);
    } finally {
      await a.close();
      await b.close();
      await dropTestDatabase(fresh);
    }
  });

  it('`opstate migrate` racing from two processes applies each migration exactly once', async () => {
    const fresh = await createTestDatabase();
    const run = () =>
      promisify(execFile)(process.execPath, opstateArgs(['migrate']), {
        cwd: REPO_ROOT,
        env: { ...process.env, DATABASE_URL: fresh.url },
      });
    try {
      const outs = (await Promise.all([run(), run()])).map((r) => r.stdout.trim()).sort();
      expect(outs).toEqual([
        `applied ${MIGRATIONS} of ${MIGRATIONS} migrations (postgres)`,
        `schema is current (${MIGRATIONS} migrations, postgres)`,
      ]);
    } finally {
      await dropTestDatabase(fresh);
    }
  });

  it('upgrading to the deleters’ work list enlists the copies of archives verified before it, and only those', async () => {
    await onFreshDatabase(async (db) => {
      // The schema as it was before the list.
      const cut = await migrateBefore(db, '0006_deletion_candidate');

      const w = await makeWorld(db);
      const [waiting, cleaned] = await withLaterColumns(db, async () => {
        const waiting = await archivedPackage(db, w, 'verified');
        await archivedPackage(db, w, 'unverified'); // completed, never VERIFIED: not listed
        return [waiting, await archivedPackage(db, w, 'verified')];
      });
      // Its deletion finished before the upgrade (the copy machine's path is beside the point).
      await db.execute(
        `update physical_copy set status = 'DELETED' where id = '${cleaned.buffer.id}'`,
      );

      expect((await migrate(db)).applied).toBe(MIGRATIONS - cut);
      const listed = await db.execute(
        'select physical_copy_id, archive_operation_id, location_type from deletion_candidate',
      );
      expect(listed).toEqual([
        {
          physical_copy_id: waiting.buffer.id,
          archive_operation_id: waiting.operationId,
          location_type: 'buffer',
        },
      ]);
      const policy = await new DeletionPolicyRepository(db).get();
      const eligible = await new DeletionRepository(db).eligible(
        { ...policy, graceSeconds: 0 },
        16,
      );
      expect(eligible.map((c) => c.copyId)).toEqual([waiting.buffer.id]);
    });
  });

  it("a fold racing an open write leaves that write's tally rows to the next fold, and the counts stay exact", async () => {
    const store = new OperationStore(database);
    const world = await makeWorld(database);
    const id = await store.create(inputFor(OperationKind.UNPACK, world));
    const before = await store.countByKindAndStatus();
    const open = await database.reserve();
    try {
      await open.execute('begin');
      await open.execute(`update operation set status = 'FAILED' where id = '${id}'`);
      // Another connection folds while the write is open: it neither sees nor waits for it.
      await store.foldCounts();
      expect(await store.countByKindAndStatus()).toEqual(before);
      await open.execute('commit');
    } finally {
      await open.release();
    }
    const after = await store.countByKindAndStatus();
    expect(after.unpack.PENDING).toBe(before.unpack.PENDING - 1);
    expect(after.unpack.FAILED).toBe(before.unpack.FAILED + 1);
    // The committed write's rows were left out of that fold; the next one takes them in.
    const rows = async () =>
      Number((await database.execute('select count(*)::int as n from operation_tally'))[0]?.n);
    const [pairs] = await database.execute<{ n: number }>(
      'select count(*)::int as n from (select distinct kind, status from operation) p',
    );
    expect(await rows()).toBeGreaterThan(Number(pairs?.n));
    await store.foldCounts();
    expect(await rows()).toBe(Number(pairs?.n));
    expect(await store.countByKindAndStatus()).toEqual(after);
  });

  it('a recount held open lets writers go on, makes a fold wait, and leaves the counts exact', async () => {
    const store = new OperationStore(database);
    const world = await makeWorld(database);
    const [a, b] = (await store.createMany([
      inputFor(OperationKind.TRANSFER, world),
      inputFor(OperationKind.TRANSFER, world),
    ])) as [string, string];
    const truth = async () => {
      const rows = await database.execute<{ kind: string; status: string; n: number }>(
        'select kind, status, count(*)::int as n from operation group by kind, status',
      );
      return Object.fromEntries(rows.map((r) => [`${r.kind}/${r.status}`, Number(r.n)]));
    };
    const tallied = async () => {
      const counts = await store.countByKindAndStatus();
      return Object.fromEntries(
        Object.entries(counts).flatMap(([kind, byStatus]) =>
          Object.entries(byStatus)
            .filter(([, n]) => n !== 0)
            .map(([status, n]) => [`${kind}/${status}`, n]),
        ),
      );
    };
    await database.execute(
      `insert into operation_tally (kind, status, n) values ('transfer', 'FAILED', 5)`,
    );
    expect(await tallied()).not.toEqual(await truth());

    const open = await database.reserve();
    let folded = false;
    let fold: Promise<number> | undefined;
    try {
      await open.execute('begin');
      const wrong = await open.execute('select * from opstate_recount_operation_tally()');
      expect(wrong.map((r) => `${r.kind}/${r.status}`)).toEqual(['transfer/FAILED']);
      // Writers on other connections go on while it is open: their tally rows count on top.
      await store.apply(a, { type: 'SCHEDULE' });
      await store.applyMany([{ id: b, event: { type: 'CANCEL', reason: 'not needed' } }]);
      // A fold waits for it, on the advisory lock both take.
      fold = store.foldCounts().finally(() => {
        folded = true;
      });
      await waitFor(async () => {
        const [row] = await database.execute<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity
            where datname = current_database() and wait_event = 'advisory'
              and query like '%opstate_fold_operation_tally%'`,
        );
        return Number(row?.n) === 1;
      }, 'the fold waiting for the recount');
      expect(folded).toBe(false);
      await open.execute('commit');
    } finally {
      await open.release();
    }
    await fold;
    expect(await tallied()).toEqual(await truth());
    expect(await store.recountCounts()).toEqual([]);
  });

  it('a recount under REPEATABLE READ whose snapshot predates a fold is refused, not miscounted, and changes nothing', async () => {
    const store = new OperationStore(database);
    const world = await makeWorld(database);
    await store.createMany([inputFor(OperationKind.TRANSFER, world)]);
    const before = await store.countByKindAndStatus();
    const open = await database.reserve();
    let refused: unknown;
    try {
      await open.execute('begin isolation level repeatable read');
      await open.execute('select count(*) from operation_tally'); // the snapshot is taken here
      // A fold on another connection commits after that snapshot: it replaces the tally rows.
      await store.foldCounts();
      refused = await open.execute('select * from opstate_recount_operation_tally()').then(
        () => undefined,
        (err: unknown) => err,
      );
      await open.execute('rollback');
    } finally {
      await open.release();
    }
    expect(String(refused)).toMatch(/could not serialize access/);
    expect(await store.countByKindAndStatus()).toEqual(before);
    expect(await store.recountCounts()).toEqual([]);
  });

  it('upgrading to site routes routes every operation not COMPLETED on its location, its unpublished dispatch too, and keeps the rest', async () => {
    await onFreshDatabase(async (db) => {
      const cut = await migrateBefore(db, '0012_operation_route');
      const w = await makeWorld(db);
      const store = new OperationStore(db);
      const [scheduled, done, pending] = await withLaterColumns(db, async () => {
        const ids = await store.createMany([
          inputFor(OperationKind.TRANSFER, w),
          inputFor(OperationKind.UNPACK, w),
          inputFor(OperationKind.STAGING, w),
        ]);
        const [a, b] = ids as [string, string];
        await store.apply(a, { type: 'SCHEDULE' });
        await store.apply(b, { type: 'SCHEDULE' });
        await store.apply(b, { type: 'START', attempt: 1, workerId: 'w' });
        await store.apply(b, { type: 'COMPLETE', attempt: 1 });
        // As an older release stored them: no site, the legacy route of the kind.
        await db.execute(`update operation set location_type = 'source' where kind = 'transfer'`);
        // …and the transfer's dispatch unpublished, in the outbox it had then.
        await db.execute(
          `insert into dispatch_outbox (operation_id, attempt, queue, operation_type, location_type, payload)
           values ('${a}', 1, 'source_data_transfer', 'data_transfer', 'source',
             '{"operationId": "${a}", "kind": "transfer", "operationType": "data_transfer", "attempt": 1}')`,
        );
        return ids as [string, string, string];
      }, ['route_site text', 'route_location text', 'priority smallint not null default 0']);
      expect((await migrate(db)).applied).toBe(MIGRATIONS - cut);
      const rows = await store.loadMany([scheduled, done, pending]);
      const queue = (id: string) => queueName((rows.get(id) as OperationRecord).route);
      expect(queue(scheduled)).toBe(`${w.buffer.site}_buffer_buffer_data_transfer`);
      expect(queue(pending)).toBe(`${w.buffer.site}_processing_processing_staging`);
      expect(queue(done)).toBe('buffer_data_transfer_unpacking');
      // The dispatch the old outbox held is still ahead of the relay, now on the site queue.
      const outbox = (await dispatchesAhead(store)).find((e) => e.operationId === scheduled);
      expect(outbox && queueName(outbox.route)).toBe(
        `${w.buffer.site}_buffer_buffer_data_transfer`,
      );
      expect((await migrate(db)).applied).toBe(0);
    });
  });

  it('upgrading to dispatches from the history leaves every dispatch the outbox held ahead of the relay, and none it had published', async () => {
    await onFreshDatabase(async (db) => {
      const cut = await migrateBefore(db, '0020_dispatch_from_history');
      const w = await makeWorld(db);
      const store = new OperationStore(db);
      const [published, queued, later] = (await store.createMany([
        inputFor(OperationKind.TRANSFER, w),
        inputFor(OperationKind.TRANSFER, w),
        inputFor(OperationKind.STAGING, w),
      ])) as [string, string, string];
      // As the release before stored them: the first dispatch published (its row deleted), the
      // second still in the outbox, and history written after both.
      await store.apply(published, { type: 'SCHEDULE' });
      await store.apply(queued, { type: 'SCHEDULE' });
      await store.apply(published, { type: 'START', attempt: 1, workerId: 'w' });
      await db.execute(
        `insert into dispatch_outbox (operation_id, attempt, queue, operation_type, location_type, payload)
         values ('${queued}', 1, 'q', 'data_transfer', 'buffer', '{}')`,
      );
      expect((await migrate(db)).applied).toBe(MIGRATIONS - cut);
      const ahead = await dispatchesAhead(store);
      expect(ahead.map((e) => [e.operationId, e.attempt, e.stale])).toEqual([[queued, 1, false]]);
      expect(ahead[0]?.payload).toEqual({
        operationId: queued,
        kind: 'transfer',
        operationType: 'data_transfer',
        attempt: 1,
      });
      const [gone] = await db.execute(`select to_regclass('dispatch_outbox') is null as gone`);
      expect(gone?.gone).toBe(true);
      expect((await store.claimDue(10)).claimed.map((c) => c.id)).toEqual([later]);
      expect((await dispatchesAhead(store)).map((e) => e.operationId)).toEqual([queued, later]);
    });
  });

  it('upgrading to dispatches from the history with nothing in the outbox starts the relay at the newest transition', async () => {
    await onFreshDatabase(async (db) => {
      await migrateBefore(db, '0020_dispatch_from_history');
      const w = await makeWorld(db);
      const store = new OperationStore(db);
      const [id] = (await store.createMany([inputFor(OperationKind.TRANSFER, w)])) as [string];
      await store.apply(id, { type: 'SCHEDULE' });
      await migrate(db);
      expect(await dispatchesAhead(store)).toEqual([]);
      const [row] = await db.execute(
        'select (select after_id from dispatch_relay_cursor) = (select max(id) from operation_transition) as at_newest',
      );
      expect(row?.at_newest).toBe(true);
    });
  });

  it('upgrading to counts from the tally counts the operations stored before it, and a write racing the upgrade once', async () => {
    const fresh = await createTestDatabase();
    const db = await openDatabase({ databaseUrl: fresh.url, max: 2 });
    const writer = await openDatabase({ databaseUrl: fresh.url, max: 2 });
    try {
      const cut = await migrateBefore(db, '0007_operation_tally');
      const w = await makeWorld(db);
      const store = new OperationStore(db);
      const [a] = await withLaterColumns(db, async () => {
        const ids = await store.createMany([
          inputFor(OperationKind.TRANSFER, w),
          inputFor(OperationKind.TRANSFER, w),
          inputFor(OperationKind.UNPACK, w),
        ]);
        const [a, b] = ids as [string, string];
        await store.apply(a, { type: 'SCHEDULE' });
        await store.apply(b, { type: 'CANCEL', reason: 'not wanted' });
        return [a];
      });

      // A writer mid-transaction when the upgrade starts: the upgrade waits for it, and its row
      // is counted once, by the upgrade's count or by the trigger, never by both or neither.
      const open = await writer.reserve();
      await open.execute('begin');
      await open.execute(
        `insert into operation (id, ${copiedColumns('')})
           select gen_random_uuid(), ${copiedColumns('t.')} from operation t where t.id = '${a}'`,
      );
      const upgrade = migrate(db);
      await waitFor(
        async () =>
          Number(
            (
              await writer.execute(
                `select count(*)::int as n from pg_stat_activity
                   where datname = current_database() and wait_event_type = 'Lock'`,
              )
            )[0]?.n,
          ) === 1,
        'the upgrade waiting for the open writer',
        30_000,
      );
      await open.execute('commit');
      await open.release();
      expect((await upgrade).applied).toBe(MIGRATIONS - cut);

      const counts = await store.countByKindAndStatus();
      expect([
        counts.transfer.PENDING,
        counts.transfer.SCHEDULED,
        counts.transfer.FAILED,
        counts.unpack.PENDING,
      ]).toEqual([0, 2, 1, 1]);
      await store.apply(a, { type: 'START', attempt: 1, workerId: 'w' });
      expect((await store.countByKindAndStatus()).transfer.IN_PROGRESS).toBe(1);
    } finally {
      await writer.close();
      await db.close();
      await dropTestDatabase(fresh);
    }
  });

  it('a reserved connection keeps a session advisory lock until released', async () => {
    const one = await database.reserve();
    const two = await database.reserve();
    try {
      const [got] = await one.execute<{ ok: boolean }>('select pg_try_advisory_lock(4242) as ok');
      const [blocked] = await two.execute<{ ok: boolean }>(
        'select pg_try_advisory_lock(4242) as ok',
      );
      expect([got?.ok, blocked?.ok]).toEqual([true, false]);
      const [unlocked] = await one.execute<{ ok: boolean }>(
        'select pg_advisory_unlock(4242) as ok',
      );
      expect(unlocked?.ok).toBe(true);
    } finally {
      await one.release();
      await two.release();
    }
  });

  it('a transition committed after a later one is still read, by the breakers and by the inspection stream', async () => {
    const world = await makeWorld(database);
    const id = await new OperationStore(database).create(inputFor(OperationKind.TRANSFER, world));
    const start = await selectLatestTransitionId(database);
    const insert = sql`insert into operation_transition
        (operation_id, from_status, to_status, event, attempt, by, at)
      values (${id}::uuid, 'PENDING', 'SCHEDULED', 'SCHEDULE', 1, 'gap-test', now())
      returning id`;
    // One writer takes an id and holds its transaction open; a second one takes the next id and
    // commits: the readers meet the later id first, as they do when two writers race.
    const late = await database.reserve();
    let lateId: number;
    try {
      await late.execute('begin');
      const [held] = await late.execute<{ id: number }>(insert);
      lateId = Number(held?.id);
      const [early] = await database.execute<{ id: number }>(insert);
      const earlyId = Number(early?.id);
      expect(earlyId).toBeGreaterThan(lateId);

      const breakers = new CircuitBreakerRepository(database);
      const breakerCursor = new TransitionCursor();
      breakerCursor.start(start);
      const streamCursor = new TransitionCursor();
      streamCursor.start(start);
      const first = await breakers.readOutcomes(breakerCursor.after, breakerCursor.gaps(0), 100);
      expect(first.ids).toEqual([earlyId]);
      breakerCursor.advance(first.ids, 0);
      const streamed = await selectTransitionsAfter(
        database,
        streamCursor.after,
        streamCursor.gaps(0),
        100,
      );
      expect(streamed.map((t) => t.id)).toEqual([earlyId]);
      streamCursor.advance(
        streamed.map((t) => t.id),
        0,
      );
      expect(breakerCursor.gaps(0)).toEqual([lateId]);
      expect(streamCursor.gaps(0)).toEqual([lateId]);

      await late.execute('commit');
      // Asked again for the id they stepped over, both get it: the gap branch, by primary key.
      const second = await breakers.readOutcomes(breakerCursor.after, breakerCursor.gaps(1), 100);
      expect(second.ids).toEqual([lateId]);
      breakerCursor.advance(second.ids, 1);
      expect(breakerCursor.gaps(1)).toEqual([]);
      const again = await selectTransitionsAfter(
        database,
        streamCursor.after,
        streamCursor.gaps(1),
        100,
      );
      expect(again).toEqual([
        expect.objectContaining({
          id: lateId,
          operationId: id,
          kind: OperationKind.TRANSFER,
          by: 'gap-test',
        }),
      ]);
    } finally {
      await late.execute('rollback').catch(() => {});
      await late.release();
    }
  });

  it('a completion whose copy another writer commits while it runs still links that copy', async () => {
    const world = await makeWorld(database);
    const store = new OperationStore(database);
    const id = await store.create(inputFor(OperationKind.LONG_TERM_ARCHIVE, world));
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 1, workerId: 'w' });
    const archived = await verifiedArchiveOutput(database, id);
    // Another writer has inserted the same live copy and not committed yet: the completion's
    // insert waits on the live-copy key, then finds it there, while its own lookup of existing
    // copies ran on a snapshot taken before that commit. (pg_stat_activity keeps only the start of
    // a long statement, so the wait is recognised by its recordset, which only it has here.)
    const other = await database.reserve();
    const watcher = await openDatabase({ databaseUrl: testDb.url, max: 1 });
    try {
      await other.execute('begin');
      await other.execute(sql`
        with c as (
          insert into physical_copy (artifact_type, artifact_id, location_id)
          values ('raw_data_package', ${world.pkg}::uuid, ${world.archive.id}::uuid)
          returning id
        )
        insert into raw_data_package_physical_copy (physical_copy_id, raw_data_package_id)
        select id, ${world.pkg}::uuid from c`);
      const completing = store.complete(id, 1, [archived]);
      await waitForLockWait(
        watcher,
        'jsonb_to_recordset',
        'the completion to wait on the other writer',
      );
      await other.execute('commit');
      const done = await completing;
      expect(done).toMatchObject({ ok: true, copiesCreated: 0, copiesAlreadyPresent: 1 });
    } finally {
      await other.execute('rollback').catch(() => {});
      await other.release();
      await watcher.close();
    }
    const links = await database.execute<{ n: number }>(sql`
      select count(*)::int as n from operation_output o
      join physical_copy c on c.id = o.physical_copy_id
      where o.operation_id = ${id}::uuid and c.artifact_id = ${world.pkg}::uuid
        and c.location_id = ${world.archive.id}::uuid`);
    expect(links[0]?.n).toBe(1);
    expect((await store.load(id)).status).toBe('COMPLETED');
  });

  it('an independent verification that loses a real deadlock to a deleter holding its copies is written again', async () => {
    const world = await makeWorld(database);
    const p = await archivedPackage(database, world, 'verified');
    // The package's two live copies, in the order the VERIFY_FAILED revoke locks them (by id,
    // which follows the order they were written): the buffer copy, then the archive copy the
    // completion wrote.
    const copies = await database.execute<{ id: string }>(sql`
      select id from physical_copy where artifact_id = ${p.pkg}::uuid order by id`);
    expect(copies.map((c) => String(c.id))[0]).toBe(p.buffer.id);
    const [first, second] = copies.map((c) => String(c.id));
    const deadlocks = async () => {
      const [row] = await database.execute<{ n: number }>(sql`
        select deadlocks::int as n from pg_stat_database where datname = current_database()`);
      return Number(row?.n);
    };
    const before = await deadlocks();
    // A deleter's transaction holds the second copy; the revoke locks the first and waits on it;
    // then the deleter asks for the first. Its own deadlock check is put off, so the check of the
    // verification's backend (1 s) finds the cycle and rolls that statement back.
    const deleter = await database.reserve();
    const watcher = await openDatabase({ databaseUrl: testDb.url, max: 1 });
    try {
      await deleter.execute('begin');
      await deleter.execute(`set local deadlock_timeout = '60s'`);
      await deleter.execute(sql`select 1 from physical_copy where id = ${second}::uuid for update`);
      const verifying = new ArchiveRecordRepository(database).recordVerification({
        operationId: p.operationId as string,
        state: ArchiveState.VERIFY_FAILED,
        by: 'operator',
        detail: { differences: ['whole-object sha256 differs'] },
      });
      await waitForLockWait(
        watcher,
        'archive_record',
        'the verification to wait on the copy the deleter holds',
      );
      // Granted once the verification's statement is rolled back; its second round then waits
      // for this transaction, which ends here.
      await deleter.execute(sql`select 1 from physical_copy where id = ${first}::uuid for update`);
      await deleter.execute('commit');
      const entry = await verifying;
      expect(entry.state).toBe(ArchiveState.VERIFY_FAILED);
    } finally {
      await deleter.execute('rollback').catch(() => {});
      await deleter.release();
      await watcher.close();
    }
    // The deadlock happened (the server counts it once the victim reports its statistics).
    await waitFor(async () => (await deadlocks()) > before, 'the deadlock to be counted', 30_000);
    const versions = await database.execute<{ v: number }>(sql`
      select version::int as v from physical_copy where artifact_id = ${p.pkg}::uuid`);
    expect(versions.map((r) => r.v)).toEqual([1, 1]);
    const states = await new ArchiveRecordRepository(database).list(p.operationId as string);
    expect(states.filter((r) => r.state === ArchiveState.VERIFY_FAILED)).toHaveLength(1);
  });
});

/**
 * Runs `write` with today's store on a database migrated only part of the way: the columns the
 * store reads and writes that later migrations add (`operation.deadline_ms`, 0011;
 * `operation.route_site` and `route_location`, 0012; `operation.priority`, 0013), and the unique
 * key its archive-record appends name (`archive_record_attempt_state_key`, 0018), are there for
 * the writes and dropped after, so the upgrade that follows starts from the older schema with the
 * rows an older release would have written.
 */
/** Runs `body` on a database of its own (two connections), dropped afterwards. */
async function onFreshDatabase(body: (db: Database) => Promise<void>): Promise<void> {
  const fresh = await createTestDatabase();
  const db = await openDatabase({ databaseUrl: fresh.url, max: 2 });
  try {
    await body(db);
  } finally {
    await db.close();
    await dropTestDatabase(fresh);
  }
}

async function withLaterColumns<T>(
  db: Database,
  write: () => Promise<T>,
  later = [
    'deadline_ms integer',
    'route_site text',
    'route_location text',
    'priority smallint not null default 0',
  ],
): Promise<T> {
  for (const c of later) await db.execute(`alter table operation add column ${c}`);
  await db.execute(
    'create unique index archive_record_attempt_state_key on archive_record (operation_id, attempt, state) where attempt is not null',
  );
  try {
    return await write();
  } finally {
    await db.execute('drop index archive_record_attempt_state_key');
    for (const c of later) {
      await db.execute(`alter table operation drop column ${c.split(' ')[0]}`);
    }
  }
}

/**
 * Applies the committed migrations that come before `tag` (the schema of an older release), from
 * a copy of the folder whose journal is cut there. Returns how many it applied.
 */
async function migrateBefore(db: Database, tag: string): Promise<number> {
  const older = await mkdtemp(join(tmpdir(), 'opstate-migrations-'));
  try {
    await cp(MIGRATIONS_FOLDER, older, { recursive: true });
    const journalPath = join(older, 'meta', '_journal.json');
    const journal = JSON.parse(await readFile(journalPath, 'utf8')) as {
      entries: { tag: string }[];
    };
    const cut = journal.entries.findIndex((e) => e.tag === tag);
    expect(cut).toBeGreaterThan(0);
    journal.entries = journal.entries.slice(0, cut);
    await writeFile(journalPath, JSON.stringify(journal));
    expect((await migrate(db, older)).applied).toBe(cut);
    return cut;
  } finally {
    await rm(older, { recursive: true, force: true });
  }
}
