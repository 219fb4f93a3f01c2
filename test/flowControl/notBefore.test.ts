import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStatusCommand } from '../../cli/commands/status.ts';
import { createSubmitCommand } from '../../cli/commands/submit.ts';
import { DEFAULT_DEADLINES_MS } from '../../machines/deadlines.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError } from '../../machines/OpstateError.ts';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import { FlowLimitRepository } from '../../persistence/FlowLimitRepository.ts';
import { loadAttention } from '../../persistence/loadAttention.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { inputFor, makeWorld, tableCounts } from '../persistence/fixtures.ts';

const MINUTE = 60_000;

describe('delayed start (notBefore) on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_notbefore', { migrated: true });
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
  });

  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  it('stays PENDING, unclaimed, until its time; a time already past means now', async () => {
    const clock = new SimulatedClock(Date.parse('2031-03-01T08:00:00Z'));
    const store = new OperationStore(database, { clock });
    const w = await makeWorld(database);
    const input = inputFor(OperationKind.LONG_TERM_ARCHIVE, w);
    const later = await store.create({ ...input, notBefore: new Date(clock.now() + 10 * MINUTE) });
    const iso = await store.create({ ...input, notBefore: '2031-03-01T09:30:00+01:00' });
    const past = await store.create({ ...input, notBefore: '2031-03-01T07:00:00Z' });
    const now = await store.create(input);
    expect((await store.load(later)).notBefore?.toISOString()).toBe('2031-03-01T08:10:00.000Z');
    expect((await store.load(iso)).notBefore?.toISOString()).toBe('2031-03-01T08:30:00.000Z');
    const claim = async () => (await store.claimDue(100)).claimed.map((c) => c.id);
    const first = (await claim()).filter((id) => [later, iso, past, now].includes(id));
    expect(first.sort()).toEqual([now, past].sort());
    await clock.advance(10 * MINUTE - 1);
    expect(await claim()).not.toContain(later);
    await clock.advance(1);
    expect(await claim()).toContain(later);
    expect((await store.load(iso)).status).toBe('PENDING');
    await clock.advance(20 * MINUTE);
    expect(await claim()).toContain(iso);
    // Once scheduled, the delayed start is spent: a retry's backoff is the machine's own.
    expect((await store.load(later)).notBefore).toBeNull();
  });

  it('refuses a notBefore that is not a time, naming the forms, and writes nothing', async () => {
    const store = new OperationStore(database);
    const w = await makeWorld(database);
    const input = inputFor(OperationKind.LONG_TERM_ARCHIVE, w);
    const before = await tableCounts(database);
    for (const notBefore of [
      'tomorrow',
      '2031-03-01',
      '2031-03-01T08:00:00', // no zone: whose eight o'clock?
      '2031-13-01T08:00:00Z',
      new Date(Number.NaN),
      1_900_000_000_000,
      null,
    ]) {
      const err = await store.create({ ...input, notBefore } as never).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, String(notBefore)).toBeInstanceOf(OpstateError);
      expect((err as OpstateError).code).toBe('BAD_INPUT');
      expect((err as OpstateError).message).toMatch(
        /notBefore must be a Date or an ISO 8601 date-time with its zone, such as 2026-12-05T18:00:00Z; got /,
      );
    }
    expect(await tableCounts(database)).toEqual(before);
  });

  it('is listed as waiting, not stuck; so is work behind a full flow limit', async () => {
    const store = new OperationStore(database);
    const w = await makeWorld(database);
    const input = inputFor(OperationKind.LONG_TERM_ARCHIVE, w);
    const created = Date.now();
    const delayed = await store.create({ ...input, notBefore: new Date(created + 3 * 3_600_000) });
    const due = await store.create(input);
    const staging = inputFor(OperationKind.STAGING, w);
    const [running, parked] = await store.createMany([staging, staging]);
    await new FlowLimitRepository(database).set({ location: w.processing.id, max: 1 });
    const { claimed } = await store.claimDue(1000);
    expect(claimed.map((c) => c.id)).toContain(running);
    expect(claimed.map((c) => c.id)).not.toContain(parked);
    // An hour on, with a floor of a minute: only the plain PENDING one is stuck.
    const timing = {
      heartbeatTimeoutMs: 30_000,
      reconcilerFloorMs: MINUTE,
      deadlines: DEFAULT_DEADLINES_MS,
    };
    const list = await loadAttention(database, {
      now: created + 3_600_000,
      timing,
      heartbeats: null,
      category: 'stuck',
      limit: 500,
    });
    const stuck = (list.sections[0]?.items ?? []).map((i) => i.subject.id);
    expect(stuck).not.toContain(delayed);
    expect(stuck).not.toContain(parked);
    expect(stuck).toContain(running); // SCHEDULED with no worker: the reconciler's case
    // `due` was claimed with the rest; make a plain PENDING one that is stuck, to show the rule bites.
    expect(claimed.map((c) => c.id)).toContain(due);
    const idle = await store.create(input);
    const later = await loadAttention(database, {
      now: created + 3_600_000,
      timing,
      heartbeats: null,
      category: 'stuck',
      limit: 500,
    });
    expect((later.sections[0]?.items ?? []).map((i) => i.subject.id)).toContain(idle);

    const out: string[] = [];
    const io = { out: (l: string) => out.push(l), err: (l: string) => out.push(l) };
    const status = createStatusCommand(
      () => openDatabase({ databaseUrl: testDb.url, max: 1 }),
      async () => ({ heartbeats: null, timing, close: async () => {} }),
    );
    expect(await status.run(['--json'], io)).toBe(0);
    const parsed = JSON.parse(out.join('\n')) as {
      waiting: Record<string, number>;
      flowLimits: { locationId: string; live: number; max: number; waiting: number }[];
    };
    const [behind] = await database.execute(`select count(*)::int as n from operation
      where target_location_id = '${w.processing.id}' and status = 'PENDING'`);
    const waitingBehind = Number(behind?.n);
    expect(waitingBehind).toBeGreaterThan(0);
    expect(parsed.waiting[OperationKind.LONG_TERM_ARCHIVE]).toBeGreaterThanOrEqual(1);
    expect(parsed.flowLimits.find((l) => l.locationId === w.processing.id)).toMatchObject({
      live: 1,
      max: 1,
      waiting: waitingBehind,
    });
    out.length = 0;
    expect(await status.run([], io)).toBe(0);
    expect(out.join('\n')).toMatch(/waiting to start \(.*not stuck\): \d+ long_term_archive/);
    expect(out.join('\n')).toMatch(
      new RegExp(`\\(every kind\\)\\s+1 of 1 \\(full\\)\\s+${waitingBehind}\\b`),
    );
  });

  it('opstate submit --not-before takes an ISO time or a delay, and refuses anything else', async () => {
    const w = await makeWorld(database);
    const submit = createSubmitCommand(() => openDatabase({ databaseUrl: testDb.url, max: 1 }));
    const run = async (...args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await submit.run(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
      return { code, out, err };
    };
    const fields = JSON.stringify(inputFor(OperationKind.LONG_TERM_ARCHIVE, w).fields);
    const at = await run(
      'long_term_archive',
      '--fields',
      fields,
      '--not-before',
      '2031-05-01T00:00:00Z',
    );
    expect(at.code).toBe(0);
    const store = new OperationStore(database);
    expect((await store.load(at.out[0] as string)).notBefore?.toISOString()).toBe(
      '2031-05-01T00:00:00.000Z',
    );
    const before = Date.now();
    const delay = await run('long_term_archive', '--fields', fields, '--not-before', '10m');
    const after = Date.now();
    expect(delay.code).toBe(0);
    const when = (await store.load(delay.out[0] as string)).notBefore?.getTime() as number;
    expect(when).toBeGreaterThanOrEqual(before + 10 * MINUTE);
    expect(when).toBeLessThanOrEqual(after + 10 * MINUTE);
    const counts = await tableCounts(database);
    for (const [value, message] of [
      [
        'soon',
        /use an ISO time with its zone such as 2026-12-05T18:00:00Z, or a delay such as 10m/,
      ],
      ['2031-05-01', /notBefore must be a Date or an ISO 8601 date-time with its zone/],
    ] as [string, RegExp][]) {
      const r = await run('long_term_archive', '--fields', fields, '--not-before', value);
      expect(r.code, value).toBe(2);
      expect(r.out).toEqual([]);
      expect(r.err.join('\n')).toMatch(message);
    }
    expect(await tableCounts(database)).toEqual(counts);
  });
});
