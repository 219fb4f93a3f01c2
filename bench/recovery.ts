/**
 * Dead worker → operation back to PENDING (DESIGN §9): how long each recovery path takes, as a
 * ratio of the timer it is bound by. Real Postgres, real NATS JetStream, workers as child
 * processes killed with SIGKILL. Prints one JSON object per line.
 *
 * - monitor path: a worker holding an operation is killed; from the kill to the RESET by the
 *   heartbeat monitor, against the heartbeat timeout (target ≤ 1.2 ×);
 * - reconciler path: a worker dies after START, before its first heartbeat; from START to the
 *   RESET by the reconciler, against the reconciler floor (target ≤ 1.2 ×).
 *
 *   node --import tsx bench/recovery.ts        (OPSTATE_BENCH_RECOVERY_SAMPLES, default 3)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { memoryLogger } from '../actors/Logger.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../actors/Runtime.ts';
import { OperationKind } from '../machines/OperationKind.ts';
import { LocationType } from '../machines/routing.ts';
import { opstateArgs, REPO_ROOT } from '../test/helpers/opstateCli.ts';
import type { JetStreamTransport } from '../transport/jetstream/createJetStreamTransport.ts';

const ADMIN = process.env.OPSTATE_BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const SAMPLES = Number(process.env.OPSTATE_BENCH_RECOVERY_SAMPLES ?? 3);
const HANDLERS = fileURLToPath(new URL('./fixtures/holdHandlers.ts', import.meta.url));

const TIMING: Partial<RuntimeTiming> = {
  heartbeatIntervalMs: 500,
  heartbeatTimeoutMs: 4_000,
  reconcilerFloorMs: 8_000,
  ackWaitMs: 60_000,
  monitorIntervalMs: 250,
  reconcilerIntervalMs: 500,
  schedulerIntervalMs: 20,
  relayIntervalMs: 20,
};

const emit = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);

async function until(cond: () => Promise<boolean>, what: string, ms = 120_000) {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function startWorker(env: Record<string, string>, extra: Record<string, string>) {
  const proc = spawn(
    process.execPath,
    opstateArgs(['worker', '--kinds', 'all', '--handlers', HANDLERS, '--faults']),
    {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env, ...extra },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const out: string[] = [];
  proc.stdout?.on('data', (b: Buffer) => out.push(b.toString()));
  proc.stderr?.on('data', (b: Buffer) => out.push(b.toString()));
  const exited = new Promise<void>((r) => proc.on('exit', () => r()));
  return { proc, out, exited };
}

async function resetOf(runtime: Runtime, id: string, by: string) {
  const view = await runtime.get(id);
  return view.transitions.find((t) => t.event === 'RESET' && t.by === by);
}

async function main() {
  const name = `opstate_bench_rec_${randomBytes(4).toString('hex')}`;
  const admin = postgres(ADMIN, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(ADMIN);
  url.pathname = `/${name}`;
  const prefix = `bench_rec_${randomBytes(4).toString('hex')}`;
  const runtime = await createRuntime({
    databaseUrl: url.toString(),
    natsUrl: NATS_URL,
    prefix,
    timing: TIMING,
    logger: memoryLogger(),
  });
  const env = {
    DATABASE_URL: url.toString(),
    NATS_URL,
    OPSTATE_PREFIX: prefix,
    OPSTATE_TIMING: JSON.stringify(TIMING),
  };
  const children: ChildProcess[] = [];
  try {
    runtime.startControlPlane();
    const location = await runtime.artifacts.addLocation({
      site: 'bench',
      name: 'source',
      locationType: LocationType.SOURCE,
      storageRoot: '/bench',
    });
    const submit = async () => {
      const pkg = await runtime.artifacts.addRawDataPackage({
        name: `p-${randomBytes(4).toString('hex')}`,
      });
      return runtime.submit({
        kind: OperationKind.RAW_DATA_PACKAGE,
        fields: { rawDataPackageId: pkg, locationId: location.id },
      });
    };
    const ready = async (w: ReturnType<typeof startWorker>) =>
      until(async () => w.out.join('').includes('started for'), 'worker start');

    const monitor: number[] = [];
    const reconciler: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      // Monitor path.
      const w = startWorker(env, { BENCH_HOLD_MS: '600000' });
      children.push(w.proc);
      await ready(w);
      const id = await submit();
      await until(
        () => runtime.transport.heartbeats.isAlive(OperationKind.RAW_DATA_PACKAGE, id),
        'a heartbeat',
      );
      const killedAt = Date.now();
      w.proc.kill('SIGKILL');
      await w.exited;
      await until(
        async () => (await resetOf(runtime, id, 'heartbeat_monitor')) !== undefined,
        'the monitor reset',
      );
      const reset = await resetOf(runtime, id, 'heartbeat_monitor');
      monitor.push((reset?.at.getTime() ?? 0) - killedAt);
      await runtime.command(id, { type: 'CANCEL', reason: 'bench sample done' });

      // Reconciler path.
      const doomed = startWorker(env, { BENCH_CRASH: 'before-first-heartbeat' });
      children.push(doomed.proc);
      await ready(doomed);
      const id2 = await submit();
      await doomed.exited;
      const started = (await runtime.store.load(id2)).startedAt?.getTime() ?? 0;
      await until(
        async () => (await resetOf(runtime, id2, 'reconciler')) !== undefined,
        'the reconciler reset',
      );
      const reset2 = await resetOf(runtime, id2, 'reconciler');
      reconciler.push((reset2?.at.getTime() ?? 0) - started);
      await runtime.command(id2, { type: 'CANCEL', reason: 'bench sample done' });
    }
    const worst = (xs: number[]) => Math.max(...xs);
    emit({
      name: 'recovery_monitor_path_worst',
      value: worst(monitor),
      unit: 'ms',
      baseline: TIMING.heartbeatTimeoutMs,
      ratio: Number((worst(monitor) / (TIMING.heartbeatTimeoutMs as number)).toFixed(3)),
      samples: monitor,
      note: 'SIGKILL of a worker holding an operation → RESET by heartbeat_monitor, against the heartbeat timeout (target ≤ 1.2)',
    });
    emit({
      name: 'recovery_reconciler_path_worst',
      value: worst(reconciler),
      unit: 'ms',
      baseline: TIMING.reconcilerFloorMs,
      ratio: Number((worst(reconciler) / (TIMING.reconcilerFloorMs as number)).toFixed(3)),
      samples: reconciler,
      note: 'worker dead after START, before its first heartbeat → RESET by reconciler, from START, against the floor (target ≤ 1.2)',
    });
  } finally {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await (runtime.transport as JetStreamTransport).destroy().catch(() => undefined);
    await runtime.close();
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}

await main();
