import { type AttentionItem, formatAge } from '../machines/attention.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import { shortId } from '../machines/shortId.ts';
import type { FlowLimitLoad } from '../persistence/reads/selectFlowLimitLoad.ts';
import { html, type SafeHtml } from './html.ts';

/** One routing queue: its live work, who serves it, and whether that needs attention. */
export interface QueueView {
  /** `<location type>_<operation type>`. */
  readonly queue: string;
  /** The kinds whose default route it is. */
  readonly kinds: readonly OperationKind[];
  /** SCHEDULED operations: dispatched, not started. */
  readonly waiting: number;
  readonly inProgress: number;
  readonly oldestWaiting: Date | null;
  /**
   * Workers with a live heartbeat that serve it: those whose heartbeat says they read it (`reads`,
   * idle or not), and those whose heartbeat does not say which queues they read (an older worker)
   * that hold work from it.
   */
  readonly liveWorkers: readonly { readonly workerId: string; readonly reads: boolean }[];
  /** Workers whose heartbeat went stale that read it, or still list work from it. */
  readonly staleWorkers: readonly string[];
  /** The attention item when no live worker serves it while work waits. */
  readonly attention: AttentionItem | null;
}

/** One worker process, as its heartbeat shows it. */
export interface WorkerView {
  readonly workerId: string;
  /** When it last beat (ms). */
  readonly at: number;
  /** Younger than the heartbeat timeout. */
  readonly live: boolean;
  /** The queues it reads; null when its heartbeat does not say (an older worker). */
  readonly queues: readonly string[] | null;
  /** The kinds it runs; null when its heartbeat does not say. */
  readonly kinds: readonly OperationKind[] | null;
  readonly held: readonly {
    readonly operationId: string;
    readonly kind: OperationKind;
    readonly attempt: number;
    /** The queue it was dispatched on; null when the operation is not in the database. */
    readonly queue: string | null;
    readonly status: string | null;
  }[];
}

/** What the workers-and-queues page shows. */
export interface WorkersPageData {
  readonly at: string;
  readonly heartbeatsVisible: boolean;
  readonly heartbeatTimeoutMs: number;
  readonly queues: readonly QueueView[];
  readonly workers: readonly WorkerView[];
  /** Every flow limit with what runs under it and what waits behind it (none when absent). */
  readonly limits?: readonly FlowLimitLoad[];
  /**
   * Registered locations (`site/name`) with nothing waiting or running on their queues that no
   * live worker reads for any kind they route: not on the attention list (nothing waits), shown
   * here so a missing worker is seen before work arrives. Empty when heartbeats are not visible.
   */
  readonly idleUnserved?: readonly string[];
}

const since = (at: Date | number) => new Date(at).toISOString();

function queueRow(q: QueueView, visible: boolean): SafeHtml {
  const idle = q.waiting === 0 && q.inProgress === 0;
  const served = !visible
    ? html`<span class="muted">not visible</span>`
    : q.liveWorkers.length > 0
      ? q.liveWorkers.map(
          (w, n) =>
            html`${n === 0 ? '' : ', '}<code>${w.workerId}</code>${w.reads ? '' : html` <span class="muted" title="its heartbeat does not say which queues it reads">(holds work from it)</span>`}`,
        )
      : q.attention !== null
        ? html`<b class="warn">none</b>`
        : html`<span class="muted">none seen</span>`;
  return html`<tr id="queue-${q.queue}" data-queue="${q.queue}" class="${idle ? 'idle' : ''} ${q.attention === null ? '' : 'attention-row'}">
    <td><code>${q.queue}</code></td><td>${q.kinds.join(', ') || html`<span class="muted">no default kind</span>`}</td>
    <td class="n" data-waiting="${q.waiting}">${q.waiting}</td><td class="n">${q.inProgress}</td>
    <td class="n">${q.oldestWaiting === null ? '-' : html`<span data-since="${since(q.oldestWaiting)}"></span>`}</td>
    <td>${served}${q.staleWorkers.length === 0 ? '' : html` <span class="muted">(stale: ${q.staleWorkers.join(', ')})</span>`}</td>
    <td class="state">${q.attention === null ? (idle ? html`<span class="muted">idle</span>` : 'served') : html`<a href="#unserved"><span class="badge UNSERVED">no live worker</span></a>`}</td></tr>`;
}

function limitRow(l: FlowLimitLoad): SafeHtml {
  const state =
    l.max === 0
      ? html`<span class="badge FAILED">parked</span>`
      : l.inUse >= l.max
        ? html`<span class="badge PENDING">full</span>`
        : html`<span class="muted">room for ${l.max - l.inUse}</span>`;
  return html`<tr data-limit="${l.location}${l.kind === null ? '' : `:${l.kind}`}">
    <td><code>${l.location}</code></td><td>${l.kind ?? html`<span class="muted">every kind</span>`}</td>
    <td class="n" data-in-use="${l.inUse}">${l.inUse}</td><td class="n">${l.max}</td>
    <td class="n" data-limit-waiting="${l.waiting}">${l.waiting}</td><td>${state}</td></tr>`;
}

/** The flow limits with their in-use and waiting counts; nothing when none is set. */
function limitsSection(limits: readonly FlowLimitLoad[]): SafeHtml | string {
  if (limits.length === 0) return '';
  return html`<section class="card" id="flow-limits"><h2>Flow limits <span class="muted">(${limits.filter((l) => l.max === 0 || l.inUse >= l.max).length} full or parked)</span></h2>
  <table class="limits"><thead><tr><th>location</th><th>kind</th><th class="n">in use</th><th class="n">max</th><th class="n">waiting</th><th>state</th></tr></thead>
  <tbody>${limits.map(limitRow)}</tbody></table>
  <p class="muted">In use: SCHEDULED or IN_PROGRESS in the limit's scope, as the scheduler counts them. Waiting: PENDING in its scope (due, or waiting for a time).</p></section>`;
}

