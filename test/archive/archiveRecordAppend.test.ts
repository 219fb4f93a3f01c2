import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArchiveState } from '../../machines/ArchiveState.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import { defineArchiveStage } from '../../stages/defineArchiveStage.ts';
import type { HandlerContext } from '../../worker/OperationHandler.ts';
import { type ArchiveWorld, startArchiveWorld, type TestPackage } from './world.ts';

/**
 * The archive record rides a Postgres outage: the archive stage appends it through the worker's
 * database (`ctx.withDatabase`), which runs a statement again when an outage took its reply, and
 * an attempt appends each state once (`archive_record_attempt_state_key`), so the append run again
 * finds the row that committed instead of adding a second. Real Postgres and NATS; the lost reply
 * is made by failing each statement with a dropped connection once it has committed.
 */
let w: ArchiveWorld;
const stage = defineArchiveStage();
/** Packages whose archive is held open (IN_PROGRESS) until the test lets it fail. */
const held = new Map<string, { ctx: (c: HandlerContext) => void; release: Promise<void> }>();
/** The statements whose reply was lost once, by what they did. */
const lost: string[] = [];

/** `ctx` whose database statements each lose their first reply after they ran (committed). */
function losingReplies(ctx: HandlerContext): HandlerContext {
  const seen = new Set<string>();
  return {
    ...ctx,
    signal: ctx.signal,
    withDatabase: (what, statement) =>
      ctx.withDatabase(what, async (database) => {
        const result = await statement(database);
        if (!seen.has(what)) {
          seen.add(what);
          lost.push(what);
          throw Object.assign(new Error('write CONNECTION_CLOSED'), { code: 'CONNECTION_CLOSED' });
        }
        return result;
      }),
  };
}

beforeAll(async () => {
  w = await startArchiveWorld();
  w.runtime.startWorker({
    kinds: [OperationKind.LONG_TERM_ARCHIVE],
    handlers: {
      [OperationKind.LONG_TERM_ARCHIVE]: async (ctx) => {
        const pkg = String((await ctx.inspect()).fields.rawDataPackageId);
        const hold = held.get(pkg);
        if (hold === undefined) return stage(losingReplies(ctx));
        hold.ctx(ctx);
        await hold.release;
        throw new OpstateError(OpstateErrorCode.BAD_INPUT, 'held archive let go');
      },
    },
  });
});
afterAll(async () => {
  await w?.close();
});

const statesOf = async (id: string) =>
  (await new ArchiveRecordRepository(w.runtime.database).list(id)).map((r) => [r.state, r.attempt]);

describe('the archive record through a Postgres outage', () => {
  it('an append whose reply was lost runs again and finds its row: one row per state, no retry spent', async () => {
    lost.length = 0;
    const pkg = await w.addPackage();
    const id = await w.submitArchive(pkg);
    await w.waitStatus(id, 'COMPLETED');
    expect(await statesOf(id)).toEqual([
      [ArchiveState.PLANNED, 1],
      [ArchiveState.UPLOADED, 1],
      [ArchiveState.READ_BACK, 1],
      [ArchiveState.VERIFIED, 1],
    ]);
    // Every append committed, lost its reply and ran again (and the location read did too).
    expect(lost.filter((what) => what.startsWith('appending '))).toEqual([
      'appending PLANNED to the archive record of',
      'appending UPLOADED to the archive record of',
      'appending READ_BACK to the archive record of',
      'appending VERIFIED to the archive record of',
    ]);
    expect((await w.runtime.store.load(id)).retryCount).toBe(0);
    expect(
      w.logger.lines.some((l) => l.message.includes('appending PLANNED to the archive record of')),
    ).toBe(true);
  });

  it('the same append again returns its row; other content for the state is a CONFLICT; after the attempt, only its own rows are found', async () => {
    const pkg: TestPackage = await w.addPackage();
    let release = () => {};
    const running = new Promise<HandlerContext>((resolve) => {
      held.set(pkg.id, { ctx: resolve, release: new Promise((r) => (release = r)) });
    });
    const id = await w.submitArchive(pkg);
    const ctx = await running;
    const records = new ArchiveRecordRepository(w.runtime.database);
    const planned = {
      operationId: id,
      attempt: ctx.operation.attempt,
      state: ArchiveState.PLANNED,
      by: 'test',
      archiveKey: `${pkg.name}.tar`,
      contentSha256: 'a'.repeat(64),
      size: 10,
      manifest: { members: [{ name: 'scan_0001.fits', size: 10 }] },
    };
    const first = await records.append(planned);
    const again = await records.append(planned);
    expect(again.id).toBe(first.id);
    await expect(
      records.append({ ...planned, contentSha256: 'b'.repeat(64) }),
    ).rejects.toMatchObject({ code: OpstateErrorCode.CONFLICT });
    expect(await statesOf(id)).toEqual([[ArchiveState.PLANNED, 1]]);

    release();
    await w.waitStatus(id, 'FAILED');
    // The attempt is over: its own append found again, a new one refused.
    expect((await records.append(planned)).id).toBe(first.id);
    await expect(
      records.append({ ...planned, state: ArchiveState.UPLOADED }),
    ).rejects.toMatchObject({ code: OpstateErrorCode.STALE_ATTEMPT });
    expect(await statesOf(id)).toEqual([[ArchiveState.PLANNED, 1]]);
  });
});
