/**
 * Dead worker → operation back to PENDING: how long each recovery path takes, as a
 * ratio of the timer it is bound by. Real Postgres, real NATS JetStream, workers as child
 * processes killed with SIGKILL. Prints one JSON object per line.
 *
 * - monitor path, running: a worker running an operation is killed; from the kill to the RESET by
 *   the heartbeat monitor, against the heartbeat timeout (target ≤ 1.2 ×);
 * - monitor path, held dispatch: a worker dies with a dispatch pulled and not yet started; from
 *   its death to the RESET, against the heartbeat timeout;
 * - monitor path, frozen worker: a worker running an operation is stopped (SIGSTOP); from the
 *   freeze to the RESET, against the heartbeat timeout;
 * - reconciler path: a worker is killed and the heartbeat bucket purged (nothing lists the
 *   operation); from START to the RESET by the reconciler, against the reconciler floor;
 * - leader takeover: the leading control-plane process is frozen (SIGSTOP); from the freeze to
 *   the standby holding the lease, against the lease plus one poll;
 * - stranded dispatch: an idle worker is frozen (SIGSTOP) with a pull request open and the broker
 *   hands it a dispatch it never reads (no heartbeat lists it); from SCHEDULE to the RESET by the
 *   heartbeat monitor, against the heartbeat timeout;
 * - broker path: a second deployment whose monitor and reconciler sleep far longer than the run;
 *   a worker running an operation is killed and an idle worker takes the redelivery; from the kill
 *   to the RESET by `broker`, against ack-wait.
 *
 *   node --import tsx bench/recovery.ts        (OPSTATE_BENCH_RECOVERY_SAMPLES, default 3)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import postgres from 'postgres';
import { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { DEFAULT_OPERATION_TYPE, LocationType, queueName, siteRoute } from '../machines/routing.ts';
import { memoryLogger } from '../observe/Logger.ts';
import { LeaseRepository } from '../persistence/LeaseRepository.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../runtime/Runtime.ts';
import {
  handlersModule,
  opstateArgs,
  prepareBuiltProcesses,
  REPO_ROOT,
} from '../test/helpers/opstateCli.ts';
import { workerHeartbeatKey } from '../transport/HeartbeatKey.ts';
import type { JetStreamTransport } from '../transport/jetstream/createJetStreamTransport.ts';
import { NATS_URL } from './lib/settings.ts';

const ADMIN = process.env.OPSTATE_BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const SAMPLES = Number(process.env.OPSTATE_BENCH_RECOVERY_SAMPLES ?? 3);
// Worker processes run the built package, with this fixture compiled against it.
await prepareBuiltProcesses((line) => process.stderr.write(`[bench] ${line}\n`));
const HANDLERS = handlersModule(new URL('./fixtures/holdHandlers.ts', import.meta.url));

const TIMING: Partial<RuntimeTiming> = {
  heartbeatIntervalMs: 500,
  heartbeatTimeoutMs: 4_000,
  reconcilerFloorMs: 8_000,
  ackWaitMs: 60_000,
  monitorIntervalMs: 250,
  reconcilerIntervalMs: 500,
  schedulerIntervalMs: 20,
  relayIntervalMs: 20,
  leaderPollMs: 250,
  leaderLeaseMs: 2_000,
};

/** The broker path alone: the monitor and the reconciler sleep far longer than the run. */
const BROKER_TIMING: Partial<RuntimeTiming> = {
  ...TIMING,
  ackWaitMs: 10_000,
  monitorIntervalMs: 600_000,
  reconcilerIntervalMs: 600_000,
};

const emit = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);

