import { type PackageClassification, STEP_LABEL } from '../machines/classifyPackageStep.ts';
import { PACKAGE_STEPS } from '../machines/packageState.ts';
import { shortId } from '../machines/shortId.ts';
import type { PackageCopyRow, PackageRecord } from '../persistence/reads/selectPackage.ts';
import { html, type SafeHtml } from './html.ts';

/** What a package page shows. */
export interface PackagePageData {
  readonly record: PackageRecord;
  readonly step: PackageClassification;
}

function copyList(copies: readonly PackageCopyRow[]): SafeHtml {
  if (copies.length === 0) return html`<span class="muted">no copy</span>`;
  return html`${copies.map(
    (c) =>
      html`<span class="copy" data-copy="${c.id}">${c.location} <span class="badge ${c.status}">${c.status}</span></span> `,
  )}`;
}

/** The lineage: its files, the packages they make up, the transfer package, and each one's copies. */
function lineage(data: PackagePageData): SafeHtml {
  const r = data.record;
  const copiesOf = (id: string) => r.copies.filter((c) => c.artifactId === id);
  const packages =
    r.members.length > 0 ? r.members : [{ id: r.facts.id, name: r.name, packaged: false }];
  const filesOf = (id: string) => r.files.filter((f) => f.rawDataPackageId === id);
  const member = (m: { id: string; name: string }) =>
    html`<li data-package="${m.id}"><span class="lineage-copy">raw_data_package ${
      m.id === r.facts.id ? html`<b>${m.name}</b>` : html`<a href="/packages/${m.id}">${m.name}</a>`
    } — ${copyList(copiesOf(m.id))}</span>${
      filesOf(m.id).length === 0
        ? ''
        : html`<ul class="lineage">${filesOf(m.id).map((f) => html`<li data-file="${f.id}">raw_data_file ${f.name}</li>`)}</ul>`
    }</li>`;
  const more =
    r.filesTotal > r.files.length
      ? html`<p class="muted">… and ${r.filesTotal - r.files.length} more files</p>`
      : '';
  const bundle = r.transferPackage;
  if (bundle === null) {
    return html`<ul class="lineage" id="lineage">${packages.map(member)}</ul>${more}
      <p class="muted">In no data transfer package yet.</p>`;
  }
  return html`<ul class="lineage" id="lineage"><li data-package="${bundle.id}"><span class="lineage-copy">data_transfer_package ${
    bundle.id === r.facts.id
      ? html`<b>${bundle.name}</b>`
      : html`<a href="/packages/${bundle.id}">${bundle.name}</a>`
  } — ${copyList(copiesOf(bundle.id))}</span><ul class="lineage">${packages.map(member)}</ul></li></ul>${more}`;
}

/** The family's operations in pipeline order, each a link to its page. */
function operations(data: PackagePageData): SafeHtml {
  const r = data.record;
  const names = new Map<string, string>([
    ...r.members.map((m) => [m.id, m.name] as const),
    [r.facts.id, r.name],
    ...(r.transferPackage === null
      ? []
      : [[r.transferPackage.id, r.transferPackage.name] as const]),
  ]);
  const rank = (k: keyof typeof PACKAGE_STEPS) => PACKAGE_STEPS[k]?.rank ?? 99;
  const ops = [...r.facts.operations].sort((a, b) => rank(a.kind) - rank(b.kind));
  if (ops.length === 0) return html`<p class="empty">none yet</p>`;
  return html`<table class="operations" id="package-operations"><thead><tr><th>step</th><th>operation</th><th>status</th><th>of</th><th>at</th><th class="n">attempt</th><th>last error</th></tr></thead><tbody>${ops.map(
    (o) =>
      html`<tr data-kind="${o.kind}" data-status="${o.status}"${o.id === data.step.operationId ? html` class="attention-row"` : ''}><td>${STEP_LABEL[o.kind]}</td><td><a class="id" href="/operations/${o.id}">${shortId(o.id)}</a></td><td><span class="badge ${o.status}">${o.status}</span></td><td>${names.get(o.subjectId) ?? shortId(o.subjectId)}</td><td>${o.target ?? '-'}</td><td class="n">${o.attempt}</td><td class="wrap">${o.lastError?.message ?? ''}</td></tr>`,
  )}</tbody></table>`;
}

/**
 * One raw data package or data transfer package: its derived state, the step it is in and why it
 * waits there, its whole lineage (transfer package, member packages, their files, every copy and
 * where it is) and the operations of its family in pipeline order. Every value from the database
 * is escaped.
 *
 * @example
 * ```ts
 * const content = packagePage({ record, step: classifyPackageStep(record.facts, now) });
 * ```
 */
export function packagePage(data: PackagePageData): SafeHtml {
  const { record: r, step } = data;
  return html`<h1>${r.facts.type} ${r.name} <span class="id">${r.facts.id}</span> <span class="badge ${step.state}" id="package-state">${step.state}</span></h1>
  <section class="card"><h2>Where it is and why</h2><dl class="facts">
    <dt>state</dt><dd>${step.state} <span class="muted">(derived from its operations and copies, never stored)</span></dd>
    <dt>step</dt><dd id="package-step">${step.kind === null ? '-' : STEP_LABEL[step.kind]}${step.location === null ? '' : ` at ${step.location}`}${
      step.operationId === null
        ? ''
        : html` — <a class="id" href="/operations/${step.operationId}">operation ${shortId(step.operationId)}</a>`
    }</dd>
    <dt>why</dt><dd id="package-why" data-wait="${step.wait}"><b>${step.wait}</b>: ${step.why}</dd>
  </dl></section>
  <section class="card"><h2>Lineage</h2>${lineage(data)}</section>
  <section class="card"><h2>Operations <span class="muted">(${r.facts.operations.length}, in pipeline order)</span></h2>${operations(data)}</section>`;
}
