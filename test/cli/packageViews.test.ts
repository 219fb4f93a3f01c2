import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Io } from '../../cli/Command.ts';
import { createInspectCommand } from '../../cli/commands/inspect.ts';
import { createListCommand } from '../../cli/commands/list.ts';
import { createStatusCommand } from '../../cli/commands/status.ts';
import { type Dashboard, startDashboard } from '../../dashboard/startDashboard.ts';
import { DEFAULT_DEADLINES_MS } from '../../machines/deadlines.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { inputFor, makeWorld, type World } from '../persistence/fixtures.ts';

/**
 * The derived package state where an operator reads it: `opstate inspect <package>`, `opstate
 * status`, `opstate list --package-state` and the dashboard's package pages, over planted facts
 * (a package whose packaging was cancelled, one nothing ran on, whose name is markup, and the
 * transfer package of both).
 */
const HOSTILE = '<img src=x onerror=alert(1)>';
const HOSTILE_FILE = '<b>frame</b>.fits';
const TIMING = {
  heartbeatTimeoutMs: 300_000,
  reconcilerFloorMs: 3_600_000,
  deadlines: DEFAULT_DEADLINES_MS,
};

let testDb: TestDatabase;
let database: Database;
let dashboard: Dashboard;
let w: World;
let hostile: string;
let packaging: string;

beforeAll(async () => {
  testDb = await createTestDatabase('opstate_pkgviews', { migrated: true });
  database = await openDatabase({ databaseUrl: testDb.url });
  await migrate(database);
  w = await makeWorld(database);
  hostile = await w.artifacts.addRawDataPackage({ name: HOSTILE, dataTransferPackageId: w.dtp });
  await w.artifacts.addRawDataFile({ name: HOSTILE_FILE, rawDataPackageId: hostile });
  const store = new OperationStore(database);
  packaging = await store.create({ ...inputFor(OperationKind.RAW_DATA_PACKAGE, w), by: 'test' });
  await store.apply(packaging, { type: 'CANCEL', reason: 'wrong files' });
  dashboard = await startDashboard({
    database,
    timing: TIMING,
    heartbeats: null,
    command: null,
    port: 0,
    logger: memoryLogger(),
  });
});

afterAll(async () => {
  await dashboard?.close();
  await database?.close();
  await dropTestDatabase(testDb);
});

/** Runs a command on its own connection (a command closes what it opens), capturing its output. */
async function run(
  make: (open: () => Promise<Database>) => { run(argv: string[], io: Io): Promise<number> },
  argv: string[],
) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await make(() => openDatabase({ databaseUrl: testDb.url })).run(argv, {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
  });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

const inspect = (argv: string[]) => run((open) => createInspectCommand(open), argv);
const list = (argv: string[]) => run((open) => createListCommand(open), argv);

