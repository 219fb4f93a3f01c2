import type { AttentionSection } from '../persistence/loadAttention.ts';
import type { OperationListRow } from '../persistence/sql/selectOperationList.ts';
import { attentionSection } from './attentionView.ts';
import { html, type SafeHtml } from './html.ts';

/** One page of the operations of a kind and status, with the link to the next page. */
export function operationListPage(
  filter: { kind: string; status: string },
  rows: readonly OperationListRow[],
  next: string | null,
): SafeHtml {
  return html`<h1>${filter.kind} <span class="badge ${filter.status}">${filter.status}</span></h1>
  <section class="card">${
    rows.length === 0
      ? html`<p class="empty">none</p>`
      : html`<table class="operations"><thead><tr><th>operation</th><th>created</th><th class="n">attempt</th><th>worker</th><th>last error</th></tr></thead><tbody>${rows.map(
          (
            r,
          ) => html`<tr data-id="${r.id}"><td><a class="id" href="/operations/${r.id}">${r.id}</a></td><td><code>${r.createdAt.toISOString()}</code></td>
            <td class="n">${r.attempt} (${r.retryCount}/${r.maxRetries})</td><td>${r.workerId ?? '-'}</td><td>${r.lastError?.message ?? ''}</td></tr>`,
        )}</tbody></table>`
  }${
    next === null
      ? ''
      : html`<p><a href="/operations?kind=${filter.kind}&status=${filter.status}&after=${encodeURIComponent(next)}">next ${rows.length} →</a></p>`
  }</section>`;
}

/** One page of one attention category. */
export function attentionCategoryPage(section: AttentionSection): SafeHtml {
  return html`<h1>Attention</h1><section class="card attention">${attentionSection(section)}</section>`;
}
