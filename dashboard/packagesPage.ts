import { PACKAGE_STATES, PACKAGE_TYPES, type PackageState } from '../machines/packageState.ts';
import type { PackageStateCounts } from '../persistence/reads/countPackageStates.ts';
import type { PackageInState } from '../persistence/reads/listPackagesInState.ts';
import { html, type SafeHtml } from './html.ts';

/** What the packages page shows. */
export interface PackagesPageData {
  readonly counts: PackageStateCounts;
  readonly state: PackageState | undefined;
  readonly rows: readonly PackageInState[];
  readonly next: string | null;
}

/**
 * The packages: how many of each type are in each derived state (each a link to the packages in
 * it), and one page of packages (those in the state asked for, else all), each a link to its page.
 *
 * @example
 * ```ts
 * const content = packagesPage({ counts, state: 'FAILED', rows, next: null });
 * ```
 */
export function packagesPage(data: PackagesPageData): SafeHtml {
  const link = (s: PackageState) => `/packages?state=${s}`;
  const counts = PACKAGE_TYPES.map(
    (t) =>
      html`<tr data-type="${t}"><td>${t}</td>${PACKAGE_STATES.map(
        (s) =>
          html`<td class="n" data-state="${s}">${
            data.counts[t][s] === 0
              ? html`<span class="muted">0</span>`
              : html`<a href="${link(s)}">${data.counts[t][s].toLocaleString('en-US')}</a>`
          }</td>`,
      )}</tr>`,
  );
  const rows = data.rows.map(
    (r) =>
      html`<tr data-package="${r.id}"><td><a href="/packages/${r.id}">${r.name}</a></td><td>${r.type}</td><td><span class="badge ${r.state}">${r.state}</span></td><td><code>${r.id}</code></td></tr>`,
  );
  const next =
    data.next === null
      ? ''
      : html`<p><a id="next-page" href="/packages?${data.state === undefined ? '' : `state=${data.state}&`}after=${encodeURIComponent(data.next)}">next page →</a></p>`;
  return html`<h1>Packages${data.state === undefined ? '' : html` <span class="badge ${data.state}">${data.state}</span>`}</h1>
    <section class="card"><h2>Per derived state</h2>
    <table class="counts" id="package-counts"><thead><tr><th>package</th>${PACKAGE_STATES.map((s) => html`<th class="n">${s}</th>`)}</tr></thead><tbody>${counts}</tbody></table>
    <p class="muted">A package's state is derived from its operations and copies, never stored. <a href="/packages">All packages</a></p></section>
    <section class="card"><h2>${data.state === undefined ? 'All packages' : `Packages ${data.state}`}</h2>${
      rows.length === 0
        ? html`<p class="empty">none</p>`
        : html`<table class="packages"><thead><tr><th>name</th><th>type</th><th>state</th><th>id</th></tr></thead><tbody>${rows}</tbody></table>`
    }${next}</section>`;
}
