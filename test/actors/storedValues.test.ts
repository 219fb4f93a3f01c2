import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInspectCommand } from '../../cli/commands/inspect.ts';
import { type Dashboard, startDashboard } from '../../dashboard/startDashboard.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import { archiveStandIn } from '../../stages/archiveStandIn.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';

/** What the README's upload step returns, and strings a second JSON decode changes or rejects. */
const RESULTS = ['plain text', '123', '{"a":1}', '"9b2cf535f27731c974343645a3985328"'] as const;

let db: TestDatabase;
let runtime: Runtime;
let dashboard: Dashboard;
const logger = memoryLogger();

beforeAll(async () => {
  db = await createTestDatabase('opstate_stored');
  // The in-process transport on the real Postgres: the worker's own step path, no broker needed.
  runtime = await createRuntime({ databaseUrl: db.url, logger });
  dashboard = await startDashboard({
    database: runtime.database,
    timing: runtime.timing,
    heartbeats: null,
    command: null,
    port: 0,
    logger,
  });
});
afterAll(async () => {
  await dashboard?.close();
  await runtime?.close();
  await dropTestDatabase(db);
});

describe('ctx.step in a worker handler', () => {
  it('returns a string result as that string, on the first run and on a re-run', async () => {
    const w = await makeWorld(runtime.database);
    const seen: { attempt: number; results: unknown[] }[] = [];
    let ran = 0;
    runtime.startControlPlane();
    runtime.startWorker({
      kinds: [OperationKind.LONG_TERM_ARCHIVE],
      handlers: {
        [OperationKind.LONG_TERM_ARCHIVE]: async (ctx) => {
          const results: unknown[] = [];
          for (const [n, value] of RESULTS.entries()) {
            results.push(
              await ctx.step(`upload-${n}`, async () => {
                ran++;
                return value;
              }),
            );
          }
          seen.push({ attempt: ctx.operation.attempt, results });
          // The first attempt fails after its steps: the second resumes from the journal.
          if (ctx.operation.attempt === 1) {
            throw new OpstateError(OpstateErrorCode.DATABASE, 'store unreachable', {
              retryable: true,
            });
          }
          // A long-term archive completes only through the archive protocol (its VERIFIED record).
          return archiveStandIn(ctx);
        },
      },
    });
    const id = await runtime.submit(inputFor(OperationKind.LONG_TERM_ARCHIVE, w));
    await waitFor(
      async () => (await runtime.store.load(id)).status === 'COMPLETED',
      'the operation to complete on its second attempt',
      60_000,
    );
    expect(seen).toEqual([
      { attempt: 1, results: [...RESULTS] },
      { attempt: 2, results: [...RESULTS] },
    ]);
    expect(ran).toBe(RESULTS.length); // the re-run took every result from the journal
    const view = await runtime.get(id);
    // The handler's own steps (the archive protocol's plan, upload and verify follow them).
    expect(view.steps.filter((s) => /^upload-\d+$/.test(s.name)).map((s) => s.result)).toEqual([
      ...RESULTS,
    ]);
    expect(view.steps.map((s) => s.name).slice(RESULTS.length)).toEqual([
      'plan',
      'upload',
      'verify',
    ]);
    expect(view).toMatchObject({
      status: 'COMPLETED',
      attempt: 2,
      lastError: null,
      unreadable: [],
    });
    expect(view.failures).toMatchObject([{ attempt: 1, error: { message: 'store unreachable' } }]);
  });

  it('fails the attempt for good, naming the fix, when a step returns what JSON cannot keep', async () => {
    const w = await makeWorld(runtime.database);
    runtime.startWorker({
      kinds: [OperationKind.TRANSFER],
      handlers: {
        [OperationKind.TRANSFER]: async (ctx) => {
          await ctx.step('stamp', async () => ({ at: new Date(0) }));
          return { outputs: await ctx.requiredOutputs() };
        },
      },
    });
    const id = await runtime.submit(inputFor(OperationKind.TRANSFER, w));
    await waitFor(
      async () => (await runtime.store.load(id)).status === 'FAILED',
      'the operation to fail',
      60_000,
    );
    const view = await runtime.get(id);
    expect(view).toMatchObject({ attempt: 1, steps: [], lastError: { retryable: false } });
    expect(view.lastError?.message).toMatch(
      /step 'stamp' result\.at is a Date, .*date\.toISOString\(\)/,
    );
  });
});

/** Writes a row past the append-only triggers, as damage or an old build would have left it. */
async function corrupt(database: Database, statement: ReturnType<typeof sql>): Promise<void> {
  await database.transaction(async (tx) => {
    await tx.execute(sql`set local session_replication_role = replica`);
    await tx.execute(statement);
  });
}

