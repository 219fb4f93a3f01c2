import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.ts';
import { OPERATION_KINDS } from '../../machines/OperationKind.ts';
import { isSealed, loadArchiveCipher } from '../../stages/archiveCipher.ts';
import { readPackage } from '../../stages/packageFormat.ts';

/**
 * `opstate demo` (what `npm start` runs), in this process: the whole pipeline on the embedded database and the
 * in-process transport, with worker-A crashed part-way.
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
  it('completes every kind through a worker crash, with one live copy per artifact and location', async () => {
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
    const archive = join(dir, 'storage', 'archive');
    const archived = await filesUnder(archive);
    expect(archived).toEqual(['obs-2024-001.tar', 'obs-2024-002.tar', 'obs-2024-003.tar']);
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
      /summary: 12 member\(s\) deleted, 1 kept along the way .* every buffer copy DELETED with one receipt/,
    );
    expect(text).toContain('→ SOURCE_REVALIDATED → DELETED → RECEIPTED');
    expect(text).toContain('next safe action: done: source deleted with a receipt');
  });
});
