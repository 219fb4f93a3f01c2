import { expect, it } from 'vitest';
import { type Clock, systemClock } from '../../machines/Clock.ts';
import { resolveDeadlines } from '../../machines/deadlines.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { OPERATION_STATUSES } from '../../machines/operationMachine.ts';
import { LocationType, queueName } from '../../machines/routing.ts';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import type { ActiveOperation } from '../../persistence/ActiveOperation.ts';
import type { CreateOperationInput } from '../../persistence/CreateOperationInput.ts';
import { migrate } from '../../persistence/migrate.ts';
import type { OperationRecord } from '../../persistence/OperationRecord.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { activePages } from '../../persistence/reads/activePages.ts';
import { barrierNow, dispatchesAhead } from '../helpers/dispatches.ts';
import { copiedColumns } from '../helpers/operationRows.ts';
import { millisOf, TIME_ORDERED_ID } from '../helpers/timeOrderedIds.ts';
import { inputFor, MIGRATIONS, makeWorld, tableCounts } from './fixtures.ts';
import { verifiedArchiveOutput } from './verifiedArchive.ts';

/** What each backend hands the shared suite. */
export interface SuiteBackend {
  /** The file's database, migrated. */
  database(): Database;
  /**
   * A second, independent handle on the same database (a new pool on Postgres; on PGlite, which
   * has one connection, the same database). Closed by the caller.
   */
  peer(): Promise<Database>;
  /**
   * The schema's owner, for what a test does by hand that the runtime never does (an operator's
   * SQL: deleting an operation, bypassing the triggers, trying to rewrite history); when absent,
   * `database()`, which then is the owner. Given when `database()` is the runtime role.
   */
  owner?(): Database;
}

async function expectCode(
  promise: Promise<unknown>,
  code: OpstateErrorCode,
): Promise<OpstateError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpstateError);
  expect((err as OpstateError).code).toBe(code);
  return err as OpstateError;
}

/** A clock that reads the test's own variable. */
const readingTime = (get: () => Date): Clock => ({ ...systemClock, now: () => get().getTime() });

/** Claims everything due, so a test's own claims are not mixed with earlier tests' leftovers. */
async function drain(database: Database): Promise<void> {
  const far = new OperationStore(database, {
    clock: new SimulatedClock(Date.parse('2999-01-01T00:00:00Z')),
  });
  while ((await far.claimDue(500)).claimed.length > 0) {}
}

/**
 * The persistence behaviour every backend must show, written once and run against Postgres and
 * PGlite. Call inside a `describe` after the file's `beforeAll` has opened and migrated.
 */
