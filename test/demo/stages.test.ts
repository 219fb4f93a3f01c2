import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SCRIPTED_FAILURE, scriptDemoHandlers } from '../../cli/commands/demoHandlers.ts';
import { describePath, recoveryOf } from '../../cli/commands/demoReport.ts';
import { ArtifactType } from '../../machines/ArtifactType.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import type { TransitionEntry } from '../../persistence/JournalRepository.ts';
import { isSealed, loadArchiveCipher, sealedKeyId } from '../../stages/archiveCipher.ts';
import { checkMemberName } from '../../stages/memberName.ts';
import { readPackage, sha256, writePackage } from '../../stages/packageFormat.ts';
import { putOnce } from '../../stages/storage.ts';
import { packTar, unpackTar } from '../../stages/tar.ts';
import { isRetryable } from '../../worker/decideRun.ts';
import type { HandlerContext, OperationHandler } from '../../worker/OperationHandler.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'opstate-stages-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const members = [
  { name: 'scan_0001.fits', data: Buffer.from('first\n') },
  { name: 'empty.dat', data: Buffer.alloc(0) },
  { name: 'block.bin', data: Buffer.alloc(512, 7) },
];

describe('tar and the package format', () => {
  it('round-trips members, and the same members give the same bytes', () => {
    const tar = packTar(members);
    expect(unpackTar(tar).map((m) => [m.name, Buffer.from(m.data).toString('hex')])).toEqual(
      members.map((m) => [m.name, m.data.toString('hex')]),
    );
    expect(sha256(packTar(members))).toBe(sha256(tar));
  });

  it('writes archives the system tar can list', async () => {
    const path = join(dir, 'p.tar');
    await writeFile(path, writePackage(members));
    let listing: string;
    try {
      listing = execFileSync('tar', ['-tf', path], { encoding: 'utf8' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new Error(
          'this test lists the archive with the system tar: install tar (e.g. apt-get install tar)',
        );
      }
      throw err;
    }
    expect(listing.trim().split('\n')).toEqual([
      'MANIFEST.json',
      'scan_0001.fits',
      'empty.dat',
      'block.bin',
    ]);
  });

  it('refuses a package whose member differs from its manifest', () => {
    const bytes = writePackage(members);
    const { members: read } = readPackage(bytes);
    expect(read.map((m) => m.name)).toEqual(members.map((m) => m.name));
    const tampered = Buffer.from(bytes);
    const at = tampered.indexOf('first\n');
    tampered.write('FIRST\n', at);
    expect(() => readPackage(tampered)).toThrow(/do not match its manifest/);
  });
});

describe('member names', () => {
  it.each([
    ['..', /names a folder/],
    ['.', /names a folder/],
    ['../etc/passwd', /path separator/],
    ['/etc/passwd', /path separator/],
    ['a\\b', /path separator/],
    ['nul\u0000byte', /NUL or control/],
    ['', /empty/],
    ['x'.repeat(100), /longer than 99 bytes/],
  ])('refuses %j when a package is written', (name, why) => {
    expect(() => packTar([{ name, data: Buffer.from('x') }])).toThrow(why);
    expect(() => checkMemberName(name, 'test')).toThrow(why);
  });
});

describe('archive cipher (AES-256-GCM)', () => {
  it('round-trips, authenticates, names the key by a fingerprint and never shows the key', async () => {
    const key = randomBytes(32).toString('hex');
    await writeFile(join(dir, 'k'), key, { mode: 0o600 });
    await writeFile(join(dir, 'other'), randomBytes(32), { mode: 0o600 });
    const cipher = loadArchiveCipher(join(dir, 'k'));
    const sealed = cipher.seal(Buffer.from('package bytes'));
    expect(isSealed(sealed)).toBe(true);
    expect(sealedKeyId(sealed)).toBe(cipher.keyId);
    expect(cipher.open(sealed).toString()).toBe('package bytes');
    expect(cipher.seal(Buffer.from('package bytes')).equals(sealed)).toBe(false); // a fresh IV each time
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1] = (tampered[tampered.length - 1] as number) ^ 1;
    expect(() => cipher.open(tampered)).toThrow(/fails authentication/);
    expect(() => cipher.open(sealed.subarray(0, 30))).toThrow(/truncated/);
    expect(() => loadArchiveCipher(join(dir, 'other')).open(sealed)).toThrow(
      /sealed with key .* but the configured key is/,
    );
    const shown = `${JSON.stringify(cipher)} ${inspect(cipher)} ${String(Object.keys(cipher))}`;
    expect(shown).toContain(cipher.keyId);
    expect(shown).not.toContain(key);
    await writeFile(join(dir, 'short'), 'abc', { mode: 0o600 });
    expect(() => loadArchiveCipher(join(dir, 'short'))).toThrow(/must hold a 256-bit key/);
    expect(() => loadArchiveCipher(join(dir, 'none'))).toThrow(/cannot read archive key file/);
    // A key file every user of the host can read is refused, naming the fix; private, it loads.
    await writeFile(join(dir, 'open'), key);
    await chmod(join(dir, 'open'), 0o644);
    expect(() => loadArchiveCipher(join(dir, 'open'))).toThrow(
      /is open to every user of this host \(mode 644\); make it private \(`chmod 600/,
    );
    await chmod(join(dir, 'open'), 0o640);
    expect(loadArchiveCipher(join(dir, 'open')).keyId).toBe(cipher.keyId);
  });
});

describe('putOnce (create-if-absent)', () => {
  it('creates, then finds identical bytes and leaves them; different bytes are a conflict, never an overwrite', async () => {
    const path = join(dir, 'archive', 'obs.tar');
    expect((await putOnce(path, Buffer.from('v1'))).outcome).toBe('created');
    expect((await putOnce(path, Buffer.from('v1'))).outcome).toBe('identical');
    await expect(putOnce(path, Buffer.from('v2'))).rejects.toMatchObject({
      code: OpstateErrorCode.CONFLICT,
      retryable: false,
    });
    expect((await readFile(path)).toString()).toBe('v1');
  });
});

describe("the demo's scripted handlers", () => {
  const ctx = (kind: OperationKind, id: string) =>
    ({ operation: { id, kind, attempt: 1, retryCount: 0 } }) as unknown as HandlerContext;

  it('fail the first operation of the chosen kind for good on whichever worker runs it, until fixed, and let every other run through', async () => {
    const ran: string[] = [];
    const unpacked: unknown[] = [];
    const base = Object.fromEntries(
      OPERATION_KINDS.map((k) => [
        k,
        (async (c) => {
          ran.push(`${k} ${c.operation.id}`);
          return {
            outputs: [
              {
                artifactType: ArtifactType.RAW_DATA_PACKAGE,
                artifactId: c.operation.id,
                locationId: 'buffer',
              },
            ],
          };
        }) satisfies OperationHandler,
      ]),
    ) as unknown as Record<OperationKind, OperationHandler>;
    const scripted = scriptDemoHandlers({
      failFirstOf: OperationKind.TRANSFER,
      afterUnpack: async (outputs) => {
        unpacked.push(outputs);
      },
    });
    const workerA = scripted.wrap(base);
    const workerB = scripted.wrap(base);
    const failureOf = (run: Promise<unknown>) =>
      run.then(
        () => undefined,
        (err: unknown) => err,
      );

    await workerA[OperationKind.RAW_DATA_PACKAGE](ctx(OperationKind.RAW_DATA_PACKAGE, 'p1'));
    expect(scripted.failed()).toBeUndefined();
    // The first transfer, on worker-B, fails with an error the worker does not retry; run again
    // on worker-A before the fix, it fails again; another transfer runs.
    const failure = await failureOf(
      workerB[OperationKind.TRANSFER](ctx(OperationKind.TRANSFER, 't1')),
    );
    expect(failure).toMatchObject({ message: SCRIPTED_FAILURE });
    expect(isRetryable(failure)).toBe(false);
    expect(scripted.failed()).toBe('t1');
    expect(
      await failureOf(workerA[OperationKind.TRANSFER](ctx(OperationKind.TRANSFER, 't1'))),
    ).toMatchObject({ message: SCRIPTED_FAILURE });
    await workerB[OperationKind.TRANSFER](ctx(OperationKind.TRANSFER, 't2'));
    // Once fixed, its retry (on either worker) runs the real handler.
    scripted.fix();
    await workerA[OperationKind.TRANSFER](ctx(OperationKind.TRANSFER, 't1'));
    expect(scripted.failed()).toBe('t1');
    // An unpack hands its outputs on once its handler has written them.
    await workerA[OperationKind.UNPACK](ctx(OperationKind.UNPACK, 'u1'));
    expect(unpacked).toEqual([
      [{ artifactType: ArtifactType.RAW_DATA_PACKAGE, artifactId: 'u1', locationId: 'buffer' }],
    ]);
    expect(ran).toEqual(['raw_data_package p1', 'transfer t2', 'transfer t1', 'unpack u1']);
  });

  it("show an operator's retry on the path and as the recovery", () => {
    const at = new Date(0);
    const t = (
      from: TransitionEntry['from'],
      to: TransitionEntry['to'],
      event: string,
      by: string,
      attempt: number,
      reason: string | null = null,
    ): TransitionEntry => ({ from, to, event, by, attempt, reason, at });
    const history = [
      t(null, 'PENDING', 'CREATE', 'pipeline:preservation', 1),
      t('PENDING', 'SCHEDULED', 'SCHEDULE', 'scheduler', 1),
      t('SCHEDULED', 'IN_PROGRESS', 'START', 'worker-A', 1),
      t('IN_PROGRESS', 'FAILED', 'FAIL', 'worker-A', 1, 'refused'),
      t('FAILED', 'PENDING', 'RETRY', 'operator:alice (demo)', 1, 'fixed'),
      t('PENDING', 'SCHEDULED', 'SCHEDULE', 'scheduler', 2),
      t('SCHEDULED', 'IN_PROGRESS', 'START', 'worker-B', 2),
      t('IN_PROGRESS', 'COMPLETED', 'COMPLETE', 'worker-B', 2),
    ];
    expect(describePath(history)).toEqual([
      'PENDING → SCHEDULED → IN_PROGRESS (worker-A) → FAILED (FAIL: refused) → PENDING (RETRY by operator:alice (demo): fixed)',
      '→ SCHEDULED → IN_PROGRESS (worker-B) → COMPLETED',
    ]);
    expect(recoveryOf(history)).toBe('retried by operator:alice (demo) after it failed for good');
    expect(recoveryOf(history.filter((h) => h.event !== 'RETRY'))).toBe('none needed');
  });
});
