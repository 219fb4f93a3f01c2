import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryLogger } from '../../actors/Logger.ts';
import { createRuntime, type Runtime } from '../../actors/Runtime.ts';
import { type Dashboard, startDashboard } from '../../dashboard/startDashboard.ts';
import { heartbeatFacts } from '../../machines/attention.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { OPERATION_STATUSES } from '../../machines/operationMachine.ts';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { selectStatusCounts } from '../../persistence/sql/controlPlaneQueries.ts';
import { launchBrowser } from '../helpers/browser.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor } from '../persistence/fixtures.ts';
import { HOSTILE_REASON, KEPT_REASON, PLANT_TIMING, plantEveryState } from './plant.ts';

/** The text a user sees in an element. */
// biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText is the rendered text
const seen = (l: Locator) => l.innerText();

/** Screenshots land here (gitignored): look at them to see what an operator sees. */
const SHOTS = join(import.meta.dirname, '..', '..', 'test-output', 'dashboard');

describe('the operator dashboard over a database with operations in every state', () => {
  let testDb: TestDatabase;
  let database: Database;
  let runtime: Runtime;
  let planted: Awaited<ReturnType<typeof plantEveryState>>;
  let readOnly: Dashboard;
  let operator: Dashboard;
  let browser: Awaited<ReturnType<typeof launchBrowser>>;
  const logger = memoryLogger();

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    testDb = await createTestDatabase('opstate_dashboard');
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
    planted = await plantEveryState(database);
    runtime = await createRuntime({
      databaseUrl: testDb.url,
      natsUrl: undefined,
      migrate: false,
      logger,
      timing: { ...PLANT_TIMING, heartbeatIntervalMs: 60_000, ackWaitMs: 70 * 60_000 },
    });
    const common = {
      database,
      timing: PLANT_TIMING,
      heartbeats: planted.heartbeats,
      port: 0,
      logger,
      pollMs: 100,
    };
    readOnly = await startDashboard({ ...common, command: null });
    operator = await startDashboard({ ...common, command: runtime.command });
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await readOnly?.close();
    await operator?.close();
    await runtime?.close();
    await planted?.close();
    await database?.close();
    await dropTestDatabase(testDb);
  });

  const post = (dashboard: Dashboard, path: string, body: unknown, header = true) =>
    fetch(`${dashboard.url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(header ? { 'x-opstate-action': '1' } : {}),
      },
      body: JSON.stringify(body),
    });

  const attentionOf = async (page: Page) =>
    (
      await page
        .locator('section.attention tr[data-subject]')
        .evaluateAll((rows) =>
          rows.map((r) => `${r.getAttribute('data-category')} ${r.getAttribute('data-subject')}`),
        )
    ).sort();

  it('shows the right counts on the table and on the lifecycle, and exactly the planted attention cases', async () => {
    const page = await browser.context.newPage();
    await page.goto(readOnly.url);
    const counts = await selectStatusCounts(database);
    for (const kind of OPERATION_KINDS) {
      for (const status of OPERATION_STATUSES) {
        const cell = page.locator(
          `table.counts tr[data-kind="${kind}"] td[data-status="${status}"]`,
        );
        expect(await seen(cell), `${kind} ${status}`).toBe(String(counts[kind][status]));
      }
    }
    for (const status of OPERATION_STATUSES) {
      const total = OPERATION_KINDS.reduce((n, k) => n + counts[k][status], 0);
      const onLifecycle = page.locator(`svg.lifecycle a[data-state="${status}"] .state-count`);
      expect(await onLifecycle.getAttribute('data-count'), status).toBe(String(total));
    }
    expect(await attentionOf(page)).toEqual(planted.expected);
    expect(await seen(page.locator('[data-category="breaker_open"] td.why'))).toMatch(
      /OPEN after 5 consecutive failures .*1 PENDING parked.*archive endpoint refused/,
    );
    expect(await seen(page.locator('[data-category="deletion_failed"] td.why'))).toBe(
      `deletion of the raw_data_package copy at ${planted.world.buffer.site}/buffer is blocked, the copy is kept: 1 member(s) kept — frame-0002.fits: ${KEPT_REASON}; see \`opstate inspect ${planted.ids.blockedArchive}\`, and after review \`opstate retry ${planted.ids.blockedArchive} --replan\``,
    );
    expect(await seen(page.locator('[data-category="deletion_stalled"] td.why'))).toMatch(
      /stalled: the lease of deleter-gone ran out 10 min ago and no deleter took over/,
    );
    expect(await seen(page.locator('[data-category="archive_conflict"] td.why'))).toMatch(
      /another object is at the archive key [0-9a-f-]+\.tar and was never overwritten; the source is kept\. .*`opstate retry [0-9a-f-]+ --replan`/,
    );
    await page.screenshot({ path: join(SHOTS, 'overview.png'), fullPage: true });
    // The same list as JSON, for scripts.
    const json = (await (await fetch(`${readOnly.url}/api/overview`)).json()) as {
      attention: { sections: { items: { category: string; subject: { id: string } }[] }[] };
    };
    expect(
      json.attention.sections
        .flatMap((s) => s.items.map((i) => `${i.category} ${i.subject.id}`))
        .sort(),
    ).toEqual(planted.expected);
    await page.close();
  });

  it('an operation page shows its path with attempts and who reset it why, and its lineage through copies', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${readOnly.url}/operations/${planted.ids.retryCap}`);
    const resets = await page
      .locator('table.path tr[data-event="RESET"]')
      .evaluateAll((rows) =>
        rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent?.trim())),
      );
    expect(resets.map((r) => [r[0], r[4], r[5]])).toEqual([
      ['1', 'heartbeat_monitor', 'stale heartbeat: last heartbeat 400 s ago (timeout 300 s)'],
      ['2', 'reconciler', 'IN_PROGRESS for 3700 s with no live or registered task'],
      ['3', 'operator', 'worker host replaced'],
    ]);
    expect(await seen(page.locator('#attempt'))).toBe('4 (retries 3/3)');
    expect(await page.locator('li[data-category="retry_cap"]').count()).toBe(1);
    await page.screenshot({ path: join(SHOTS, 'operation-resets.png'), fullPage: true });

    await page.goto(`${readOnly.url}/operations/${planted.ids.completed}`);
    const down = await page.locator('ul[data-direction="down"] li').allInnerTexts();
    expect(down).toHaveLength(1);
    expect(down[0]).toMatch(/raw_data_package .* at site-.*\/lta .*consumed by staging/);
    const up = await page.locator('ul[data-direction="up"] li').allInnerTexts();
    expect(up[0]).toMatch(/\/source .*registered, not produced by an operation/);
    // An archive whose source deletion kept a member: its resume record and next safe action.
    await page.goto(`${readOnly.url}/operations/${planted.ids.blockedArchive}`);
    expect(await seen(page.locator('#last-durable'))).toMatch(/^DELETION_FAILED at /);
    expect(await seen(page.locator('#deletion'))).toMatch(
      /^DELETION_FAILED, plan 1, failures 1\/\d+; deleted 1, missing 0, kept 1, remaining 0/,
    );
    const kept = page.locator('table.members tr[data-outcome="kept"] td');
    expect(await kept.nth(2).textContent()).toBe(KEPT_REASON);
    expect(await seen(page.locator('#next-action'))).toMatch(
      /^Next safe action: review: 1 member kept .*--replan/,
    );
    await page.screenshot({ path: join(SHOTS, 'operation-resume-record.png'), fullPage: true });
    await page.goto(`${readOnly.url}/operations/${planted.ids.cancelled}`);
    const cancel = page.locator('table.path tr[data-event="CANCEL"] td').nth(5);
    expect(await cancel.textContent()).toBe(HOSTILE_REASON);
    expect(await page.locator('table.path img, table.path b').count()).toBe(0);
    expect(await page.title()).not.toBe('1');
    await page.goto(`${readOnly.url}/operations/${planted.ids.stuckStale}`);
    expect(await seen(page.locator('.heartbeat'))).toMatch(/^(35\d|36\d) s ago$|^6 min ago$/);
    expect(await seen(page.locator('li[data-category="stuck"]'))).toMatch(
      /held by a worker whose last heartbeat was 6 min ago/,
    );
    await page.close();
  });

  it('updates an open page without reloading it when the operation moves, keeping what the operator typed', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${operator.url}/operations/${planted.ids.pendingFresh}`);
    await page.fill('form[data-action="cancel"] input[name="reason"]', 'half-typed reason');
    await page.evaluate(() => {
      (globalThis as unknown as { notReloaded: boolean }).notReloaded = true;
    });
    expect(await seen(page.locator('#status'))).toBe('PENDING');
    await planted.store.apply(planted.ids.pendingFresh, { type: 'SCHEDULE' });
    await waitFor(
      async () => (await seen(page.locator('#status'))) === 'SCHEDULED',
      'the open page to show SCHEDULED',
    );
    expect(
      await page.evaluate(() => (globalThis as unknown as { notReloaded?: boolean }).notReloaded),
    ).toBe(true);
    expect(await page.inputValue('form[data-action="cancel"] input[name="reason"]')).toBe(
      'half-typed reason',
    );
    await page.close();
  });

  it('a retry from the page moves a FAILED operation to PENDING; a refused action shows the machine’s reason', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${operator.url}/operations/${planted.ids.failed}`);
    await page.fill('form[data-action="retry"] input[name="reason"]', 'checksum tool fixed');
    await page.click('form[data-action="retry"] button');
    await waitFor(
      async () => (await seen(page.locator('#status'))) === 'PENDING',
      'PENDING on the page',
    );
    expect(await seen(page.locator('.result'))).toBe('retry: FAILED → PENDING (attempt 2)');
    expect(await page.inputValue('form[data-action="retry"] input[name="reason"]')).toBe('');
    const record = await planted.store.load(planted.ids.failed);
    expect([record.status, record.attempt]).toEqual(['PENDING', 2]);
    const history = await runtime.journal.listTransitions(planted.ids.failed);
    expect(history.at(-1)).toMatchObject({
      event: 'RETRY',
      by: 'operator',
      reason: 'checksum tool fixed',
    });
    await page.screenshot({ path: join(SHOTS, 'retry-done.png'), fullPage: true });

    await page.goto(`${operator.url}/operations/${planted.ids.completed}`);
    await page.click('form[data-action="reset"] button');
    await page.locator('.result.refused').waitFor();
    expect(await seen(page.locator('.result'))).toBe(
      'Refused: RESET is not accepted in COMPLETED (it is a final state) [INVALID_EVENT]',
    );
    expect((await planted.store.load(planted.ids.completed)).status).toBe('COMPLETED');
    await page.screenshot({ path: join(SHOTS, 'reset-refused.png'), fullPage: true });
    await page.close();
  });

  it('pages every list: the pages of a category, read two at a time, are the whole category', async () => {
    const { loadAttention } = await import('../../persistence/loadAttention.ts');
    const facts = {
      now: Date.now(),
      timing: PLANT_TIMING,
      heartbeats: heartbeatFacts(await planted.heartbeats.list()),
    };
    const whole = await loadAttention(database, { ...facts, category: 'stuck' });
    expect(whole.sections[0]?.items).toHaveLength(5);
    const paged: string[] = [];
    let after: string | undefined;
    for (let n = 0; n < 5; n++) {
      const page = (await loadAttention(database, { ...facts, category: 'stuck', limit: 2, after }))
        .sections[0];
      paged.push(...(page?.items.map((i) => i.subject.id) ?? []));
      if (page?.next == null) break;
      after = page.next;
    }
    expect(paged).toEqual(whole.sections[0]?.items.map((i) => i.subject.id));
    // The operations of one kind and status, and of one status across kinds.
    const one = await fetch(`${readOnly.url}/operations?kind=transfer&status=SCHEDULED&fragment=1`);
    expect(await one.text()).toContain(planted.ids.stuckScheduled);
    const all = await (
      await fetch(`${readOnly.url}/operations?status=IN_PROGRESS&fragment=1`)
    ).text();
    for (const id of [planted.ids.stuckNoBeat, planted.ids.beating, planted.ids.stuckStale]) {
      expect(all).toContain(id);
    }
    const category = await (
      await fetch(`${readOnly.url}/attention?category=retry_cap&fragment=1`)
    ).text();
    expect(category).toContain(planted.ids.retryCap);
    expect((await fetch(`${readOnly.url}/operations?status=DONE`)).status).toBe(400);
  });

  it('opstate status shows the same attention list, as text and as JSON', async () => {
    const { createStatusCommand } = await import('../../cli/commands/status.ts');
    const status = createStatusCommand(
      async () => ({ ...database, close: async () => {} }),
      async () => ({ timing: PLANT_TIMING, heartbeats: planted.heartbeats, close: async () => {} }),
    );
    const out: string[] = [];
    const io = { out: (l: string) => out.push(l), err: (l: string) => out.push(l) };
    expect(await status.run(['--json'], io)).toBe(0);
    const json = JSON.parse(out.join('')) as {
      attention: {
        sections: { category: string; items: { category: string; subject: { id: string } }[] }[];
      };
    };
    const listed = json.attention.sections.flatMap((s) =>
      s.items.map((i) => `${i.category} ${i.subject.id}`),
    );
    // The retry above took the FAILED one off the list, and the live test scheduled a fresh one.
    const expected = planted.expected.filter((e) => e !== `failed ${planted.ids.failed}`);
    expect(listed.sort()).toEqual(expected);
    out.length = 0;
    expect(await status.run([], io)).toBe(0);
    const start = out.findIndex((l) => l.startsWith('attention ('));
    expect(out[start]).toBe(`attention (${expected.length})`);
    for (const e of expected) {
      const id = e.split(' ')[1] as string;
      expect(
        out.slice(start).some((l) => l.startsWith(`    ${id}  `)),
        e,
      ).toBe(true);
    }
    expect(out.slice(start)).toContain('  Stuck past their timers (5)');
  });

  it('is read-only unless actions are allowed, and refuses bad requests with a clear error', async () => {
    const before = await planted.store.load(planted.ids.scheduledFresh);
    const readOnlyAnswer = await post(
      readOnly,
      `/api/operations/${planted.ids.scheduledFresh}/cancel`,
      {},
    );
    expect(readOnlyAnswer.status).toBe(403);
    expect(await readOnlyAnswer.json()).toMatchObject({ code: 'READ_ONLY' });
    const noHeader = await post(
      operator,
      `/api/operations/${planted.ids.scheduledFresh}/cancel`,
      {},
      false,
    );
    expect(noHeader.status).toBe(403);
    const badId = await post(operator, '/api/operations/not-a-uuid/cancel', {});
    expect([badId.status, ((await badId.json()) as { code: string }).code]).toEqual([
      400,
      'BAD_INPUT',
    ]);
    const badAction = await post(
      operator,
      `/api/operations/${planted.ids.scheduledFresh}/delete`,
      {},
    );
    expect(badAction.status).toBe(400);
    const missing = await fetch(`${readOnly.url}/operations/00000000-0000-4000-8000-000000000000`);
    expect(missing.status).toBe(404);
    const badPage = await fetch(`${readOnly.url}/attention?category=stuck&after=garbage`);
    expect(badPage.status).toBe(400);
    const after = await planted.store.load(planted.ids.scheduledFresh);
    expect(after.version).toBe(before.version);
    expect(logger.lines.filter((l) => l.level === 'ERROR')).toEqual([]);
  });
  it('pages failures newest first (they stay FAILED until retried)', async () => {
    const { loadAttention } = await import('../../persistence/loadAttention.ts');
    const failures: string[] = [];
    for (let n = 0; n < 3; n++) {
      const id = await planted.store.create(inputFor(OperationKind.UNPACK, planted.world));
      await planted.store.apply(id, { type: 'SCHEDULE' });
      await planted.store.apply(id, { type: 'START', attempt: 1, workerId: 'w-page' });
      await planted.store.apply(id, {
        type: 'FAIL',
        attempt: 1,
        error: { message: `failure ${n}`, retryable: false },
      });
      failures.push(id);
    }
    const facts = { now: Date.now(), timing: PLANT_TIMING, heartbeats: null };
    const paged: string[] = [];
    let after: string | undefined;
    for (let n = 0; n < 5; n++) {
      const page = (
        await loadAttention(database, { ...facts, category: 'failed', limit: 2, after })
      ).sections[0];
      paged.push(...(page?.items.map((i) => i.subject.id) ?? []));
      if (page?.next == null) break;
      after = page.next;
    }
    // The new ones first, then the archive conflict planted earlier (also FAILED).
    expect(paged).toEqual([...[...failures].reverse(), planted.ids.conflict]);
  });
});
