import { randomBytes } from 'node:crypto';
import { type FileHandle, open, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CopyDeleter } from '../../deleter/CopyDeleter.ts';
import type { DeleterFaults } from '../../deleter/runDeletion.ts';
import { crash, withFaults } from '../../loops/drill.ts';
import { systemClock } from '../../machines/Clock.ts';
import { PhysicalCopyStatus } from '../../machines/physicalCopyMachine.ts';
import { shortId } from '../../machines/shortId.ts';
import { ArtifactType } from '../../persistence/ArtifactType.ts';
import { CopyLifecycle } from '../../persistence/CopyLifecycle.ts';
import { DeletionPolicyRepository } from '../../persistence/DeletionPolicyRepository.ts';
import { DeletionRepository } from '../../persistence/DeletionRepository.ts';
import type { OutputCopy } from '../../persistence/publicRecords.ts';
import { loadResumeRecord } from '../../persistence/resumeRecord.ts';
import type { Runtime } from '../../runtime/Runtime.ts';
import { replan } from '../../runtime/replan.ts';
import { type ArchiveCipher, loadArchiveCipher } from '../../stages/archiveCipher.ts';
import type { SampleData } from '../../stages/sampleData.ts';

/** Short leases so a crashed deleter is taken over within seconds. */
const LEASE_MS = 1_500;
const DEADLINE_MS = 60_000;

const pause = (ms: number) => systemClock.sleep(ms);

/** What the deletion demo's parts share. */
interface DeletionScene {
  readonly runtime: Runtime;
  readonly sample: SampleData;
  readonly out: (line?: string) => void;
  readonly copies: CopyLifecycle;
  readonly deletions: DeletionRepository;
}