describe('an operation whose stored values are damaged', () => {
  let id: string;
  const snapshotText = '{"value": "NOWHERE", "context": {}}';
  const errorText = '"{\\"message\\":\\"no such bucket\\",\\"retryable\\":true}"';

  beforeAll(async () => {
    const { store, journal } = runtime;
    const w = await makeWorld(runtime.database);
    id = await store.create(inputFor(OperationKind.LONG_TERM_ARCHIVE, w));
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 1, workerId: 'w-damaged' });
    await journal.recordStep({ operationId: id, attempt: 1, name: 'upload', state: 'done' });
    await store.apply(id, {
      type: 'FAIL',
      attempt: 1,
      error: { message: 'checksum mismatch', retryable: false },
    });
    // A step result as the old reader choked on it, a snapshot of no known state, an error that
    // was encoded twice, a breadcrumb that is a bare string.
    await corrupt(
      runtime.database,
      sql`update operation_step set result = '"plain text"'::jsonb where operation_id = ${id}::uuid`,
    );
    await corrupt(
      runtime.database,
      sql`update operation set snapshot = ${snapshotText}::jsonb, last_error = ${errorText}::jsonb
        where id = ${id}::uuid`,
    );
    await corrupt(
      runtime.database,
      sql`update operation_failure_event set error = '"checksum mismatch"'::jsonb
        where operation_id = ${id}::uuid`,
    );
  });

  it('runtime.get shows them as unreadable with the row text, and everything else', async () => {
    const view = await runtime.get(id);
    expect(view).toMatchObject({
      id,
      status: 'FAILED',
      attempt: 1,
      fields: { rawDataPackageId: expect.any(String) },
      steps: [{ name: 'upload', result: 'plain text' }],
      failures: [{ attempt: 1, error: 'checksum mismatch' }],
      lastError: { code: 'UNREADABLE', retryable: false },
    });
    expect(view.lastError?.message).toContain('{\\"message\\":\\"no such bucket\\"');
    expect(view.transitions.map((t) => t.event)).toEqual(['CREATE', 'SCHEDULE', 'START', 'FAIL']);
    expect(view.unreadable).toEqual([
      {
        column: 'operation.snapshot',
        raw: JSON.stringify(JSON.parse(snapshotText)),
        reason: expect.stringContaining('no known lifecycle state'),
      },
      {
        column: 'operation.last_error',
        raw: errorText,
        reason: 'an error record is an object, not a string',
      },
    ]);
  });

  it('opstate inspect prints them as unreadable with the row text, and everything else', async () => {
    const shared = async (): Promise<Database> => ({ ...runtime.database, close: async () => {} });
    const out: string[] = [];
    const err: string[] = [];
    const io = { out: (l: string) => out.push(l), err: (l: string) => err.push(l) };
    expect(await createInspectCommand(shared).run([id], io)).toBe(0);
    const text = out.join('\n');
    expect(err).toEqual([]);
    expect(text).toContain('status      FAILED');
    expect(text).toContain('last error  unreadable stored error (an error record is an object');
    expect(text).toContain('transitions (4)');
    expect(text).toContain('upload #1 done');
    expect(text).toContain('#1 "checksum mismatch"');
    expect(text).toContain('unreadable (2)');
    expect(text).toContain(
      `operation.last_error: an error record is an object, not a string: ${errorText}`,
    );
    expect(text).toMatch(
      /operation\.snapshot: stored snapshot has no known lifecycle state.*: \{"value":"NOWHERE","context":\{\}\}/,
    );
    out.length = 0;
    expect(await createInspectCommand(shared).run([id, '--json'], io)).toBe(0);
    expect(JSON.parse(out.join('\n'))).toMatchObject({
      id,
      steps: [{ result: 'plain text' }],
      unreadable: [
        { column: 'operation.snapshot' },
        { column: 'operation.last_error', raw: errorText },
      ],
    });
  });

  it("the dashboard's operation page shows them as unreadable with the row text, and everything else", async () => {
    const res = await fetch(`${dashboard.url}/operations/${id}`);
    const page = await res.text();
    expect(res.status, page.slice(0, 500)).toBe(200);
    expect(page).toContain('Unreadable stored values');
    expect(page).toContain('operation.snapshot');
    expect(page).toContain('operation.last_error');
    expect(page).toContain('UNREADABLE');
    expect(page).toContain('no such bucket');
    expect(page).toContain('plain text');
    expect(page).toContain('checksum mismatch');
    expect(page).toContain('w-damaged');
  });
});
