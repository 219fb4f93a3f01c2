import { utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInspectCommand } from '../../cli/commands/inspect.ts';
import { createPolicyCommand } from '../../cli/commands/policy.ts';
import { createStatusCommand } from '../../cli/commands/status.ts';
import { main } from '../../cli/main.ts';
import type { CopyDeleter } from '../../deleter/CopyDeleter.ts';
import { CopyLifecycle } from '../../persistence/CopyLifecycle.ts';
import { DeletionRepository } from '../../persistence/DeletionRepository.ts';
import { crash, type DeleterFaults, withFaults } from '../../testing.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { ARCHIVE_TIMING, type ArchiveWorld, NATS_URL, startArchiveWorld } from './world.ts';

/**
 * The operator's side of archive-then-delete, against a live deployment on the real Postgres and
 * NATS: `inspect` on a deletion whose deleter died (the resume record and the next safe action),
 * `status` showing it, `retry --replan` for a stale archive plan and for a failed deletion, and
 * the deletion policy command.
 */
let w: ArchiveWorld;
const saved = { ...process.env };
beforeAll(async () => {
  w = await startArchiveWorld();
  w.startArchiver();
  Object.assign(process.env, {
    DATABASE_URL: w.db.url,
    NATS_URL,
    OPSTATE_PREFIX: w.prefix,
    OPSTATE_TIMING: JSON.stringify(ARCHIVE_TIMING),
  });
});
afterAll(async () => {
  for (const k of ['DATABASE_URL', 'NATS_URL', 'OPSTATE_PREFIX', 'OPSTATE_TIMING']) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
  await w?.close();
});

function capture() {
  const lines: string[] = [];
  return {
    lines,
    text: () => lines.join('\n'),
    io: { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) },
  };
}
const shared = () => Promise.resolve({ ...w.runtime.database, close: async () => {} });
const statusOf = async (copyId: string) =>
  (await new CopyLifecycle(w.runtime.database).facts(copyId)).state.status;