/** A fresh archive key in the demo's folder, and the policy that cleans buffer copies at once. */
async function keyAndPolicy(
  runtime: Runtime,
  dir: string,
  out: (line?: string) => void,
): Promise<ArchiveCipher> {
  const keyFile = join(dir, 'archive.key');
  await writeFile(keyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
  const cipher: ArchiveCipher = loadArchiveCipher(keyFile);
  const policies = new DeletionPolicyRepository(runtime.database);
  const policy = await policies.set(
    { cleanLocationTypes: ['buffer' as never], graceSeconds: 0, protectedPrefixes: [] },
    'demo',
  );
  out(
    `  archives are encrypted at rest: AES-256-GCM, key file ${keyFile} (key id ${cipher.keyId}; the key itself is never printed, logged or recorded)`,
  );
  out(
    `  deletion policy: ${policy.cleanLocationTypes.join(', ')} copies are deleted ${policy.graceSeconds} s after a verified archive; source copies are kept`,
  );
  return cipher;
}

/**
 * Deleter A, which crashes once after its last unlink and before its receipt; deleter B is
 * started then, and takes over once A's lease runs out.
 */
function startCrashingDeleter(runtime: Runtime, out: (line?: string) => void) {
  let crashedOnce = false;
  let b: CopyDeleter | undefined;
  const a: CopyDeleter = runtime.startCopyDeleter({
    id: 'deleter-A',
    intervalMs: 200,
    leaseMs: LEASE_MS,
    ...withFaults<DeleterFaults>({
      beforeReceipt: () => {
        if (crashedOnce) return;
        crashedOnce = true;
        out('  ! deleter-A has unlinked every member of one copy and recorded each, but not yet');
        out(
          '    written the receipt. Crashing deleter-A now: it writes nothing more, and its lease',
        );
        out(
          `    (${LEASE_MS} ms) is left to run out. Starting deleter-B, which knows nothing of it.`,
        );
        void crash(a);
        b = runtime.startCopyDeleter({ id: 'deleter-B', intervalMs: 200, leaseMs: LEASE_MS });
      },
    }),
  });
  out(`  ${a.id}: deletes what the policy cleans (it will crash once, before a receipt)`);
  return { crashedOnce: () => crashedOnce, stopB: async () => b?.stop() };
}

/** The sample packages' copies at the buffer. */
async function bufferCopies(scene: DeletionScene) {
  const { runtime, sample } = scene;
  return (
    await Promise.all(
      sample.packages.map((p) => runtime.artifacts.copiesOf(ArtifactType.RAW_DATA_PACKAGE, p.id)),
    )
  )
    .flat()
    .filter((c) => c.locationId === sample.locations.buffer.id);
}

/** The buffer copies once every one's status is one `want` takes; undefined past the deadline. */
async function settled(scene: DeletionScene, want: (s: string) => boolean) {
  const deadline = systemClock.now() + DEADLINE_MS;
  for (;;) {
    const all = await bufferCopies(scene);
    if (all.length > 0 && all.every((c) => want(c.status))) return all;
    if (systemClock.now() > deadline) return undefined;
    await pause(100);
  }
}

/** Prints one copy's deletion: its path, members deleted and kept (with why), its receipt. */
async function describeDeletion(scene: DeletionScene, copyId: string, name: string) {
  const { deletions, out } = scene;
  const plans = await deletions.plansOf(copyId);
  const lines: string[] = [];
  let deleted = 0;
  let kept = 0;
  for (const p of plans) {
    const loaded = await deletions.load(p.id);
    for (const m of loaded?.members ?? []) {
      if (m.outcome === 'DELETED') deleted++;
      if (m.outcome === 'KEPT') {
        kept++;
        lines.push(`      kept ${m.name} (plan ${p.plan}): ${m.reason}`);
      }
    }
  }
  const history = (await scene.copies.history(copyId)).map(
    (t) => `${t.to}${t.event === 'RESUME_DELETION' ? ` (RESUME by ${t.by})` : ''}`,
  );
  const receipt = await deletions.receiptOf(copyId);
  out(`    ${name}: ${['PRESENT', ...history].join(' → ')}`);
  out(
    `      ${deleted} member(s) deleted, ${kept} kept over ${plans.length} plan(s)${receipt ? `; receipt ${receipt.at.toISOString()}: ${receipt.membersDeleted} deleted, ${receipt.membersMissing} missing, ${receipt.bytes} bytes, archive ${receipt.archiveKey}` : ''}`,
  );
  for (const l of lines) out(l);
  return { deleted, kept };
}

/** An operator re-plans each failed deletion's archive, as `opstate retry <id> --replan` does. */
async function replanFailed(
  scene: DeletionScene,
  failed: readonly { id: string }[],
  archiveIds: readonly string[],
) {
  const { runtime, out } = scene;
  for (const c of failed) {
    for (const id of archiveIds) {
      const view = await runtime.get(id);
      if (view.inputs[0]?.id !== c.id) continue;
      out(`    $ opstate retry ${id} --replan`);
      const r = await replan(runtime, id, 'the analysis tool let go of the file');
      out(
        `      ${r.replanned === 'deletion' ? `source deletion re-planned: ${r.status}` : r.status}`,
      );
    }
  }
}

/**
 * Section 10: waits for every buffer deletion, reports each; unless an operator did so already
 * (`letGo`), lets go of the held file, re-plans the kept one and reports again; true when every buffer copy was DELETED after a crash and a
 * takeover.
 */
async function reportDeletions(
  scene: DeletionScene,
  archiveIds: readonly string[],
  held: { handle: FileHandle; path: string } | undefined,
  deleter: ReturnType<typeof startCrashingDeleter>,
): Promise<boolean> {
  const { runtime, sample, out } = scene;
  out();
  out('10. Archive then delete: the buffer copies after their verified archives');
  const first = await settled(
    scene,
    (s) => s === PhysicalCopyStatus.DELETED || s === PhysicalCopyStatus.DELETION_FAILED,
  );
  if (first === undefined) {
    out(`  the deleters did not settle within ${DEADLINE_MS / 1000} s`);
    return false;
  }
  const nameOf = (id: string) => sample.artifacts.get(id)?.name ?? shortId(id);
  const describeAll = async (copies: readonly { id: string; artifactId: string }[]) => {
    let deleted = 0;
    let kept = 0;
    for (const c of copies) {
      const n = await describeDeletion(scene, c.id, nameOf(c.artifactId));
      deleted += n.deleted;
      kept += n.kept;
    }
    return { deleted, kept };
  };
  let { deleted, kept } = await describeAll(first);
  const failed = first.filter((c) => c.status === PhysicalCopyStatus.DELETION_FAILED);
  // An operator may have let go and re-planned already (see `letGo`): then all is DELETED here.
  let second: typeof first | undefined = first;
  if (held !== undefined || failed.length > 0) {
    if (held !== undefined) {
      await held.handle.close();
      out(`  the analysis tool closes ${held.path}; after review an operator re-plans:`);
    }
    await replanFailed(scene, failed, archiveIds);
    second = await settled(scene, (s) => s === PhysicalCopyStatus.DELETED);
    out('  after the re-plan:');
    ({ deleted, kept } = await describeAll(second ?? (await bufferCopies(scene))));
  }
  const resumed = (
    await Promise.all((await bufferCopies(scene)).map((c) => scene.copies.history(c.id)))
  )
    .flat()
    .filter((t) => t.event === 'RESUME_DELETION').length;
  for (const id of archiveIds.slice(0, 1)) {
    const view = await runtime.get(id);
    const resume = await loadResumeRecord(runtime.database, view);
    if (resume !== undefined) {
      out(`  inspect ${shortId(id)}: ${resume.records.map((r) => r.state).join(' → ')}`);
      out(`    next safe action: ${resume.nextSafeAction}`);
    }
  }
  const ok = second !== undefined && deleter.crashedOnce() && resumed > 0;
  out(
    `  summary: ${deleted} member(s) deleted, ${kept} kept along the way (reasons above); ${resumed} deletion(s) resumed by another deleter after a crash; every buffer copy ${second === undefined ? 'NOT ' : ''}DELETED with one receipt`,
  );
  await deleter.stopB();
  return ok;
}

/**
 * The archive-then-delete part of `opstate demo`: an encryption key for the archive, the deletion
 * policy (buffer copies cleaned right after a verified archive), deleter A that crashes once after
 * its last unlink and before its receipt (deleter B takes over when the lease runs out), and one
 * member held open "by an analysis tool" (this process) so that it is kept and reported, then
 * re-planned after the tool lets go.
 *
 * @example
 * ```ts
 * const deletion = await startDeletionDemo(runtime, dir, sample, out);
 * ```
 */
export async function startDeletionDemo(
  runtime: Runtime,
  dir: string,
  sample: SampleData,
  out: (line?: string) => void,
) {
  const cipher = await keyAndPolicy(runtime, dir, out);
  const deleter = startCrashingDeleter(runtime, out);
  const scene: DeletionScene = {
    runtime,
    sample,
    out,
    copies: new CopyLifecycle(runtime.database),
    deletions: new DeletionRepository(runtime.database),
  };
  let held: { handle: FileHandle; path: string } | undefined;
  let holding = false;
  return {
    cipher,
    /**
     * As the unpack writes the packages at the buffer, before it completes (so before any of them
     * is archived): an analysis tool opens one file of one of them and keeps it open.
     */
    async holdUnpacked(outputs: readonly OutputCopy[]) {
      const pkg = sample.packages[1] ?? sample.packages[0];
      const copy = outputs.find(
        (c) => c.artifactId === pkg?.id && c.locationId === sample.locations.buffer.id,
      );
      if (holding || copy?.path == null) return;
      holding = true;
      const path = join(copy.path, 'scan_0002.fits');
      held = { handle: await open(path, 'r'), path };
      out(`  an analysis tool (this process, pid ${process.pid}) now holds ${path} open`);
    },
    /**
     * Before a rollback that re-runs the unpack (which writes every member's buffer copy again,
     * and whose re-run archives only a PRESENT one): waits for every buffer deletion to end, lets
     * go of the held file, re-plans the kept deletion and waits until every buffer copy is
     * DELETED; true once it is.
     */
    async letGo(archiveIds: readonly string[]): Promise<boolean> {
      const ended = await settled(
        scene,
        (s) => s === PhysicalCopyStatus.DELETED || s === PhysicalCopyStatus.DELETION_FAILED,
      );
      if (ended === undefined) return false;
      if (held !== undefined) {
        await held.handle.close();
        out(`  the analysis tool closes ${held.path}; after review an operator re-plans:`);
        held = undefined;
      }
      await replanFailed(
        scene,
        ended.filter((c) => c.status === PhysicalCopyStatus.DELETION_FAILED),
        archiveIds,
      );
      return (await settled(scene, (s) => s === PhysicalCopyStatus.DELETED)) !== undefined;
    },
    /** After the pipeline: wait for every buffer deletion, report, re-plan the kept one. */
    report: (archiveIds: readonly string[]): Promise<boolean> =>
      reportDeletions(scene, archiveIds, held, deleter),
  };
}
