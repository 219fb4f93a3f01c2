import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimitCommand } from '../../cli/commands/limit.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError } from '../../machines/OpstateError.ts';
import { LocationType } from '../../machines/routing.ts';
import { FlowLimitRepository } from '../../persistence/FlowLimitRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { selectFlowLimitLoad } from '../../persistence/reads/selectFlowLimitLoad.ts';
import { measuringBuffers } from '../helpers/explainBuffers.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';

/** Live (SCHEDULED or IN_PROGRESS) operations at a location, of one kind or of any kind. */
async function liveAt(database: Database, locationId: string, kind?: OperationKind) {
  const [row] = await database.execute(`select count(*)::int as n from operation
    where target_location_id = '${locationId}' and status in ('SCHEDULED', 'IN_PROGRESS')
      ${kind === undefined ? '' : `and kind = '${kind}'`}`);
  return Number(row?.n);
}

async function pendingAt(database: Database, locationId: string) {
  const [row] = await database.execute(`select count(*)::int as n from operation
    where target_location_id = '${locationId}' and status = 'PENDING'`);
  return Number(row?.n);
}

async function refusal(p: Promise<unknown>): Promise<OpstateError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpstateError);
  return err as OpstateError;
}

describe('flow limits, enforced by the claim on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database;
  let store: OperationStore;
  let limits: FlowLimitRepository;

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_flow', { migrated: true });
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
    store = new OperationStore(database);
    limits = new FlowLimitRepository(database);
  });

  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  /** Drains what an earlier test left due, so each test claims only its own operations. */
  async function settle() {
    for (;;) {
      const { claimed } = await store.claimDue(10_000);
      if (claimed.length === 0) break;
      for (const c of claimed) await store.apply(c.id, { type: 'CANCEL', reason: 'test over' });
    }
  }

  it('sets, lists and clears limits by id or site/name, of a kind or of every kind', async () => {
    const w = await makeWorld(database);
    const at = `${w.archive.site}/${w.archive.name}`;
    const kindLimit = await limits.set({
      location: at,
      kind: OperationKind.LONG_TERM_ARCHIVE,
      max: 2,
      by: 'ops',
    });
    expect(kindLimit).toMatchObject({
      locationId: w.archive.id,
      location: at,
      kind: OperationKind.LONG_TERM_ARCHIVE,
      max: 2,
      live: 0,
      updatedBy: 'ops',
    });
    await limits.set({ location: w.archive.id, max: 5 });
    // Setting a scope again replaces its limit.
    await limits.set({ location: w.archive.id, kind: OperationKind.LONG_TERM_ARCHIVE, max: 3 });
    const mine = (await limits.list()).filter((l) => l.locationId === w.archive.id);
    expect(mine.map((l) => [l.kind, l.max])).toEqual([
      [null, 5],
      [OperationKind.LONG_TERM_ARCHIVE, 3],
    ]);
    expect(await limits.clear({ location: at })).toMatchObject({ kind: null, max: 5 });
    expect(await limits.clear({ location: at })).toBeNull();
    expect(
      (await limits.list()).filter((l) => l.locationId === w.archive.id).map((l) => l.kind),
    ).toEqual([OperationKind.LONG_TERM_ARCHIVE]);
    await limits.clear({ location: at, kind: OperationKind.LONG_TERM_ARCHIVE });
  });

  it('refuses bad input with a message that names the fix, and changes nothing', async () => {
    const w = await makeWorld(database);
    await limits.set({ location: w.archive.id, max: 4 });
    const before = await limits.list();
    const cases: [() => Promise<unknown>, RegExp][] = [
      [
        () => limits.set({ location: 'nowhere/lta', max: 1 }),
        /unknown location 'nowhere\/lta'.*site\/name/,
      ],
      [
        () => limits.set({ location: '0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f', max: 1 }),
        /unknown location '0190c3d2/,
      ],
      [() => limits.set({ location: 'lta', max: 1 }), /unknown location 'lta'/],
      [
        () => limits.set({ location: w.archive.id, kind: 'long_term_archiv', max: 1 }),
        /unknown operation kind "long_term_archiv"; use one of .*long_term_archive/,
      ],
      [() => limits.set({ location: w.archive.id, max: -1 }), /whole number from 0 .*; got -1/],
      [() => limits.set({ location: w.archive.id, max: 1.5 }), /whole number from 0 .*; got 1.5/],
      [() => limits.set({ location: w.archive.id, max: Number.NaN }), /whole number/],
      [() => limits.set({ location: w.archive.id, max: 10_000_000 }), /to 1000000; got 10000000/],
      [() => limits.clear({ location: 'nowhere/lta' }), /unknown location/],
      [
        () => limits.clear({ location: w.archive.id, kind: 'tape' }),
        /unknown operation kind "tape"/,
      ],
    ];
    for (const [attempt, message] of cases) {
      const err = await refusal(attempt());
      expect(err.code).toBe('BAD_INPUT');
      expect(err.message).toMatch(message);
    }
    expect(await limits.list()).toEqual(before);
    await limits.clear({ location: w.archive.id });
  });

  it('opstate limit set, list and clear; bad input exits 2 and changes nothing', async () => {
    const w = await makeWorld(database);
    const at = `${w.archive.site}/${w.archive.name}`;
    const limit = createLimitCommand(() => openDatabase({ databaseUrl: testDb.url, max: 1 }));
    const run = async (...args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await limit.run(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
      return { code, out, err };
    };
    const set = await run('set', '--kind', 'long_term_archive', '--location', at, '--max', '2');
    expect(set).toMatchObject({ code: 0, err: [] });
    expect(set.out).toEqual([expect.stringMatching(/long_term_archive\s+0 live of 2$/)]);
    expect((await run('set', '--location', w.archive.id, '--max', '0')).code).toBe(0);
    const listed = await run('list', '--json');
    const mine = (JSON.parse(listed.out[0] as string) as { location: string }[]).filter(
      (l) => l.location === at,
    );
    expect(mine).toMatchObject([
      { kind: null, max: 0, live: 0, updatedBy: 'operator' },
      { kind: 'long_term_archive', max: 2, live: 0 },
    ]);
    const text = await run('list');
    expect(text.out).toContain(
      `${at.padEnd(28)} ${'(every kind)'.padEnd(22)}     0 live of 0 (parked)`,
    );
    const before = await limits.list();
    for (const [args, message] of [
      [['set', '--location', 'nowhere/lta', '--max', '1'], /unknown location 'nowhere\/lta'/],
      [['set', '--location', at, '--kind', 'tape', '--max', '1'], /unknown operation kind "tape"/],
      [['set', '--location', at, '--max', '1.5'], /use a whole number ≥ 0/],
      [['set', '--location', at, '--max', '-1'], /.+/],
      [['set', '--location', at], /--max/],
    ] as [string[], RegExp][]) {
      const r = await run(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.out).toEqual([]);
      expect(r.err.join('\n')).toMatch(message);
    }
    expect(await limits.list()).toEqual(before);
    expect((await run('clear', '--location', at)).out).toEqual([
      expect.stringMatching(/^cleared: .*\(every kind\)/),
    ]);
    const again = await run('clear', '--location', at, '--json');
    expect(JSON.parse(again.out[0] as string)).toEqual({ removed: null });
    await run('clear', '--location', at, '--kind', 'long_term_archive');
  });

  it('claims no more than a kind limit; a limit of 0 parks the location; clearing resumes', async () => {
    await settle();
    const w = await makeWorld(database);
    await limits.set({ location: w.archive.id, kind: OperationKind.LONG_TERM_ARCHIVE, max: 2 });
    const archives = await store.createMany(
      Array.from({ length: 5 }, () => inputFor(OperationKind.LONG_TERM_ARCHIVE, w)),
    );
    const transfers = await store.createMany(
      Array.from({ length: 3 }, () => inputFor(OperationKind.TRANSFER, w)),
    );
    const first = await store.claimDue(100);
    const ids = first.claimed.map((c) => c.id);
    // Oldest first within the limit; other locations are not held up.
    expect(ids.filter((id) => archives.includes(id))).toEqual(archives.slice(0, 2));
    expect(ids.filter((id) => transfers.includes(id))).toEqual(transfers);
    expect((await store.claimDue(100)).claimed).toEqual([]);
    // One finishes: one more starts.
    await store.apply(archives[0] as string, { type: 'CANCEL', reason: 'finished' });
    expect((await store.claimDue(100)).claimed.map((c) => c.id)).toEqual([archives[2]]);
    // Zero parks it even with room; clearing the limit lets the rest go.
    await store.apply(archives[1] as string, { type: 'CANCEL', reason: 'finished' });
    await limits.set({ location: w.archive.id, kind: OperationKind.LONG_TERM_ARCHIVE, max: 0 });
    expect((await store.claimDue(100)).claimed).toEqual([]);
    expect(await pendingAt(database, w.archive.id)).toBe(2);
    await limits.clear({ location: w.archive.id, kind: OperationKind.LONG_TERM_ARCHIVE });
    expect((await store.claimDue(100)).claimed.map((c) => c.id)).toEqual(archives.slice(3));
  });

  it('a location-wide limit caps every kind together, with a kind limit inside it', async () => {
    await settle();
    const w = await makeWorld(database);
    // Transfers and unpacks both land on the buffer.
    await limits.set({ location: w.buffer.id, max: 3 });
    await limits.set({ location: w.buffer.id, kind: OperationKind.TRANSFER, max: 1 });
    await store.createMany(Array.from({ length: 4 }, () => inputFor(OperationKind.TRANSFER, w)));
    await store.createMany(Array.from({ length: 4 }, () => inputFor(OperationKind.UNPACK, w)));
    const { claimed, heldBack } = await store.claimDue(100);
    expect(claimed.filter((c) => c.kind === OperationKind.TRANSFER)).toHaveLength(1);
    expect(claimed.filter((c) => c.kind === OperationKind.UNPACK)).toHaveLength(2);
    // Each scope is read for its room only: one transfer, and three unpacks (each kind under the
    // location-wide limit is given the location's room), of which the admission holds one back.
    expect(heldBack).toBe(1);
    expect(await liveAt(database, w.buffer.id)).toBe(3);
  });

  it('a scope with less room than the batch: its rows read for that room only, highest priority first', async () => {
    await settle();
    const w = await makeWorld(database);
    await limits.set({ location: w.buffer.id, kind: OperationKind.TRANSFER, max: 3 });
    try {
      const priorities = [0, 5, -5, 50, 0, 5, 50, 0, -100, 20, 0, 5];
      const made = await store.createMany(
        priorities.map((priority) => ({ ...inputFor(OperationKind.TRANSFER, w), priority })),
      );
      const inClaimOrder = made
        .map((id, n) => ({ id, n, priority: priorities[n] as number }))
        .sort((a, b) => b.priority - a.priority || a.n - b.n)
        .map((m) => m.id);
      const first = await store.claimDue(100);
      // No row beyond the room was locked: nothing held back.
      expect(first.heldBack).toBe(0);
      expect(first.claimed.map((c) => c.id).sort()).toEqual(inClaimOrder.slice(0, 3).sort());
      // Full now: the next pass takes nothing and locks nothing.
      expect(await store.claimDue(100)).toMatchObject({ claimed: [], heldBack: 0 });
      // Two finish: the next two in claim order start.
      for (const c of first.claimed.slice(0, 2)) {
        await store.apply(c.id, { type: 'CANCEL', reason: 'finished' });
      }
      const second = await store.claimDue(100);
      expect(second.heldBack).toBe(0);
      expect(second.claimed.map((c) => c.id).sort()).toEqual(inClaimOrder.slice(3, 5).sort());
      expect(await liveAt(database, w.buffer.id, OperationKind.TRANSFER)).toBe(3);
    } finally {
      await limits.clear({ location: w.buffer.id, kind: OperationKind.TRANSFER });
    }
  });

  it('a full scope’s backlog is not read: the claim costs the same behind 100 parked rows or 2,000', async () => {
    await settle();
    const w = await makeWorld(database);
    await limits.set({ location: w.archive.id, max: 0 });
    await limits.set({ location: w.buffer.id, max: 1 });
    // Priorities spread, so that a read in claim order meets the parked rows all over the table.
    const parked = (_: unknown, n: number) => ({
      ...inputFor(OperationKind.LONG_TERM_ARCHIVE, w),
      priority: ((n * 37) % 201) - 100,
    });
    const last = { ...inputFor(OperationKind.TRANSFER, w), priority: -100 };
    try {
      const claimMeasured = async () => {
        const buffers: number[] = [];
        const { claimed } = await new OperationStore(
          measuringBuffers(database, 'flow_room', buffers),
        ).claimDue(256);
        expect(buffers).toHaveLength(1);
        return { buffers: buffers[0] as number, claimed };
      };
      // The parked archives come first in claim order: a read in that order meets them first.
      await store.createMany(Array.from({ length: 100 }, parked));
      const [t1] = await store.createMany([last]);
      const few = await claimMeasured();
      expect(few.claimed.map((c) => c.id)).toEqual([t1]);
      await store.apply(t1 as string, { type: 'CANCEL', reason: 'finished' });
      await store.createMany(Array.from({ length: 1900 }, parked));
      const [t2] = await store.createMany([last]);
      await database.execute('analyze operation');
      const many = await claimMeasured();
      expect(many.claimed.map((c) => c.id)).toEqual([t2]);
      expect(await pendingAt(database, w.archive.id)).toBe(2000);
      // Reading past the parked backlog cost a heap fetch per row: 1,900 buffers more at least.
      // What may grow is the depth of the index each probe descends (a page per level).
      expect(many.buffers).toBeLessThan(few.buffers + 500);
      await store.apply(t2 as string, { type: 'CANCEL', reason: 'finished' });
    } finally {
      await limits.clear({ location: w.archive.id });
      await limits.clear({ location: w.buffer.id });
      const rows = await database.execute<{ id: string }>(
        `select id from operation where status = 'PENDING' and target_location_id = '${w.archive.id}'`,
      );
      await store.applyMany(
        rows.map((r) => ({ id: String(r.id), event: { type: 'CANCEL', reason: 'test over' } })),
      );
    }
  });

  it('a full scope holds back its own location only: due work without a target location is claimed', async () => {
    await settle();
    const w = await makeWorld(database);
    // Both kinds of scope full: the archive parked as a whole, the buffer's transfers parked.
    await limits.set({ location: w.archive.id, max: 0 });
    await limits.set({ location: w.buffer.id, kind: OperationKind.TRANSFER, max: 0 });
    try {
      const [archive, transfer, loose] = await store.createMany([
        inputFor(OperationKind.LONG_TERM_ARCHIVE, w),
        inputFor(OperationKind.TRANSFER, w),
        inputFor(OperationKind.TRANSFER, w),
      ]);
      // A row written before operations carried their target location (migration 0002).
      await database.execute(
        `update operation set target_location_id = null where id = '${loose}'`,
      );
      const { claimed } = await store.claimDue(100);
      expect(claimed.map((c) => c.id)).toEqual([loose]);
      expect(await pendingAt(database, w.archive.id)).toBe(1);
      expect(await pendingAt(database, w.buffer.id)).toBe(1);
      for (const id of [archive, transfer, loose]) {
        await store.apply(id as string, { type: 'CANCEL', reason: 'test over' });
      }
    } finally {
      await limits.clear({ location: w.archive.id });
      await limits.clear({ location: w.buffer.id, kind: OperationKind.TRANSFER });
    }
  });

  it('selectFlowLimitLoad: each limit with its in-use count and what waits behind it', async () => {
    await settle();
    const w = await makeWorld(database);
    await limits.set({ location: w.buffer.id, max: 3 });
    await limits.set({ location: w.buffer.id, kind: OperationKind.TRANSFER, max: 1 });
    await store.createMany(Array.from({ length: 4 }, () => inputFor(OperationKind.TRANSFER, w)));
    await store.createMany(Array.from({ length: 4 }, () => inputFor(OperationKind.UNPACK, w)));
    // A delayed one waits too, and counts in both scopes' waiting.
    await store.createMany([
      { ...inputFor(OperationKind.UNPACK, w), notBefore: '2999-01-01T00:00:00Z' },
    ]);
    await store.claimDue(100);
    const load = (await selectFlowLimitLoad(database)).filter((l) => l.locationId === w.buffer.id);
    expect(load).toEqual([
      {
        locationId: w.buffer.id,
        location: expect.stringMatching(/\/buffer$/),
        kind: null,
        max: 3,
        inUse: 3,
        waiting: 6,
      },
      {
        locationId: w.buffer.id,
        location: expect.stringMatching(/\/buffer$/),
        kind: OperationKind.TRANSFER,
        max: 1,
        inUse: 1,
        waiting: 3,
      },
    ]);
  });

  it('the claim finds the full flow-limit scopes reading the live work once, however many limits are set', async () => {
    await settle();
    const world = await makeWorld(database);
    const site = `lim-${randomUUID().slice(0, 8)}`;
    const places: { id: string }[] = [];
    for (let i = 0; i < 40; i++) {
      places.push(
        await world.artifacts.addLocation({
          site,
          name: `buf${i}`,
          locationType: LocationType.BUFFER,
          storageRoot: `/data/${site}/buf${i}`,
        }),
      );
    }
    const transfer = (i: number) => {
      const input = inputFor(OperationKind.TRANSFER, world);
      return {
        ...input,
        fields: { ...input.fields, destinationLocationId: (places[i % 40] as { id: string }).id },
      };
    };
    // 1,000 live transfers over the 40 locations, and two due ones to claim.
    await store.createMany(Array.from({ length: 1000 }, (_, i) => transfer(i)));
    expect((await store.claimDue(1000)).claimed).toHaveLength(1000);
    await store.createMany([transfer(0), transfer(1)]);
    const claimMeasured = async () => {
      const buffers: number[] = [];
      const { claimed } = await new OperationStore(
        measuringBuffers(database, 'flow_room', buffers),
      ).claimDue(1);
      expect(claimed).toHaveLength(1);
      expect(buffers).toHaveLength(1);
      return buffers[0] as number;
    };
    try {
      for (const place of places) await limits.set({ location: place.id, max: 100_000 });
      const forty = await claimMeasured();
      for (const place of places) {
        await limits.set({ location: place.id, kind: OperationKind.TRANSFER, max: 100_000 });
      }
      const eighty = await claimMeasured();
      // Counting each limit's scope apart read the live work again for every limit.
      expect(eighty).toBeLessThan(1.3 * forty);
    } finally {
      for (const place of places) {
        await limits.clear({ location: place.id });
        await limits.clear({ location: place.id, kind: OperationKind.TRANSFER });
      }
      const live = await database.execute<{ id: string }>(
        `select id from operation where status = 'SCHEDULED' and target_location_id in (${places.map((p) => `'${p.id}'`).join(', ')})`,
      );
      await store.applyMany(
        live.map((r) => ({ id: String(r.id), event: { type: 'CANCEL', reason: 'test over' } })),
      );
    }
  });

  it('four claimers at once never start more than the limits allow', async () => {
    await settle();
    const w = await makeWorld(database);
    const ARCHIVE_LIMIT = 3;
    const BUFFER_LIMIT = 4;
    await limits.set({
      location: w.archive.id,
      kind: OperationKind.LONG_TERM_ARCHIVE,
      max: ARCHIVE_LIMIT,
    });
    await limits.set({ location: w.buffer.id, max: BUFFER_LIMIT });
    const inputs = Array.from({ length: 300 }, (_, n) =>
      n % 3 === 0
        ? inputFor(OperationKind.LONG_TERM_ARCHIVE, w)
        : inputFor(n % 3 === 1 ? OperationKind.TRANSFER : OperationKind.UNPACK, w),
    );
    await store.createMany(inputs);
    const peers = await Promise.all(
      Array.from({ length: 4 }, () => openDatabase({ databaseUrl: testDb.url, max: 2 })),
    );
    const highest = { archive: 0, buffer: 0, samples: 0 };
    const sample = async (on: Database) => {
      const [archive, buffer] = await Promise.all([
        liveAt(on, w.archive.id, OperationKind.LONG_TERM_ARCHIVE),
        liveAt(on, w.buffer.id),
      ]);
      highest.archive = Math.max(highest.archive, archive);
      highest.buffer = Math.max(highest.buffer, buffer);
      highest.samples++;
    };
    let finished = 0;
    try {
      /** One claimer: claims, samples, then runs what it claimed (START, then it is done). */
      const claimLoop = async (peer: Database) => {
        const own = new OperationStore(peer);
        for (;;) {
          const { claimed } = await own.claimDue(16);
          await sample(peer);
          if (claimed.length === 0) {
            if ((await pendingAt(peer, w.archive.id)) + (await pendingAt(peer, w.buffer.id)) === 0)
              return;
            continue;
          }
          for (const c of claimed) {
            await own.apply(c.id, { type: 'START', attempt: c.attempt, workerId: 'w-test' });
            await sample(peer);
            await own.apply(c.id, { type: 'CANCEL', reason: 'ran' });
            finished++;
          }
        }
      };
      await Promise.all(peers.map(claimLoop));
    } finally {
      await Promise.all(peers.map((p) => p.close()));
    }
    expect(finished).toBe(300);
    expect(highest.samples).toBeGreaterThan(300);
    expect(highest.archive).toBeLessThanOrEqual(ARCHIVE_LIMIT);
    expect(highest.buffer).toBeLessThanOrEqual(BUFFER_LIMIT);
    // The limits were reached, so the samples could have seen an overshoot.
    expect(highest.archive).toBe(ARCHIVE_LIMIT);
    expect(highest.buffer).toBe(BUFFER_LIMIT);
  });
});
