import { html, raw, type SafeHtml } from './html.ts';

const CSS = `
:root { --bg:#f6f7f9; --fg:#1d2330; --muted:#5d6678; --line:#d9dde5; --card:#fff;
  --pending:#6b7bd6; --scheduled:#3d9bd1; --in_progress:#e0a030; --completed:#3b9b5a; --failed:#d14b4b; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; align-items:center; gap:16px; padding:10px 20px; background:#1d2330; color:#fff; }
header a { color:#fff; text-decoration:none; font-weight:600; }
header .live { margin-left:auto; font-size:12px; color:#b9c0cf; }
header .live.on::before { content:'●'; color:#4ccf7a; margin-right:6px; }
header nav { display:flex; gap:4px; } header nav a { font-weight:500; color:#c9d0de; padding:3px 9px; border-radius:5px; }
header nav a:hover { color:#fff; } header nav a[aria-current="page"] { color:#fff; background:#34405a; }
header .mode { color:#8f99ad; font-size:12px; }
main { padding:16px 20px 40px; max-width:1280px; }
h1 { font-size:20px; margin:4px 0 12px; } h2 { font-size:16px; margin:22px 0 8px; }
section.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:12px 16px; margin-bottom:14px; }
table { border-collapse:collapse; width:100%; } th, td { text-align:left; padding:5px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-weight:600; color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.03em; }
td.n, th.n { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
a { color:#2357c6; } code, .id { font-family:ui-monospace, monospace; font-size:12.5px; }
.badge { display:inline-block; padding:1px 7px; border-radius:10px; font-size:12px; font-weight:600; color:#fff; background:var(--muted); }
.badge.PENDING { background:var(--pending); } .badge.SCHEDULED { background:var(--scheduled); }
.badge.IN_PROGRESS { background:var(--in_progress); } .badge.COMPLETED { background:var(--completed); }
.badge.FAILED { background:var(--failed); } .badge.OPEN { background:var(--failed); } .badge.HALF_OPEN { background:var(--in_progress); }
.muted { color:var(--muted); } .why { max-width:640px; }
.attention h3 { font-size:14px; margin:14px 0 6px; } .attention .count { color:var(--muted); font-weight:400; }
.empty { color:var(--muted); font-style:italic; }
svg.lifecycle { max-width:100%; height:auto; } .state-box { fill:#eef1f8; stroke:#6b7bd6; stroke-width:1.5; }
.state-box.final { fill:#eaf6ee; stroke:var(--completed); } .state-inner { fill:none; stroke:var(--completed); }
.state-name { font-weight:700; font-size:13px; } .state-count { font-size:15px; fill:#2357c6; }
.edge { stroke:#8a93a6; stroke-width:1.3; fill:none; } .edge.back { stroke-dasharray:4 3; }
.edge-label { font-size:10.5px; fill:var(--muted); } marker path { fill:#8a93a6; }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:3px 14px; margin:0; } dl.facts dt { color:var(--muted); }
tr.reset td { background:#fff6e6; } tr.attempt-start td { border-top:2px solid var(--line); }
form.action { display:inline-flex; gap:6px; margin-right:10px; } form.action input { width:220px; }
button { cursor:pointer; } .result { margin-top:8px; padding:6px 10px; border-radius:6px; }
.result.ok { background:#eaf6ee; } .result.refused { background:#fdecec; } .result.mixed { background:#fff6e6; }
.bulk-results tr[data-outcome="refused"] td { color:var(--failed); } .bulk-summary { font-weight:600; }
.lineage li { margin:3px 0; } ul.lineage ul.lineage { margin:2px 0 6px; padding-left:22px; border-left:1px dotted var(--line); }
pre.long { margin:0; max-height:14em; overflow:auto; white-space:pre-wrap; overflow-wrap:anywhere; word-break:break-word;
  font:12px/1.4 ui-monospace, monospace; background:#f4f5f8; padding:4px 6px; border-radius:4px; }
table.steps, table.failures { table-layout:fixed; } table.steps th:nth-child(5), td.result-cell { width:58%; }
table.steps th:nth-child(2) { width:80px; } table.failures td:first-child { width:60px; }
td.wrap { overflow-wrap:anywhere; min-width:14em; } dd, .why, #last-error, .result { overflow-wrap:anywhere; }
section.card { min-width:0; } .badge { white-space:nowrap; } th { white-space:nowrap; }
form.search { display:flex; flex-wrap:wrap; gap:6px; align-items:center; margin-bottom:6px; } form.search input { flex:1 1 320px; }
form.bulk { margin:6px 10px 6px 0; } .bulk-results { margin-top:6px; } .bulk-results td { padding:2px 8px; }
tr.attention-row td { background:#fdecec; } tr.idle td { color:var(--muted); } tr.stale td { color:var(--muted); }
tr.group-start td { border-top:2px solid var(--line); } table.operations td:nth-child(4) { white-space:nowrap; }
.warn { color:var(--failed); } section.alert { border-color:var(--failed); background:#fff8f8; }
.error-page h1 { margin-top:4px; } #error-message { font-size:15px; }
.badge.PRESENT { background:var(--completed); } .badge.DELETED { background:#7a8294; }
.badge.DELETION_SCHEDULED { background:var(--scheduled); } .badge.DELETION_IN_PROGRESS { background:var(--in_progress); }
.badge.DELETION_FAILED { background:var(--failed); } .badge.UNSERVED { background:var(--failed); }
`;

