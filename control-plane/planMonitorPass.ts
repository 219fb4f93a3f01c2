import type { PlannedReset } from '../loops/PlannedReset.ts';
import type { ActiveOperation } from '../persistence/ActiveOperation.ts';
import type { DispatchMessage, WorkerHeartbeat } from '../transport/Transport.ts';
import { type ActiveAttempt, findAbandoned } from './findAbandoned.ts';

/**
 * The operations worth reading for the heartbeat monitor: those listed by a heartbeat older than
 * the timeout (only what a stale heartbeat lists can be abandoned), each once.
 *
 * @example
 * ```ts
 * const operations = await store.loadMany(staleSuspects(beats, clock.now(), timeoutMs));
 * ```
 */
export function staleSuspects(
  beats: readonly WorkerHeartbeat[],
  now: number,
  timeoutMs: number,
): string[] {
  const suspects = new Set<string>();
  for (const b of beats) {
    if (now - b.at < timeoutMs) continue;
    for (const h of b.held) suspects.add(h.operationId);
  }
  return [...suspects];
}

/**
 * The heartbeat monitor's pass, pure: `findAbandoned` turned into the RESETs to apply (by
 * `heartbeat_monitor`, fenced on the attempt judged dead) and the INFO line each writes once
 * applied.
 *
 * @example
 * ```ts
 * const resets = planMonitorResets({ now, timeoutMs, beats, operations });
 * ```
 */
export function planMonitorResets(input: {
  readonly now: number;
  readonly timeoutMs: number;
  readonly beats: readonly WorkerHeartbeat[];
  readonly operations: readonly ActiveAttempt[];
}): PlannedReset[] {
  const at = new Date(input.now).toISOString();
  return findAbandoned(input).map((op) =>
    monitorReset(op, at, `stale heartbeat: ${op.reason}`, {
      workerIds: op.workerIds,
      reason: op.reason,
    }),
  );
}

/** A RESET by the heartbeat monitor, fenced on the attempt, with the INFO line it writes. */
function monitorReset(
  op: Pick<PlannedReset, 'id' | 'kind' | 'status' | 'attempt'>,
  at: string,
  reason: string,
  fields: Record<string, unknown>,
): PlannedReset {
  const { id, kind, status, attempt } = op;
  return {
    id,
    kind,
    status,
    attempt,
    event: { type: 'RESET', by: 'heartbeat_monitor', reason, attempt, at },
    line: {
      level: 'INFO',
      message: 'heartbeat monitor reset operation',
      fields: { operationId: id, kind, status, attempt, ...fields },
    },
  };
}

/**
 * The heartbeat monitor's second look, pure: a SCHEDULED operation that no heartbeat lists at its
 * attempt, fresh or stale, for longer than the timeout, whose dispatch the broker has handed out
 * and not seen settled (`unsettled`), sits with a worker that died or froze before it read the
 * dispatch: no heartbeat can ever list it, and the broker would only hand it out again after
 * ack-wait. It gets a RESET by `heartbeat_monitor`, fenced on that attempt. One still waiting in
 * the queue (not handed out: behind a busy worker, or with no worker at all) is left alone.
 *
 * A dispatch handed out a moment ago looks the same until the worker's next beat lists it (a
 * queue that kept it waiting past the timeout hands it out just before this look). So a suspect
 * is first marked (`seen`, the time of each mark; carry the returned map to the next pass), from
 * `graceMs` (more than a heartbeat interval) before the timeout on, and reset once it is past the
 * timeout and was marked at least `graceMs` before, still unlisted and handed out at every look in
 * between (a mark whose operation is no longer a suspect is dropped). A dispatch stranded since it
 * was scheduled is reset at the timeout; one handed out just now is not.
 *
 * @example
 * ```ts
 * const waiting = await store.listActiveOlderThan(new Date(now - strandedLookMs(timeoutMs, graceMs)));
 * const { resets, seen: next } = planStrandedResets({ now, timeoutMs, graceMs, beats, waiting,
 *   unsettled: await transport.unsettled(), seen });
 * ```
 */
export function planStrandedResets(input: {
  readonly now: number;
  readonly timeoutMs: number;
  readonly graceMs: number;
  readonly beats: readonly WorkerHeartbeat[];
  readonly waiting: readonly ActiveOperation[];
  readonly unsettled: readonly DispatchMessage[];
  readonly seen: ReadonlyMap<string, number>;
}): { resets: PlannedReset[]; seen: Map<string, number> } {
  const { now, timeoutMs } = input;
  const handedOut = new Set(input.unsettled.map((m) => `${m.operationId}:${m.attempt}`));
  const at = new Date(now).toISOString();
  const seen = new Map<string, number>();
  const suspects = unlistedScheduled(
    input.beats,
    input.waiting,
    now - strandedLookMs(timeoutMs, input.graceMs),
  ).filter((op) => handedOut.has(`${op.id}:${op.attempt}`));
  for (const op of suspects) {
    const key = `${op.id}:${op.attempt}`;
    seen.set(key, input.seen.get(key) ?? now);
  }
  const resets: PlannedReset[] = suspects
    .filter(
      (op) =>
        now - op.since.getTime() >= timeoutMs &&
        now - (seen.get(`${op.id}:${op.attempt}`) ?? now) >= input.graceMs,
    )
    .map((op) => {
      const reason = `dispatch handed to a worker that never listed it (died or froze before reading it); SCHEDULED for ${Math.round((now - op.since.getTime()) / 1000)} s (timeout ${timeoutMs / 1000} s)`;
      return monitorReset(op, at, `stranded: ${reason}`, { reason });
    });
  return { resets, seen };
}

/** How long a SCHEDULED operation goes unlisted before the stranded look marks it. */
export function strandedLookMs(timeoutMs: number, graceMs: number): number {
  return Math.max(0, timeoutMs - graceMs);
}

/**
 * The SCHEDULED operations scheduled before `before` that no heartbeat, fresh or stale, lists at
 * their attempt: the only ones worth asking the broker about (`planStrandedResets`).
 */
export function unlistedScheduled(
  beats: readonly WorkerHeartbeat[],
  waiting: readonly ActiveOperation[],
  before: number,
): ActiveOperation[] {
  const listed = new Set(beats.flatMap((b) => b.held.map((h) => `${h.operationId}:${h.attempt}`)));
  return waiting.filter(
    (op) =>
      op.status === 'SCHEDULED' &&
      op.since.getTime() <= before &&
      !listed.has(`${op.id}:${op.attempt}`),
  );
}
