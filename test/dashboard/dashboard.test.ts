import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startInspectorRelay } from '../../cli/inspectorRelay.ts';
import { type Dashboard, startDashboard } from '../../dashboard/startDashboard.ts';
import { heartbeatFacts } from '../../machines/attention.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { OPERATION_STATUSES } from '../../machines/operationMachine.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { selectStatusCounts } from '../../persistence/reads/selectStatusCounts.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import { launchBrowser } from '../helpers/browser.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor } from '../persistence/fixtures.ts';
import {
  HOSTILE_REASON,
  KEPT_REASON,
  LONG_RESULT,
  PLANT_TIMING,
  plantEveryState,
} from './plant.ts';

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
    testDb = await createTestDatabase('opstate_dashboard', { migrated: true });
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

  const actionsOf = (page: Page) =>
    page
      .locator('form[data-action]')
      .evaluateAll((forms) => forms.map((f) => f.getAttribute('data-action')));

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
    const deadlines = await page
      .locator('[data-category="deadline"] td.why')
      .evaluateAll((cells) => cells.map((c) => c.textContent?.trim()));
    expect(deadlines).toEqual([
      expect.stringMatching(
        /^IN_PROGRESS on worker-c at attempt 1 for 50 min, 83 % of its deadline of 1 h \(set at submit\): at the deadline its handler is aborted and the deadline path resets it/,
      ),
      expect.stringMatching(
        /^IN_PROGRESS on worker-c at attempt 1 for 30 min, past its deadline of 20 min \(set at submit\) by 10 min; the deadline path should have reset it/,
      ),
    ]);
    expect(await seen(page.locator('[data-category="deletion_stalled"] td.why'))).toMatch(
      /stalled: the lease of deleter-gone ran out 10 min ago and no deleter took over/,
    );
    expect(await seen(page.locator('[data-category="archive_conflict"] td.why'))).toMatch(
      /another object is at the archive key [0-9a-f-]+\.tar and was never overwritten; the source is kept\. .*`opstate retry [0-9a-f-]+ --replan`/,
    );
    // Every live heartbeat says which queues its worker reads: a queue nobody reads is listed as
    // soon as work waits in it.
    expect(
      await seen(
        page.locator(
          'tr[data-category="queue_unserved"][data-subject="source_data_transfer_package_creation"] td.why',
        ),
      ),
    ).toMatch(
      /^no live worker serves queue source_data_transfer_package_creation \(1 waiting, the oldest for \d+ s\): no heartbeat younger than 5 min names it among the queues its worker reads; start a worker for it \(`opstate worker --kinds data_transfer_package --handlers …`\)$/,
    );
    // Every page is linked from the header, and the search from the overview itself.
    expect(
      await page.locator('header nav a').evaluateAll((as) => as.map((a) => a.getAttribute('href'))),
    ).toEqual(['/', '/operations', '/packages', '/workers', '/copies']);
    expect(await page.locator('#all-operations').getAttribute('href')).toBe('/operations');
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
    // SCHEDULED in a queue no live worker serves: the page says so and what to do.
    await page.goto(`${readOnly.url}/operations/${planted.ids.scheduledFresh}`);
    expect(await seen(page.locator('li[data-category="queue_unserved"]'))).toMatch(
      /^queue_unserved: no live worker serves queue buffer_data_transfer_unpacking \(2 waiting/,
    );
    expect(await seen(page.locator('#next-action'))).toMatch(
      /^Next safe action: Start a worker that serves queue buffer_data_transfer_unpacking/,
    );
    await page.screenshot({ path: join(SHOTS, 'operation-queue-unserved.png'), fullPage: true });
    await page.close();
  });

  it('the lineage is a tree: each package with its own files under it', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${readOnly.url}/operations/${planted.ids.bundling}`);
    const branches = await page.locator('ul[data-direction="up"] > li').evaluateAll((items) =>
      items.map((li) => ({
        pkg: li.querySelector(':scope > .lineage-copy b')?.textContent,
        files: [...li.querySelectorAll(':scope > ul > li > .lineage-copy b')]
          .map((b) => b.textContent)
          .sort(),
      })),
    );
    const { a, b } = planted.lineage;
    expect(branches.sort((x, y) => String(x.pkg).localeCompare(String(y.pkg)))).toEqual([
      { pkg: a.name, files: [...a.files].sort() },
      { pkg: b.name, files: [...b.files].sort() },
    ]);
    expect(await page.locator('ul[data-direction="up"] li').count()).toBe(2 + 4 + 5);
    await page.screenshot({ path: join(SHOTS, 'lineage-tree.png'), fullPage: true });
    await page.close();
  });

  it('a 5 KB journal result wraps and scrolls inside its card', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${readOnly.url}/operations/${planted.ids.packagingA}`);
    const box = page.locator('table.steps pre.long');
    expect(await box.textContent()).toBe(JSON.stringify(LONG_RESULT));
    const fit = await box.evaluate((el) => {
      const card = el.closest('section.card');
      const root = el.ownerDocument.documentElement;
      return {
        card: [card?.scrollWidth, card?.clientWidth],
        page: [root.scrollWidth, root.clientWidth],
        box: [el.scrollHeight, el.clientHeight],
      };
    });
    expect(fit.card[0]).toBeLessThanOrEqual(fit.card[1] as number);
    expect(fit.page[0]).toBeLessThanOrEqual(fit.page[1] as number);
    // Taller than its box: it scrolls there instead of stretching the page.
    expect(fit.box[0]).toBeGreaterThan(fit.box[1] as number);
    await box.scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SHOTS, 'journal-long-result.png') });
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
    // PENDING takes no RETRY: the page now offers only what the machine takes there.
    await waitFor(
      async () => (await actionsOf(page)).join() === 'cancel',
      'only Cancel on the PENDING page',
    );
    const record = await planted.store.load(planted.ids.failed);
    expect([record.status, record.attempt]).toEqual(['PENDING', 2]);
    const history = await runtime.journal.listTransitions(planted.ids.failed);
    expect(history.at(-1)).toMatchObject({
      event: 'RETRY',
      by: 'operator:operator (dashboard, 127.0.0.1)',
      reason: 'checksum tool fixed',
    });
    await page.screenshot({ path: join(SHOTS, 'retry-done.png'), fullPage: true });

    // An operation that moves on while its page is open (no live updates reach this one): the
    // machine refuses the action the page still offered, and the page shows why.
    const moving = await planted.store.create(inputFor(OperationKind.UNPACK, planted.world));
    await planted.store.apply(moving, { type: 'SCHEDULE' });
    const stale = await browser.context.newPage();
    await stale.route('**/events', (r) => r.abort());
    await stale.goto(`${operator.url}/operations/${moving}`);
    expect(await actionsOf(stale)).toEqual(['reset', 'cancel']);
    await planted.store.apply(moving, { type: 'CANCEL', reason: 'superseded' });
    await stale.click('form[data-action="reset"] button');
    await stale.locator('.result.refused').waitFor();
    expect(await seen(stale.locator('.result'))).toBe(
      'Refused: RESET is not accepted in FAILED (accepted: RETRY) [INVALID_EVENT]',
    );
    expect((await planted.store.load(moving)).status).toBe('FAILED');
    await stale.screenshot({ path: join(SHOTS, 'reset-refused.png'), fullPage: true });
    await stale.close();
    await page.close();
  });

  it('offers only the actions the machine accepts in the operation’s state', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${operator.url}/operations/${planted.ids.completed}`);
    expect(await actionsOf(page)).toEqual([]);
    expect(await seen(page.locator('#no-actions'))).toBe(
      'No operator action applies in COMPLETED.',
    );
    await page.goto(`${operator.url}/operations/${planted.ids.conflict}`);
    expect(await actionsOf(page)).toEqual(['retry']);
    await page.goto(`${operator.url}/operations/${planted.ids.stuckScheduled}`);
    expect(await actionsOf(page)).toEqual(['reset', 'cancel']);
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
      queues: { queue: string; waiting: number; readers: string[] | null }[];
      queueReadersUnknown: string[];
    };
    const queue = (name: string) => json.queues.find((q) => q.queue === name);
    expect(queue('source_data_transfer')).toMatchObject({ waiting: 2, readers: ['worker-g'] });
    expect(queue('source_data_transfer_package_creation')).toMatchObject({
      waiting: 1,
      readers: [],
    });
    expect(queue('processing_staging')).toMatchObject({ waiting: 0, readers: [] });
    expect(json.queueReadersUnknown).toEqual([]);
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
    // Per queue with work or a reader: waiting, in progress, the live workers reading it.
    const queues = out.findIndex((l) => l.startsWith('queue  '));
    expect(out[queues]).toMatch(/^queue\s+waiting {2}in progress {2}live workers reading it$/);
    const line = (name: string) => out.slice(queues).find((l) => l.startsWith(`${name} `));
    expect(line('source_data_transfer')).toMatch(/^source_data_transfer\s+2\s+\d+ {2}worker-g$/);
    // In progress: the three worker-c runs (one near its deadline, one past it) and two others.
    expect(line('source_raw_data_package_creation')).toMatch(/\s5 {2}worker-c$/);
    expect(line('source_data_transfer_package_creation')).toMatch(/\s1\s+0 {2}none$/);
    expect(line('processing_staging')).toBeUndefined();
    expect(out.slice(queues, start)).toContainEqual(
      expect.stringMatching(
        // The quiet ones: the legacy queues and every registered location's site queues.
        /^ {2}\(\d+ other queues: nothing waiting or in progress, no live worker reading them\)$/,
      ),
    );
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
  /** FAILED operations with the given errors, created now (a test's own). */
  const failWith = async (messages: readonly string[]) => {
    const ids: string[] = [];
    for (const message of messages) {
      const id = await planted.store.create(inputFor(OperationKind.UNPACK, planted.world));
      await planted.store.apply(id, { type: 'SCHEDULE' });
      await planted.store.apply(id, { type: 'START', attempt: 1, workerId: 'w-search' });
      await planted.store.apply(id, {
        type: 'FAIL',
        attempt: 1,
        error: { message, retryable: false },
      });
      ids.push(id);
    }
    return ids;
  };

  /** The ids a search lists, in the page's order (its content, as a refresh reads it). */
  const listed = async (dashboard: Dashboard, query: Record<string, string>) => {
    const url = `${dashboard.url}/operations?${new URLSearchParams({ ...query, fragment: '1' })}`;
    const text = await (await fetch(url)).text();
    return [...text.matchAll(/<tr data-id="([0-9a-f-]+)"/g)].map((m) => m[1]);
  };

  const token = `bulk-${randomUUID().slice(0, 8)}`;
  let searched: string[] = [];

  it('searches every operation by id, short id, package, kind, status and error text, literally', async () => {
    searched = await failWith([
      `${token} disk 100% full_now`,
      `${token} 1000 files fullXnow`,
      `${token} quote ' and "double" <b>bold</b>`,
      `${token} plain`,
    ]);
    const [pct, notPct, quoted, plain] = searched as [string, string, string, string];
    // Newest first.
    expect(await listed(readOnly, { q: token, status: 'FAILED' })).toEqual([...searched].reverse());
    expect(await listed(readOnly, { q: token, kind: 'transfer' })).toEqual([]);
    // %, _ and quotes are plain characters, never wildcards or SQL.
    expect(await listed(readOnly, { q: '100%' })).toEqual([pct]);
    expect(await listed(readOnly, { q: 'full_now' })).toEqual([pct]);
    expect(await listed(readOnly, { q: '"double"' })).toEqual([quoted]);
    expect(await listed(readOnly, { q: "quote '" })).toEqual([quoted]);
    // By id whole, by its start, by the short id the pages show.
    expect(await listed(readOnly, { q: notPct })).toEqual([notPct]);
    expect(await listed(readOnly, { q: plain.slice(0, 23) })).toContain(plain);
    expect(await listed(readOnly, { q: notPct.slice(-8).toUpperCase() })).toEqual([notPct]);
    // By the package an operation acts on: its name in part, or its id.
    const { a } = planted.lineage;
    expect(await listed(readOnly, { q: a.name.slice(0, 18) })).toContain(planted.ids.packagingA);
    expect(await listed(readOnly, { q: a.pkg })).toEqual([planted.ids.packagingA]);

    const page = await browser.context.newPage();
    const hostile = `<script>document.title='pwned'</script>"'%_`;
    await page.goto(`${readOnly.url}/operations?${new URLSearchParams({ q: hostile })}`);
    expect(await page.inputValue('form[data-form="search"] input[name="q"]')).toBe(hostile);
    expect(await page.locator('#searched').textContent()).toBe(hostile);
    expect(await page.locator('main script').count()).toBe(0);
    expect(await page.title()).toBe('All operations · opstate');
    expect(await seen(page.locator('main .empty'))).toBe('no operation matches');
    // What an error says is shown as text.
    await page.goto(`${readOnly.url}/operations?${new URLSearchParams({ q: token })}`);
    expect(await page.locator('table.operations b').count()).toBe(0);
    expect(await page.locator(`tr[data-id="${quoted}"] td.error`).textContent()).toBe(
      `${token} quote ' and "double" <b>bold</b>`,
    );
    // Filtered to FAILED on a read-only dashboard: no bulk retry, and why.
    await page.goto(`${readOnly.url}/operations?status=FAILED`);
    expect(await page.locator('form[data-bulk]').count()).toBe(0);
    expect(await seen(page.locator('main'))).toMatch(
      /Read-only: start the dashboard with --allow-actions to retry these/,
    );
    await page.goto(`${readOnly.url}/operations?q=${encodeURIComponent(token)}`);
    await page.screenshot({ path: join(SHOTS, 'operations-search.png'), fullPage: true });
    await page.close();

    // Pages: read two at a time, they are the whole list, in order.
    const { searchOperations } = await import('../../persistence/reads/searchOperations.ts');
    const pages: string[] = [];
    let after: { createdAt: Date; id: string } | undefined;
    for (let n = 0; n < 4; n++) {
      const rows = await searchOperations(database, { text: token }, { limit: 2, after });
      pages.push(...rows.map((r) => r.id));
      const last = rows.at(-1);
      if (rows.length < 2 || last === undefined) break;
      after = { createdAt: last.createdAt, id: last.id };
    }
    expect(pages).toEqual([...searched].reverse());
    expect((await fetch(`${readOnly.url}/operations?q=${'x'.repeat(201)}`)).status).toBe(400);
    expect((await fetch(`${readOnly.url}/operations?kind=nope`)).status).toBe(400);
    expect((await fetch(`${readOnly.url}/operations?after=garbage`)).status).toBe(400);
  });

  it('retries every FAILED operation shown, each through the machine, and says which were refused', async () => {
    const page = await browser.context.newPage();
    // The page keeps what it was loaded with, so that one of them can move on behind its back.
    await page.route('**/events', (r) => r.abort());
    await page.goto(
      `${operator.url}/operations?${new URLSearchParams({ q: token, status: 'FAILED' })}`,
    );
    expect(await seen(page.locator('form[data-bulk="retry"] button'))).toBe('Retry all 4 shown');
    const [first, second, third, movedOn] = searched as [string, string, string, string];
    await planted.store.apply(movedOn, { type: 'RETRY' });
    await page.fill('form[data-bulk="retry"] input[name="reason"]', 'disk cleaned');
    await page.screenshot({ path: join(SHOTS, 'bulk-retry-offered.png'), fullPage: true });
    await page.click('form[data-bulk="retry"] button');
    await page.locator('.result table.bulk-results tr').nth(3).waitFor();
    const results = await page
      .locator('.result table.bulk-results tr')
      .evaluateAll((rows) =>
        rows.map((r) => [
          r.getAttribute('data-id'),
          r.getAttribute('data-outcome'),
          r.querySelectorAll('td')[2]?.textContent,
        ]),
      );
    expect(results.sort()).toEqual(
      [
        [first, 'retried', 'FAILED → PENDING (attempt 2)'],
        [second, 'retried', 'FAILED → PENDING (attempt 2)'],
        [third, 'retried', 'FAILED → PENDING (attempt 2)'],
        [
          movedOn,
          'refused',
          'RETRY is not accepted in PENDING (accepted: SCHEDULE, CANCEL) [INVALID_EVENT]',
        ],
      ].sort(),
    );
    expect(await seen(page.locator('.result .bulk-summary'))).toBe('retried 3 of 4; 1 refused');
    for (const id of [first, second, third]) {
      expect((await planted.store.load(id)).status).toBe('PENDING');
      expect((await runtime.journal.listTransitions(id)).at(-1)).toMatchObject({
        event: 'RETRY',
        by: 'operator:operator (dashboard, 127.0.0.1)',
        reason: 'disk cleaned',
      });
    }
    // The list refreshes: nothing of them is FAILED any more; the outcomes stay on the page.
    await page.locator('main .empty').waitFor();
    expect(await page.locator('.result table.bulk-results tr').count()).toBe(4);
    await page.screenshot({ path: join(SHOTS, 'bulk-retry.png'), fullPage: true });
    await page.close();

    // The rules of single actions, and a cap per request; a bad request retries nothing.
    const conflict = planted.ids.conflict;
    expect((await post(readOnly, '/api/operations/retry', { ids: [conflict] })).status).toBe(403);
    expect((await post(operator, '/api/operations/retry', { ids: [conflict] }, false)).status).toBe(
      403,
    );
    const tooMany = await post(operator, '/api/operations/retry', {
      ids: Array.from({ length: 101 }, () => randomUUID()),
    });
    expect([tooMany.status, ((await tooMany.json()) as { message: string }).message]).toEqual([
      400,
      'at most 100 operations per bulk retry, got 101; retry them a page at a time',
    ]);
    expect(
      (await post(operator, '/api/operations/retry', { ids: [conflict, 'nope'] })).status,
    ).toBe(400);
    expect((await post(operator, '/api/operations/retry', { ids: [] })).status).toBe(400);
    expect((await planted.store.load(conflict)).status).toBe('FAILED');
  });

  it('shows each queue’s depth and the live workers reading it, idle ones too, and names a queue nobody reads at once', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${readOnly.url}/workers`);
    const why = (queue: string) => seen(page.locator(`#unserved li[data-queue="${queue}"]`));
    const state = (queue: string) => seen(page.locator(`tr[data-queue="${queue}"] td.state`));
    expect(await why('buffer_data_transfer_unpacking')).toMatch(
      /^no live worker serves queue buffer_data_transfer_unpacking \(2 waiting, the oldest for \d+ min\)/,
    );
    // Scheduled just now, read by no live worker: listed at once.
    expect(await why('source_data_transfer_package_creation')).toMatch(
      /^no live worker serves queue source_data_transfer_package_creation \(1 waiting, the oldest for \d+ s\)/,
    );
    expect(await page.locator('#unserved li').count()).toBe(2);
    expect(await state('source_data_transfer_package_creation')).toBe('no live worker');
    // worker-g holds nothing and reads the transfer queue: it serves it, idle.
    const transfer = page.locator('tr[data-queue="source_data_transfer"] td');
    expect(await transfer.nth(2).textContent()).toBe('2');
    expect(await transfer.nth(5).textContent()).toBe('worker-g');
    expect(await state('source_data_transfer')).toBe('served');
    const idle = page.locator('tr[data-worker="worker-g"] td');
    expect(await idle.nth(1).textContent()).toBe('live');
    expect(await idle.nth(3).getAttribute('data-queues')).toBe('source_data_transfer');
    expect(await seen(idle.nth(3))).toBe('source_data_transfer (transfer)');
    expect(await seen(idle.nth(4))).toBe('nothing (idle, or between operations)');
    // An older worker's heartbeat does not say what it reads: its queues are those it holds from.
    expect(await seen(page.locator('tr[data-worker="worker-d"] td').nth(3))).toBe(
      'its heartbeat does not say; holds work from source_raw_data_package_creation',
    );
    const served = page.locator('tr[data-queue="source_raw_data_package_creation"] td');
    expect(await served.nth(2).textContent()).toBe('0');
    expect(await served.nth(3).textContent()).toBe('5');
    expect(await served.nth(5).textContent()).toMatch(/^worker-c \(stale: worker-d\)$/);
    expect(await state('source_raw_data_package_creation')).toBe('served');
    expect(await state('processing_staging')).toBe('idle');
    const workers = await page
      .locator('table.workers tr[data-worker]')
      .evaluateAll((rows) =>
        rows.map(
          (r) => `${r.getAttribute('data-worker')} ${r.querySelectorAll('td')[1]?.textContent}`,
        ),
      );
    expect(workers).toEqual(['worker-c live', 'worker-d stale', 'worker-f stale', 'worker-g live']);
    await page.screenshot({ path: join(SHOTS, 'workers.png'), fullPage: true });
    await page.close();
    const json = (await (await fetch(`${readOnly.url}/api/workers`)).json()) as {
      queues: { queue: string; waiting: number }[];
    };
    expect(json.queues.find((q) => q.queue === 'source_data_transfer')?.waiting).toBe(2);
  });

  it('lists copies by artifact and every deletion: what it deleted, when, on which verified archive', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${readOnly.url}/copies`);
    const done = page.locator(`tr[data-deletion="${planted.deleted.deletionId}"]`);
    expect(await done.getAttribute('data-deleted')).toBe('true');
    expect(await seen(done.locator('td.deletion-state'))).toMatch(
      /^deleted 2 member\(s\), 20 bytes, at \S+ by deleter-q$/,
    );
    expect(await seen(done.locator('td.archive'))).toMatch(
      new RegExp(`VERIFIED at \\S+\\s+key ${planted.deleted.pkg}\\.tar version 1:2:3`),
    );
    expect(await done.locator('td.archive a').getAttribute('href')).toBe(
      `/operations/${planted.ids.doneArchive}`,
    );
    const blocked = page.locator(`tr[data-copy="${planted.deletionFailedCopy}"][data-deletion]`);
    expect(await seen(blocked.locator('td.deletion-state'))).toBe(
      'DELETION_FAILED: deleted 1, kept 1, missing 0, remaining 0 of 2',
    );
    await page.screenshot({ path: join(SHOTS, 'copies.png'), fullPage: true });
    await page.goto(`${readOnly.url}/copies?q=${planted.deleted.pkg}`);
    const states = await page
      .locator(`table.copies tr[data-artifact="${planted.deleted.pkg}"]`)
      .evaluateAll((rows) => rows.map((r) => r.querySelector('.badge')?.textContent));
    expect(states.sort()).toEqual(['DELETED', 'PRESENT']);
    await page.goto(`${readOnly.url}/copies?q=${encodeURIComponent('%_<i>')}`);
    expect(await seen(page.locator('table.copies, main .empty').first())).toBe(
      'no copies matching “%_<i>”',
    );
    await page.close();
    expect((await fetch(`${readOnly.url}/copies?status=GONE`)).status).toBe(400);
  });

  it('answers a browser’s bad request with an HTML page and a script’s with JSON', async () => {
    const page = await browser.context.newPage();
    const missing = '00000000-0000-4000-8000-000000000000';
    const notFound = await page.goto(`${readOnly.url}/operations/${missing}`);
    expect(notFound?.status()).toBe(404);
    expect(await seen(page.locator('#error-message'))).toBe(`no operation with id ${missing}`);
    expect(await page.locator('#back').getAttribute('href')).toBe('/');
    expect(await page.locator('header nav a').count()).toBe(5);
    await page.screenshot({ path: join(SHOTS, 'error-404.png'), fullPage: true });
    const badId = await page.goto(`${readOnly.url}/operations/not-a-uuid`);
    expect(badId?.status()).toBe(400);
    expect(await seen(page.locator('#error-message'))).toBe(
      'operation id "not-a-uuid" is not a uuid',
    );
    const nowhere = await page.goto(`${readOnly.url}/nowhere`);
    expect(nowhere?.status()).toBe(404);
    // The JSON API answers JSON whatever the browser asks for, and so does a page to a script.
    const html = { accept: 'text/html' };
    const api = await fetch(`${readOnly.url}/api/operations/not-a-uuid`, { headers: html });
    expect([api.status, api.headers.get('content-type')]).toEqual([
      400,
      'application/json; charset=utf-8',
    ]);
    const script = await fetch(`${readOnly.url}/operations/${missing}`);
    expect(await script.json()).toMatchObject({ code: 'NOT_FOUND' });
    // A failure the dashboard did not expect: a page that says so, and the error in the log.
    const failing = memoryLogger();
    const broken = await startDashboard({
      database: {
        execute: async () => {
          throw new Error('connection reset by peer');
        },
      } as unknown as Database,
      timing: PLANT_TIMING,
      heartbeats: null,
      command: null,
      port: 0,
      logger: failing,
      pollMs: 60_000,
    });
    try {
      const failed = await page.goto(broken.url);
      expect(failed?.status()).toBe(500);
      expect(await seen(page.locator('#error-message'))).toBe(
        'the dashboard failed on this request; see its log',
      );
      const line = failing.lines.find((l) => l.message === 'dashboard request failed');
      expect(line?.level).toBe('ERROR');
      expect(line?.fields.err).toBeInstanceOf(Error);
      expect(String((line?.fields.err as Error | undefined)?.message)).toBe(
        'connection reset by peer',
      );
      await page.screenshot({ path: join(SHOTS, 'error-500.png'), fullPage: true });
    } finally {
      await page.close();
      await broken.close();
    }
  });

  it('the inspector page says why and what to do when the inspector cannot load', async () => {
    const relay = await startInspectorRelay({ port: 0, ui: 'http://127.0.0.1:9/inspect' });
    const page = await browser.context.newPage();
    try {
      await page.goto(relay.page);
      await page.locator('#unavailable').waitFor({ state: 'visible' });
      expect(await seen(page.locator('#why'))).toBe(
        'This browser cannot reach http://127.0.0.1:9/inspect.',
      );
      expect(await seen(page.locator('#unavailable'))).toMatch(
        /What to do: connect this browser to the internet, .* then reload this page/,
      );
      expect(await page.locator('#inspector').isHidden()).toBe(true);
      expect(await (await fetch(relay.page)).text()).toMatch(/<noscript>.*needs JavaScript/);
      await page.screenshot({ path: join(SHOTS, 'inspector-offline.png'), fullPage: true });
    } finally {
      await page.close();
      await relay.stop();
    }
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