export function storeSuite(backend: SuiteBackend): void {
  const db = () => backend.database();
  const owner = () => backend.owner?.() ?? db();

  it('running the migrations again applies nothing and changes nothing', async () => {
    const before = await tableCounts(db());
    expect(await migrate(db())).toEqual({ applied: 0, total: MIGRATIONS });
    expect(await migrate(db())).toEqual({ applied: 0, total: MIGRATIONS });
    expect(await tableCounts(db())).toEqual(before);
  });

  it('creates an operation of every kind with its subtype row, inputs and creation transition', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    for (const kind of OPERATION_KINDS) {
      const id = await store.create(inputFor(kind, w));
      const op = await store.load(id);
      expect(op).toMatchObject({
        id,
        kind,
        status: 'PENDING',
        attempt: 1,
        retryCount: 0,
        version: 0,
      });
      expect(op.envelope.machineId).toBe('operation');
      expect(op.snapshot.context.kind).toBe(kind);
      const [sub] = await db().execute(
        `select count(*)::int as n from ${kind === 'raw_data_package' ? 'packaging' : kind === 'data_transfer_package' ? 'bundling' : kind}_operation where operation_id = '${id}'`,
      );
      expect(sub?.n).toBe(1);
    }
  });

  it('the database rejects a subtype row of the wrong kind', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const id = await store.create(inputFor(OperationKind.TRANSFER, w));
    // A packaging subtype row under a transfer base row: the composite FK (id, kind) refuses it.
    await expectCode(
      db().execute(
        `insert into packaging_operation (operation_id, raw_data_package_id, location_id)
         values ('${id}', '${w.pkg}', '${w.source.id}')`,
      ),
      OpstateErrorCode.BAD_INPUT,
    );
    // Forcing the kind column instead trips the check constraint.
    const err = await expectCode(
      db().execute(
        `insert into packaging_operation (operation_id, kind, raw_data_package_id, location_id)
         values ('${id}', 'transfer', '${w.pkg}', '${w.source.id}')`,
      ),
      OpstateErrorCode.BAD_INPUT,
    );
    expect(err.details.sqlState).toBe('23514');
    // A breadcrumb of another kind than its operation's, a subtype row moved under an operation
    // of another kind, and a change of an operation's kind are refused the same way.
    const refused = async (statement: string) => {
      const e = await expectCode(db().execute(statement), OpstateErrorCode.BAD_INPUT);
      expect(e.details.sqlState).toBe('23503');
    };
    await refused(
      `insert into operation_failure_event (kind, operation_id, attempt, error)
       values ('raw_data_package', '${id}', 1, '{}')`,
    );
    const packaging = await store.create(inputFor(OperationKind.RAW_DATA_PACKAGE, w));
    const move = `update transfer_operation set operation_id = '${packaging}'
       where operation_id = '${id}'`;
    // The runtime's database role may not update subtype rows at all: refused before the trigger.
    const [may] = await db().execute<{ update: boolean }>(
      `select has_table_privilege('transfer_operation', 'UPDATE') as update`,
    );
    if (may?.update === true) await refused(move);
    else await expectCode(db().execute(move), OpstateErrorCode.CONFIG);
    await refused(`update operation set kind = 'raw_data_package' where id = '${id}'`);
    // The refused statements changed nothing; a breadcrumb of its own kind is taken.
    expect((await store.load(id)).kind).toBe(OperationKind.TRANSFER);
    await db().execute(
      `insert into operation_failure_event (kind, operation_id, attempt, error)
       values ('transfer', '${id}', 1, '{}')`,
    );
  });

  it('bad input gets a clear error and changes nothing', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const id = await store.create(inputFor(OperationKind.LONG_TERM_ARCHIVE, w));
    const before = await tableCounts(db());

    const unknownKind = await expectCode(
      store.create({ kind: 'archive', fields: {} } as unknown as CreateOperationInput),
      OpstateErrorCode.BAD_INPUT,
    );
    expect(unknownKind.message).toContain('long_term_archive');
    await expectCode(
      // @ts-expect-error: a TRANSFER without its locations, as plain JavaScript may send it
      store.create({ kind: OperationKind.TRANSFER, fields: { dataTransferPackageId: w.dtp } }),
      OpstateErrorCode.BAD_INPUT,
    );
    // A well-formed create whose package does not exist: the subtype insert fails, the base row
    // written in the same statement goes with it.
    await expectCode(
      store.create({
        kind: OperationKind.STAGING,
        fields: {
          rawDataPackageId: '00000000-0000-4000-8000-000000000000',
          sourceLocationId: w.archive.id,
          destinationLocationId: w.processing.id,
        },
      }),
      OpstateErrorCode.BAD_INPUT,
    );
    await expectCode(
      store.apply(id, { type: 'COMPLETE', attempt: 1 }),
      OpstateErrorCode.INVALID_EVENT,
    );
    await expectCode(store.apply(id, { type: 'BOGUS' } as never), OpstateErrorCode.BAD_INPUT);
    await expectCode(
      store.apply('00000000-0000-4000-8000-000000000000', { type: 'SCHEDULE' }),
      OpstateErrorCode.NOT_FOUND,
    );
    await expectCode(store.apply('not-a-uuid', { type: 'SCHEDULE' }), OpstateErrorCode.BAD_INPUT);
    await expectCode(store.load("x' or 1=1 --"), OpstateErrorCode.BAD_INPUT);
    await expectCode(store.complete(id, 1, []), OpstateErrorCode.INVALID_EVENT);
    const late = await expectCode(
      store.create({ ...inputFor(OperationKind.TRANSFER, w), deadlineMs: 0 }),
      OpstateErrorCode.BAD_INPUT,
    );
    expect(late.message).toContain('deadlineMs must be a whole number of milliseconds from 1');

    expect(await tableCounts(db())).toEqual(before);
    expect((await store.load(id)).version).toBe(0);
  });

  it('claims a backlog longer than a batch in due order, one batch at a time', async () => {
    await drain(db());
    let now = new Date('2031-01-01T00:00:00Z');
    const store = new OperationStore(db(), { clock: readingTime(() => now) });
    const w = await makeWorld(db());
    // A retry: due again once its backoff (not_before) has passed.
    const retry = await store.create(inputFor(OperationKind.TRANSFER, w));
    expect((await store.claimDue(10)).claimed.map((c) => c.id)).toEqual([retry]);
    await store.apply(retry, { type: 'START', attempt: 1, workerId: 'w-1' });
    await store.apply(retry, {
      type: 'FAIL',
      attempt: 1,
      error: { message: 'disk full', retryable: true },
    });
    const notBefore = (await store.load(retry)).notBefore?.getTime() ?? 0;
    // Never tried yet (no not_before): due first, oldest first.
    const fresh: string[] = [];
    for (let i = 0; i < 5; i++) {
      now = new Date(notBefore + 1000 * (i + 1));
      fresh.push(await store.create(inputFor(OperationKind.TRANSFER, w)));
    }
    const batches: string[][] = [];
    for (;;) {
      const { claimed } = await store.claimDue(2);
      if (claimed.length === 0) break;
      batches.push(claimed.map((c) => c.id).sort()); // a batch is a set: its rows come back unordered
    }
    const set = (...ids: (string | undefined)[]) => (ids as string[]).sort();
    expect(batches).toEqual([
      set(fresh[0], fresh[1]),
      set(fresh[2], fresh[3]),
      set(fresh[4], retry),
    ]);
  });

  it('routes each operation on the location whose storage its handler must reach, and refuses one no worker would read', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const site = w.buffer.site;
    const kinds = [
      [OperationKind.RAW_DATA_PACKAGE, `${site}_source_source_raw_data_package_creation`],
      [OperationKind.DATA_TRANSFER_PACKAGE, `${site}_source_source_data_transfer_package_creation`],
      [OperationKind.TRANSFER, `${site}_buffer_buffer_data_transfer`],
      [OperationKind.UNPACK, `${site}_buffer_buffer_data_transfer_unpacking`],
      [OperationKind.LONG_TERM_ARCHIVE, `${site}_lta_long_term_archive_long_term_archive_transfer`],
      [OperationKind.STAGING, `${site}_processing_processing_staging`],
    ] as const;
    const ids = await store.createMany(kinds.map(([k]) => inputFor(k, w)));
    const records = await store.loadMany(ids);
    expect(ids.map((id) => queueName((records.get(id) as OperationRecord).route))).toEqual(
      kinds.map(([, q]) => q),
    );

    const before = await tableCounts(db());
    const wrong = await expectCode(
      store.create({
        kind: OperationKind.STAGING,
        fields: {
          rawDataPackageId: w.pkg,
          sourceLocationId: w.archive.id,
          destinationLocationId: w.buffer.id,
        },
      }),
      OpstateErrorCode.BAD_INPUT,
    );
    expect(wrong.message).toBe(
      `location ${site}/buffer is a buffer location, where no worker serves staging: route it to a processing location`,
    );
    await expectCode(
      w.artifacts.addLocation({
        site: 'two_words',
        name: 'x',
        locationType: LocationType.BUFFER,
        storageRoot: '/x',
      }),
      OpstateErrorCode.BAD_INPUT,
    );
    expect(await tableCounts(db())).toEqual(before);
  });

  it('walks the lifecycle with columns in step with the snapshot, history, outbox and breadcrumbs', async () => {
    await drain(db());
    let now = new Date('2030-01-01T00:00:00Z');
    const store = new OperationStore(db(), { clock: readingTime(() => now) });
    const w = await makeWorld(db());
    const id = await store.create({ ...inputFor(OperationKind.TRANSFER, w), maxRetries: 2 });

    const { claimed } = await store.claimDue(10);
    expect(claimed.map((c) => c.id)).toEqual([id]);
    expect(claimed[0]).toMatchObject({
      attempt: 1,
      version: 1,
      route: { operationType: 'data_transfer' },
    });
    // The dispatch is the SCHEDULE transition itself: read back as the relay reads it.
    const outbox = await dispatchesAhead(store);
    const mine = outbox.find((e) => e.operationId === id);
    expect(mine).toMatchObject({
      attempt: 1,
      stale: false,
      payload: { operationId: id, kind: 'transfer', operationType: 'data_transfer', attempt: 1 },
    });
    expect(mine?.createdAt.toISOString()).toBe('2030-01-01T00:00:00.000Z');
    expect(mine && queueName(mine.route)).toBe(`${w.buffer.site}_buffer_buffer_data_transfer`);
    // The relay moves its cursor past it, never back.
    expect(await store.saveRelayCursor(mine?.id ?? 0)).toBe(true);
    expect(await store.saveRelayCursor((mine?.id ?? 0) - 1)).toBe(false);
    expect((await dispatchesAhead(store)).some((e) => e.operationId === id)).toBe(false);

    now = new Date('2030-01-01T00:00:05Z');
    const started = await store.apply(id, { type: 'START', attempt: 1, workerId: 'w-1' });
    expect(started).toMatchObject({ from: 'SCHEDULED', status: 'IN_PROGRESS', version: 2 });
    let row = await store.load(id);
    expect(row).toMatchObject({ status: 'IN_PROGRESS', workerId: 'w-1', attempt: 1 });
    expect(row.startedAt?.toISOString()).toBe('2030-01-01T00:00:05.000Z');

    now = new Date('2030-01-01T00:00:10Z');
    const failed = await store.apply(id, {
      type: 'FAIL',
      attempt: 1,
      error: { message: 'disk full', retryable: true },
    });
    expect(failed.status).toBe('PENDING');
    expect(failed.effects.map((e) => e.type)).toContain('recordFailure');
    row = await store.load(id);
    expect(row).toMatchObject({ status: 'PENDING', attempt: 2, retryCount: 1, workerId: null });
    expect(row.lastError).toMatchObject({ message: 'disk full', retryable: true });
    expect(row.notBefore?.toISOString()).toBe(row.snapshot.context.notBefore);
    const notBefore = row.notBefore?.getTime() ?? 0;
    expect(notBefore).toBeGreaterThan(now.getTime());
    expect(row.startedAt).toBeNull();
    const [crumb] = await db().execute(
      `select kind, attempt, error from operation_failure_event where operation_id = '${id}'`,
    );
    expect(crumb).toMatchObject({ kind: 'transfer', attempt: 1, error: { message: 'disk full' } });

    // Backoff: not due until not_before has passed.
    expect((await store.claimDue(10)).claimed).toEqual([]);
    now = new Date(notBefore + 1);
    expect((await store.claimDue(10)).claimed.map((c) => [c.id, c.attempt])).toEqual([[id, 2]]);
    // The attempt-2 dispatch is the one past the cursor; the attempt-1 one is passed already.
    const again = (await dispatchesAhead(store)).filter((e) => e.operationId === id);
    expect(again.map((e) => [e.attempt, e.stale])).toEqual([[2, false]]);
    // Read from the start, attempt 1's is there and stale: its operation moved on.
    const all = await store.fetchDispatches(0, await barrierNow(store), 100_000);
    expect(all.filter((e) => e.operationId === id).map((e) => [e.attempt, e.stale])).toEqual([
      [1, true],
      [2, false],
    ]);

    const reset = await store.apply(id, {
      type: 'RESET',
      by: 'reconciler',
      reason: 'no heartbeat',
    });
    expect(reset).toMatchObject({ status: 'PENDING' });
    const history = await db().execute(
      `select from_status, to_status, event, attempt, by, reason from operation_transition
       where operation_id = '${id}' order by id`,
    );
    expect(
      history.map((h) => `${h.from_status}>${h.to_status}:${h.event}#${h.attempt}@${h.by}`),
    ).toEqual([
      'null>PENDING:CREATE#1@operator',
      'PENDING>SCHEDULED:SCHEDULE#1@scheduler',
      'SCHEDULED>IN_PROGRESS:START#1@w-1',
      'IN_PROGRESS>PENDING:FAIL#1@w-1',
      'PENDING>SCHEDULED:SCHEDULE#2@scheduler',
      'SCHEDULED>PENDING:RESET#2@reconciler',
    ]);
    expect(history.at(-1)?.reason).toBe('no heartbeat');
    const [size] = await db().execute(
      `select octet_length(snapshot::text) as n from operation where id = '${id}'`,
    );
    expect(Number(size?.n)).toBeLessThanOrEqual(1024);
    // History is append-only, even to the schema's owner.
    await expectCode(
      owner().execute(`update operation_transition set by = 'x' where operation_id = '${id}'`),
      OpstateErrorCode.BAD_INPUT,
    );
  });

  it('a lost compare-and-set gets CONFLICT with both versions and writes nothing', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const id = await store.create(inputFor(OperationKind.UNPACK, w));
    await store.apply(id, { type: 'SCHEDULE' });
    const before = await tableCounts(db());
    const err = await expectCode(
      store.apply(id, { type: 'START', attempt: 1, workerId: 'w' }, { expectedVersion: 0 }),
      OpstateErrorCode.CONFLICT,
    );
    expect(err.details).toMatchObject({ id, expectedVersion: 0, currentVersion: 1 });
    expect(await tableCounts(db())).toEqual(before);
  });

  it('two concurrent applies on the same version: exactly one wins, the other gets CONFLICT', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const id = await store.create(inputFor(OperationKind.STAGING, w));
    await store.apply(id, { type: 'SCHEDULE' });
    const peer = await backend.peer();
    try {
      const other = new OperationStore(peer);
      const results = await Promise.allSettled([
        store.apply(id, { type: 'START', attempt: 1, workerId: 'a' }, { expectedVersion: 1 }),
        other.apply(id, { type: 'START', attempt: 1, workerId: 'b' }, { expectedVersion: 1 }),
      ]);
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r) => r.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      expect(((lost[0] as PromiseRejectedResult).reason as OpstateError).code).toBe('CONFLICT');
      const [n] = await db().execute(
        `select count(*)::int as n from operation_transition where operation_id = '${id}' and event = 'START'`,
      );
      expect(n?.n).toBe(1);
      expect((await store.load(id)).version).toBe(2);
    } finally {
      if (peer !== db()) await peer.close();
    }
  });

  it('applyTo writes against a loaded row in one statement and is fenced on its version', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const id = await store.create(inputFor(OperationKind.DATA_TRANSFER_PACKAGE, w));
    const loaded = await store.load(id);
    const scheduled = await store.applyTo(loaded, { type: 'SCHEDULE' });
    expect(scheduled).toMatchObject({ status: 'SCHEDULED', version: 1 });
    const before = await tableCounts(db());
    const err = await expectCode(
      store.applyTo(loaded, { type: 'CANCEL', reason: 'late' }),
      OpstateErrorCode.CONFLICT,
    );
    expect(err.details).toMatchObject({ expectedVersion: 0, currentVersion: 1 });
    expect(await tableCounts(db())).toEqual(before);
    const fresh = await store.load(id);
    const [started] = await store.applyManyTo([
      { record: fresh, event: { type: 'START', attempt: 1, workerId: 'w' } },
    ]);
    expect(started?.ok && started.status).toBe('IN_PROGRESS');
  });

  it('applyMany gives each row its own result and writes only the accepted ones', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const [a, b, c] = await store.createMany([
      inputFor(OperationKind.TRANSFER, w),
      inputFor(OperationKind.UNPACK, w),
      inputFor(OperationKind.STAGING, w),
    ]);
    const results = await store.applyMany([
      { id: a as string, event: { type: 'SCHEDULE' } },
      { id: b as string, event: { type: 'COMPLETE', attempt: 1 } },
      { id: c as string, event: { type: 'SCHEDULE' }, expectedVersion: 7 },
      { id: '00000000-0000-4000-8000-00000000abcd', event: { type: 'SCHEDULE' } },
      { id: 'nope', event: { type: 'SCHEDULE' } },
      { id: a as string, event: { type: 'SCHEDULE' } },
    ]);
    expect(results.map((r) => (r.ok ? r.status : r.error.code))).toEqual([
      'SCHEDULED',
      'INVALID_EVENT',
      'CONFLICT',
      'NOT_FOUND',
      'BAD_INPUT',
      'BAD_INPUT',
    ]);
    const loaded = await store.loadMany([a as string, b as string, c as string]);
    expect([...loaded.values()].map((r) => [r.status, r.version])).toEqual(
      expect.arrayContaining([
        ['SCHEDULED', 1],
        ['PENDING', 0],
        ['PENDING', 0],
      ]),
    );
  });

  it('two concurrent completions of one archive leave exactly one copy', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const id = await store.create(inputFor(OperationKind.LONG_TERM_ARCHIVE, w));
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 1, workerId: 'w' });
    // A long-term archive completes with its VERIFIED record (the kind's output contract).
    const output = await verifiedArchiveOutput(db(), id);
    const peer = await backend.peer();
    try {
      const other = new OperationStore(peer);
      const [r1, r2] = await Promise.all([
        store.complete(id, 1, [output]),
        other.complete(id, 1, [output]),
      ]);
      expect([r1.alreadyCompleted, r2.alreadyCompleted].sort()).toEqual([false, true]);
      expect(r1.copiesCreated + r2.copiesCreated).toBe(1);
    } finally {
      if (peer !== db()) await peer.close();
    }
    const copies = await w.artifacts.copiesOf('raw_data_package', w.pkg);
    expect(copies.filter((c) => c.locationId === w.archive.id)).toHaveLength(1);
    expect((await store.load(id)).status).toBe('COMPLETED');
    // A late redelivery of the same attempt is success and writes nothing.
    const before = await tableCounts(db());
    expect((await store.complete(id, 1, [output])).alreadyCompleted).toBe(true);
    expect(await tableCounts(db())).toEqual(before);
  });

  it('one completion batch of operations producing the same copy makes one copy and links them all', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const ids = await store.createMany(
      Array.from({ length: 3 }, () => inputFor(OperationKind.LONG_TERM_ARCHIVE, w)),
    );
    for (const id of ids) {
      await store.apply(id, { type: 'SCHEDULE' });
      await store.apply(id, { type: 'START', attempt: 1, workerId: 'w' });
    }
    // Each archived the same package through the protocol: the same copy, the same checksum.
    const outputs = [];
    for (const id of ids) outputs.push(await verifiedArchiveOutput(db(), id));
    const output = outputs[0] as Awaited<ReturnType<typeof verifiedArchiveOutput>>;
    // The same copy named in upper case by one of them: still the same copy, and still created.
    const upper = {
      ...output,
      artifactId: w.pkg.toUpperCase(),
      locationId: w.archive.id.toUpperCase(),
    };
    const [a, b, c] = ids as [string, string, string];
    const batch = await store.completeMany([
      { id: a, attempt: 1, outputs: [upper] },
      { id: b, attempt: 1, outputs: [output] },
    ]);
    expect(batch.map((r) => r.ok && r.alreadyCompleted)).toEqual([false, false]);
    expect(batch.map((r) => r.ok && r.copiesCreated + r.copiesAlreadyPresent)).toEqual([1, 1]);
    expect(batch.map((r) => r.ok && r.copiesCreated)).toEqual([1, 1]);
    const later = await store.complete(c, 1, [output]);
    expect(later).toMatchObject({ copiesCreated: 0, copiesAlreadyPresent: 1 });
    const copies = await w.artifacts.copiesOf('raw_data_package', w.pkg);
    const here = copies.filter((copy) => copy.locationId === w.archive.id);
    expect(here).toHaveLength(1);
    const links = await db().execute(
      `select operation_id::text as id from operation_output where physical_copy_id = '${here[0]?.id}'`,
    );
    expect(links.map((l) => l.id).sort()).toEqual([...ids].sort());
    for (const id of ids) expect((await store.load(id)).status).toBe('COMPLETED');
  });

  it('a second archive operation of the same package completes on the existing copy (conflict = done)', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const ids = await store.createMany([
      inputFor(OperationKind.LONG_TERM_ARCHIVE, w),
      inputFor(OperationKind.LONG_TERM_ARCHIVE, w),
    ]);
    for (const id of ids) {
      await store.apply(id, { type: 'SCHEDULE' });
      await store.apply(id, { type: 'START', attempt: 1, workerId: 'w' });
    }
    const output = await verifiedArchiveOutput(db(), ids[0] as string);
    await verifiedArchiveOutput(db(), ids[1] as string);
    const peer = await backend.peer();
    let results: Awaited<ReturnType<OperationStore['complete']>>[];
    try {
      const other = new OperationStore(peer);
      results = await Promise.all([
        store.complete(ids[0] as string, 1, [output]),
        other.complete(ids[1] as string, 1, [output]),
      ]);
    } finally {
      if (peer !== db()) await peer.close();
    }
    expect(results.map((r) => r.alreadyCompleted)).toEqual([false, false]);
    expect(results.map((r) => r.copiesCreated).sort()).toEqual([0, 1]);
    const live = await w.artifacts.findLiveCopy('raw_data_package', w.pkg, w.archive.id);
    expect(live).toBeDefined();
    const [links] = await db().execute(
      `select count(*)::int as n from operation_output where physical_copy_id = '${live?.id}'`,
    );
    expect(links?.n).toBe(2);
    // The database itself refuses a second live copy (a DELETED one frees the slot: see the copy
    // lifecycle suite, where a copy reaches DELETED only through the deletion machine).
    await expectCode(
      db().execute(
        `insert into physical_copy (artifact_type, artifact_id, location_id)
         values ('raw_data_package', '${w.pkg}', '${w.archive.id}')`,
      ),
      OpstateErrorCode.CONFLICT,
    );
    expect((await w.artifacts.addCopy(output)).created).toBe(false);
  });

  it('a stale attempt cannot complete and writes nothing', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const id = await store.create(inputFor(OperationKind.LONG_TERM_ARCHIVE, w));
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 1, workerId: 'old' });
    await store.apply(id, { type: 'RESET', by: 'heartbeat_monitor', reason: 'stale heartbeat' });
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 2, workerId: 'new' });
    const before = await tableCounts(db());
    await expectCode(
      store.complete(id, 1, [
        { artifactType: 'raw_data_package', artifactId: w.pkg, locationId: w.archive.id },
      ]),
      OpstateErrorCode.STALE_ATTEMPT,
    );
    expect(await tableCounts(db())).toEqual(before);
  });

  it('claims never hand out the same operation twice, even from two handles at once', async () => {
    await drain(db());
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const ids = await store.createMany(
      Array.from({ length: 120 }, () => inputFor(OperationKind.RAW_DATA_PACKAGE, w)),
    );
    const peer = await backend.peer();
    const seen: string[][] = [[], []];
    try {
      const stores = [store, new OperationStore(peer)];
      await Promise.all(
        stores.map(async (s, n) => {
          for (;;) {
            const { claimed } = await s.claimDue(7);
            if (claimed.length === 0) return;
            seen[n]?.push(...claimed.map((c) => c.id));
          }
        }),
      );
    } finally {
      if (peer !== db()) await peer.close();
    }
    const all = [...(seen[0] ?? []), ...(seen[1] ?? [])];
    expect(new Set(all).size).toBe(all.length);
    expect(new Set(all)).toEqual(new Set(ids));
    // One dispatch each, recorded by its one SCHEDULE transition.
    const [scheduled] = await db().execute(
      `select count(*)::int as n from operation_transition
       where to_status = 'SCHEDULED' and operation_id = any('{${ids.join(',')}}'::uuid[])`,
    );
    expect(scheduled?.n).toBe(120);
  });

  it('an operator command that loses its compare-and-set is decided again on the row as it now is', async () => {
    const { applyOperatorCommand, OPERATOR_COMMAND_ATTEMPTS } = await import(
      '../../runtime/operatorCommand.ts'
    );
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const historyOf = async (id: string) =>
      (
        await db().execute(
          `select from_status, to_status, event, by from operation_transition
           where operation_id = '${id}' order by id`,
        )
      ).map((h) => `${h.from_status}>${h.to_status}:${h.event}@${h.by}`);
    /**
     * A store whose next `apply` meets a writer that got in between its read and its write: the
     * rival's move lands first, then the command is written against the version read before it,
     * so the real compare-and-set refuses it.
     */
    const racing = (rival: (id: string) => Promise<unknown>, races: number) => {
      let left = races;
      let calls = 0;
      return {
        get calls() {
          return calls;
        },
        apply: async (...[id, event, options]: Parameters<OperationStore['apply']>) => {
          calls++;
          if (left-- <= 0) return store.apply(id, event, options);
          const read = await store.load(id);
          await rival(id);
          return store.apply(id, event, { ...options, expectedVersion: read.version });
        },
      };
    };

    // Scheduled just as the operator cancels it: cancelled from SCHEDULED on the second try.
    const cancelled = await store.create(inputFor(OperationKind.TRANSFER, w));
    const scheduler = racing((id) => store.apply(id, { type: 'SCHEDULE' }), 1);
    const t = await applyOperatorCommand(scheduler, systemClock, cancelled, {
      type: 'CANCEL',
      reason: 'not wanted',
    });
    expect(t).toMatchObject({ from: 'SCHEDULED', status: 'FAILED' });
    expect(scheduler.calls).toBe(2);
    expect(await historyOf(cancelled)).toEqual([
      'null>PENDING:CREATE@operator',
      'PENDING>SCHEDULED:SCHEDULE@scheduler',
      'SCHEDULED>FAILED:CANCEL@operator',
    ]);

    // Completed just as the operator resets it: the machine refuses the reset, nothing is written.
    const completed = await store.create(inputFor(OperationKind.TRANSFER, w));
    await store.apply(completed, { type: 'SCHEDULE' });
    await store.apply(completed, { type: 'START', attempt: 1, workerId: 'w' });
    const worker = racing((id) => store.apply(id, { type: 'COMPLETE', attempt: 1 }), 1);
    await expectCode(
      applyOperatorCommand(worker, systemClock, completed, {
        type: 'RESET',
        by: 'operator',
        reason: 'stuck?',
      }),
      OpstateErrorCode.INVALID_EVENT,
    );
    expect((await historyOf(completed)).at(-1)).toBe('IN_PROGRESS>COMPLETED:COMPLETE@w');

    // A row that moves under every try: the command gives up with CONFLICT after a bounded number.
    const busy = await store.create({ ...inputFor(OperationKind.TRANSFER, w), maxRetries: 100 });
    await store.apply(busy, { type: 'SCHEDULE' });
    const flapping = racing(async (id) => {
      await store.apply(id, { type: 'RESET', by: 'operator', reason: 'flap' });
      await store.apply(id, { type: 'SCHEDULE' });
    }, OPERATOR_COMMAND_ATTEMPTS);
    await expectCode(
      applyOperatorCommand(flapping, systemClock, busy, { type: 'CANCEL', reason: 'x' }),
      OpstateErrorCode.CONFLICT,
    );
    expect(flapping.calls).toBe(OPERATOR_COMMAND_ATTEMPTS);
    expect((await store.load(busy)).status).toBe('SCHEDULED');

    // Only RETRY, RESET and CANCEL are an operator's to send.
    await expectCode(
      applyOperatorCommand(store, systemClock, busy, { type: 'START', attempt: 1, workerId: 'x' }),
      OpstateErrorCode.BAD_INPUT,
    );
  });

  it('journal steps are recorded once, a re-run gets the recorded result, a fenced attempt is refused', async () => {
    const { JournalRepository } = await import('../../persistence/JournalRepository.ts');
    const store = new OperationStore(db());
    const journal = new JournalRepository(db());
    const w = await makeWorld(db());
    const id = await store.create(inputFor(OperationKind.LONG_TERM_ARCHIVE, w));
    await expectCode(
      journal.recordStep({ operationId: id, attempt: 1, name: 'plan', state: 'done' }),
      OpstateErrorCode.STALE_ATTEMPT,
    );
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 1, workerId: 'w' });
    const first = await journal.recordStep({
      operationId: id,
      attempt: 1,
      name: 'plan',
      state: 'done',
      result: { members: ['a', 'b'] },
    });
    expect(first.recorded).toBe(true);
    const again = await journal.recordStep({
      operationId: id,
      attempt: 1,
      name: 'plan',
      state: 'done',
      result: { members: ['x'] },
    });
    expect(again).toMatchObject({ recorded: false, step: { result: { members: ['a', 'b'] } } });
    expect((await journal.getStep(id, 'plan'))?.result).toEqual({ members: ['a', 'b'] });
    expect(await journal.getStep(id, 'upload')).toBeUndefined();
    await store.apply(id, { type: 'RESET', by: 'operator', reason: 'test' });
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 2, workerId: 'w2' });
    // The resumed attempt sees the first attempt's plan and records the next step.
    expect(
      (await journal.recordStep({ operationId: id, attempt: 2, name: 'plan', state: 'done' }))
        .recorded,
    ).toBe(false);
    await expectCode(
      journal.recordStep({ operationId: id, attempt: 1, name: 'upload', state: 'done' }),
      OpstateErrorCode.STALE_ATTEMPT,
    );
    expect(
      (await journal.recordStep({ operationId: id, attempt: 2, name: 'upload', state: 'done' }))
        .recorded,
    ).toBe(true);
    expect((await journal.listSteps(id)).map((s) => [s.name, s.attempt])).toEqual([
      ['plan', 1],
      ['upload', 2],
    ]);
  });

  it('walks lineage from a raw data file up to its transfer package and back, and through copies', async () => {
    const { LineageRepository } = await import('../../persistence/LineageRepository.ts');
    const lineage = new LineageRepository(db());
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const files = await Promise.all(
      ['a.fits', 'b.fits'].map((name) => w.artifacts.addRawDataFile({ name, size: 10 })),
    );
    await w.artifacts.assignFiles(w.pkg, files);
    const up = await lineage.ofFile(files[0] as string);
    expect(up?.file.name).toBe('a.fits');
    expect(up?.rawDataPackage?.id).toBe(w.pkg);
    expect(up?.dataTransferPackage?.id).toBe(w.dtp);
    expect(up?.copies.map((c) => c.id)).toContain(w.sourceCopy);
    const down = await lineage.contentsOf(w.dtp);
    expect(down?.rawDataPackages.map((p) => [p.id, p.files.map((f) => f.name)])).toEqual([
      [w.pkg, ['a.fits', 'b.fits']],
    ]);

    const id = await store.create(inputFor(OperationKind.LONG_TERM_ARCHIVE, w));
    expect(await lineage.packageState(w.pkg)).toBe('ARCHIVING');
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 1, workerId: 'w' });
    await store.complete(id, 1, [await verifiedArchiveOutput(db(), id)]);
    const archived = await w.artifacts.findLiveCopy('raw_data_package', w.pkg, w.archive.id);
    expect((await lineage.operationsOfCopy(w.sourceCopy)).consumedBy.map((o) => o.id)).toEqual([
      id,
    ]);
    expect(
      (await lineage.operationsOfCopy(archived?.id ?? '')).producedBy.map((o) => o.id),
    ).toEqual([id]);
    expect(await lineage.packageState(w.pkg)).toBe('ARCHIVED');
    expect(await lineage.ofFile('00000000-0000-4000-8000-000000000000')).toBeUndefined();
  });

  it('derives group status from the children and keeps the retention claim', async () => {
    const { GroupRepository } = await import('../../persistence/GroupRepository.ts');
    const groups = new GroupRepository(db());
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const group = await groups.create({ name: 'staging job', active: true });
    expect(await groups.status(group.id)).toBe('EMPTY');
    const stagingCopy = (
      await w.artifacts.addCopy({
        artifactType: 'raw_data_package',
        artifactId: w.pkg,
        locationId: w.archive.id,
      })
    ).copy;
    const [a, b] = await store.createMany([
      { ...inputFor(OperationKind.STAGING, w), groupId: group.id, inputs: [stagingCopy.id] },
      { ...inputFor(OperationKind.STAGING, w), groupId: group.id },
    ]);
    expect(await groups.status(group.id)).toBe('PENDING');
    await store.apply(a as string, { type: 'SCHEDULE' });
    expect(await groups.status(group.id)).toBe('SCHEDULED');
    await store.apply(a as string, { type: 'START', attempt: 1, workerId: 'w' });
    expect(await groups.status(group.id)).toBe('IN_PROGRESS');
    await store.complete(a as string, 1, [
      { artifactType: 'raw_data_package', artifactId: w.pkg, locationId: w.processing.id },
    ]);
    expect(await groups.status(group.id)).toBe('IN_PROGRESS');
    await store.apply(b as string, { type: 'CANCEL', reason: 'operator gave up' });
    expect(await groups.status(group.id)).toBe('FAILED');
    expect(await groups.isCopyRetained(stagingCopy.id)).toBe(true);
    expect(await groups.setActive(group.id, false)).toBe(true);
    expect(await groups.isCopyRetained(stagingCopy.id)).toBe(false);
    expect((await groups.get(group.id))?.releasedAt).toBeInstanceOf(Date);
  });

  it('control-plane queries: IN_PROGRESS list, active older than a time, counts per kind × status', async () => {
    let now = new Date('2031-05-01T00:00:00Z');
    const store = new OperationStore(db(), { clock: readingTime(() => now) });
    const w = await makeWorld(db());
    const before = await store.countByKindAndStatus();
    const id = await store.create(inputFor(OperationKind.UNPACK, w));
    await store.apply(id, { type: 'SCHEDULE' });
    now = new Date('2031-05-01T00:01:00Z');
    await store.apply(id, { type: 'START', attempt: 1, workerId: 'w-9' });
    const running = (await store.listInProgress()).find((o) => o.id === id);
    expect(running).toMatchObject({ kind: 'unpack', attempt: 1, workerId: 'w-9' });
    expect(running?.startedAt?.toISOString()).toBe('2031-05-01T00:01:00.000Z');
    const old = await store.listActiveOlderThan(new Date('2031-05-01T00:02:00Z'));
    expect(old.find((o) => o.id === id)).toMatchObject({ status: 'IN_PROGRESS' });
    expect(
      (await store.listActiveOlderThan(new Date('2031-05-01T00:00:30Z'))).find((o) => o.id === id),
    ).toBeUndefined();
    const after = await store.countByKindAndStatus();
    expect(Object.keys(after)).toEqual([...OPERATION_KINDS]);
    for (const kind of OPERATION_KINDS)
      expect(Object.keys(after[kind])).toEqual([...OPERATION_STATUSES]);
    expect(after.unpack.IN_PROGRESS - before.unpack.IN_PROGRESS).toBe(1);
  });

  it('active older than a time, page by page: each row once in (since, id) order, one status on request, ties split across pages', async () => {
    const now = new Date('2031-05-02T00:00:00Z');
    const store = new OperationStore(db(), { clock: readingTime(() => now) });
    const w = await makeWorld(db());
    // Seven operations scheduled at one instant (their since ties), three of them started.
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const id = await store.create(inputFor(OperationKind.UNPACK, w));
      await store.apply(id, { type: 'SCHEDULE' });
      if (i < 3) await store.apply(id, { type: 'START', attempt: 1, workerId: `w-${i}` });
      ids.push(id);
    }
    const before = new Date('2031-05-02T00:00:01Z');
    const mine = (ops: ActiveOperation[]) => ops.filter((o) => ids.includes(o.id));
    const read = async (only: { status?: 'SCHEDULED' | 'IN_PROGRESS' }) => {
      const pages: string[][] = [];
      for await (const page of activePages(store, before, only, 2)) {
        expect(page.length).toBeLessThanOrEqual(2);
        pages.push(mine(page).map((o) => o.id));
      }
      return pages;
    };
    const all = (await read({})).flat();
    expect(all).toEqual([...ids].sort());
    const one = await store.listActiveOlderThan(before, 1000);
    expect(mine(one).map((o) => o.id)).toEqual(all);
    expect((await read({ status: 'SCHEDULED' })).flat()).toEqual(ids.slice(3).sort());
    expect((await read({ status: 'IN_PROGRESS' })).flat()).toEqual(ids.slice(0, 3).sort());
    // A page starts strictly after the position it is given.
    const [first, second] = await store.listActiveOlderThan(before, 2);
    const next = await store.listActiveOlderThan(before, 2, {
      after: (first as ActiveOperation).position,
    });
    expect(next[0]?.id).toBe(second?.id);
  });

  it('an operation keeps its own deadline; the deadline query lists attempts IN_PROGRESS past theirs, own or their kind’s, from their START', async () => {
    let now = new Date('2031-06-01T00:00:00Z');
    const store = new OperationStore(db(), { clock: readingTime(() => now) });
    const w = await makeWorld(db());
    const own = await store.create({ ...inputFor(OperationKind.UNPACK, w), deadlineMs: 60_000 });
    const ofKind = await store.create(inputFor(OperationKind.UNPACK, w));
    const waiting = await store.create({ ...inputFor(OperationKind.UNPACK, w), deadlineMs: 1 });
    expect((await store.load(own)).deadlineMs).toBe(60_000);
    expect((await store.load(ofKind)).deadlineMs).toBeNull();
    for (const id of [own, ofKind]) await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(waiting, { type: 'SCHEDULE' }); // SCHEDULED, not running: no deadline yet
    now = new Date('2031-06-01T00:10:00Z');
    for (const id of [own, ofKind])
      await store.apply(id, { type: 'START', attempt: 1, workerId: 'w-9' });
    const deadlines = resolveDeadlines({ unpack: 120_000 });
    const past = async (at: string) =>
      (await store.listPastDeadline(new Date(at), deadlines)).filter((o) =>
        [own, ofKind, waiting].includes(o.id),
      );
    expect(await past('2031-06-01T00:10:59.999Z')).toEqual([]);
    expect(await past('2031-06-01T00:11:00Z')).toEqual([
      {
        id: own,
        kind: 'unpack',
        attempt: 1,
        startedAt: new Date('2031-06-01T00:10:00Z'),
        workerId: 'w-9',
        deadlineMs: 60_000,
      },
    ]);
    expect((await past('2031-06-01T00:12:00Z')).map((o) => o.id).sort()).toEqual(
      [own, ofKind].sort(),
    );
    // The database holds the same bounds as submit does.
    const refused = await expectCode(
      db().execute(`update operation set deadline_ms = 0 where id = '${own}'`),
      OpstateErrorCode.BAD_INPUT,
    );
    expect(refused.details.sqlState).toBe('23514');
  });

  it('counts per kind × status stay exact through every kind of write, folded or not; a rolled-back write and a bare fold change nothing', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    /** What the counts must say: every operation row counted afresh. */
    const truth = async () => {
      const rows = await db().execute<{ kind: string; status: string; n: number }>(
        'select kind, status, count(*)::int as n from operation group by kind, status',
      );
      const counts = Object.fromEntries(
        OPERATION_KINDS.map((k) => [k, Object.fromEntries(OPERATION_STATUSES.map((s) => [s, 0]))]),
      );
      for (const r of rows) (counts[r.kind] as Record<string, number>)[r.status] = Number(r.n);
      return counts;
    };
    /** The counts, and the scheduler's count of SCHEDULED work, as the rows say. */
    const expectExact = async () => {
      const rows = await truth();
      expect(await store.countByKindAndStatus()).toEqual(rows);
      expect(await store.countScheduled()).toBe(
        OPERATION_KINDS.reduce((n, k) => n + (rows[k]?.SCHEDULED ?? 0), 0),
      );
    };
    await expectExact();
    const scheduledBefore = await store.countScheduled();

    const [t1, t2, u, s, a] = (await store.createMany([
      inputFor(OperationKind.TRANSFER, w),
      inputFor(OperationKind.TRANSFER, w),
      inputFor(OperationKind.UNPACK, w),
      inputFor(OperationKind.STAGING, w),
      inputFor(OperationKind.LONG_TERM_ARCHIVE, w),
    ])) as [string, string, string, string, string];
    await expectExact();
    await store.applyMany([t1, t2, u, s, a].map((id) => ({ id, event: { type: 'SCHEDULE' } })));
    await expectExact();
    expect(await store.countScheduled()).toBe(scheduledBefore + 5);
    await store.applyMany(
      [t1, t2, u, a].map((id) => ({ id, event: { type: 'START', attempt: 1, workerId: 'w' } })),
    );
    await expectExact();
    expect(await store.countScheduled()).toBe(scheduledBefore + 1);
    const output = {
      artifactType: 'raw_data_package' as const,
      artifactId: w.pkg,
      locationId: w.archive.id,
    };
    await store.completeMany([{ id: a, attempt: 1, outputs: [output] }]);
    await store.apply(t1, {
      type: 'FAIL',
      attempt: 1,
      error: { message: 'disk gone', retryable: false },
    });
    await store.apply(t2, {
      type: 'FAIL',
      attempt: 1,
      error: { message: 'timeout', retryable: true },
    });
    await store.apply(s, { type: 'CANCEL', reason: 'operator gave up' });
    await expectExact();
    await store.apply(t1, { type: 'RETRY' });
    await expectExact();
    // An event refused as a whole (the stale version) writes nothing, and counts nothing.
    await store.applyMany([{ id: u, event: { type: 'SCHEDULE' }, expectedVersion: 99 }]);
    await expectExact();

    // A create and a status change rolled back leave the counts as they were.
    const before = await store.countByKindAndStatus();
    await expect(
      db().transaction(async (tx) => {
        await tx.execute(
          `insert into operation (id, ${copiedColumns('')})
             select gen_random_uuid(), ${copiedColumns('t.')} from operation t where t.id = '${u}'`,
        );
        await tx.execute(`update operation set status = 'FAILED' where id = '${u}'`);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await store.countByKindAndStatus()).toEqual(before);
    // The same row inserted and deleted for good (nothing in the runtime deletes operations; an
    // operator's SQL might): counted, then not.
    const [extra] = await db().execute<{ id: string }>(
      `insert into operation (id, ${copiedColumns('')})
         select gen_random_uuid(), ${copiedColumns('t.')} from operation t where t.id = '${u}'
         returning id::text as id`,
    );
    await expectExact();
    await owner().execute(`delete from operation where id = '${extra?.id}'`);
    expect(await store.countByKindAndStatus()).toEqual(before);

    // Folding leaves one row per kind and status that has operations, and the same sums.
    const pairs = Object.values(await truth()).reduce(
      (n, byStatus) => n + Object.values(byStatus).filter((c) => c > 0).length,
      0,
    );
    const rows = async () =>
      Number((await db().execute('select count(*)::int as n from operation_tally'))[0]?.n);
    expect(await rows()).toBeGreaterThan(pairs);
    expect(await store.foldCounts()).toBeGreaterThan(pairs);
    expect(await rows()).toBe(pairs);
    await expectExact();
    // Nothing new since: a fold rewrites the same rows and changes no sum.
    await store.foldCounts();
    expect(await rows()).toBe(pairs);
    await expectExact();
    await store.apply(u, {
      type: 'FAIL',
      attempt: 1,
      error: { message: 'late', retryable: false },
    });
    await expectExact();
  });

  it('a recount puts a tally something bypassed back on the rows, says what was wrong, and changes nothing when it matched', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const [t, u] = (await store.createMany([
      inputFor(OperationKind.TRANSFER, w),
      inputFor(OperationKind.UNPACK, w),
    ])) as [string, string];
    await store.apply(t, { type: 'SCHEDULE' });
    const matched = await store.countByKindAndStatus();
    expect(await store.recountCounts()).toEqual([]);
    expect(await store.countByKindAndStatus()).toEqual(matched);

    // Writes the triggers never saw: the transfer taken out of SCHEDULED and an operation that
    // exists only in the tally.
    await owner().transaction(async (tx) => {
      await tx.execute('alter table operation disable trigger user');
      await tx.execute(
        `update operation set status = 'PENDING', scheduled_at = null where id = '${t}'`,
      );
      await tx.execute('alter table operation enable trigger user');
    });
    await db().execute(
      `insert into operation_tally (kind, status, n) values ('staging', 'IN_PROGRESS', 3)`,
    );
    const wrong = await store.countByKindAndStatus();
    expect(wrong.transfer.SCHEDULED).toBe(matched.transfer.SCHEDULED);
    expect(wrong.staging.IN_PROGRESS).toBe(matched.staging.IN_PROGRESS + 3);
    // The scheduler is told of a SCHEDULED transfer that is not there.
    const scheduledRows = async () =>
      Number(
        (
          await db().execute(`select count(*)::int as n from operation where status = 'SCHEDULED'`)
        )[0]?.n,
      );
    expect(await store.countScheduled()).toBe((await scheduledRows()) + 1);

    // `opstate status` notices the live counts that differ (one statement, one snapshot).
    const shared = async (): Promise<Database> => ({ ...db(), close: async () => {} });
    const { createStatusCommand } = await import('../../cli/commands/status.ts');
    const status = async (args: string[]) => {
      const out: string[] = [];
      const io = { out: (l: string) => out.push(l), err: () => {} };
      expect(await createStatusCommand(shared).run(args, io)).toBe(0);
      return out;
    };
    const liveDrift = [
      {
        kind: 'staging',
        status: 'IN_PROGRESS',
        tallied: matched.staging.IN_PROGRESS + 3,
        stored: matched.staging.IN_PROGRESS,
      },
      {
        kind: 'transfer',
        status: 'SCHEDULED',
        tallied: matched.transfer.SCHEDULED,
        stored: matched.transfer.SCHEDULED - 1,
      },
    ];
    expect(JSON.parse((await status(['--json'])).join('\n')).countsDrift).toEqual(liveDrift);
    const text = await status([]);
    expect(text).toContain(
      `  transfer SCHEDULED: the counts say ${matched.transfer.SCHEDULED}, ${matched.transfer.SCHEDULED - 1} stored`,
    );
    expect(text.some((l) => l.includes('`opstate recount` puts them back'))).toBe(true);

    // `opstate recount --json` says what was wrong.
    const { createRecountCommand } = await import('../../cli/commands/recount.ts');
    const recount = async (args: string[]) => {
      const out: string[] = [];
      const io = { out: (l: string) => out.push(l), err: (l: string) => out.push(l) };
      expect(await createRecountCommand(shared).run(args, io)).toBe(0);
      return out;
    };
    expect(JSON.parse((await recount(['--json'])).join('\n'))).toEqual({
      wrong: [
        {
          kind: 'staging',
          status: 'IN_PROGRESS',
          tallied: matched.staging.IN_PROGRESS + 3,
          stored: matched.staging.IN_PROGRESS,
        },
        {
          kind: 'transfer',
          status: 'PENDING',
          tallied: matched.transfer.PENDING,
          stored: matched.transfer.PENDING + 1,
        },
        {
          kind: 'transfer',
          status: 'SCHEDULED',
          tallied: matched.transfer.SCHEDULED,
          stored: matched.transfer.SCHEDULED - 1,
        },
      ],
    });
    const rows = await db().execute<{ kind: string; status: string; n: number }>(
      'select kind, status, count(*)::int as n from operation group by kind, status',
    );
    const recounted = await store.countByKindAndStatus();
    for (const r of rows) expect(recounted[r.kind as OperationKind][r.status as never]).toBe(r.n);
    expect(recounted.staging.IN_PROGRESS).toBe(matched.staging.IN_PROGRESS);
    expect(await store.countScheduled()).toBe(await scheduledRows());
    // One row per kind and status that has operations, and a second recount finds nothing.
    expect(
      Number((await db().execute('select count(*)::int as n from operation_tally'))[0]?.n),
    ).toBe(rows.length);
    expect(await recount([])).toEqual([
      'the counts matched the operations stored; nothing changed',
    ]);
    expect(JSON.parse((await status(['--json'])).join('\n')).countsDrift).toEqual([]);
    await db().execute(
      `insert into operation_tally (kind, status, n) values ('data_transfer_package', 'FAILED', 2)`,
    );
    expect(await recount([])).toEqual([
      `data_transfer_package FAILED: the counts said ${recounted.data_transfer_package.FAILED + 2}, ${recounted.data_transfer_package.FAILED} stored`,
      '1 of the counts put back on the rows',
    ]);
    // The triggers count on from the recount.
    await store.apply(u, { type: 'SCHEDULE' });
    expect((await store.countByKindAndStatus()).unpack.SCHEDULED).toBe(
      recounted.unpack.SCHEDULED + 1,
    );
  });

  it('ids are time-ordered: an operation created without one gets its creation time, rows the database keys get its clock', async () => {
    const at = Date.parse('2031-06-01T12:00:00.123Z');
    const store = new OperationStore(db(), { clock: new SimulatedClock(at) });
    const w = await makeWorld(db());
    const [a, b] = (await store.createMany([
      inputFor(OperationKind.LONG_TERM_ARCHIVE, w),
      inputFor(OperationKind.LONG_TERM_ARCHIVE, w),
    ])) as [string, string];
    for (const id of [a, b]) {
      expect(id).toMatch(TIME_ORDERED_ID);
      expect(millisOf(id)).toBe(at);
    }
    // Keyed by the database: the world's package, and the copy a completion creates.
    const [dbNow] = await db().execute<{ ms: string }>(
      'select (extract(epoch from clock_timestamp()) * 1000)::bigint as ms',
    );
    await store.apply(a, { type: 'SCHEDULE' });
    await store.apply(a, { type: 'START', attempt: 1, workerId: 'w' });
    const done = await store.complete(a, 1, [await verifiedArchiveOutput(db(), a)]);
    expect(done.copiesCreated).toBe(1);
    const [copy] = await db().execute<{ id: string }>(
      `select physical_copy_id::text as id from operation_output where operation_id = '${a}'`,
    );
    for (const id of [w.pkg, String(copy?.id)]) {
      expect(id).toMatch(TIME_ORDERED_ID);
      expect(Math.abs(millisOf(id) - Number(dbNow?.ms))).toBeLessThan(60_000);
    }
  });

  it('opstate status --json and inspect --json print the documented shapes', async () => {
    const { createStatusCommand } = await import('../../cli/commands/status.ts');
    const { createInspectCommand } = await import('../../cli/commands/inspect.ts');
    const shared = async (): Promise<Database> => ({ ...db(), close: async () => {} });
    const capture = () => {
      const out: string[] = [];
      const err: string[] = [];
      return { out, err, io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l) } };
    };
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const { JournalRepository } = await import('../../persistence/JournalRepository.ts');
    const id = await store.create(inputFor(OperationKind.LONG_TERM_ARCHIVE, w));
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 1, workerId: 'w-7' });
    await new JournalRepository(db()).recordStep({
      operationId: id,
      attempt: 1,
      name: 'plan',
      state: 'done',
    });
    await store.complete(id, 1, [await verifiedArchiveOutput(db(), id)]);

    const { LeaseRepository } = await import('../../persistence/LeaseRepository.ts');
    const lease = await new LeaseRepository(db()).acquire(`status-${id}`, 'host-a:42:abc', 60_000);
    const status = capture();
    expect(await createStatusCommand(shared).run(['--json'], status.io)).toBe(0);
    const parsed = JSON.parse(status.out.join('\n')) as {
      operations: Record<string, Record<string, number>>;
      leaders: { name: string; holder: string; since: string; expired: boolean }[];
    };
    expect(Object.keys(parsed)).toEqual([
      'leaders',
      'operations',
      'packages',
      'waiting',
      'countsDrift',
      'circuitBreakers',
      'flowLimits',
      'copies',
      'deletions',
      'queues',
      'queueReadersUnknown',
      'attention',
    ]);
    expect((parsed as unknown as { countsDrift: unknown }).countsDrift).toEqual([]);
    expect(parsed.leaders.find((l) => l.name === `status-${id}`)).toEqual({
      name: `status-${id}`,
      holder: 'host-a:42:abc',
      epoch: lease?.epoch,
      since: lease?.acquiredAt.toISOString(),
      renewedAt: lease?.renewedAt.toISOString(),
      expiresAt: lease?.expiresAt.toISOString(),
      expired: false,
    });
    expect(Object.keys(parsed.operations)).toEqual([...OPERATION_KINDS]);
    for (const kind of OPERATION_KINDS) {
      expect(Object.keys(parsed.operations[kind] ?? {})).toEqual([...OPERATION_STATUSES]);
      for (const n of Object.values(parsed.operations[kind] ?? {}))
        expect(Number.isInteger(n)).toBe(true);
    }
    expect(parsed.operations.long_term_archive?.COMPLETED).toBeGreaterThanOrEqual(1);
    const table = capture();
    expect(await createStatusCommand(shared).run([], table.io)).toBe(0);
    expect(table.out[0]).toMatch(/^kind\s+PENDING\s+SCHEDULED\s+IN_PROGRESS\s+COMPLETED\s+FAILED$/);
    // The operations table, the line of what waits to start when something does (other tests
    // share the database), the leader, then (the world has copies) the copies per location
    // type × status.
    const afterTable = 1 + OPERATION_KINDS.length;
    const waits = table.out[afterTable]?.startsWith('waiting to start (') === true;
    expect(table.out[afterTable + (waits ? 1 : 0)]).toBe('');
    expect(table.out).toContain(
      `leader of status-${id}: host-a:42:abc since ${lease?.acquiredAt.toISOString()} (epoch 1, lease renewed ${lease?.renewedAt.toISOString()}, until ${lease?.expiresAt.toISOString()})`,
    );
    const copiesAt = table.out.indexOf('physical copies (deletion after archive)');
    expect(copiesAt).toBeGreaterThan(1 + OPERATION_KINDS.length);
    expect(table.out[copiesAt + 1]).toMatch(/^location type\s+PRESENT\s+DELETION_SCHEDULED/);
    // Then the attention list.
    expect(table.out.some((l) => /^attention \(\d+\+?\)/.test(l))).toBe(true);

    const inspect = capture();
    expect(await createInspectCommand(shared).run([id, '--json'], inspect.io)).toBe(0);
    const view = JSON.parse(inspect.out.join('\n'));
    expect(view).toMatchObject({
      id,
      kind: 'long_term_archive',
      status: 'COMPLETED',
      attempt: 1,
      retryCount: 0,
      fields: {
        rawDataPackageId: w.pkg,
        sourceLocationId: w.source.id,
        destinationLocationId: w.archive.id,
        archiveKey: null,
      },
      inputs: [{ id: w.sourceCopy }],
      outputs: [{ artifactId: w.pkg, locationId: w.archive.id, status: 'PRESENT' }],
      steps: [{ name: 'plan', attempt: 1, state: 'done' }],
    });
    expect(view.transitions.map((t: Record<string, unknown>) => Object.keys(t).sort())[0]).toEqual([
      'at',
      'attempt',
      'by',
      'event',
      'from',
      'reason',
      'to',
    ]);
    expect(
      view.transitions.map((t: { event: string; by: string }) => `${t.event}@${t.by}`),
    ).toEqual(['CREATE@operator', 'SCHEDULE@scheduler', 'START@w-7', 'COMPLETE@w-7']);
    const human = capture();
    expect(await createInspectCommand(shared).run([id], human.io)).toBe(0);
    expect(human.out.join('\n')).toContain('IN_PROGRESS → COMPLETED');
    const missing = capture();
    expect(
      await createInspectCommand(shared).run(['00000000-0000-4000-8000-000000000000'], missing.io),
    ).toBe(1);
    expect(missing.err.join('\n')).toMatch(/\[NOT_FOUND\]$/);
  });
}
