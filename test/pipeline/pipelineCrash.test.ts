import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { createStageHandlers } from '../../stages/createStageHandlers.ts';
import { registerSampleData } from '../../stages/sampleData.ts';
import { SAMPLE_PIPELINE } from '../../stages/samplePipeline.ts';
import { deploymentPerTest, waitFor } from '../actors/harness.ts';
import { NATS_URL } from '../archive/world.ts';
import { REPO_ROOT } from '../helpers/opstateCli.ts';

/**
 * The leader killed (SIGKILL) between each completion and the next stage's creation: a
 * control-plane process that dies before its pipeline pass writes each stage's first operations,
 * restarted each time, creates every stage exactly once.
 */
const deploy = deploymentPerTest();
const FIXTURE = join(REPO_ROOT, 'test', 'pipeline', 'fixtures', 'crashingPlane.ts');
const STAGES = ['bundling', 'transfer-1', 'unpack-1', 'archive-1'];

let dir: string | undefined;
let plane: ChildProcess | undefined;
afterEach(async () => {
  if (plane !== undefined && plane.exitCode === null && plane.signalCode === null) {
    const exited = new Promise((resolve) => plane?.once('exit', resolve));
    plane.kill('SIGKILL');
    await exited;
  }
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
  plane = undefined;
});

/** Every operation as `kind|subject|target location`, the subject from its subtype row. */
async function keys(database: {
  execute: (q: ReturnType<typeof sql>) => Promise<Record<string, unknown>[]>;
}) {
  const rows = await database.execute(sql`
    select o.kind, o.status, o.target_location_id::text as location,
      coalesce(r.raw_data_package_id, d.data_transfer_package_id, t.data_transfer_package_id,
               u.data_transfer_package_id, a.raw_data_package_id)::text as subject
    from operation o
    left join packaging_operation r on r.operation_id = o.id
    left join bundling_operation d on d.operation_id = o.id
    left join transfer_operation t on t.operation_id = o.id
    left join unpack_operation u on u.operation_id = o.id
    left join long_term_archive_operation a on a.operation_id = o.id`);
  return rows.map((r) => ({
    kind: String(r.kind),
    status: String(r.status),
    key: `${String(r.kind)}|${String(r.subject)}|${String(r.location)}`,
  }));
}

describe('the pipeline pass under a leader killed before each creation', () => {
  it('creates each stage exactly once through a SIGKILL and a restart per stage', async () => {
    const dep = await deploy();
    dir = await mkdtemp(join(tmpdir(), 'opstate-pipeline-crash-'));
    const markers = join(dir, 'markers');
    await mkdir(markers);
    const site = `pcrash-${Math.random().toString(16).slice(2, 8)}`;
    const rt = dep.runtime;
    const sample = await registerSampleData(rt.artifacts, dir, { site, packageCount: 3 });
    const roots = new Map(Object.values(sample.locations).map((l) => [l.id, l.storageRoot]));
    rt.startWorker({
      kinds: [...OPERATION_KINDS],
      handlers: createStageHandlers({
        storageRootOf: (id) => roots.get(id) as string,
      }),
    });
    let starts = 0;
    let killed = 0;
    const output: string[] = [];
    const start = () => {
      starts++;
      const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
        cwd: REPO_ROOT,
        env: {
          ...process.env,
          DATABASE_URL: dep.db.url,
          NATS_URL,
          OPSTATE_PREFIX: dep.prefix,
          OPSTATE_TIMING: JSON.stringify(dep.timing),
          PIPELINE_SITE: site,
          FIXTURE_MARKERS: markers,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout?.on('data', (c: Buffer) => output.push(c.toString()));
      child.stderr?.on('data', (c: Buffer) => output.push(c.toString()));
      // A plane killed by its fault comes back at once, as a supervisor would bring it back.
      child.once('exit', (_code, signal) => {
        if (signal === 'SIGKILL' && plane === child) {
          killed++;
          plane = start();
        }
      });
      return child;
    };
    plane = start();
    await rt.submitMany(
      (SAMPLE_PIPELINE[0]?.inputs(sample, []) ?? []).map((p) => ({ ...p, by: 'test' })),
    );
    await waitFor(
      async () =>
        (await keys(rt.database)).filter(
          (o) => o.kind === OperationKind.LONG_TERM_ARCHIVE && o.status === 'COMPLETED',
        ).length === 3,
      '3 archives COMPLETED',
      180_000,
    );
    // Each stage's crash point fired, each killed the plane, and each restart went on.
    expect(STAGES.filter((s) => existsSync(join(markers, s)))).toEqual(STAGES);
    expect(killed).toBe(STAGES.length);
    expect(starts).toBe(STAGES.length + 1);
    const ops = await keys(rt.database);
    expect(new Set(ops.map((o) => o.key)).size).toBe(ops.length);
    const perKind = (kind: string) => ops.filter((o) => o.kind === kind).length;
    expect(perKind(OperationKind.RAW_DATA_PACKAGE)).toBe(3);
    expect(perKind(OperationKind.DATA_TRANSFER_PACKAGE)).toBe(1);
    expect(perKind(OperationKind.TRANSFER)).toBe(1);
    expect(perKind(OperationKind.UNPACK)).toBe(1);
    expect(perKind(OperationKind.LONG_TERM_ARCHIVE)).toBe(3);
  }, 240_000);
});