describe('the derived package state on the command line', () => {
  it('opstate inspect <package> shows its state, its step and why, and its lineage', async () => {
    const json = await inspect([w.pkg, '--json']);
    expect(json.code, json.err).toBe(0);
    const view = JSON.parse(json.out);
    expect(view).toMatchObject({
      type: 'raw_data_package',
      id: w.pkg,
      state: 'FAILED',
      step: { kind: OperationKind.RAW_DATA_PACKAGE, operationId: packaging, wait: 'failed' },
      transferPackage: { id: w.dtp },
    });
    expect(view.step.why).toMatch(
      /was cancelled by an operator: cancelled: wrong files; its branch stops here until .opstate retry /,
    );
    expect(view.members.map((m: { id: string }) => m.id).sort()).toEqual([w.pkg, hostile].sort());
    expect(view.copies).toEqual([
      expect.objectContaining({
        artifactId: w.pkg,
        location: `${w.source.site}/source`,
        status: 'PRESENT',
      }),
    ]);

    const text = await inspect([w.pkg]);
    expect(text.code).toBe(0);
    expect(text.out).toContain(`raw_data_package ${w.pkg}`);
    expect(text.out).toMatch(/\n {2}state {7}FAILED/);
    expect(text.out).toContain(
      `  why         failed: packaging at ${w.source.site}/source was cancelled`,
    );

    const bundle = JSON.parse((await inspect([w.dtp, '--json'])).out);
    expect(bundle).toMatchObject({ type: 'data_transfer_package', state: 'FAILED', filesTotal: 1 });
    const planned = JSON.parse((await inspect([hostile, '--json'])).out);
    expect(planned).toMatchObject({ state: 'PLANNED', step: { wait: 'not_started' } });
    expect(planned.files).toEqual([expect.objectContaining({ name: HOSTILE_FILE })]);
  });

  it('opstate inspect still shows an operation, and refuses an id that names nothing as NOT_FOUND (exit 1)', async () => {
    const op = await inspect([packaging]);
    expect(op.code).toBe(0);
    expect(op.out).toContain(`operation ${packaging}`);
    const unknown = randomUUID();
    const none = await inspect([unknown]);
    expect(none.code).toBe(1);
    expect(none.out).toBe('');
    expect(none.err).toContain(`no operation or package has id ${unknown}`);
    expect(none.err).toMatch(/\[NOT_FOUND\]/);
  });

  it('opstate list --package-state lists the packages in a state', async () => {
    const failed = await list(['--package-state', 'FAILED', '--json']);
    expect(failed.code, failed.err).toBe(0);
    expect(
      JSON.parse(failed.out)
        .map((r: { id: string }) => r.id)
        .sort(),
    ).toEqual([w.pkg, w.dtp].sort());
    const planned = await list(['--package-state', 'PLANNED']);
    expect(planned.out.split('\n')).toEqual([
      `${hostile}  raw_data_package       PLANNED       ${HOSTILE}`,
    ]);
    const none = await list(['--package-state', 'ARCHIVED']);
    expect(none).toMatchObject({ code: 0, out: '', err: 'no package is ARCHIVED' });
  });

  it('refuses an unknown state, and the operation filters beside --package-state, with exit 2', async () => {
    const bad = await list(['--package-state', 'archived']);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/'archived' is invalid\. Allowed choices are PLANNED, PACKAGING/);
    const mixed = await list(['--package-state', 'FAILED', '--kind', 'transfer']);
    expect(mixed.code).toBe(2);
    expect(mixed.err).toContain(
      '--package-state lists packages; --kind, --status and --since filter operations',
    );
  });

  it('opstate status counts the packages per state', async () => {
    const source = async () => ({ timing: TIMING, heartbeats: null, close: async () => {} });
    const json = await run((open) => createStatusCommand(open, source), ['--json']);
    expect(json.code, json.err).toBe(0);
    const { packages } = JSON.parse(json.out);
    expect(packages.raw_data_package).toMatchObject({ FAILED: 1, PLANNED: 1, ARCHIVED: 0 });
    expect(packages.data_transfer_package).toMatchObject({ FAILED: 1, PLANNED: 0 });
    const text = await run((open) => createStatusCommand(open, source), []);
    expect(text.out).toMatch(/\nraw_data_package +1 +0 +0 +0 +0 +0 +0 +1\n/);
  });
});

describe('the derived package state on the dashboard', () => {
  const get = (path: string, accept = 'text/html') =>
    fetch(`${dashboard.url}${path}`, { headers: { accept } });

  it('lists the packages per state and by state', async () => {
    const all = await get('/packages');
    expect(all.status).toBe(200);
    const body = await all.text();
    expect(body).toContain('href="/packages?state=FAILED"');
    expect(body).toContain('aria-current="page">Packages</a>');
    const failed = await (await get('/packages?state=FAILED')).text();
    expect(failed).toContain(`href="/packages/${w.pkg}"`);
    expect(failed).toContain(`href="/packages/${w.dtp}"`);
    expect(failed).not.toContain(`href="/packages/${hostile}"`);
  });

  it("shows a package's state, step, why and lineage, every value escaped", async () => {
    const page = await (await get(`/packages/${w.pkg}`)).text();
    expect(page).toContain('id="package-state">FAILED</span>');
    expect(page).toContain('data-wait="failed"');
    expect(page).toContain(`href="/operations/${packaging}"`);
    expect(page).toContain(`href="/packages/${w.dtp}"`);
    const marked = await (await get(`/packages/${hostile}`)).text();
    expect(marked).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(marked).toContain('&lt;b&gt;frame&lt;/b&gt;.fits');
    expect(marked).not.toContain(HOSTILE);
    expect(marked).not.toContain(HOSTILE_FILE);
    const json = await (await get(`/api/packages/${w.dtp}`, 'application/json')).json();
    expect(json).toMatchObject({
      name: expect.any(String),
      step: { state: 'FAILED', wait: 'failed' },
    });
  });

  it('answers an unknown package 404, a malformed id or state 400', async () => {
    const unknown = randomUUID();
    const missing = await get(`/api/packages/${unknown}`, 'application/json');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({
      code: 'NOT_FOUND',
      message: expect.stringContaining(unknown),
    });
    expect((await get('/packages/not-an-id')).status).toBe(400);
    const state = await get('/packages?state=archived', 'application/json');
    expect(state.status).toBe(400);
    expect(((await state.json()) as { message: string }).message).toMatch(
      /state must be one of PLANNED/,
    );
  });
});
