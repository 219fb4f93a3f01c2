import { OPERATION_KINDS } from '../machines/OperationKind.ts';
import { OPERATION_STATUSES, operationMachine } from '../machines/operationMachine.ts';
import type { AttentionList } from '../persistence/loadAttention.ts';
import type { StatusCounts } from '../persistence/StatusCounts.ts';
import { attentionView } from './attentionView.ts';
import { html, type SafeHtml } from './html.ts';
import { lifecycleSvg } from './lifecycleSvg.ts';

/** What the overview shows. */
export interface OverviewData {
  readonly counts: StatusCounts;
  readonly attention: AttentionList;
}

/**
 * The overview: the lifecycle drawn from the machine definition with the count on each state,
 * counts per kind × status (each a link to that page of operations), and the attention list.
 *
 * @example
 * ```ts
 * const content = overviewPage({ counts, attention });
 * ```
 */
export function overviewPage(data: OverviewData): SafeHtml {
  const totals = Object.fromEntries(
    OPERATION_STATUSES.map((s) => [s, OPERATION_KINDS.reduce((n, k) => n + data.counts[k][s], 0)]),
  );
  const all = Object.values(totals).reduce((a, b) => a + b, 0);
  const link = (kind: string | null, status: string) =>
    `/operations?status=${status}${kind === null ? '' : `&kind=${kind}`}`;
  const rows = OPERATION_KINDS.map(
    (k) =>
      html`<tr data-kind="${k}"><td>${k}</td>${OPERATION_STATUSES.map(
        (s) =>
          html`<td class="n" data-status="${s}">${
            data.counts[k][s] === 0
              ? html`<span class="muted">0</span>`
              : html`<a href="${link(k, s)}">${data.counts[k][s].toLocaleString('en-US')}</a>`
          }</td>`,
      )}</tr>`,
  );
  return html`<h1>Operations <span class="muted">(${all.toLocaleString('en-US')})</span></h1>
    <p class="overview-links"><a href="/operations" id="all-operations">Search all operations →</a> · <a href="/operations?status=FAILED">the failed ones</a> · <a href="/workers">workers and queues</a> · <a href="/copies">copies and deletions</a></p>
    ${attentionView(data.attention)}
    <section class="card"><h2>Lifecycle</h2>${lifecycleSvg(operationMachine, totals, (s) => link(null, s))}</section>
    <section class="card"><h2>Per kind and status</h2>
    <table class="counts"><thead><tr><th>kind</th>${OPERATION_STATUSES.map((s) => html`<th class="n">${s}</th>`)}</tr></thead>
    <tbody>${rows}<tr class="total" data-kind="all"><td><b>all</b></td>${OPERATION_STATUSES.map(
      (s) =>
        html`<td class="n" data-status="${s}"><b>${(totals[s] ?? 0).toLocaleString('en-US')}</b></td>`,
    )}</tr></tbody></table></section>
    <p class="muted">As of <span data-at="${data.attention.at}">${data.attention.at}</span>.</p>`;
}
