import { html, type SafeHtml } from './html.ts';

/** Why a request failed, for a person: the HTTP status, the error's code and its message. */
export interface ErrorPageData {
  readonly status: number;
  readonly code: string;
  readonly message: string;
  /** The path asked for. */
  readonly path: string;
}

const TITLES: Readonly<Record<number, string>> = {
  400: 'That request cannot be answered',
  403: 'Not allowed from this dashboard',
  404: 'Nothing here',
  405: 'Not a method this dashboard answers',
  409: 'Refused',
  500: 'The dashboard failed on this request',
};

/**
 * The content of an error page for a browser, shown in the layout: what went wrong, in the
 * error's own words (escaped), and the way back. Scripts and the JSON API get the same error as
 * JSON instead.
 *
 * @example
 * ```ts
 * errorPage({ status: 404, code: 'NOT_FOUND', message: 'no operation 0190…', path: '/operations/0190…' });
 * ```
 */
export function errorPage(data: ErrorPageData): SafeHtml {
  return html`<section class="card error-page" data-status="${data.status}" data-code="${data.code}">
  <h1>${TITLES[data.status] ?? 'Error'} <span class="muted">(${data.status})</span></h1>
  <p id="error-message">${data.message}</p>
  <p class="muted">${data.code} · <code>${data.path}</code></p>
  <p><a href="/" id="back">← back to the overview</a> · <a href="/operations">search all operations</a></p></section>`;
}
