/**
 * The embedded default's cost, engine by engine, each in a fresh child process: PGlite as it
 * opens by default, PGlite with small buffers, and a real Postgres started privately from the
 * binaries an npm package ships (persistence/embeddedPostgres.ts, the default since these
 * figures chose it), all under the same runtime
 * (in-process transport, a control plane and a worker with a no-op handler). Per engine: open
 * time (a new data folder, then reopening it), resident memory idle and under load (the Node
 * process plus, for the private server, every Postgres process), and end-to-end operations/s.
 * Compared figures use PGlite's default as the baseline, measured in the same run.
 *
 *   node --import tsx bench/embedded.ts          (OPSTATE_BENCH_EMBEDDED_OPS, default 2000)
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OperationKind } from '../machines/OperationKind.ts';
import { LocationType } from '../machines/routing.ts';
import { memoryLogger } from '../observe/Logger.ts';
import { createRuntime, type Runtime } from '../runtime/Runtime.ts';
import { type Figure, print } from './lib/figure.ts';

const ENGINES = ['pglite', 'pglite-small-buffers', 'postgres-private'] as const;
type Engine = (typeof ENGINES)[number];
const OPS = Number(process.env.OPSTATE_BENCH_EMBEDDED_OPS ?? 2000);

/** Resident memory (MiB) of a process and, recursively, its children. */
function residentMiB(root: number): number {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // the process is gone
    }
  }
  let kib = 0;
  const visit = (pid: number) => {
    try {
      const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      kib += Number(m?.[1] ?? 0);
    } catch {
      // the process is gone
    }
    for (const c of children.get(pid) ?? []) visit(c);
  };
  visit(root);
  return kib / 1024;
}

async function open(engine: Engine, dir: string): Promise<Runtime> {
  return createRuntime({
    embedded: true,
    dataDir: join(dir, 'data'),
    logger: memoryLogger(),
    prefix: 'bench',
    embeddedEngine: engine === 'postgres-private' ? 'postgres' : 'pglite',
    ...(engine === 'pglite-small-buffers'
      ? { pglite: { postgresqlconf: ['shared_buffers=16MB', 'wal_buffers=1MB'] } }
      : {}),
  });
}

const settle = () => new Promise((r) => setTimeout(r, 1_000));

/** One engine, in this (fresh) process: prints its figures as JSON lines. */
async function measure(engine: Engine): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), `opstate-bench-${engine}-`));
  // As root the private server runs as the postgres user, which must reach its data folder.
  await chmod(dir, 0o711);
  try {
    const startedAt = performance.now();
    const first = await open(engine, dir);
    const openFresh = performance.now() - startedAt;
    await settle();
    const idle = residentMiB(process.pid);
    const runtime = first;
    const source = await runtime.artifacts.addLocation({
      site: 'bench',
      name: 'source',
      locationType: LocationType.SOURCE,
      storageRoot: join(dir, 'source'),
    });
    const buffer = await runtime.artifacts.addLocation({
      site: 'bench',
      name: 'buffer',
      locationType: LocationType.BUFFER,
      storageRoot: join(dir, 'buffer'),
    });
    const bundle = await runtime.artifacts.addDataTransferPackage({ name: 'dtp' });
    runtime.startControlPlane();
    runtime.startWorker({
      kinds: [OperationKind.TRANSFER],
      concurrency: 16,
      // The copy a transfer must produce; every operation moves the same package, so all but the
      // first find it there (conflict = already done).
      handlers: {
        [OperationKind.TRANSFER]: async () => ({
          outputs: [
            { artifactType: 'data_transfer_package', artifactId: bundle, locationId: buffer.id },
          ],
        }),
      },
    });
    let peak = idle;
    const sampler = setInterval(() => {
      peak = Math.max(peak, residentMiB(process.pid));
    }, 200);
    const began = performance.now();
    for (let i = 0; i < OPS; i += 250) {
      await runtime.submitMany(
        Array.from({ length: Math.min(250, OPS - i) }, () => ({
          kind: OperationKind.TRANSFER,
          fields: {
            dataTransferPackageId: bundle,
            sourceLocationId: source.id,
            destinationLocationId: buffer.id,
          },
        })),
      );
    }
    for (;;) {
      const counts = await runtime.store.countByKindAndStatus();
      if (counts[OperationKind.TRANSFER].COMPLETED >= OPS) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const seconds = (performance.now() - began) / 1000;
    clearInterval(sampler);
    peak = Math.max(peak, residentMiB(process.pid));
    await first.close();
    const reopenedAt = performance.now();
    const second = await open(engine, dir);
    const reopen = performance.now() - reopenedAt;
    await second.close();
    const out = (name: string, value: number, unit: string) =>
      process.stdout.write(`${JSON.stringify({ engine, name, value, unit })}\n`);
    out('open_new_ms', openFresh, 'ms');
    out('reopen_ms', reopen, 'ms');
    out('rss_idle_mib', idle, 'MiB');
    out('rss_load_mib', peak, 'MiB');
    out('e2e_ops_per_s', OPS / seconds, 'ops/s');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Runs each engine in a child process of its own and prints the comparison. */
async function compare(): Promise<void> {
  const results = new Map<string, number>();
  for (const engine of ENGINES) {
    const lines = await new Promise<string[]>((resolve, reject) => {
      const env = { ...process.env };
      delete env.DATABASE_URL;
      delete env.NATS_URL;
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', fileURLToPath(import.meta.url), engine],
        {
          env,
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      let text = '';
      child.stdout?.on('data', (b: Buffer) => {
        text += b.toString();
      });
      child.on('exit', (code) =>
        code === 0
          ? resolve(text.split('\n').filter(Boolean))
          : reject(new Error(`bench embedded ${engine}: exit ${code}`)),
      );
    });
    for (const line of lines) {
      const f = JSON.parse(line) as { engine: string; name: string; value: number };
      results.set(`${f.engine}:${f.name}`, f.value);
    }
  }
  const units: Record<string, string> = {
    open_new_ms: 'ms',
    reopen_ms: 'ms',
    rss_idle_mib: 'MiB',
    rss_load_mib: 'MiB',
    e2e_ops_per_s: 'ops/s',
  };
  for (const [name, unit] of Object.entries(units)) {
    const baseline = results.get(`pglite:${name}`) as number;
    for (const engine of ENGINES) {
      const value = results.get(`${engine}:${name}`) as number;
      const figure: Figure = {
        name: `embedded_${engine.replaceAll('-', '_')}_${name}`,
        value,
        unit,
      };
      print(engine === 'pglite' ? figure : { ...figure, baseline });
    }
  }
}

const engine = process.argv[2];
if (engine === undefined) await compare();
else if ((ENGINES as readonly string[]).includes(engine)) await measure(engine as Engine);
else {
  process.stderr.write(`unknown engine ${engine}; choose from ${ENGINES.join(', ')}\n`);
  process.exitCode = 2;
}
