import type { AttentionItem } from '../machines/attention.ts';
import { acceptedEvents } from '../machines/decide.ts';
import { OperationStatus } from '../machines/operationMachine.ts';
import { OPERATOR_ACTIONS, operatorEvent } from '../machines/operatorEvent.ts';
import { shortId } from '../machines/shortId.ts';
import type { OperationInspection } from '../persistence/inspectOperation.ts';
import type { TransitionEntry } from '../persistence/JournalRepository.ts';
import type { LineageLink } from '../persistence/reads/selectLineage.ts';
import type { ResumeRecord } from '../persistence/resumeRecord.ts';
import { html, type SafeHtml } from './html.ts';
import { type LineageNode, lineageTree } from './lineageTree.ts';

/** What an operation page shows besides the inspection itself. */
export interface OperationPageData {
  readonly view: OperationInspection;
  readonly up: readonly LineageLink[];
  readonly down: readonly LineageLink[];
  /** Null when heartbeats are not visible from the dashboard's process. */
  readonly heartbeat: { readonly at: number; readonly workerId: string } | 'none' | null;
  /** The attention items of this operation now (same rules as the list). */
  readonly attention: readonly AttentionItem[];
  /** A long-term archive's resume record (null for other kinds). */
  readonly resume: ResumeRecord | null;
  readonly allowActions: boolean;
}

const iso = (d: Date | null) => (d === null ? '-' : d.toISOString());

/** Characters of one stored value shown in full; past it the page says how much is left out. */
const LONG_VALUE_MAX = 20_000;

/** A stored value as JSON in a box of its own that wraps and scrolls (never wider than its card). */
function longValue(value: unknown, operationId: string): SafeHtml {
  const text = JSON.stringify(value) ?? '-';
  const cut = text.length > LONG_VALUE_MAX;
  return html`<pre class="long">${cut ? text.slice(0, LONG_VALUE_MAX) : text}</pre>${
    cut
      ? html`<p class="muted">… ${(text.length - LONG_VALUE_MAX).toLocaleString('en-US')} more characters: see <code>opstate inspect ${operationId} --json</code></p>`
      : ''
  }`;
}

/** What an operator can safely do next, from the state and what the attention rules say. */
export function nextSafeAction(
  view: OperationInspection,
  attention: readonly AttentionItem[],
): string {
  const stuck = attention.some((a) => a.category === 'stuck');
  const unserved = attention.find((a) => a.category === 'queue_unserved');
  if (unserved !== undefined && !stuck) {
    return `Start a worker that serves queue ${unserved.subject.id} (see Attention above); the operation itself needs nothing: it waits in its queue and starts when a worker takes it.`;
  }
  switch (view.status) {
    case OperationStatus.COMPLETED:
      return 'Nothing: it completed.';
    case OperationStatus.FAILED:
      return view.lastError?.code === 'CANCELLED'
        ? 'Nothing unless it should run after all: then Retry (a new attempt with a fresh retry budget).'
        : 'Fix the cause named by the last error, then Retry (a new attempt with a fresh retry budget).';
    case OperationStatus.PENDING:
      return stuck
        ? 'Check that a control-plane leader runs and that its circuit breaker is closed; the operation itself needs nothing.'
        : 'Wait: the scheduler dispatches it when it is due.';
    default:
      return stuck
        ? 'Reset it (a new, fenced attempt: the old worker can no longer complete it), after checking why recovery did not.'
        : 'Wait: it is being worked on (or about to be); recovery resets it if its worker dies.';
  }
}

function pathRows(transitions: readonly TransitionEntry[]): SafeHtml[] {
  let attempt = 0;
  return transitions.map((t) => {
    const firstOfAttempt = t.attempt !== attempt;
    attempt = t.attempt;
    const classes = [t.event === 'RESET' ? 'reset' : '', firstOfAttempt ? 'attempt-start' : '']
      .filter(Boolean)
      .join(' ');
    const who = t.event === 'RESET' ? html`<b>${t.by}</b>` : t.by;
    return html`<tr class="${classes}" data-event="${t.event}"><td class="n">${t.attempt}</td><td><code>${t.at.toISOString()}</code></td>
      <td>${t.from ?? '∅'} → <span class="badge ${t.to}">${t.to}</span></td><td>${t.event}</td><td>${who}</td><td>${t.reason ?? ''}</td></tr>`;
  });
}

function lineageItem(node: LineageNode, direction: 'up' | 'down'): SafeHtml {
  const l = node.link;
  const verb = direction === 'up' ? 'produced by' : 'consumed by';
  return html`<li data-depth="${l.depth}" data-copy="${l.copy.id}"><span class="lineage-copy">
      ${l.copy.artifactType} <b>${l.copy.artifactName ?? shortId(l.copy.artifactId)}</b> at ${l.copy.location}
      <span class="badge">${l.copy.status}</span> — ${
        l.operation === null
          ? html`<span class="muted">${direction === 'up' ? 'registered, not produced by an operation' : 'not consumed yet'}</span>`
          : html`${verb} <a class="id" href="/operations/${l.operation.id}">${l.operation.kind} ${shortId(l.operation.id)}</a> <span class="badge ${l.operation.status}">${l.operation.status}</span>`
      }</span>${
        node.children.length === 0
          ? ''
          : html`<ul class="lineage">${node.children.map((c) => lineageItem(c, direction))}</ul>`
      }</li>`;
}

