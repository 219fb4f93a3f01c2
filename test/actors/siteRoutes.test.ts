import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { defaultRoute, LocationType, OperationType, queueName } from '../../machines/routing.ts';
import type { JetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { dispatchesAhead } from '../helpers/dispatches.ts';
import {
  type Child,
  type Deployment,
  deploymentPerTest,
  FAST_TIMING,
  kill9,
  newPackage,
  waitFor,
} from './harness.ts';

/**
 * Routes by site and location on the real Postgres and NATS JetStream, with workers as real
 * child processes: each site has its own storage folder and its own workers, whose handlers fail
 * loudly when asked to write another site's folder.
 */
const deploy = deploymentPerTest();
const folders: string[] = [];
afterAll(async () => {
  for (const f of folders) await rm(f, { recursive: true, force: true });
});

interface Site {
  readonly name: string;
  readonly root: string;
  readonly source: string;
  readonly archive: string;
}

/** Registers a site (a source and a long-term archive under its own folder). */
async function addSite(dep: Deployment, base: string, roots: Record<string, string>) {
  const name = `s${randomUUID().slice(0, 8)}`;
  const root = join(base, name);
  const add = async (loc: string, locationType: LocationType) => {
    await mkdir(join(root, loc), { recursive: true });
    const l = await dep.runtime.artifacts.addLocation({
      site: name,
      name: loc,
      locationType,
      storageRoot: join(root, loc),
    });
    roots[l.id] = join(root, loc);
    return l.id;
  };
  const site: Site = {
    name,
    root,
    source: await add('src', LocationType.SOURCE),
    archive: await add('lta', LocationType.LONG_TERM_ARCHIVE),
  };
  return site;
}

async function archiveAt(dep: Deployment, site: Site, archive = site.archive) {
  const { pkg, sourceCopy } = await newPackage(dep.runtime, { source: site.source });
  return dep.runtime.submit({
    kind: OperationKind.LONG_TERM_ARCHIVE,
    fields: {
      rawDataPackageId: pkg,
      sourceLocationId: site.source,
      destinationLocationId: archive,
    },
    inputs: [sourceCopy],
  });
}

const status = async (dep: Deployment, id: string) => (await dep.runtime.store.load(id)).status;
const allDone = async (dep: Deployment, ids: readonly string[]) =>
  (await Promise.all(ids.map((id) => status(dep, id)))).every((s) => s === 'COMPLETED');

/** Every transition of these operations: none may be a failure. */
async function failures(dep: Deployment, ids: readonly string[]) {
  const views = await Promise.all(ids.map((id) => dep.runtime.get(id)));
  return views.flatMap((v) => v.transitions.filter((t) => t.event === 'FAIL'));
}

async function world(timing = FAST_TIMING) {
  const dep = await deploy(timing);
  const base = await mkdtemp(join(tmpdir(), 'opstate-sites-'));
  folders.push(base);
  const roots: Record<string, string> = {};
  const rootsFile = join(base, 'roots.json');
  const a = await addSite(dep, base, roots);
  const b = await addSite(dep, base, roots);
  const saveRoots = () => writeFile(rootsFile, JSON.stringify(roots));
  await saveRoots();
  const worker = (site: Site, args: string[] = []): Promise<Child> =>
    dep.readyWorker(
      {
        FIXTURE_KINDS: 'long_term_archive',
        FIXTURE_SITE_ROOT: site.root,
        FIXTURE_LOCATION_ROOTS_FILE: rootsFile,
      },
      ['--site', site.name, ...args],
    );
  /** Registers another long-term archive at `site` (workers running are not told). */
  const addArchive = async (site: Site, name: string) => {
    await mkdir(join(site.root, name), { recursive: true });
    const added = await dep.runtime.artifacts.addLocation({
      site: site.name,
      name,
      locationType: LocationType.LONG_TERM_ARCHIVE,
      storageRoot: join(site.root, name),
    });
    roots[added.id] = join(site.root, name);
    await saveRoots();
    return added.id;
  };
  return { dep, a, b, worker, addArchive };
}

describe('routes by site and location', () => {
  it('every operation completes at its own site, none fails for a wrong one, and killing one site’s workers stalls only that site', async () => {
    const { dep, a, b, worker } = await world();
    dep.runtime.startControlPlane();
    await worker(a);
    await worker(a);
    const bWorkers = [await worker(b)];
    const first = { a: [] as string[], b: [] as string[] };
    for (let i = 0; i < 4; i++) {
      first.a.push(await archiveAt(dep, a));
      first.b.push(await archiveAt(dep, b));
    }
    const all = [...first.a, ...first.b];
    await waitFor(() => allDone(dep, all), 'every operation to complete at its site', 60_000);
    expect(await failures(dep, all)).toEqual([]);
    expect((await readdir(join(a.root, 'lta'))).length).toBe(4);
    expect((await readdir(join(b.root, 'lta'))).length).toBe(4);
    for (const id of all) {
      const view = await dep.runtime.get(id);
      expect(view.queue).toMatch(/^s[0-9a-f]{8}_lta_long_term_archive_long_term_archive_transfer$/);
    }

    for (const w of bWorkers) await kill9(w);
    const later = { a: [] as string[], b: [] as string[] };
    for (let i = 0; i < 3; i++) {
      later.a.push(await archiveAt(dep, a));
      later.b.push(await archiveAt(dep, b));
    }
    await waitFor(() => allDone(dep, later.a), "site A's work to complete without B", 60_000);
    // A's work went through while B's waits: B's operations are not done, and none failed.
    const stalled = await Promise.all(later.b.map((id) => status(dep, id)));
    expect(stalled.filter((s) => s === 'COMPLETED')).toEqual([]);
    expect(await failures(dep, [...later.a, ...later.b])).toEqual([]);
    expect((await readdir(join(b.root, 'lta'))).length).toBe(4);

    // A worker of site B again: its site's work comes home.
    await worker(b);
    await waitFor(() => allDone(dep, later.b), "site B's work once it has a worker", 60_000);
    expect(await failures(dep, later.b)).toEqual([]);
  });

  it('a worker reads a location registered while it runs within a discovery interval; an unknown site or location is refused at start', async () => {
    const { dep, a, worker, addArchive } = await world();
    dep.runtime.startControlPlane();
    const w = await worker(a);
    const id = await archiveAt(dep, a, await addArchive(a, 'lta2'));
    await waitFor(async () => (await status(dep, id)) === 'COMPLETED', 'the new location', 30_000);
    expect((await dep.runtime.get(id)).queue).toBe(
      `${a.name}_lta2_long_term_archive_long_term_archive_transfer`,
    );
    expect(w.printed('worker reads new queues')).toBe(true);

    const nowhere = dep.spawnWorker({ FIXTURE_KINDS: 'long_term_archive' }, ['--site', 'nowhere']);
    expect(await nowhere.exited).toBe(2);
    expect(nowhere.printed('site "nowhere" has no location registered: check --site')).toBe(true);
    const wrong = dep.spawnWorker({ FIXTURE_KINDS: 'long_term_archive' }, [
      '--site',
      a.name,
      '--locations',
      'lta,nope',
    ]);
    expect(await wrong.exited).toBe(2);
    expect(wrong.printed(`site ${a.name} has no location "nope"`)).toBe(true);
  });

  it('a control plane in a process of its own creates the consumer of a location registered since as soon as it dispatches work there, not at its next discovery pass', async () => {
    const { dep, a, worker, addArchive } = await world();
    // The leader looks for new locations only every ten minutes: within this test's deadline
    // only the dispatch can make it create the new queue's consumer. The submitter (this
    // process) runs no control plane, so its submit wakes nothing there.
    const slowDiscovery = { ...FAST_TIMING, discoveryIntervalMs: 600_000 };
    const plane = dep.spawnCli(['control-plane'], {
      OPSTATE_TIMING: JSON.stringify(slowDiscovery),
    });
    await waitFor(
      () => plane.printed('site queues ready'),
      'the leader’s first routes pass',
      60_000,
    );
    const w = await worker(a);
    const added = await addArchive(a, 'lta3');
    const queue = `${a.name}_lta3_long_term_archive_long_term_archive_transfer`;
    // The worker process creates no consumer; it reads the new queue once the leader has.
    await waitFor(() => w.printed(queue), 'the worker to look for the new queue', 30_000);
    expect(plane.output.some((l) => l.includes('site queues ready') && l.includes(queue))).toBe(
      false,
    );
    const id = await archiveAt(dep, a, added);
    await waitFor(async () => (await status(dep, id)) === 'COMPLETED', 'the new location', 60_000);
    expect((await dep.runtime.get(id)).queue).toBe(queue);
    expect(plane.output.some((l) => l.includes('site queues ready') && l.includes(queue))).toBe(
      true,
    );
  });

  it('dispatches queued under the legacy names before the upgrade are moved to their site queues and complete, none lost', async () => {
    // A short duplicate window: the move's first publish is dropped as a duplicate of the
    // original one, and the legacy copy is handed back and moved once the window has passed. The
    // operations are SCHEDULED before the workers and the control plane start, which takes
    // seconds on a busy machine: a reconciler floor well past that keeps the reconciler from
    // resetting them first (its reset, not the move, would then bring them to attempt 2).
    const { dep, a, b, worker } = await world({
      ...FAST_TIMING,
      duplicateWindowMs: 2_000,
      heartbeatTimeoutMs: 20_000,
      reconcilerFloorMs: 60_000,
      ackWaitMs: 90_000,
    });
    const ids = [await archiveAt(dep, a), await archiveAt(dep, b), await archiveAt(dep, a)];
    // As an older release left them: SCHEDULED, each dispatch on the legacy queue only.
    for (const id of ids) await dep.runtime.store.apply(id, { type: 'SCHEDULE' });
    const ahead = await dispatchesAhead(dep.runtime.store);
    await dep.runtime.store.saveRelayCursor(Math.max(...ahead.map((e) => e.id)));
    const transport = dep.runtime.transport as JetStreamTransport;
    const legacy = defaultRoute(OperationKind.LONG_TERM_ARCHIVE);
    for (const id of ids) {
      await transport.publish(legacy, {
        operationId: id,
        kind: OperationKind.LONG_TERM_ARCHIVE,
        operationType: OperationType.LONG_TERM_ARCHIVE_TRANSFER,
        attempt: 1,
      });
    }
    expect(await legacyDepth(dep)).toBe(3);
    await worker(a);
    await worker(b);
    dep.runtime.startControlPlane();
    await waitFor(() => allDone(dep, ids), 'the legacy dispatches to be moved and done', 90_000);
    expect(await failures(dep, ids)).toEqual([]);
    for (const id of ids) {
      const view = await dep.runtime.get(id);
      // The moved dispatch itself was started: attempt 1, never reset and dispatched again
      // before it ran. (A later reset of a started attempt, by a heartbeat that arrived late on
      // a busy machine, is another path's work and not what this test is about.)
      const first = view.transitions.find((t) => t.event === 'START');
      expect(first?.attempt, JSON.stringify(view.transitions)).toBe(1);
    }
    await waitFor(
      async () => (await legacyDepth(dep)) === 0,
      'the legacy queue to be empty',
      30_000,
    );
    expect(dep.logger.lines.some((l) => l.message === 'dispatch moved to its site queue')).toBe(
      true,
    );
    expect(queueName(legacy)).toBe('long_term_archive_long_term_archive_transfer');
  });
});

/** Dispatches stored on the legacy long-term-archive subject. */
async function legacyDepth(dep: Deployment): Promise<number> {
  const transport = dep.runtime.transport as JetStreamTransport;
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const jsm = await jetstreamManager(transport.connection);
  const info = await jsm.streams.info(`${dep.prefix}_dispatch`, {
    subjects_filter: `${dep.prefix}.dispatch.long_term_archive.long_term_archive_transfer`,
  });
  return Object.values(info.state.subjects ?? {}).reduce((n, c) => n + c, 0);
}