async function until(cond: () => Promise<boolean>, what: string, ms = 120_000) {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function startWorker(env: Record<string, string>, extra: Record<string, string>, args?: string[]) {
  const argv = args ?? ['worker', '--kinds', 'all', '--handlers', HANDLERS, '--faults'];
  const proc = spawn(process.execPath, opstateArgs(argv), {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env, ...extra },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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

/** Where every bench package is created: its site route is the one queue the samples watch. */
const SOURCE_LOCATION = { site: 'bench', name: 'source', locationType: LocationType.SOURCE };

/** One isolated deployment: its own database, NATS prefix and runtime, with these timers. */
async function openDeployment(admin: postgres.Sql, timing: Partial<RuntimeTiming>) {
  const name = `opstate_bench_rec_${randomBytes(4).toString('hex')}`;
  await admin.unsafe(`create database ${name}`);
  const url = new URL(ADMIN);
  url.pathname = `/${name}`;
  const prefix = `bench_rec_${randomBytes(4).toString('hex')}`;
  const runtime = await createRuntime({
    databaseUrl: url.toString(),
    natsUrl: NATS_URL,
    prefix,
    timing,
    logger: memoryLogger(),
  });
  const env = {
    DATABASE_URL: url.toString(),
    NATS_URL,
    OPSTATE_PREFIX: prefix,
    OPSTATE_TIMING: JSON.stringify(timing),
  };
  const location = await runtime.artifacts.addLocation({
    ...SOURCE_LOCATION,
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
  const close = async () => {
    await (runtime.transport as JetStreamTransport).destroy().catch(() => undefined);
    await runtime.close();
    await admin.unsafe(`drop database if exists ${name} with (force)`);
  };
  return { runtime, env, prefix, submit, close };
}

const ONE_KIND = ['worker', '--kinds', OperationKind.RAW_DATA_PACKAGE, '--handlers', HANDLERS];

type Child = ReturnType<typeof startWorker>;

/** What every sample works with: the deployments, their processes and the waits on them. */
interface Samples {
  readonly runtime: Runtime;
  readonly env: Record<string, string>;
  readonly prefix: string;
  readonly submit: () => Promise<string>;
  readonly broker: Awaited<ReturnType<typeof openDeployment>>;
  readonly children: ChildProcess[];
  readonly planes: readonly Child[];
  readonly leases: LeaseRepository;
  ready(w: Child): Promise<void>;
  status(id: string): Promise<string>;
  resetBy(id: string, by: string): Promise<number>;
  running(extra: Record<string, string>): Promise<{ w: Child; id: string }>;
  cancel(id: string): Promise<void>;
  queue(): Promise<{ num_waiting: number }>;
}

/** The waits and steps the samples share, on the main deployment. */
async function samplesOf(
  dep: Awaited<ReturnType<typeof openDeployment>>,
  broker: Awaited<ReturnType<typeof openDeployment>>,
  children: ChildProcess[],
  planes: readonly Child[],
): Promise<Samples> {
  const { runtime, env, prefix, submit } = dep;
  const ready = async (w: ReturnType<typeof startWorker>) =>
    until(async () => w.out.join('').includes('started for'), 'worker start');
  const status = async (id: string) => (await runtime.store.load(id)).status;
  const resetBy = async (id: string, by: string) => {
    await until(async () => (await resetOf(runtime, id, by)) !== undefined, `the ${by} reset`);
    return (await resetOf(runtime, id, by))?.at.getTime() ?? 0;
  };
  const running = async (extra: Record<string, string>) => {
    const w = startWorker(env, extra);
    children.push(w.proc);
    await ready(w);
    const id = await submit();
    await until(async () => (await status(id)) === 'IN_PROGRESS', 'the worker to run it');
    return { w, id };
  };
  /** Ends a sample; the scheduler may move the operation meanwhile (a lost race: try again). */
  const cancel = async (id: string) => {
    for (;;) {
      try {
        await runtime.command(id, { type: 'CANCEL', reason: 'bench sample done' });
        return;
      } catch (err) {
        if (!(err instanceof OpstateError && err.code === OpstateErrorCode.CONFLICT)) throw err;
      }
    }
  };

  const jsm = await jetstreamManager((runtime.transport as JetStreamTransport).connection);
  // The queue of the bench's own location: a worker also reads the legacy queue of its kinds,
  // whose pull requests tell nothing about where the bench's dispatches go.
  const routed = queueName(
    siteRoute(DEFAULT_OPERATION_TYPE[OperationKind.RAW_DATA_PACKAGE], SOURCE_LOCATION),
  );
  const queue = () => jsm.consumers.info(`${prefix}_dispatch`, routed);
  return {
    runtime,
    env,
    prefix,
    submit,
    broker,
    children,
    planes,
    leases: new LeaseRepository(runtime.database),
    ready,
    status,
    resetBy,
    running,
    cancel,
    queue,
  };
}

/** Monitor path: a running operation's worker killed; from the kill to the RESET. */
async function monitorSample(s: Samples): Promise<number> {
  const { running, resetBy, cancel } = s;
  const a = await running({ BENCH_HOLD_MS: '600000' });
  const killedAt = Date.now();
  a.w.proc.kill('SIGKILL');
  await a.w.exited;
  const ms = (await resetBy(a.id, 'heartbeat_monitor')) - killedAt;
  await cancel(a.id);
  return ms;
}

/** Monitor path: a dispatch pulled, covered by a heartbeat, the worker dead before START. */
async function heldSample(s: Samples): Promise<number> {
  const { env, children, ready, submit, resetBy, cancel } = s;
  const doomed = startWorker(env, { BENCH_CRASH: 'before-start' });
  children.push(doomed.proc);
  await ready(doomed);
  const id2 = await submit();
  await doomed.exited;
  const diedAt = Date.now();
  const ms = (await resetBy(id2, 'heartbeat_monitor')) - diedAt;
  await cancel(id2);
  return ms;
}

/** Monitor path: a running operation's worker frozen; from the freeze to the RESET. */
async function frozenSample(s: Samples): Promise<number> {
  const { running, resetBy, cancel } = s;
  const b = await running({ BENCH_HOLD_MS: '600000' });
  const frozenAt = Date.now();
  b.w.proc.kill('SIGSTOP');
  const ms = (await resetBy(b.id, 'heartbeat_monitor')) - frozenAt;
  b.w.proc.kill('SIGKILL');
  await cancel(b.id);
  return ms;
}

/** Reconciler path: the worker killed and its heartbeat purged: nothing lists the operation. */
async function reconcilerSample(s: Samples): Promise<number> {
  const { runtime, prefix, running, resetBy, cancel } = s;
  const c = await running({ BENCH_HOLD_MS: '600000' });
  const workerId = /"workerId":"([^"]+)"/.exec(c.w.out.join(''))?.[1] ?? '';
  c.w.proc.kill('SIGKILL');
  await c.w.exited;
  const kv = await new Kvm(jetstream((runtime.transport as JetStreamTransport).connection)).open(
    `${prefix}_heartbeats`,
  );
  await kv.purge(workerHeartbeatKey(workerId));
  const started = (await runtime.store.load(c.id)).startedAt?.getTime() ?? 0;
  const ms = (await resetBy(c.id, 'reconciler')) - started;
  await cancel(c.id);
  return ms;
}

/** Leader takeover: the leading control plane frozen; from the freeze to the standby's lease. */
async function takeoverSample(s: Samples): Promise<number> {
  const { leases, prefix, planes } = s;
  const [lease] = (await leases.list()).filter((l) => l.name === prefix && !l.expired);
  const pid = Number(lease?.holder.split(':')[1]);
  const leader = planes.find((p) => p.proc.pid === pid);
  if (lease === undefined || leader === undefined) throw new Error('no leader among the planes');
  const stoppedAt = Date.now();
  leader.proc.kill('SIGSTOP');
  await until(
    async () => (await leases.list()).some((l) => l.name === prefix && l.epoch > lease.epoch),
    'the standby to take over',
  );
  const ms = Date.now() - stoppedAt;
  leader.proc.kill('SIGCONT');
  return ms;
}

/** Stranded dispatch: handed to an idle worker frozen with a pull request open. */
async function strandedSample(s: Samples): Promise<number> {
  const { runtime, env, children, ready, submit, status, queue, resetBy, cancel } = s;
  const e = startWorker(env, {}, ONE_KIND);
  children.push(e.proc);
  await ready(e);
  let strandedId: string | undefined;
  while (strandedId === undefined) {
    await until(async () => (await queue()).num_waiting > 0, 'an open pull request');
    e.proc.kill('SIGSTOP');
    if ((await queue()).num_waiting === 0) {
      e.proc.kill('SIGCONT'); // its request expired meanwhile: try again
      continue;
    }
    const id = await submit();
    // Earlier samples leave dispatches of their own unsettled: ask about this one.
    const handedOut = async () =>
      (await runtime.transport.unsettled()).some((m) => m.operationId === id);
    await until(
      async () =>
        (await handedOut()) ||
        ((await status(id)) === 'SCHEDULED' && (await queue()).num_waiting === 0),
      'the dispatch handed out or left queued',
    );
    if (await handedOut()) strandedId = id;
    else {
      e.proc.kill('SIGCONT');
      await until(async () => (await status(id)) === 'COMPLETED', 'the woken worker');
    }
  }
  const sid = strandedId;
  const scheduled = (await runtime.get(sid)).transitions.find((t) => t.event === 'SCHEDULE');
  if (scheduled === undefined) throw new Error(`operation ${sid} was never scheduled`);
  const ms = (await resetBy(sid, 'heartbeat_monitor')) - scheduled.at.getTime();
  e.proc.kill('SIGKILL');
  await cancel(strandedId);
  return ms;
}

/** Broker path (its own deployment): the redelivery after ack-wait finds no live holder. */
async function brokerSample(s: Samples): Promise<number> {
  const { broker, children, ready } = s;
  const f = startWorker(broker.env, { BENCH_HOLD_MS: '600000' }, ONE_KIND);
  children.push(f.proc);
  await ready(f);
  const fid = await broker.submit();
  await until(
    async () => (await broker.runtime.store.load(fid)).status === 'IN_PROGRESS',
    'the broker-path worker to run it',
  );
  // A second worker, idle, takes the redelivery once the first is dead.
  const g = startWorker(broker.env, {}, ONE_KIND);
  children.push(g.proc);
  await ready(g);
  const brokerKilledAt = Date.now();
  f.proc.kill('SIGKILL');
  await f.exited;
  await until(
    async () => (await resetOf(broker.runtime, fid, 'broker')) !== undefined,
    'the broker reset',
  );
  const ms = ((await resetOf(broker.runtime, fid, 'broker'))?.at.getTime() ?? 0) - brokerKilledAt;
  await until(
    async () => (await broker.runtime.store.load(fid)).status === 'COMPLETED',
    'the idle worker to complete it',
  );
  g.proc.kill('SIGKILL');
  return ms;
}

/** The worst sample of each path against its timer, one JSON line each. */
function printFigures(
  x: Record<
    'monitor' | 'held' | 'frozen' | 'reconciler' | 'takeover' | 'stranded' | 'brokerPath',
    number[]
  >,
): void {
  const { monitor, held, frozen, reconciler, takeover, stranded, brokerPath } = x;
  const worst = (xs: number[]) => Math.max(...xs);
  const figure = (name: string, xs: number[], baseline: number, note: string) =>
    emit({
      name,
      value: worst(xs),
      unit: 'ms',
      baseline,
      ratio: Number((worst(xs) / baseline).toFixed(3)),
      samples: xs,
      note,
    });
  const timeout = TIMING.heartbeatTimeoutMs as number;
  figure(
    'recovery_monitor_path_worst',
    monitor,
    timeout,
    'SIGKILL of a worker running an operation → RESET by heartbeat_monitor, against the heartbeat timeout (target ≤ 1.2)',
  );
  figure(
    'recovery_held_dispatch_worst',
    held,
    timeout,
    'worker dead with a dispatch pulled, not started → RESET by heartbeat_monitor, against the heartbeat timeout (target ≤ 1.2)',
  );
  figure(
    'recovery_frozen_worker_worst',
    frozen,
    timeout,
    'SIGSTOP of a worker running an operation → RESET by heartbeat_monitor, against the heartbeat timeout (target ≤ 1.2)',
  );
  figure(
    'recovery_reconciler_path_worst',
    reconciler,
    TIMING.reconcilerFloorMs as number,
    'worker dead and its heartbeat purged → RESET by reconciler, from START, against the floor (target ≤ 1.2)',
  );
  figure(
    'recovery_stranded_dispatch_worst',
    stranded,
    timeout,
    'idle worker frozen (SIGSTOP) with a pull request open, handed a dispatch it never reads → RESET by heartbeat_monitor, from SCHEDULE, against the heartbeat timeout (target ≤ 1.2)',
  );
  figure(
    'recovery_broker_path_worst',
    brokerPath,
    BROKER_TIMING.ackWaitMs as number,
    'SIGKILL of a worker running an operation, monitor and reconciler asleep → RESET by broker on the redelivery, against ack-wait (target ≤ 1.2)',
  );
  figure(
    'leader_takeover_worst',
    takeover,
    (TIMING.leaderLeaseMs as number) + (TIMING.leaderPollMs as number),
    'SIGSTOP of the leading control plane → the standby holds the lease, against lease + one poll (target ≤ 1)',
  );
}

async function main() {
  const admin = postgres(ADMIN, { max: 1, onnotice: () => {} });
  const dep = await openDeployment(admin, TIMING);
  const broker = await openDeployment(admin, BROKER_TIMING);
  const children: ChildProcess[] = [];
  try {
    const planes = [
      startWorker(dep.env, {}, ['control-plane']),
      startWorker(dep.env, {}, ['control-plane']),
    ];
    children.push(...planes.map((p) => p.proc));
    const s = await samplesOf(dep, broker, children, planes);
    const brokerPlane = startWorker(broker.env, {}, ['control-plane']);
    children.push(brokerPlane.proc);
    const x = {
      monitor: [] as number[],
      held: [] as number[],
      frozen: [] as number[],
      reconciler: [] as number[],
      takeover: [] as number[],
      stranded: [] as number[],
      brokerPath: [] as number[],
    };
    for (let i = 0; i < SAMPLES; i++) {
      x.monitor.push(await monitorSample(s));
      x.held.push(await heldSample(s));
      x.frozen.push(await frozenSample(s));
      x.reconciler.push(await reconcilerSample(s));
      x.takeover.push(await takeoverSample(s));
      x.stranded.push(await strandedSample(s));
      x.brokerPath.push(await brokerSample(s));
    }
    printFigures(x);
  } finally {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await dep.close();
    await broker.close();
    await admin.end();
  }
}

await main();
