import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { LocationType } from '../../machines/routing.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import { ArtifactType } from '../../persistence/ArtifactType.ts';
import { CopyLifecycle } from '../../persistence/CopyLifecycle.ts';
import { DeletionPolicyRepository } from '../../persistence/DeletionPolicyRepository.ts';
import { DeletionRepository } from '../../persistence/DeletionRepository.ts';
import { checksumOf, MANIFEST_NAME, sha256, writePackage } from '../../stages/packageFormat.ts';
import { unpackTar } from '../../stages/tar.ts';
import { type Child, type Deployment, startDeployment, waitFor } from '../actors/harness.ts';
import { handlersModule } from '../helpers/opstateCli.ts';

/**
 * The crash matrix of archive-then-delete, with real processes on the real Postgres and NATS:
 * worker processes run the reference archive handler and a deleter, and SIGKILL themselves once
 * at each boundary (see fixtures/stageWorker.ts): before upload, mid-upload (a partial temporary
 * file left behind), after the object is stored and before its step is recorded, during read-back,
 * after VERIFIED, between member deletions, after the last unlink and before the receipt, and after
 * the receipt. A dead worker is replaced; the runtime resumes every batch on its own (heartbeat
 * monitor for the archive, lease takeover for the deletion). At every death and at the end: each
 * source is intact or has a verified archive; at the end, the archive object is the one first
 * written, every deleted member is listed, nothing was kept, each copy is DELETED with one receipt
 * and each operation COMPLETED with one archive copy.
 */
const POINTS = [
  'before-upload',
  'mid-upload',
  'after-store',
  'during-read-back',
  'after-verified',
  'between-members',
  'before-receipt',
  'after-receipt',
] as const;
const HANDLERS = handlersModule(new URL('./fixtures/stageWorker.ts', import.meta.url));