/** The client: live refresh of `<main>` on change events, ticking ages, operator actions. */
const SCRIPT = `
(() => {
  let refreshing = false, again = false;
  const main = () => document.querySelector('main');
  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      const url = new URL(location.href); url.searchParams.set('fragment', '1');
      const r = await fetch(url, { headers: { accept: 'text/html' } });
      if (r.ok) {
        const html = await r.text();
        // What the operator is typing survives the refresh, and so does the focus: read both at
        // the last moment, with no await between reading and swapping.
        const keep = document.querySelector('.result');
        const fields = () => [...main().querySelectorAll('form input[name], form select[name]')];
        const keyOf = (i) => { const f = i.closest('form').dataset;
          return (f.action || f.bulk || f.form || '') + ':' + i.name; };
        const typed = new Map(fields().map((i) => [keyOf(i), i.value]));
        const focused = document.activeElement;
        const active = focused && focused.name && focused.closest && focused.closest('main form') ? keyOf(focused) : null;
        main().innerHTML = html;
        for (const i of fields()) {
          const key = keyOf(i);
          if (typed.has(key)) i.value = typed.get(key);
          if (key === active) i.focus();
        }
        if (keep) { const slot = document.querySelector('#action-result'); if (slot) slot.replaceWith(keep); }
        document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
        tick();
      }
    } finally { refreshing = false; if (again) { again = false; refresh(); } }
  }
  function age(ms) { const s = Math.max(0, ms) / 1000;
    return s < 120 ? Math.round(s) + ' s' : s < 7200 ? Math.round(s / 60) + ' min' : (s / 3600).toFixed(1) + ' h'; }
  function tick() { for (const el of document.querySelectorAll('[data-since]')) {
    el.textContent = age(Date.now() - Date.parse(el.dataset.since)) + (el.dataset.suffix || ''); } }
  const live = document.querySelector('.live');
  const events = new EventSource('/events');
  events.addEventListener('open', () => live && live.classList.add('on'));
  events.addEventListener('error', () => live && live.classList.remove('on'));
  events.addEventListener('change', refresh);
  setInterval(tick, 1000); tick();
  // Time alone puts operations past their timers: look again now and then, change or not.
  setInterval(refresh, 15000);
  function bulkBox(r, body) {
    const box = document.createElement('div');
    box.className = 'result ' + (!r.ok || body.retried === 0 ? 'refused' : body.refused === 0 ? 'ok' : 'mixed');
    box.setAttribute('role', 'status');
    const line = document.createElement('div');
    line.className = 'bulk-summary';
    line.textContent = r.ok ? body.message : 'Refused: ' + body.message + (body.code ? ' [' + body.code + ']' : '');
    box.append(line);
    if (r.ok) {
      const table = document.createElement('table');
      table.className = 'bulk-results';
      for (const x of body.results) {
        const tr = table.insertRow();
        tr.dataset.id = x.id; tr.dataset.outcome = x.outcome;
        const a = document.createElement('a'); a.href = '/operations/' + x.id; a.className = 'id'; a.textContent = x.id.slice(-8);
        tr.insertCell().append(a);
        tr.insertCell().textContent = x.outcome;
        tr.insertCell().textContent = x.message + (x.code ? ' [' + x.code + ']' : '');
      }
      box.append(table);
    }
    return box;
  }
  document.addEventListener('submit', async (e) => {
    const bulk = e.target.closest('form[data-bulk]');
    if (bulk) {
      e.preventDefault();
      const reason = bulk.querySelector('input[name=reason]');
      const r = await fetch(bulk.action, { method: 'POST',
        headers: { 'content-type': 'application/json', 'x-opstate-action': '1' },
        body: JSON.stringify({ ids: bulk.dataset.ids.split(' ').filter(Boolean),
          reason: reason && reason.value ? reason.value : undefined }) });
      const body = await r.json().catch(() => ({ message: 'no answer' }));
      if (r.ok && reason) reason.value = '';
      const box = bulkBox(r, body);
      const slot = document.querySelector('#action-result, .result');
      if (slot) slot.replaceWith(box); else bulk.parentElement.append(box);
      refresh();
      return;
    }
    const form = e.target.closest('form[data-action]');
    if (!form) return;
    e.preventDefault();
    const reason = form.querySelector('input[name=reason]');
    const r = await fetch(form.action, { method: 'POST',
      headers: { 'content-type': 'application/json', 'x-opstate-action': '1' },
      body: JSON.stringify({ reason: reason && reason.value ? reason.value : undefined }) });
    const body = await r.json().catch(() => ({ message: 'no answer' }));
    if (r.ok && reason) reason.value = '';
    const box = document.createElement('div');
    box.className = 'result ' + (r.ok ? 'ok' : 'refused');
    box.setAttribute('role', 'status');
    box.textContent = r.ok ? body.message : 'Refused: ' + body.message + (body.code ? ' [' + body.code + ']' : '');
    const slot = document.querySelector('#action-result, .result');
    if (slot) slot.replaceWith(box); else form.parentElement.append(box);
    refresh();
  });
})();
`;

