import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { LocationType } from '../../machines/routing.ts';
import { XSTATE_VERSION } from '../../machines/snapshotEnvelope.ts';
import { ArtifactRepository } from '../../persistence/ArtifactRepository.ts';
import { CircuitBreakerRepository } from '../../persistence/CircuitBreakerRepository.ts';
import { createMetrics } from '../../runtime/Metrics.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';

/**
 * What a scrape of `/metrics` says, read from the registry's exposition text as Prometheus reads
 * it: the names Node dashboards look for, the build, breaker states as labels, and no heartbeat
 * age for a kind no heartbeat covers. One database and one runtime (in-process transport).
 */
interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** The samples of a Prometheus text exposition (comments and blank lines skipped). */
function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    samples.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return samples;
}

async function scrape(registry: Registry): Promise<Sample[]> {
  return parseExposition(await registry.metrics());
}

const named = (samples: Sample[], name: string) => samples.filter((s) => s.name === name);

let db: TestDatabase;
let runtime: Runtime;
beforeAll(async () => {
  db = await createTestDatabase('opstate_metrics');
  runtime = await createRuntime({ databaseUrl: db.url });
});
afterAll(async () => {
  await runtime?.close();
  await dropTestDatabase(db);
});

describe('the metrics registry', () => {
  it("serves Node's default metrics under their standard names, never renamed", async () => {
    const samples = await scrape(createMetrics().registry);
    const names = new Set(samples.map((s) => s.name));
    for (const name of [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'process_start_time_seconds',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
      'nodejs_version_info',
    ]) {
      expect(names).toContain(name);
    }
    expect([...names].filter((n) => /^opstate_(process|nodejs)_/.test(n))).toEqual([]);
    // Everything else is opstate's own, under its prefix.
    expect(
      [...names].filter((n) => !/^(process|nodejs)_/.test(n) && !n.startsWith('opstate_')),
    ).toEqual([]);
  });

  it('leaves the default metrics out when asked, so an application can merge its own registry', async () => {
    const app = new Registry();
    collectDefaultMetrics({ register: app });
    const without = createMetrics(undefined, { defaultMetrics: false }).registry;
    const names = (await scrape(without)).map((s) => s.name);
    expect(names.filter((n) => /^(process|nodejs)_/.test(n))).toEqual([]);
    const merged = await scrape(Registry.merge([app, without]));
    expect(named(merged, 'process_resident_memory_bytes')).toHaveLength(1);
    expect(named(merged, 'opstate_build_info')).toHaveLength(1);
    // With both collecting them, the names clash: the reason for the option.
    expect(() => Registry.merge([app, createMetrics().registry])).toThrow(/process_/);
  });

  it('says which opstate, Node and xstate a process runs: opstate_build_info 1', async () => {
    const { version } = JSON.parse(
      readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
    ) as { version: string };
    expect(named(await scrape(createMetrics().registry), 'opstate_build_info')).toEqual([
      {
        name: 'opstate_build_info',
        labels: { version, node: process.version, xstate: XSTATE_VERSION },
        value: 1,
      },
    ]);
  });

  it('has no heartbeat age for a kind no heartbeat covers, never a 0', async () => {
    const metrics = createMetrics();
    metrics.watchDeployment(runtime);
    expect(named(await scrape(metrics.registry), 'opstate_heartbeat_age_seconds')).toEqual([]);

    const workerId = `w-${randomUUID().slice(0, 8)}`;
    await runtime.transport.heartbeats.beat(workerId, [
      { kind: OperationKind.TRANSFER, operationId: randomUUID(), attempt: 1 },
    ]);
    try {
      const ages = named(await scrape(metrics.registry), 'opstate_heartbeat_age_seconds');
      expect(ages.map((s) => s.labels)).toEqual([{ kind: 'transfer' }]);
      expect(ages[0]?.value).toBeGreaterThanOrEqual(0);
    } finally {
      await runtime.transport.heartbeats.remove(workerId);
    }
    // Gone again once the heartbeat is: a stale series would read as a live worker's.
    expect(named(await scrape(metrics.registry), 'opstate_heartbeat_age_seconds')).toEqual([]);
  });

  it('gives each breaker one series per state, 1 for the state it is in and 0 for the others', async () => {
    const site = `site-${randomUUID().slice(0, 8)}`;
    const artifacts = new ArtifactRepository(runtime.database);
    const loc = (name: string) =>
      artifacts.addLocation({
        site,
        name,
        locationType: LocationType.LONG_TERM_ARCHIVE,
        storageRoot: `/data/${name}`,
      });
    const [down, back] = [await loc('lta-down'), await loc('lta-back')];
    const now = new Date();
    const row = (locationId: string, state: 'OPEN' | 'CLOSED') => ({
      kind: OperationKind.LONG_TERM_ARCHIVE,
      locationId,
      expectedVersion: null,
      state,
      consecutiveFailures: state === 'OPEN' ? 5 : 0,
      openedAt: state === 'OPEN' ? now : null,
      lastFailure: null,
      updatedAt: now,
    });
    await new CircuitBreakerRepository(runtime.database).write([
      row(down.id, 'OPEN'),
      row(back.id, 'CLOSED'),
    ]);
    const metrics = createMetrics();
    metrics.watchDeployment(runtime);
    const states = named(await scrape(metrics.registry), 'opstate_breaker_state')
      .filter((s) => s.labels.location?.startsWith(`${site}/`))
      .map((s) => [s.labels.kind, s.labels.location, s.labels.state, s.value]);
    expect(states.sort()).toEqual(
      [
        ['long_term_archive', `${site}/lta-back`, 'CLOSED', 1],
        ['long_term_archive', `${site}/lta-back`, 'HALF_OPEN', 0],
        ['long_term_archive', `${site}/lta-back`, 'OPEN', 0],
        ['long_term_archive', `${site}/lta-down`, 'CLOSED', 0],
        ['long_term_archive', `${site}/lta-down`, 'HALF_OPEN', 0],
        ['long_term_archive', `${site}/lta-down`, 'OPEN', 1],
      ].sort(),
    );
  });
});