let dep: Deployment | undefined;
let dir: string | undefined;
afterAll(async () => {
  await dep?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

interface MatrixPackage {
  readonly point: (typeof POINTS)[number];
  readonly id: string;
  readonly copyId: string;
  readonly folder: string;
  readonly files: Record<string, Buffer>;
  operationId: string;
}

describe('archive-then-delete crash matrix (SIGKILL at every boundary)', () => {
  it('resumes every batch safely after a kill at each boundary', async () => {
    dep = await startDeployment();
    const d = dep;
    dir = await mkdtemp(join(tmpdir(), 'opstate-matrix-'));
    const markers = join(dir, 'markers');
    await mkdir(markers);
    const keyFile = join(dir, 'archive.key');
    await writeFile(keyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
    const site = `matrix-${randomUUID().slice(0, 8)}`;
    const location = async (name: string, locationType: LocationType) => {
      const storageRoot = join(dir as string, name);
      await mkdir(storageRoot, { recursive: true });
      return d.runtime.artifacts.addLocation({ site, name, locationType, storageRoot });
    };
    const buffer = await location('buffer', LocationType.BUFFER);
    const archive = await location('archive', LocationType.LONG_TERM_ARCHIVE);
    await new DeletionPolicyRepository(d.runtime.database).set(
      { cleanLocationTypes: [LocationType.BUFFER], graceSeconds: 0, maxFailures: 10 },
      'test',
    );
    d.runtime.startControlPlane();

    const env = {
      FIXTURE_ROOTS: JSON.stringify({
        [buffer.id]: buffer.storageRoot,
        [archive.id]: archive.storageRoot,
      }),
      FIXTURE_MARKERS: markers,
      OPSTATE_ARCHIVE_KEY_FILE: keyFile,
    };
    const args = [
      '--kinds',
      OperationKind.LONG_TERM_ARCHIVE,
      '--handlers',
      HANDLERS,
      '--delete-copies',
      '--deleter-lease-ms',
      '1500',
      '--deleter-interval-ms',
      '100',
      // A deleter whose 1.5 s lease ran out on a busy machine may still be hashing a member when
      // its peer takes the deletion over: the peer rechecks a member held open this long.
      '--deleter-open-wait-ms',
      '5000',
      // The fixture's deleter crash points are its `faults` export: honoured only with this flag.
      '--faults',
    ];
    const spawnWorker = () =>
      d.spawnCli(['worker', ...args, '--id', `mx-${randomUUID().slice(0, 6)}`], env);
    const workers: Child[] = [spawnWorker(), spawnWorker()];
    await waitFor(() => workers.every((c) => c.printed('deleter')), 'workers to start', 60_000);

    const packages: MatrixPackage[] = [];
    for (const point of POINTS) {
      const files = {
        'scan_0001.fits': Buffer.from(`${point} first\n`.repeat(20)),
        'scan_0002.fits': Buffer.from(`${point} second\n`.repeat(50)),
        'scan_0003.fits': Buffer.from(`${point} third\n`.repeat(5)),
      };
      const bytes = writePackage(Object.entries(files).map(([name, data]) => ({ name, data })));
      const id = await d.runtime.artifacts.addRawDataPackage({
        name: `mx-${point}-${randomUUID()}`,
      });
      const folder = join(
        buffer.storageRoot,
        'raw_data_package',
        `crash-${point}-${id.slice(0, 8)}`,
      );
      await mkdir(folder, { recursive: true });
      await writeFile(join(folder, MANIFEST_NAME), unpackTar(bytes)[0]?.data ?? Buffer.alloc(0));
      for (const [name, data] of Object.entries(files)) await writeFile(join(folder, name), data);
      const { copy } = await d.runtime.artifacts.addCopy({
        artifactType: ArtifactType.RAW_DATA_PACKAGE,
        artifactId: id,
        locationId: buffer.id,
        path: folder,
        checksum: checksumOf(sha256(bytes)),
        size: bytes.length,
      });
      packages.push({ point, id, copyId: copy.id, folder, files, operationId: '' });
    }
    const ids = await d.runtime.submitMany(
      packages.map((p) => ({
        kind: OperationKind.LONG_TERM_ARCHIVE,
        fields: {
          rawDataPackageId: p.id,
          sourceLocationId: buffer.id,
          destinationLocationId: archive.id,
          archiveKey: `${p.point}.tar`,
        },
        inputs: [p.copyId],
        maxRetries: 10,
      })),
    );
    packages.forEach((p, i) => {
      p.operationId = ids[i] as string;
    });

    const records = new ArchiveRecordRepository(d.runtime.database);
    const copies = new CopyLifecycle(d.runtime.database);
    const deletions = new DeletionRepository(d.runtime.database);
    const intact = async (p: MatrixPackage) => {
      for (const [name, data] of [[MANIFEST_NAME, null], ...Object.entries(p.files)] as const) {
        try {
          const found = await readFile(join(p.folder, name));
          if (data !== null && !found.equals(data)) return false;
        } catch {
          return false;
        }
      }
      return true;
    };
    /** At every moment: the source is intact, or a verified archive of it exists. */
    const safe = async () => {
      for (const p of packages) {
        const last = (await records.list(p.operationId))
          .filter((r) => r.state === 'VERIFIED' || r.state === 'VERIFY_FAILED')
          .at(-1);
        if (!(await intact(p)) && last?.state !== 'VERIFIED')
          return `${p.point}: source damaged without a verified archive`;
      }
      return null;
    };

    // Supervise: replace every worker that killed itself, checking the invariant at each death.
    let deaths = 0;
    const violations: string[] = [];
    await waitFor(
      async () => {
        for (let i = 0; i < workers.length; i++) {
          const c = workers[i] as Child;
          if (c.proc.exitCode === null && c.proc.signalCode === null) continue;
          deaths++;
          const v = await safe();
          if (v !== null) violations.push(v);
          workers[i] = spawnWorker();
        }
        const done = await Promise.all(
          packages.map(async (p) => {
            const op = await d.runtime.store.load(p.operationId);
            const { state } = await copies.facts(p.copyId);
            return op.status === 'COMPLETED' && state.status === 'DELETED';
          }),
        );
        return done.every(Boolean);
      },
      'every archive COMPLETED and every source copy DELETED',
      150_000,
      200,
    );
    expect(violations).toEqual([]);
    expect(await safe()).toBeNull();
    expect((await readdir(markers)).sort()).toEqual([...POINTS].sort());
    expect(deaths).toBeGreaterThanOrEqual(POINTS.length);

    for (const p of packages) {
      const view = await d.runtime.get(p.operationId);
      expect(view.status, p.point).toBe('COMPLETED');
      const live = (await d.runtime.artifacts.copiesOf(ArtifactType.RAW_DATA_PACKAGE, p.id)).filter(
        (c) => c.locationId === archive.id && c.status !== 'DELETED',
      );
      expect(live, p.point).toHaveLength(1);
      // The object is the one first written: every UPLOADED names the same object and digest,
      // and the file still has that digest.
      const rows = await records.list(p.operationId);
      const uploads = rows.filter((r) => r.state === 'UPLOADED');
      expect(uploads.length, p.point).toBeGreaterThanOrEqual(1);
      expect(
        new Set(uploads.map((u) => `${u.objectVersion}/${u.objectSha256}`)).size,
        p.point,
      ).toBe(1);
      const stored = await readFile(join(archive.storageRoot, `${p.point}.tar`));
      expect(sha256(stored), p.point).toBe(uploads[0]?.objectSha256);
      expect(
        rows.some((r) => r.state === 'VERIFIED'),
        p.point,
      ).toBe(true);
      // Every member is accounted for: removed members are listed, none was kept.
      const [plan, ...more] = await deletions.plansOf(p.copyId);
      expect(more, p.point).toEqual([]);
      const members = (await deletions.load(plan?.id as string))?.members ?? [];
      expect(
        members.map((m) => m.name),
        p.point,
      ).toEqual([MANIFEST_NAME, ...Object.keys(p.files)]);
      expect(
        members.filter((m) => m.outcome === null || m.outcome === 'KEPT'),
        p.point,
      ).toEqual([]);
      for (const m of members) {
        await expect(stat(m.path), `${p.point} ${m.name}`).rejects.toMatchObject({
          code: 'ENOENT',
        });
      }
      const receipt = await deletions.receiptOf(p.copyId);
      expect((receipt?.membersDeleted ?? 0) + (receipt?.membersMissing ?? 0), p.point).toBe(4);
      const [n] = await d.runtime.database.execute(
        `select count(*)::int as n from copy_deletion_receipt where physical_copy_id = '${p.copyId}'`,
      );
      expect(n?.n, p.point).toBe(1);
      expect((await copies.facts(p.copyId)).state.status, p.point).toBe('DELETED');
    }
    // The kill between member deletions left one member unlinked but unrecorded: found MISSING,
    // never guessed deleted.
    const between = packages.find((p) => p.point === 'between-members') as MatrixPackage;
    const [betweenPlan] = await deletions.plansOf(between.copyId);
    const betweenMembers = (await deletions.load(betweenPlan?.id as string))?.members ?? [];
    expect(betweenMembers.find((m) => m.seq === 2)?.outcome).toBe('MISSING');
    // The kill mid-upload left its partial temporary file behind, never linked to the key.
    expect(
      (await readdir(archive.storageRoot)).some((f) => f.startsWith('mid-upload.tar.partial-')),
    ).toBe(true);
  });
});
