import { afterEach, describe, expect, it } from 'vitest';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { LocationType } from '../../machines/routing.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { CircuitBreakerRepository } from '../../persistence/CircuitBreakerRepository.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../../runtime/Runtime.ts';
import { archiveStandIn } from '../../stages/archiveStandIn.ts';
import type { OperationHandler } from '../../worker/OperationHandler.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';
import { waitFor } from '../transport/helpers.ts';

/**
 * The breaker as the control plane runs it: a runtime on the real Postgres and the in-process
 * transport, a worker whose archive handler fails for one location while that location is "down".
 */
const TIMING: Partial<RuntimeTiming> = {
  schedulerIntervalMs: 20,
  relayIntervalMs: 20,
  breakerIntervalMs: 20,
  breakerThreshold: 3,
  leaderPollMs: 100,
};

let open: { runtime: Runtime; db: TestDatabase } | undefined;
afterEach(async () => {
  await open?.runtime.close();
  await dropTestDatabase(open?.db);
  open = undefined;
});

async function deployment(breakerCooldownMs: number) {
  const db = await createTestDatabase('opstate_breaker_rt');
  const logger = memoryLogger();
  const runtime = await createRuntime({
    databaseUrl: db.url,
    timing: { ...TIMING, breakerCooldownMs },
    logger,
  });
  open = { runtime, db };
  const w = await makeWorld(runtime.database);
  const down = await w.artifacts.addLocation({
    site: w.archive.site,
    name: 'lta-down',
    locationType: LocationType.LONG_TERM_ARCHIVE,
    storageRoot: '/data/lta-down',
  });
  const state = { down: true };
  const fine: OperationHandler = async (ctx) => ({ outputs: await ctx.requiredOutputs() });
  const archive: OperationHandler = async (ctx) => {
    const { fields } = await ctx.inspect();
    if (state.down && fields.destinationLocationId === down.id) {
      throw Object.assign(new Error(`archive ${down.id} unreachable`), { retryable: false });
    }
    // A long-term archive completes only through the archive protocol (its VERIFIED record).
    return archiveStandIn(ctx);
  };
  const plane = runtime.startControlPlane();
  await waitFor(() => plane.isLeader, 'leadership');
  runtime.startWorker({
    kinds: OPERATION_KINDS,
    handlers: {
      ...Object.fromEntries(OPERATION_KINDS.map((k) => [k, fine])),
      [OperationKind.LONG_TERM_ARCHIVE]: archive,
    } as Record<OperationKind, OperationHandler>,
  });
  const archiveTo = (destinationLocationId: string, n: number) =>
    Promise.all(
      Array.from({ length: n }, () =>
        runtime.submit({
          ...inputFor(OperationKind.LONG_TERM_ARCHIVE, w),
          fields: { rawDataPackageId: w.pkg, sourceLocationId: w.source.id, destinationLocationId },
        }),
      ),
    );
  const statusOf = async (id: string) => (await runtime.store.load(id)).status;
  const allIn = async (ids: readonly string[], status: string) =>
    (await Promise.all(ids.map(statusOf))).every((s) => s === status);
  const breaker = async () =>
    (await new CircuitBreakerRepository(runtime.database).listNotClosed()).find(
      (b) => b.locationId === down.id,
    );
  return { runtime, logger, w, down, state, archiveTo, allIn, breaker };
}

describe('circuit breaker in a running control plane', () => {
  it('opens after the threshold, parks the pair while others flow, and resumes on a reset', async () => {
    const d = await deployment(600_000);
    const failed = await d.archiveTo(d.down.id, 3);
    await waitFor(async () => (await d.breaker())?.state === 'OPEN', 'the breaker to open');
    expect(await d.allIn(failed, 'FAILED')).toBe(true);

    const parked = await d.archiveTo(d.down.id, 2);
    const flowing = [
      ...(await d.archiveTo(d.w.archive.id, 2)),
      await d.runtime.submit(inputFor(OperationKind.TRANSFER, d.w)),
    ];
    // Work submitted after the parked operations completes: the scheduler passed over them.
    await waitFor(() => d.allIn(flowing, 'COMPLETED'), 'other pairs to complete');
    for (const id of parked) {
      expect(await d.runtime.store.load(id)).toMatchObject({ status: 'PENDING', version: 0 });
    }
    // Besides the handler's failures (at warn, one per operation that failed), the breaker said once.
    const warnings = d.logger.lines.filter((l) => l.level === 'WARNING');
    expect(
      warnings
        .filter((l) => l.message !== 'operation failed')
        .map((l) => [l.message, l.fields.kind]),
    ).toEqual([[expect.stringMatching(/opened/), OperationKind.LONG_TERM_ARCHIVE]]);
    expect(warnings.filter((l) => l.message === 'operation failed')).toHaveLength(failed.length);

    d.state.down = false;
    await new CircuitBreakerRepository(d.runtime.database).reset(
      OperationKind.LONG_TERM_ARCHIVE,
      d.down.id,
    );
    await waitFor(() => d.allIn(parked, 'COMPLETED'), 'the parked operations after the reset');
  });

  it('after the cooldown one probe goes alone; its success closes the breaker and the rest follow', async () => {
    const d = await deployment(300);
    await d.archiveTo(d.down.id, 3);
    await waitFor(async () => (await d.breaker()) !== undefined, 'the breaker to open');
    // The location is back, but the breaker does not know it yet: it waits for its cooldown.
    d.state.down = false;
    const parked = await d.archiveTo(d.down.id, 4);
    await waitFor(() => d.allIn(parked, 'COMPLETED'), 'the parked operations to complete');
    expect(await d.breaker()).toBeUndefined();

    // From the history: the first of them to be scheduled completed before any other was.
    const views = await Promise.all(parked.map((id) => d.runtime.get(id)));
    const rows = await d.runtime.database.execute(
      `select id, operation_id, event from operation_transition
       where operation_id in (${parked.map((id) => `'${id}'`).join(', ')})
         and event in ('SCHEDULE', 'COMPLETE') order by id`,
    );
    const [first] = rows;
    expect(first?.event).toBe('SCHEDULE');
    const probeDone = rows.findIndex(
      (r) => r.event === 'COMPLETE' && r.operation_id === first?.operation_id,
    );
    expect(rows.slice(1, probeDone).filter((r) => r.event === 'SCHEDULE')).toEqual([]);
    expect(views.every((v) => v.attempt === 1)).toBe(true);
    const messages = d.logger.lines
      .filter((l) => l.message.startsWith('circuit breaker'))
      .map((l) => l.message.split(';')[0]);
    expect(messages).toEqual([
      'circuit breaker opened',
      'circuit breaker half-open',
      'circuit breaker closed',
    ]);
  });
});
