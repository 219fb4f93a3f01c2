/**
 * Dashboard page times over many operations: the overview (counts, lifecycle and the whole
 * attention list) and an operation page (path, journal, lineage, attention), served over HTTP
 * from the real Postgres. Each is measured at 1,000 operations and again at 100,000 (the same
 * database, grown), and printed as one JSON line with the 1,000-operation time as its baseline:
 * a ratio near 1 says the page does not grow with the table.
 *
 *   node --import tsx bench/dashboard.ts
 *
 * Env: OPSTATE_BENCH_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres),
 * OPSTATE_BENCH_DASHBOARD_OPS (default 100000), OPSTATE_BENCH_REQUESTS (per page, default 30).
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { startDashboard } from '../dashboard/startDashboard.ts';
import { systemClock } from '../machines/Clock.ts';
import { DEFAULT_DEADLINES_MS } from '../machines/deadlines.ts';
import { OPERATION_KINDS, OperationKind } from '../machines/OperationKind.ts';
import type { OperationEvent } from '../machines/operationMachine.ts';
import { LocationType } from '../machines/routing.ts';
import { memoryLogger } from '../observe/Logger.ts';
import { ArtifactRepository } from '../persistence/ArtifactRepository.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import { migrate } from '../persistence/migrate.ts';
import { OperationStore } from '../persistence/OperationStore.ts';
import { openDatabase } from '../persistence/openDatabase.ts';
import type { OperationFields } from '../persistence/subtypeFields.ts';
import { print } from './lib/figure.ts';

const ADMIN = process.env.OPSTATE_BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TOTAL = Number(process.env.OPSTATE_BENCH_DASHBOARD_OPS ?? 100_000);
const REQUESTS = Number(process.env.OPSTATE_BENCH_REQUESTS ?? 30);
const SMALL = 1_000;
const BATCH = 2_000;
const HOUR = 3_600_000;

const name = `opstate_bench_dash_${randomBytes(4).toString('hex')}`;
const admin = postgres(ADMIN, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database ${name}`);
const url = new URL(ADMIN);
url.pathname = `/${name}`;
const database = await openDatabase({ databaseUrl: url.toString() });

try {
  await migrate(database);
  let now = Date.now();
  const store = new OperationStore(database, { clock: { ...systemClock, now: () => now } });
  const artifacts = new ArtifactRepository(database);
  const loc = (n: string, locationType: LocationType) =>
    artifacts.addLocation({ site: 'bench', name: n, locationType, storageRoot: `/data/${n}` });
  const source = await loc('source', LocationType.SOURCE);
  const buffer = await loc('buffer', LocationType.BUFFER);
  const archive = await loc('lta', LocationType.LONG_TERM_ARCHIVE);
  // Staging routes on its destination, which must be a processing location.
  const processing = await loc('processing', LocationType.PROCESSING);
  const dtp = await artifacts.addDataTransferPackage({ name: 'dtp-bench' });
  const pkg = await artifacts.addRawDataPackage({ name: 'rdp-bench', dataTransferPackageId: dtp });
  const fields: { readonly [K in OperationKind]: OperationFields<K> } = {
    [OperationKind.RAW_DATA_PACKAGE]: { rawDataPackageId: pkg, locationId: source.id },
    [OperationKind.DATA_TRANSFER_PACKAGE]: { dataTransferPackageId: dtp, locationId: source.id },
    [OperationKind.TRANSFER]: {
      dataTransferPackageId: dtp,
      sourceLocationId: source.id,
      destinationLocationId: buffer.id,
    },
    [OperationKind.UNPACK]: { dataTransferPackageId: dtp, locationId: buffer.id },
    [OperationKind.LONG_TERM_ARCHIVE]: {
      rawDataPackageId: pkg,
      sourceLocationId: source.id,
      destinationLocationId: archive.id,
    },
    [OperationKind.STAGING]: {
      rawDataPackageId: pkg,
      sourceLocationId: archive.id,
      destinationLocationId: processing.id,
    },
  };

  /** Applies one event to many operations, in batches. */
  const applyAll = async (
    ids: readonly string[],
    event: (id: string, n: number) => OperationEvent,
  ) => {
    for (let i = 0; i < ids.length; i += BATCH) {
      const results = await store.applyMany(
        ids.slice(i, i + BATCH).map((id, n) => ({ id, event: event(id, i + n) })),
      );
      const refused = results.find((r) => !r.ok);
      if (refused !== undefined && !refused.ok) throw refused.error;
    }
  };

  /**
   * Adds `count` operations, two hours old, in a realistic mix: most COMPLETED, 4% FAILED,
   * 2% reset by the monitor and retried (still IN_PROGRESS, no heartbeat: stuck), 1% SCHEDULED
   * for two hours (stuck), 3% PENDING, and one in 200 reset to its retry cap.
   */
  const grow = async (count: number) => {
    now = Date.now() - 2 * HOUR;
    const ids: string[] = [];
    for (let i = 0; i < count; i += BATCH) {
      const n = Math.min(BATCH, count - i);
      ids.push(
        ...(await store.createMany(
          Array.from({ length: n }, (_, j) => {
            const kind = OPERATION_KINDS[(i + j) % OPERATION_KINDS.length] as OperationKind;
            // A kind picked at run time: its fields are this table's entry for it.
            return { kind, fields: fields[kind], by: 'bench' } as CreateOperationInput;
          }),
        )),
      );
    }
    const share = (from: number, to: number) =>
      ids.filter((_, n) => n % 100 >= from && n % 100 < to);
    const live = ids.filter((_, n) => n % 100 >= 3);
    const scheduledOnly = share(3, 4);
    await applyAll(live, () => ({ type: 'SCHEDULE' }));
    const started = live.filter((id) => !scheduledOnly.includes(id));
    await applyAll(started, () => ({ type: 'START', attempt: 1, workerId: 'bench-worker' }));
    const failed = share(4, 8);
    const reset = share(8, 10);
    const capped = ids.filter((_, n) => n % 200 === 9);
    const done = started.filter((id) => !failed.includes(id) && !reset.includes(id));
    await applyAll(failed, () => ({
      type: 'FAIL',
      attempt: 1,
      error: { message: 'checksum mismatch', retryable: false },
    }));
    await applyAll(done, () => ({ type: 'COMPLETE', attempt: 1 }));
    for (let attempt = 1; attempt <= 3; attempt++) {
      const round = attempt === 1 ? reset : capped;
      await applyAll(round, () => ({
        type: 'RESET',
        by: 'heartbeat_monitor',
        reason: 'stale heartbeat',
        attempt,
      }));
      await applyAll(round, () => ({ type: 'SCHEDULE' }));
      await applyAll(round, () => ({
        type: 'START',
        attempt: attempt + 1,
        workerId: 'bench-worker',
      }));
    }
    // Measured as autovacuum leaves a table between bursts, not right after 300,000 updates, and
    // with the count tally folded, as a control plane's leader keeps it.
    await store.foldCounts();
    await database.execute('vacuum analyze');
    return { ids, capped };
  };

  const common = {
    database,
    timing: {
      heartbeatTimeoutMs: 300_000,
      reconcilerFloorMs: HOUR,
      deadlines: DEFAULT_DEADLINES_MS,
    },
    heartbeats: null,
    command: null,
    port: 0,
    logger: memoryLogger(),
  };
  const dashboard = await startDashboard(common);

  const time = async (path: string) => {
    const times: number[] = [];
    for (let i = 0; i < REQUESTS + 3; i++) {
      const t0 = performance.now();
      const res = await fetch(`${dashboard.url}${path}`);
      await res.text();
      if (!res.ok) throw new Error(`${path} answered ${res.status}`);
      if (i >= 3) times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    return {
      median: times[Math.floor(times.length / 2)] as number,
      p95: times[Math.floor(times.length * 0.95)] as number,
    };
  };

  try {
    const first = await grow(SMALL);
    const sample = first.capped[0] as string;
    const smallOverview = await time('/');
    const smallOperation = await time(`/operations/${sample}`);
    process.stderr.write(`bench dashboard: ${SMALL} operations planted, growing to ${TOTAL}\n`);
    await grow(TOTAL - SMALL);
    const overview = await time('/');
    const operation = await time(`/operations/${sample}`);
    const [{ n } = { n: 0 }] = await database.execute<{ n: number }>(
      'select count(*)::int as n from operation',
    );
    const attention = (await (await fetch(`${dashboard.url}/api/overview`)).json()) as {
      attention: { sections: { category: string; total: number }[] };
    };
    const totals = Object.fromEntries(
      attention.attention.sections.map((s) => [s.category, s.total]),
    );
    print({
      name: 'dashboard_overview_page_ms',
      value: overview.median,
      unit: 'ms',
      baseline: smallOverview.median,
      p95: Math.round(overview.p95 * 100) / 100,
      operations: Number(n),
      attention: totals,
      note: `median of ${REQUESTS} GETs of / (counts, lifecycle, attention list, 50 per category) at ${n} operations; baseline: the same at ${SMALL}`,
    });
    print({
      name: 'dashboard_operation_page_ms',
      value: operation.median,
      unit: 'ms',
      baseline: smallOperation.median,
      p95: Math.round(operation.p95 * 100) / 100,
      operations: Number(n),
      note: `median of ${REQUESTS} GETs of one operation page (4 attempts, 3 resets, lineage) at ${n} operations; baseline: the same at ${SMALL}`,
    });
  } finally {
    await dashboard.close();
  }
} finally {
  await database.close();
  await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.end({ timeout: 5 });
}
