import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.ts';
import { OPERATION_KINDS } from '../../machines/OperationKind.ts';
import { isSealed, loadArchiveCipher } from '../../stages/archiveCipher.ts';
import { readPackage } from '../../stages/packageFormat.ts';

/**
 * `opstate demo` (what `npm start` runs), in this process: the declared pipeline on the embedded
 * database and the in-process transport, each package's files declared complete and nothing
 * submitted, one stage failed for good and retried by an operator, worker-A crashed part-way, then
 * a package staged on request and the transfer package rolled back to its transfer.
 */
let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

/** Every file under a folder, as paths relative to it. */
async function filesUnder(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(root.length + 1))
    .sort();
}

describe('opstate demo', () => {
  it('runs the declared pipeline from its entry stage through a failed-then-retried stage, a worker crash and a rollback, every package ARCHIVED, one live copy per artifact and location', async () => {
    dir = await mkdtemp(join(tmpdir(), 'opstate-demo-test-'));
    await chmod(dir, 0o711); // as root, the embedded Postgres server runs as another user
    const lines: string[] = [];
    const io = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) };
    const code = await main(['demo', '--data-dir', dir], io);
    const text = lines.join('\n');
    expect(code, text).toBe(0);

    // One summary line per operation: `  <kind>  <STATUS> attempt N …`. Every kind is there, and
    // every operation COMPLETED.
    const summaries = lines.filter((l) => /^ {2}[a-z_]+ +[A-Z_]+ attempt \d+/.test(l));
    for (const kind of OPERATION_KINDS) {
      expect(
        summaries.some((l) => l.startsWith(`  ${kind} `)),
        `${kind} in\n${text}`,
      ).toBe(true);
    }
    expect(
      summaries.every((l) => / COMPLETED attempt /.test(l)),
      text,
    ).toBe(true);

    // Nothing was submitted by the demo: every packaging was created by the pipeline's pass from
    // its package's "files complete" fact, the staging by the operator's request, every other
    // operation by the pass.
    const creators = summaries.map((l) => {
      const next = lines[lines.indexOf(l) + 1] ?? '';
      const by = /^ {4}created {3}by (\S+)$/.exec(next)?.[1];
      return `${l.trim().split(/ +/)[0]} ${by}`;
    });
    // The rollback's transfer was created by the operator with it, its unpack and archives by the
    // pass again: the superseded operations are counted too.
    expect(creators.filter((c) => c.endsWith(' pipeline:preservation')).sort(), text).toEqual([
      'data_transfer_package pipeline:preservation',
      ...Array(6).fill('long_term_archive pipeline:preservation'),
      ...Array(3).fill('raw_data_package pipeline:preservation'),
      'transfer pipeline:preservation',
      'unpack pipeline:preservation',
      'unpack pipeline:preservation',
    ]);
    expect(creators.filter((c) => !c.endsWith(' pipeline:preservation')).sort(), text).toEqual([
      'staging operator:alice',
      'transfer operator:alice',
    ]);

    // One stage failed for good and stopped its branch: every package FAILED (derived), and no
    // unpack existed until an operator retried it; the retry resumed the branch to ARCHIVED.
    const retryAt = lines.findIndex((l) =>
      /^ {2}\$ opstate retry [0-9a-f-]{36} --operator alice /.test(l),
    );
    expect(retryAt, text).toBeGreaterThan(0);
    const beforeRetry = lines.slice(0, retryAt);
    for (const name of ['obs-2024-001', 'obs-2024-002', 'obs-2024-003', 'dtp-2024-01']) {
      expect(
        beforeRetry.some((l) => new RegExp(`^ {4}${name} +FAILED +failed: `).test(l)),
        `${name} FAILED before the retry in\n${text}`,
      ).toBe(true);
    }
    expect(beforeRetry.join('\n')).toContain(
      'per state: raw_data_package 3 FAILED; data_transfer_package 1 FAILED',
    );
    expect(beforeRetry.join('\n')).toMatch(
      /transfer dtp-2024-01 FAILED \(attempt 1\): the destination refused/,
    );
    expect(
      beforeRetry.filter((l) => /^ {2}\+ (unpack|long-term archive) /.test(l)),
      text,
    ).toEqual([]);
    const transfer = summaries.find((l) => l.startsWith('  transfer '));
    expect(transfer, text).toMatch(/ COMPLETED attempt 2 /);
    expect(text).toMatch(
      /IN_PROGRESS \(worker-[AB]\) → FAILED \(FAIL: the destination refused the session[^\n]*\) → PENDING \(RETRY by operator:alice \(demo\): /,
    );
    expect(text).toContain('recovery  retried by operator:alice (demo) after it failed for good');

    // At the end every package is ARCHIVED, derived from its operations and copies.
    for (const name of ['obs-2024-001', 'obs-2024-002', 'obs-2024-003', 'dtp-2024-01']) {
      expect(
        lines.slice(retryAt).some((l) => new RegExp(`^ {4}${name} +ARCHIVED +done: `).test(l)),
        `${name} ARCHIVED in\n${text}`,
      ).toBe(true);
    }
    expect(text).toContain(
      'packages per derived state: raw_data_package 3 ARCHIVED; data_transfer_package 1 ARCHIVED',
    );
    expect(text).toMatch(
      /a\) retry the failed stage: transfer [0-9a-f]{8} FAILED for good and its branch stopped; retried by operator alice, it COMPLETED \(attempt 2\) and the branch went on to ARCHIVED/,
    );

    // The rollback happened: the transfer package back to 'transfer-1', its plan printed dry
    // first; each redone operation (the transfer, the unpack, every member's archive) superseded,
    // and run again once by an operation carrying the rollback's id, the transfer created by the
    // operator and the rest by the pass; every package ARCHIVED again.
    const dryAt = lines.findIndex((l) =>
      /^ {2}\$ opstate rollback \S+ --to transfer-1 .* --dry-run$/.test(l),
    );
    expect(dryAt, text).toBeGreaterThan(retryAt);
    expect(lines[dryAt + 1], text).toMatch(
      /^ {4}dry run \(nothing changed\): rollback of data_transfer_package [0-9a-f-]{36} to 'transfer-1'/,
    );
    expect(lines[dryAt + 2], text).toBe('    redo, in order: transfer-1, unpack-1, archive-1');
    const rolled =
      /^ {4}rollback ([0-9a-f-]{36}): 5 operations superseded, 1 created by operator:alice;/.exec(
        lines.find((l) => /^ {4}rollback [0-9a-f-]{36}: /.test(l)) ?? '',
      );
    expect(rolled, text).not.toBeNull();
    const rollbackId = rolled?.[1] as string;
    /** The lines that describe one operation in section 5, from its summary line on. */
    const blockOf = (l: string) => {
      const at = lines.indexOf(l);
      const end = lines.findIndex((x, i) => i > at && (x === '' || summaries.includes(x)));
      return lines.slice(at, end);
    };
    const marked = (mark: string) =>
      summaries
        .filter((l) => blockOf(l).includes(`    rollback  ${mark}`))
        .map((l) => creators[summaries.indexOf(l)])
        .sort();
    expect(marked(`re-run of rollback ${rollbackId}`), text).toEqual([
      ...Array(3).fill('long_term_archive pipeline:preservation'),
      'transfer operator:alice',
      'unpack pipeline:preservation',
    ]);
    expect(marked(`superseded by rollback ${rollbackId}: redone, out of the chain`), text).toEqual([
      ...Array(3).fill('long_term_archive pipeline:preservation'),
      'transfer pipeline:preservation',
      'unpack pipeline:preservation',
    ]);
    expect(text).toContain(
      `rollback ${rollbackId} to 'transfer-1' by operator:alice: 5 operations superseded, 5 created again carrying its id, 5 COMPLETED`,
    );
    const rolledAt = lines.findIndex((l) => l.startsWith(`    rollback ${rollbackId}: `));
    expect(lines.slice(rolledAt).some((l) => /^ {2}every package ARCHIVED again /.test(l))).toBe(
      true,
    );
    expect(text).toContain(
      `c) roll the transfer package back to 'transfer-1': dtp-2024-01 back to 'transfer-1' by operator alice (rollback ${rollbackId}): 5 operations redone (transfer-1, unpack-1, archive-1), 7 copies superseded; 5 of 5 new operations COMPLETED and every package is ARCHIVED again`,
    );

    // The crash happened, and a recovery path (not a lucky completion) brought the work home.
    expect(text).toContain('Crashing worker-A now');
    expect(text).toMatch(/RESET by (heartbeat_monitor|reconciler|broker)/);
    const recovered = lines.filter((l) => /^ {4}recovery /.test(l) && !l.includes('none needed'));
    expect(recovered.length, text).toBeGreaterThan(0);
    expect(
      summaries.some((l) => / attempt [2-9]/.test(l)),
      text,
    ).toBe(true);

    // No artifact has two live copies at one location: per output, and over every artifact.
    const outputs = lines.filter((l) => /^ {4}output /.test(l));
    expect(outputs.length).toBeGreaterThan(0);
    expect(
      // A buffer copy the deleter already removed (policy: buffer copies after a verified archive)
      // says so; anything else has exactly one live copy.
      outputs.every(
        (l) => l.endsWith(': 1 live copy') || /buffer: deleted after its verified archive$/.test(l),
      ),
      text,
    ).toBe(true);
    expect(text).toContain('no artifact has more than one live copy at a location');
    expect(text).not.toContain('DUPLICATE');

    // The archive holds real packages, encrypted at rest, that decrypt and read back against their
    // manifests; the key never appears in the output; nothing half written was left behind.
    // The pipeline's archive stage keys each object by its package's id.
    const archive = join(dir, 'storage', 'archive');
    const archived = await filesUnder(archive);
    expect(archived).toHaveLength(3);
    for (const name of archived) {
      expect(name).toMatch(/^raw_data_package\/[0-9a-f-]{36}\.tar$/);
      expect(text).toContain(`archive ${name}`);
    }
    const keyText = (await readFile(join(dir, 'archive.key'), 'utf8')).trim();
    expect(text).not.toContain(keyText);
    const cipher = loadArchiveCipher(join(dir, 'archive.key'));
    expect(text).toContain(`key id ${cipher.keyId}`);
    for (const name of archived) {
      const sealed = await readFile(join(archive, name));
      expect(isSealed(sealed)).toBe(true);
      const { members } = readPackage(cipher.open(sealed));
      expect(members.map((m) => m.name)).toEqual([
        'scan_0001.fits',
        'scan_0002.fits',
        'scan_0003.fits',
      ]);
    }
    const everything = await filesUnder(join(dir, 'storage'));
    expect(everything.filter((f) => f.includes('.partial-'))).toEqual([]);

    // Archive then delete: every buffer package folder is gone (deleted after its verified archive,
    // each with a receipt); one deletion was resumed by deleter-B after deleter-A crashed between
    // its last unlink and its receipt; the member held open was kept with that reason, then
    // deleted after the re-plan; the source copies stay (the policy does not clean them).
    expect(everything.filter((f) => f.startsWith('buffer/raw_data_package/'))).toEqual([]);
    expect(everything.filter((f) => f.startsWith('source/'))).toHaveLength(9 + 3 + 1);
    expect(text).toContain('Crashing deleter-A now');
    expect(text).toMatch(/DELETION_IN_PROGRESS \(RESUME by deleter-B\) → DELETED/);
    expect(text).toMatch(/kept scan_0002\.fits \(plan 1\): open by process \d+ \(node\)/);
    expect(text).toMatch(
      // Four members (the manifest and three files) in each of six buffer copies: the first
      // unpack's three and the three the rollback's unpack wrote again.
      /summary: 24 member\(s\) deleted, 1 kept along the way .* every buffer copy DELETED with one receipt/,
    );
    expect(text).toContain('→ SOURCE_REVALIDATED → DELETED → RECEIPTED');
    expect(text).toContain('next safe action: done: source deleted with a receipt');
  });
});