/** Idle registered locations no live worker reads: a lower note than the attention list. */
function idleUnservedSection(locations: readonly string[]): SafeHtml | string {
  if (locations.length === 0) return '';
  return html`<section class="card" id="idle-unserved"><h2>Locations no live worker reads <span class="muted">(${locations.length}, nothing waiting there)</span></h2>
  <p>${codes(locations)}</p>
  <p class="muted">No live worker reads any queue of these registered locations. Nothing waits there now, so they are not on the attention list; work routed to them will wait until a worker of their site starts (<code>opstate worker --site …</code>).</p></section>`;
}

const codes = (names: readonly string[]) =>
  names.map((q, n) => html`${n === 0 ? '' : ', '}<code>${q}</code>`);

/** The queues a worker reads, or, when its heartbeat does not say, those it holds work from. */
function queuesCell(w: WorkerView): SafeHtml {
  if (w.queues !== null) {
    return w.queues.length === 0
      ? html`<span class="muted">none</span>`
      : html`${codes(w.queues)}${w.kinds === null || w.kinds.length === 0 ? '' : html` <span class="muted">(${w.kinds.join(', ')})</span>`}`;
  }
  const held = [...new Set(w.held.map((h) => h.queue).filter((q) => q !== null))];
  const unsaid = html`<span class="muted">its heartbeat does not say; ${held.length === 0 ? 'it holds nothing' : 'holds work from'}</span>`;
  return held.length === 0 ? unsaid : html`${unsaid} ${codes(held)}`;
}

function workerRow(w: WorkerView): SafeHtml {
  return html`<tr data-worker="${w.workerId}" class="${w.live ? '' : 'stale'}">
    <td><code>${w.workerId}</code></td>
    <td>${w.live ? html`<span class="badge COMPLETED">live</span>` : html`<span class="badge FAILED">stale</span>`}</td>
    <td class="n"><span data-since="${since(w.at)}" data-suffix=" ago"></span></td>
    <td class="queues" data-queues="${w.queues === null ? '' : w.queues.join(' ')}">${queuesCell(w)}</td>
    <td>${
      w.held.length === 0
        ? html`<span class="muted">nothing (idle, or between operations)</span>`
        : w.held.map(
            (h) =>
              html`<a class="id" href="/operations/${h.operationId}" title="${h.operationId}">${h.kind} ${shortId(h.operationId)}</a> <span class="muted">#${h.attempt}${h.status === null ? '' : ` ${h.status}`}</span><br>`,
          )
    }</td></tr>`;
}

/**
 * Workers and queues: each routing queue's depth (SCHEDULED operations, dispatched and not
 * started, and those in progress) with the live workers serving it, and each worker's heartbeat
 * with the queues it reads and what it holds. A queue with work waiting and no live worker serving
 * it is marked with the attention list's words. A heartbeat names the queues its worker reads, so
 * an idle worker serves its queues here too; one of an older worker does not, and that worker
 * serves a queue here when it holds work from it.
 *
 * @example
 * ```ts
 * const content = workersPage(await data.workers());
 * ```
 */
export function workersPage(data: WorkersPageData): SafeHtml {
  const unserved = data.queues.filter((q) => q.attention !== null);
  const live = data.workers.filter((w) => w.live).length;
  return html`<h1>Workers and queues</h1>
  ${
    data.heartbeatsVisible
      ? ''
      : html`<p class="card muted" id="heartbeats-hidden">Heartbeats are not visible from this process (in-process transport): the workers and who serves each queue cannot be shown, only the queues' depths.</p>`
  }
  ${
    unserved.length === 0
      ? ''
      : html`<section class="card alert" id="unserved"><h2>No live worker serves ${unserved.length === 1 ? 'this queue' : 'these queues'}</h2><ul>${unserved.map(
          (q) => html`<li data-queue="${q.queue}">${q.attention?.why}</li>`,
        )}</ul></section>`
  }
  ${limitsSection(data.limits ?? [])}
  <section class="card"><h2>Queues <span class="muted">(${data.queues.filter((q) => q.waiting > 0).length} with work waiting)</span></h2>
  <table class="queues"><thead><tr><th>queue</th><th>kinds</th><th class="n">waiting</th><th class="n">in progress</th><th class="n">oldest waiting</th><th>live workers serving it</th><th>state</th></tr></thead>
  <tbody>${data.queues.map((q) => queueRow(q, data.heartbeatsVisible))}</tbody></table>
  <p class="muted">Waiting: SCHEDULED, dispatched and not started. A worker serves a queue here when its heartbeat (younger than ${formatAge(data.heartbeatTimeoutMs)}) names the queue among those it reads, idle or not; a heartbeat of an older worker does not say, and that worker serves the queues it holds work from.</p></section>
  ${
    data.heartbeatsVisible
      ? html`<section class="card"><h2>Workers <span class="muted">(${live} live, ${data.workers.length - live} stale)</span></h2>${
          data.workers.length === 0
            ? html`<p class="empty">no worker heartbeat is stored</p>`
            : html`<table class="workers"><thead><tr><th>worker</th><th>heartbeat</th><th class="n">last beat</th><th>queues it reads</th><th>holds</th></tr></thead><tbody>${data.workers.map(workerRow)}</tbody></table>`
        }</section>`
      : ''
  }
  ${idleUnservedSection(data.idleUnserved ?? [])}
  <p class="muted">As of <span data-at="${data.at}">${data.at}</span>.</p>`;
}
