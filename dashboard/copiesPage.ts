import {
  PHYSICAL_COPY_STATUSES,
  type PhysicalCopyStatus,
} from '../machines/physicalCopyMachine.ts';
import { shortId } from '../machines/shortId.ts';
import type { CopyListRow } from '../persistence/reads/selectCopies.ts';
import type { DeletionListRow } from '../persistence/reads/selectDeletions.ts';
import { html, type SafeHtml } from './html.ts';

/** What the copies-and-deletions page shows. */
export interface CopiesPageData {
  readonly filter: {
    readonly status?: PhysicalCopyStatus | undefined;
    readonly text?: string | undefined;
  };
  /** Copies per location type × status. */
  readonly counts: Readonly<Record<string, Readonly<Record<PhysicalCopyStatus, number>>>>;
  readonly copies: readonly CopyListRow[];
  readonly copiesNext: string | null;
  readonly deletions: readonly DeletionListRow[];
  readonly deletionsNext: string | null;
}

const iso = (d: Date | null) => (d === null ? '-' : d.toISOString());

function query(params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, v);
  const s = q.toString();
  return s === '' ? '/copies' : `/copies?${s}`;
}

function copyRows(copies: readonly CopyListRow[]): SafeHtml[] {
  let artifact = '';
  return copies.map((c) => {
    const first = c.artifactId !== artifact;
    artifact = c.artifactId;
    return html`<tr data-copy="${c.id}" data-artifact="${c.artifactId}" class="${first ? 'group-start' : ''}">
      <td title="${c.artifactId}">${first ? html`<span class="muted">${c.artifactType}</span><br><b>${c.artifactName ?? shortId(c.artifactId)}</b>` : ''}</td>
      <td>${c.location} <span class="muted">(${c.locationType})</span></td>
      <td><span class="badge ${c.status}">${c.status}</span></td>
      <td class="n" title="${iso(c.updatedAt)}"><span data-since="${iso(c.updatedAt)}"></span></td>
      <td class="wrap"><code>${c.path ?? '-'}</code></td><td class="n">${c.size ?? '-'}</td>
      <td class="wrap">${c.deletionFailureCount > 0 ? `${c.deletionFailureCount} deletion failure(s)` : ''}${c.lastError === null ? '' : html`<br>${c.lastError}`}</td></tr>`;
  });
}

function deletionState(d: DeletionListRow): SafeHtml {
  if (d.receipt !== null) {
    return html`<b>deleted</b> ${d.receipt.membersDeleted} member(s)${d.receipt.membersMissing > 0 ? `, ${d.receipt.membersMissing} already missing` : ''}, ${d.receipt.bytes.toLocaleString('en-US')} bytes, at <code>${iso(d.receipt.at)}</code> by ${d.receipt.by}`;
  }
  const remaining = d.members - d.deleted - d.kept - d.missing;
  return html`${d.copyStatus}: deleted ${d.deleted}, kept ${d.kept}, missing ${d.missing}, remaining ${remaining} of ${d.members}${d.copyStatus === 'DELETION_IN_PROGRESS' ? html`; ${d.leaseExpired ? html`<b class="warn">the lease of ${d.holder} ran out</b> at` : html`held by ${d.holder} until`} <code>${iso(d.leaseUntil)}</code>` : ''}`;
}

function deletionRow(d: DeletionListRow): SafeHtml {
  const a = d.archive;
  const key = d.receipt?.archiveKey ?? a.key;
  const version = d.receipt?.archiveObjectVersion ?? a.objectVersion;
  return html`<tr data-deletion="${d.deletionId}" data-copy="${d.copyId}" data-deleted="${d.receipt !== null}">
    <td>${d.artifactType} <b>${d.artifactName ?? '-'}</b><br><span class="muted">at ${d.location}</span> <span class="badge ${d.copyStatus}">${d.copyStatus}</span></td>
    <td class="n">${d.plan}</td><td><code>${iso(d.startedAt)}</code></td>
    <td class="wrap deletion-state">${deletionState(d)}</td>
    <td class="wrap archive">archive <a class="id" href="/operations/${a.operationId}" title="${a.operationId}">${shortId(a.operationId)}</a>${a.location === null ? '' : html` at ${a.location}`}:
      ${a.verification === null ? html`<b class="warn">no verification recorded</b>` : html`<b>${a.verification}</b> at <code>${iso(a.verifiedAt)}</code>`}<br>
      <span class="muted">key</span> <code>${key ?? '-'}</code> <span class="muted">version</span> <code>${version ?? '-'}</code><br>
      <span class="muted">object sha256</span> <code>${a.objectSha256}</code></td></tr>`;
}

