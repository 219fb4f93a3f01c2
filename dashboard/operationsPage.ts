import { OPERATION_KINDS, type OperationKind } from '../machines/OperationKind.ts';
import { OPERATION_STATUSES, type OperationStatus } from '../machines/operationMachine.ts';
import { shortId } from '../machines/shortId.ts';
import type { OperationSearchRow } from '../persistence/reads/searchOperations.ts';
import { BULK_RETRY_MAX } from './bulkRetry.ts';
import { html, type SafeHtml } from './html.ts';

/** What the all-operations page shows. */
export interface OperationsPageData {
  readonly filter: {
    readonly kind?: OperationKind | undefined;
    readonly status?: OperationStatus | undefined;
    readonly text?: string | undefined;
  };
  readonly rows: readonly OperationSearchRow[];
  readonly next: string | null;
  readonly allowActions: boolean;
}

function link(filter: OperationsPageData['filter'], after?: string): string {
  const q = new URLSearchParams();
  if (filter.text !== undefined) q.set('q', filter.text);
  if (filter.kind !== undefined) q.set('kind', filter.kind);
  if (filter.status !== undefined) q.set('status', filter.status);
  if (after !== undefined) q.set('after', after);
  const s = q.toString();
  return s === '' ? '/operations' : `/operations?${s}`;
}

function describe(filter: OperationsPageData['filter']): SafeHtml {
  const parts: SafeHtml[] = [];
  if (filter.kind !== undefined) parts.push(html`kind <b>${filter.kind}</b>`);
  if (filter.status !== undefined)
    parts.push(html`status <span class="badge ${filter.status}">${filter.status}</span>`);
  if (filter.text !== undefined)
    parts.push(html`matching “<span id="searched">${filter.text}</span>”`);
  return parts.length === 0
    ? html`every operation`
    : html`${parts.map((p, n) => html`${n === 0 ? '' : ', '}${p}`)}`;
}

/** Retry every FAILED operation shown, when actions are allowed (each through the machine). */
function bulkRetry(data: OperationsPageData): SafeHtml {
  if (data.filter.status !== 'FAILED' || data.rows.length === 0) return html``;
  if (!data.allowActions) {
    return html`<p class="muted">Read-only: start the dashboard with --allow-actions to retry these from here (or use opstate retry).</p>`;
  }
  const ids = data.rows.slice(0, BULK_RETRY_MAX).map((r) => r.id);
  return html`<form class="action bulk" data-bulk="retry" data-ids="${ids.join(' ')}" method="post" action="/api/operations/retry">
    <input name="reason" placeholder="reason (optional)" aria-label="reason for retrying all shown">
    <button type="submit">Retry all ${ids.length} shown</button></form>
    <span class="muted">each goes through the machine: one that moved on is refused, with the reason</span>`;
}

/**
 * Every operation, newest first, searched by kind, status and a free text (an id whole or its
 * start or its short form, a package's id or a part of its name, a part of the last error), a
 * page at a time. Filtered to FAILED, and with actions allowed, it offers to retry every
 * operation shown; each retry goes through the machine and reports its own outcome.
 *
 * @example
 * ```ts
 * const content = operationsPage({ filter: { status: 'FAILED' }, rows, next, allowActions: true });
 * ```
 */
export function operationsPage(data: OperationsPageData): SafeHtml {
  const f = data.filter;
  const rows = data.rows.map(
    (r) => html`<tr data-id="${r.id}" data-status="${r.status}">
      <td><a class="id" href="/operations/${r.id}" title="${r.id}">${shortId(r.id)}</a></td><td>${r.kind}</td>
      <td><span class="badge ${r.status}">${r.status}</span></td><td><code>${r.createdAt.toISOString()}</code></td>
      <td class="n">${r.attempt} (${r.retryCount}/${r.maxRetries})</td><td>${r.workerId ?? '-'}</td>
      <td>${r.package === null ? '-' : html`<span title="${r.package.id}">${r.package.name ?? shortId(r.package.id)}</span>`}</td>
      <td class="wrap error">${r.lastError?.message ?? ''}</td></tr>`,
  );
  return html`<h1>All operations</h1>
  <section class="card"><form class="search" method="get" action="/operations" data-form="search">
    <input name="q" value="${f.text ?? ''}" size="48" aria-label="search operations" placeholder="id or its start, short id, package id or name, error text">
    <select name="kind" aria-label="kind"><option value="">any kind</option>${OPERATION_KINDS.map((k) => html`<option value="${k}"${k === f.kind ? ' selected' : ''}>${k}</option>`)}</select>
    <select name="status" aria-label="status"><option value="">any status</option>${OPERATION_STATUSES.map((s) => html`<option value="${s}"${s === f.status ? ' selected' : ''}>${s}</option>`)}</select>
    <button type="submit">Search</button> <a href="/operations">clear</a>
  </form>
  <p class="muted" id="search-summary">${data.rows.length}${data.next === null ? '' : '+'} shown, newest first: ${describe(f)}.</p>
  ${bulkRetry(data)}
  <div id="action-result"></div>
  ${
    data.rows.length === 0
      ? html`<p class="empty">no operation matches</p>`
      : html`<table class="operations"><thead><tr><th>operation</th><th>kind</th><th>status</th><th>created</th><th class="n">attempt</th><th>worker</th><th>package</th><th>last error</th></tr></thead><tbody>${rows}</tbody></table>`
  }${data.next === null ? '' : html`<p><a id="next-page" href="${link(f, data.next)}">next ${data.rows.length} →</a></p>`}</section>`;
}