/** The lineage as a tree: each copy, and under it what was reached through its operation. */
function lineageList(links: readonly LineageLink[], direction: 'up' | 'down'): SafeHtml {
  if (links.length === 0) return html`<p class="empty">none</p>`;
  return html`<ul class="lineage" data-direction="${direction}">${lineageTree(links).map((n) => lineageItem(n, direction))}</ul>`;
}

const at = (d: Date | null | undefined) => (d == null ? '-' : d.toISOString());

/** A long-term archive's resume record: where it stands, what it is, what was deleted or kept. */
function resumeSection(r: ResumeRecord): SafeHtml {
  const last = r.lastDurable;
  const d = r.deletion;
  const members = (label: string, list: readonly { path: string; reason?: string | null }[]) =>
    list.map(
      (m) =>
        html`<tr data-outcome="${label}"><td>${label}</td><td><code>${m.path}</code></td><td>${m.reason ?? ''}</td></tr>`,
    );
  return html`<section class="card resume"><h2>Resume record (archive then delete)</h2><dl class="facts">
    <dt>last durable</dt><dd id="last-durable">${last === null ? 'nothing recorded' : `${last.state} at ${at(last.at)} by ${last.by}${last.attempt === null ? '' : ` (attempt ${last.attempt})`}`}</dd>
    <dt>records</dt><dd>${r.records.map((x) => x.state).join(' → ') || '-'}</dd>
    ${r.source === null ? '' : html`<dt>source</dt><dd>copy <code>${r.source.copyId}</code> (${r.source.locationType}) <code>${r.source.path ?? '-'}</code>, ${r.source.members ?? '?'} member(s), <span class="badge">${r.source.status}</span></dd>`}
    ${r.archive === null ? '' : html`<dt>archive</dt><dd>key <code>${r.archive.key ?? '-'}</code>, version <code>${r.archive.objectVersion ?? '-'}</code>, object sha256 <code>${r.archive.objectSha256 ?? '-'}</code>; ${r.archive.encrypted === true ? `encrypted (key id ${r.archive.keyId})` : 'not encrypted'}; verification <b>${r.archive.verification ?? 'none'}</b></dd>`}
    <dt>policy</dt><dd>${r.policy.cleaned ? `cleaned after archive, grace ${r.policy.graceSeconds} s${r.policy.eligibleAt === null ? '' : `, eligible at ${at(r.policy.eligibleAt)}`}` : 'kept after archive'}${r.retainedBy.length === 0 ? '' : `; held by group ${r.retainedBy.join(', ')}`}</dd>
    ${d === null ? '' : html`<dt>deletion</dt><dd id="deletion">${d.status}, plan ${d.plans}, failures ${d.failures}/${d.maxFailures}; deleted ${d.deleted.length}, missing ${d.missing.length}, kept ${d.kept.length}, remaining ${d.remaining.length}${d.current === null ? '' : `; holder ${d.current.holder}, lease until ${at(d.current.leaseUntil)}${d.leaseExpired ? ' (expired)' : ''}`}</dd>`}
    ${r.receipt === null ? '' : html`<dt>receipt</dt><dd>${at(r.receipt.at)} by ${r.receipt.by}: ${r.receipt.membersDeleted} deleted, ${r.receipt.membersMissing} missing, ${r.receipt.bytes} bytes</dd>`}
  </dl>${
    d === null || d.kept.length + d.missing.length + d.remaining.length === 0
      ? ''
      : html`<table class="members"><thead><tr><th>member</th><th>path</th><th>why</th></tr></thead><tbody>${members('kept', d.kept)}${members('missing', d.missing)}${members('remaining', d.remaining)}</tbody></table>`
  }</section>`;
}

function heartbeatLine(data: OperationPageData): SafeHtml {
  if (data.heartbeat === null) {
    return html`<span class="muted">not visible from this process (in-process transport)</span>`;
  }
  if (data.heartbeat === 'none') {
    return html`<span class="muted">no worker holds attempt ${data.view.attempt}</span>`;
  }
  return html`<span class="heartbeat" data-since="${new Date(data.heartbeat.at).toISOString()}" data-suffix=" ago"></span> <span class="muted">(worker ${data.heartbeat.workerId}, holding attempt ${data.view.attempt})</span>`;
}

/**
 * One operation: facts, live heartbeat age, what needs attention and the next safe action, the
 * operator actions (retry, reset, cancel; the machine decides and a refusal says why), its path
 * with attempts and who reset it why, journal steps, failures, and lineage up and down through
 * copies.
 *
 * @example
 * ```ts
 * const content = operationPage({ view, up, down, heartbeat: null, attention: [], allowActions: false });
 * ```
 */
