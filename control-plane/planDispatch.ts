import type { Route } from '../machines/routing.ts';
import type { LogLine } from '../observe/LogLine.ts';
import type { ScheduledTransition } from '../persistence/OutboxEntry.ts';
import type { DispatchMessage, PublishManyResult } from '../transport/Transport.ts';

/** A dispatch to publish: where, and the message. */
export interface OutboxDispatch {
  readonly route: Route;
  readonly payload: DispatchMessage;
}

/** One attempt's dispatch, as the scheduler and the relay both name it. */
export function dispatchKey(d: { readonly operationId: string; readonly attempt: number }): string {
  return `${d.operationId}:${d.attempt}`;
}

/**
 * How many due operations the scheduler may claim now: a full batch, less when the broker already
 * holds close to `maxScheduled` (a backlog waits as PENDING in the database, not in the queue); 0
 * means none.
 *
 * @example
 * ```ts
 * const limit = schedulingLimit({ scheduled: await store.countScheduled(), maxScheduled, batchSize });
 * ```
 */
export function schedulingLimit(input: {
  readonly scheduled: number;
  readonly maxScheduled: number;
  readonly batchSize: number;
}): number {
  return Math.max(0, Math.min(input.batchSize, input.maxScheduled - input.scheduled));
}

/** A barrier the relay took (`dispatchBarrier`): when, and the newest transition id then. */
export interface RelayBarrier {
  readonly at: number;
  readonly upTo: number;
}

/**
 * The newest of the relay's barriers at least `graceMs` old, and the barriers to keep (the ones
 * after it): every SCHEDULE row at or below its `upTo` was committed that long ago, so a read up
 * to it holds nothing the scheduler may still be publishing. Undefined while none is that old.
 *
 * @example
 * ```ts
 * const { upTo, keep } = settledBarrier([...barriers, { at: now, upTo: await store.dispatchBarrier() }], now, 1_000);
 * ```
 */
export function settledBarrier(
  barriers: readonly RelayBarrier[],
  now: number,
  graceMs: number,
): { upTo: number | undefined; keep: RelayBarrier[] } {
  const settled = barriers.findLastIndex((b) => now - b.at >= graceMs);
  return {
    upTo: settled === -1 ? undefined : (barriers[settled] as RelayBarrier).upTo,
    keep: barriers.slice(settled + 1),
  };
}

/**
 * Whether the relay takes a new barrier this pass: when it holds none, or its newest is a quarter
 * of the grace old. A barrier settles once the grace has passed, so the cursor trails the history
 * by at most the grace and a quarter, and a relay run every few milliseconds still takes four
 * barriers per grace, not one per pass.
 */
export function barrierDue(
  barriers: readonly RelayBarrier[],
  now: number,
  graceMs: number,
): boolean {
  const newest = barriers[barriers.length - 1];
  return newest === undefined || now - newest.at >= graceMs / 4;
}

/** What one relay pass publishes, and how far it passes the history if all of that goes out. */
export interface RelayPlan {
  /** The SCHEDULE transitions whose dispatches to read and publish (unless stale). */
  readonly load: readonly number[];
  /** The keys (`dispatchKey`) of the scheduler's publishes this pass passed: forget them. */
  readonly passed: readonly string[];
  /** The transition id the cursor may move to once every dispatch in `load` is out. */
  readonly upTo: number;
  /** Whether the read was a full batch, all of it old enough to take: run again at once. */
  readonly more: boolean;
}

/**
 * The relay's choice among the SCHEDULE transitions it read past its cursor (oldest first,
 * final up to `upTo`: see `dispatchBarrier`), pure. A barrier at least the grace old bounds the
 * read (`settledBarrier`), so none should be younger; one that is (a scheduler on another clock)
 * stops the pass, and the cursor waits before it: the scheduler that wrote it may be publishing
 * it right now. Of the rest, one this term's scheduler published is passed over; the others are
 * to be read with their operations and published (`load`). With nothing young, the cursor moves
 * to the last row of a full batch, else to `upTo`.
 *
 * @example
 * ```ts
 * const plan = planRelay({ rows, upTo, now, graceMs: 1_000, limit: 1024, published });
 * ```
 */
export function planRelay(input: {
  readonly rows: readonly ScheduledTransition[];
  readonly upTo: number;
  readonly now: number;
  readonly graceMs: number;
  readonly limit: number;
  /** The keys of what this term's scheduler published. */
  readonly published: ReadonlySet<string>;
}): RelayPlan {
  const load: number[] = [];
  const passed: string[] = [];
  for (const row of input.rows) {
    if (input.now - row.at.getTime() < input.graceMs) {
      return { load, passed, upTo: row.id - 1, more: false };
    }
    const key = dispatchKey(row);
    if (input.published.has(key)) passed.push(key);
    else load.push(row.id);
  }
  const full = input.rows.length === input.limit;
  const last = input.rows[input.rows.length - 1];
  return { load, passed, upTo: full && last !== undefined ? last.id : input.upTo, more: full };
}

/**
 * How far the relay's cursor moves after its publish of `sent` (in id order): to the plan's
 * `upTo`, or to just before the first dispatch that failed (it and those after it are read again
 * at the next pass).
 */
export function relayPassedTo(
  plan: RelayPlan,
  sent: readonly { readonly id: number }[],
  results: readonly PublishManyResult[],
): number {
  const failed = sent.findIndex((_, i) => results[i]?.ok !== true);
  return failed === -1 ? plan.upTo : (sent[failed] as { id: number }).id - 1;
}

/** How long the relay leaves a fresh dispatch to the scheduler that wrote it. */
export function relayGraceMs(relayIntervalMs: number): number {
  return Math.max(1_000, 4 * relayIntervalMs);
}

/**
 * After a publish: the keys (`dispatchKey`) of what went out, and what to log — one WARNING for
 * the failures, naming the first (the relay publishes them again from the history).
 *
 * @example
 * ```ts
 * const { sent, failed, lines } = sortPublished(dispatches, await transport.publishMany(items), 'scheduler');
 * ```
 */
export function sortPublished(
  dispatches: readonly OutboxDispatch[],
  results: readonly PublishManyResult[],
  from: string,
): { sent: string[]; failed: number; lines: LogLine[] } {
  const sent: string[] = [];
  let failed = 0;
  let first: Error | undefined;
  dispatches.forEach((d, i) => {
    const r = results[i];
    if (r?.ok === true) {
      sent.push(dispatchKey(d.payload));
      return;
    }
    failed++;
    first ??= r === undefined ? new Error('no publish result') : r.error;
  });
  const lines: LogLine[] =
    first === undefined
      ? []
      : [
          {
            level: 'WARNING',
            message: `${from} could not publish some dispatches; the relay retries them`,
            fields: { failed, err: first },
          },
        ];
  return { sent, failed, lines };
}