describe('operator tools', () => {
  it('inspect and status show a deletion whose deleter died mid-way, with the next safe action; another deleter finishes it', async () => {
    const pkg = await w.addPackage();
    let dying: CopyDeleter | undefined;
    dying = w.startDeleter({
      id: 'deleter-dies',
      leaseMs: 1_000,
      ...withFaults<DeleterFaults>({
        afterMember: ({ seq }) => {
          if (seq === 1 && dying !== undefined) void crash(dying);
        },
      }),
    });
    const id = await w.submitArchive(pkg);
    await w.waitStatus(id, 'COMPLETED');
    await waitFor(
      async () => (await statusOf(pkg.copy.id)) === 'DELETION_IN_PROGRESS',
      'the deletion to start',
    );
    await waitFor(
      async () =>
        ((
          await new DeletionRepository(w.runtime.database).plansOf(pkg.copy.id)
        )[0]?.leaseUntil.getTime() ?? Date.now()) <
        Date.now() - 200,
      "the dead deleter's lease to run out",
    );
    const inspect = capture();
    expect(await createInspectCommand(shared).run([id], inspect.io)).toBe(0);
    expect(inspect.text()).toMatch(
      /next safe action: resume: revalidate and delete 4 remaining members \(lease of deleter-dies expired at .*; any deleter takes over, interruption 1 of 3\)/,
    );
    expect(inspect.text()).toMatch(/last durable +SOURCE_REVALIDATED/);
    const json = capture();
    expect(await createInspectCommand(shared).run([id, '--json'], json.io)).toBe(0);
    const resume = JSON.parse(json.text()).resume;
    expect(resume).toMatchObject({
      lastDurable: { state: 'SOURCE_REVALIDATED' },
      source: { copyId: pkg.copy.id, locationType: 'buffer', members: 4 },
      archive: { key: `${pkg.name}.tar`, verification: 'VERIFIED', encrypted: false },
      deletion: {
        status: 'DELETION_IN_PROGRESS',
        leaseExpired: true,
        current: { holder: 'deleter-dies', epoch: 1 },
      },
      receipt: null,
    });
    expect(resume.deletion.remaining).toHaveLength(4);
    expect(resume.nextSafeAction).toMatch(/^resume: revalidate and delete 4 remaining members/);
    const status = capture();
    expect(await createStatusCommand(shared).run(['--json'], status.io)).toBe(0);
    const parsed = JSON.parse(status.text());
    expect(parsed.copies.buffer.DELETION_IN_PROGRESS).toBe(1);
    expect(parsed.deletions.inProgress).toEqual([
      expect.objectContaining({
        copyId: pkg.copy.id,
        holder: 'deleter-dies',
        leaseExpired: true,
        done: 0,
        members: 4,
      }),
    ]);
    const table = capture();
    await createStatusCommand(shared).run([], table.io);
    expect(table.text()).toMatch(
      new RegExp(`deleting ${pkg.copy.id}: 0/4 members, deleter-dies epoch 1, lease EXPIRED`),
    );

    const rescuer = w.startDeleter({ id: 'deleter-rescue' });
    await waitFor(
      async () => (await statusOf(pkg.copy.id)) === 'DELETED',
      'the takeover to finish',
    );
    await rescuer.stop();
    const after = capture();
    await createInspectCommand(shared).run([id], after.io);
    expect(after.text()).toMatch(
      /missing +.*MANIFEST\.json: not there when revalidated; whether an earlier run of this deletion removed it cannot be verified/,
    );
    expect(after.text()).toMatch(/receipt .* 3 deleted, 1 missing/);
    expect(after.text()).toMatch(
      /next safe action: done: source deleted with a receipt \(3 members deleted, 1 found missing\)/,
    );
    const history = (await new CopyLifecycle(w.runtime.database).history(pkg.copy.id)).map(
      (t) => `${t.event} by ${t.by}`,
    );
    expect(history).toEqual([
      'SCHEDULE_DELETION by deleter-dies',
      'START_DELETION by deleter-dies',
      'RESUME_DELETION by deleter-rescue',
      'DELETION_SUCCEEDED by deleter-rescue',
    ]);
  });

  it('retry --replan: a stale archive plan is planned again beside the old one; a failed deletion is re-planned; anything else is refused', async () => {
    const pkg = await w.addPackage();
    // The archive fails: the source no longer matches its copy record (a file was rewritten).
    await writeFile(join(pkg.folder, 'scan_0001.fits'), 'rewritten after registration\n');
    const id = await w.submitArchive(pkg);
    await w.waitStatus(id, 'FAILED');
    const inspect = capture();
    await createInspectCommand(shared).run([id], inspect.io);
    expect(inspect.text()).toMatch(
      /next safe action: blocked: no verified archive — source kept, investigate/,
    );
    // Put the bytes back as they were registered; then re-plan.
    await writeFile(join(pkg.folder, 'scan_0001.fits'), pkg.files['scan_0001.fits'] as Buffer);
    const retry = capture();
    expect(await main(['retry', id, '--replan', '--reason', 'file restored'], retry.io)).toBe(0);
    expect(retry.text()).toMatch(/plan generation 2 recorded beside the old one; FAILED → PENDING/);
    await w.waitStatus(id, 'COMPLETED');

    // A failed deletion (a member kept) is re-planned through the same command.
    let touched = false;
    const deleter = w.startDeleter({
      id: 'deleter-touchy',
      ...withFaults<DeleterFaults>({
        afterPlan: async ({ copyId }) => {
          if (copyId !== pkg.copy.id || touched) return;
          touched = true;
          await utimes(
            join(pkg.folder, 'scan_0002.fits'),
            new Date('2022-02-02'),
            new Date('2022-02-02'),
          );
        },
      }),
    });
    await waitFor(
      async () => (await statusOf(pkg.copy.id)) === 'DELETION_FAILED',
      'the deletion to keep a member',
    );
    const again = capture();
    expect(await main(['retry', id, '--replan'], again.io)).toBe(0);
    expect(again.text()).toMatch(/deletion re-planned: DELETION_FAILED → DELETION_SCHEDULED/);
    await waitFor(
      async () => (await statusOf(pkg.copy.id)) === 'DELETED',
      'the re-planned deletion',
    );
    await deleter.stop();
    const refused = capture();
    expect(await main(['retry', id, '--replan'], refused.io)).toBe(1);
    expect(refused.text()).toMatch(
      /nothing to re-plan: operation .* is COMPLETED and its source copy is DELETED .*\[INVALID_EVENT\]/,
    );
  });

  it('policy shows and changes the deletion policy; bad values are refused with usage', async () => {
    const show = capture();
    expect(await createPolicyCommand(shared).run([], show.io)).toBe(0);
    expect(show.text()).toMatch(/cleaned after archive +buffer/);
    const set = capture();
    expect(
      await createPolicyCommand(shared).run(
        ['set', '--grace', '30', '--protect', '/data/keep', '--protect', '/data/also', '--json'],
        set.io,
      ),
    ).toBe(0);
    expect(JSON.parse(set.text())).toMatchObject({
      graceSeconds: 30,
      protectedPrefixes: ['/data/keep', '/data/also'],
      updatedBy: 'operator',
    });
    const unset = capture();
    await createPolicyCommand(shared).run(
      ['set', '--unprotect', '/data/keep', '--grace', '0', '--json'],
      unset.io,
    );
    expect(JSON.parse(unset.text())).toMatchObject({
      graceSeconds: 0,
      protectedPrefixes: ['/data/also'],
    });
    const bad = capture();
    expect(await main(['policy', 'set', '--clean', 'nowhere'], bad.io)).toBe(2);
    expect(bad.text()).toMatch(/'nowhere' is not a location type/);
    await w.policies.set({ protectedPrefixes: [] }, 'test');
  });
});