export function operationPage(data: OperationPageData): SafeHtml {
  const v = data.view;
  const accepted = acceptedEvents(v.status);
  // Only the actions whose event the machine takes in this state.
  const offered = OPERATOR_ACTIONS.filter((a) => accepted.includes(operatorEvent(a).type));
  const actions = !data.allowActions
    ? html`<p class="muted">Read-only: start the dashboard with --allow-actions to retry, reset or cancel from here (or use opstate retry|reset|cancel).</p>`
    : offered.length === 0
      ? html`<p class="muted" id="no-actions">No operator action applies in ${v.status}.</p>`
      : html`<div class="actions">${offered.map(
          (
            a,
          ) => html`<form class="action" data-action="${a}" method="post" action="/api/operations/${v.id}/${a}">
          <input name="reason" placeholder="reason (optional)" aria-label="reason for ${a}"><button type="submit">${a[0]?.toUpperCase()}${a.slice(1)}</button></form>`,
        )}<div id="action-result"></div></div>`;
  return html`<h1>${v.kind} <span class="id">${v.id}</span> <span class="badge ${v.status}" id="status">${v.status}</span></h1>
  <section class="card"><dl class="facts">
    <dt>attempt</dt><dd id="attempt">${v.attempt} (retries ${v.retryCount}/${v.maxRetries})</dd>
    <dt>queue</dt><dd><code>${v.queue}</code></dd>
    <dt>worker</dt><dd>${v.workerId ?? '-'}</dd>
    <dt>heartbeat</dt><dd>${heartbeatLine(data)}</dd>
    <dt>created</dt><dd><code>${iso(v.createdAt)}</code></dd>
    <dt>scheduled</dt><dd><code>${iso(v.scheduledAt)}</code></dd>
    <dt>started</dt><dd><code>${iso(v.startedAt)}</code></dd>
    <dt>finished</dt><dd><code>${iso(v.finishedAt)}</code></dd>
    <dt>not before</dt><dd><code>${iso(v.notBefore)}</code></dd>
    <dt>last error</dt><dd id="last-error">${v.lastError === null ? '-' : html`${v.lastError.message}${v.lastError.code === undefined ? '' : html` <code>[${v.lastError.code}]</code>`}`}</dd>
    <dt>group</dt><dd>${v.groupId ?? '-'}</dd>
    ${Object.entries(v.fields).map(([k, val]) => html`<dt>${k}</dt><dd><code>${val ?? '-'}</code></dd>`)}
  </dl></section>
  ${v.unreadable.length === 0 ? '' : html`<section class="card" id="unreadable"><h2>Unreadable stored values</h2><ul>${v.unreadable.map((u) => html`<li><code>${u.column}</code>: ${u.reason}<br><code style="word-break:break-all">${u.raw}</code></li>`)}</ul></section>`}
  <section class="card"><h2>Attention and next safe action</h2>
    ${
      data.attention.length > 0
        ? html`<ul>${data.attention.map((a) => html`<li data-category="${a.category}"><b>${a.category}</b>: ${a.why}</li>`)}</ul>`
        : /^(blocked|review|resume)/.test(data.resume?.nextSafeAction ?? '')
          ? html`<p>The operation needs nothing, but its archive-then-delete batch does: see the resume record below.</p>`
          : html`<p class="muted">Nothing needs attention.</p>`
    }
    <p id="next-action"><b>Next safe action:</b> ${data.resume?.nextSafeAction ?? nextSafeAction(v, data.attention)}</p>
    <p class="muted">The machine accepts in ${v.status}: ${accepted.length === 0 ? 'nothing (final state)' : accepted.join(', ')}.</p>
    ${actions}</section>
  ${data.resume === null ? '' : resumeSection(data.resume)}
  <section class="card"><h2>Path <span class="muted">(${v.transitions.length} transitions, ${v.attempt} attempt${v.attempt === 1 ? '' : 's'})</span></h2>
    <table class="path"><thead><tr><th class="n">attempt</th><th>at</th><th>status</th><th>event</th><th>by</th><th>reason</th></tr></thead><tbody>${pathRows(v.transitions)}</tbody></table></section>
  <section class="card"><h2>Journal steps</h2>${
    v.steps.length === 0
      ? html`<p class="empty">none recorded</p>`
      : html`<table class="steps"><thead><tr><th>step</th><th class="n">attempt</th><th>state</th><th>at</th><th>result</th></tr></thead><tbody>${v.steps.map(
          (s) =>
            html`<tr><td>${s.name}</td><td class="n">${s.attempt}</td><td>${s.state}</td><td><code>${s.at.toISOString()}</code></td><td class="result-cell">${longValue(s.result, v.id)}</td></tr>`,
        )}</tbody></table>`
  }</section>
  ${v.failures.length === 0 ? '' : html`<section class="card"><h2>Failures</h2><table class="failures"><tbody>${v.failures.map((f) => html`<tr><td class="n">#${f.attempt}</td><td class="result-cell">${longValue(f.error, v.id)}</td><td><code>${f.at.toISOString()}</code></td></tr>`)}</tbody></table></section>`}
  <section class="card"><h2>Lineage up (what it consumed, and where that came from)</h2>${lineageList(data.up, 'up')}
  <h2>Lineage down (what it produced, and where that went)</h2>${lineageList(data.down, 'down')}</section>`;
}
