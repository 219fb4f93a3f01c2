import type { Route } from '../machines/routing.ts';
import type { LogLine } from '../observe/LogLine.ts';
import type { OutboxEntry } from '../persistence/OutboxEntry.ts';
import type { DispatchMessage, PublishManyResult } from '../transport/Transport.ts';

/** A dispatch to publish, with the outbox row that keeps it until it is (null: none). */
export interface OutboxDispatch {
  readonly outboxId: number | null;
  readonly route: Route;
  readonly payload: DispatchMessage;
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

/**
 * The outbox relay's choice among the rows it read, pure: rows younger than the grace are being
 * published by the scheduler right now (taking them would only publish twice: harmless,
 * deduplicated, but two round trips for nothing) and are left; of the rest, a stale row (its
 * operation moved on: the worker would fence it anyway) is dropped and the others published.
 * `more` says whether the read was a full batch of rows old enough to take.
 *
 * @example
 * ```ts
 * const plan = planRelay({ rows: await store.fetchOutbox(256), now, graceMs, batchSize: 256 });
 * ```
 */
export function planRelay(input: {
  readonly rows: readonly OutboxEntry[];
  readonly now: number;
  readonly graceMs: number;
  readonly batchSize: number;
}): { drop: number[]; publish: OutboxDispatch[]; more: boolean } {
  const due = input.rows.filter((r) => input.now - r.createdAt.getTime() >= input.graceMs);
  return {
    drop: due.filter((r) => r.stale).map((r) => r.id),
    publish: due
      .filter((r) => !r.stale)
      .map((r) => ({ outboxId: r.id, route: r.route, payload: r.payload })),
    more: due.length === input.batchSize,
  };
}

/** How long the relay leaves a fresh outbox row to the scheduler that wrote it. */
export function relayGraceMs(relayIntervalMs: number): number {
  return Math.max(1_000, 4 * relayIntervalMs);
}

/**
 * After a publish: the outbox rows to clear (published, with a row) and what to log — one WARNING
 * for the failures, naming the first (their rows stay for the relay's next pass).
 *
 * @example
 * ```ts
 * const { clear, failed, lines } = sortPublished(dispatches, await transport.publishMany(items), 'scheduler');
 * ```
 */
export function sortPublished(
  dispatches: readonly OutboxDispatch[],
  results: readonly PublishManyResult[],
  from: string,
): { clear: number[]; failed: number; lines: LogLine[] } {
  const clear: number[] = [];
  let failed = 0;
  let first: Error | undefined;
  dispatches.forEach((d, i) => {
    const r = results[i];
    if (r?.ok === true) {
      if (d.outboxId !== null) clear.push(d.outboxId);
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
  return { clear, failed, lines };
}