/**
 * Copies and deletions: copies per location type and status; the physical copies, grouped by
 * artifact (each copy's location, state, path and deletion failures), filtered by status or by
 * a part of an artifact's name or id; and the deletion plans, newest first: what each deleted or
 * kept, when, and the verified archive it relied on (its operation, verification, key, version
 * and digest, from the receipt once written).
 *
 * @example
 * ```ts
 * const content = copiesPage({ filter: {}, ...(await data.copies({ copiesAfter: null, deletionsAfter: null })) });
 * ```
 */
export function copiesPage(data: CopiesPageData): SafeHtml {
  const f = data.filter;
  const types = Object.keys(data.counts).sort();
  const counts =
    types.length === 0
      ? html`<p class="empty">no copies</p>`
      : html`<table class="copy-counts"><thead><tr><th>location type</th>${PHYSICAL_COPY_STATUSES.map((s) => html`<th class="n">${s}</th>`)}</tr></thead><tbody>${types.map(
          (t) =>
            html`<tr data-location-type="${t}"><td>${t}</td>${PHYSICAL_COPY_STATUSES.map((s) => {
              const n = data.counts[t]?.[s] ?? 0;
              return html`<td class="n" data-status="${s}">${n === 0 ? html`<span class="muted">0</span>` : html`<a href="${query({ status: s })}">${n.toLocaleString('en-US')}</a>`}</td>`;
            })}</tr>`,
        )}</tbody></table>`;
  return html`<h1>Copies and deletions</h1>
  <section class="card"><h2>Copies per location type and status</h2>${counts}</section>
  <section class="card"><h2>Physical copies <span class="muted">(by artifact, newest first)</span></h2>
  <form class="search" method="get" action="/copies" data-form="copies">
    <input name="q" value="${f.text ?? ''}" placeholder="artifact name, or the start of an artifact or copy id" aria-label="search copies" size="40">
    <select name="status" aria-label="copy status"><option value="">any status</option>${PHYSICAL_COPY_STATUSES.map((s) => html`<option value="${s}"${s === f.status ? ' selected' : ''}>${s}</option>`)}</select>
    <button type="submit">Search</button> <a href="/copies">clear</a></form>
  ${
    data.copies.length === 0
      ? html`<p class="empty">no copies${f.text === undefined ? '' : html` matching “${f.text}”`}</p>`
      : html`<table class="copies"><thead><tr><th>artifact</th><th>location</th><th>state</th><th class="n">for</th><th>path</th><th class="n">bytes</th><th>deletion</th></tr></thead><tbody>${copyRows(data.copies)}</tbody></table>`
  }${data.copiesNext === null ? '' : html`<p><a href="${query({ q: f.text, status: f.status, copiesAfter: data.copiesNext })}">next ${data.copies.length} →</a></p>`}</section>
  <section class="card"><h2>Deletions <span class="muted">(newest first)</span></h2>${
    data.deletions.length === 0
      ? html`<p class="empty">no deletion planned yet</p>`
      : html`<table class="deletions"><thead><tr><th>copy</th><th class="n">plan</th><th>started</th><th>what became of it</th><th>on which archive</th></tr></thead><tbody>${data.deletions.map(deletionRow)}</tbody></table>`
  }${data.deletionsNext === null ? '' : html`<p><a href="${query({ q: f.text, status: f.status, deletionsAfter: data.deletionsNext })}">next ${data.deletions.length} →</a></p>`}</section>`;
}