/** Every inline script the pages carry, for the Content-Security-Policy's hashes. */
export const PAGE_SCRIPTS: readonly string[] = Object.freeze([SCRIPT]);

/** The pages the header links to. */
const NAV: readonly { readonly path: string; readonly label: string }[] = [
  { path: '/', label: 'Overview' },
  { path: '/operations', label: 'Operations' },
  { path: '/packages', label: 'Packages' },
  { path: '/workers', label: 'Workers & queues' },
  { path: '/copies', label: 'Copies & deletions' },
];

/**
 * A whole page: header, `<main>` with the content, styles and the live client. A request with
 * `fragment=1` gets only the content (what the client swaps in on a change).
 *
 * @example
 * ```ts
 * page('Overview', html`<h1>Overview</h1>`, { allowActions: false, path: '/' });
 * ```
 */
export function page(
  title: string,
  content: SafeHtml,
  options: { allowActions: boolean; path?: string },
): string {
  const current = options.path ?? '';
  const nav = NAV.map(
    (n) =>
      html`<a href="${n.path}"${raw(n.path === current || (n.path !== '/' && current.startsWith(`${n.path}/`)) ? ' aria-current="page"' : '')}>${n.label}</a>`,
  );
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · opstate</title><style>${raw(CSS)}</style></head>
<body data-refreshes="0"><header><a href="/">opstate</a><nav>${nav}</nav><span class="mode">${options.allowActions ? 'operator actions enabled' : 'read-only'}</span><span class="live">live</span></header>
<main>${content}</main>
<script>${raw(SCRIPT)}</script></body></html>`.value;
}
