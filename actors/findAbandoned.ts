import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationStatus } from '../machines/operationMachine.ts';
import type { WorkerHeartbeat } from '../transport/Transport.ts';

/** What the heartbeat monitor knows of an active operation. */
export interface ActiveAttempt {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  readonly attempt: number;
}

/** An operation to reset, and why. */
export interface Abandoned {
  readonly id: string;
  readonly kind: OperationKind;
  readonly attempt: number;
  readonly status: OperationStatus;
  /** The worker(s) whose last heartbeat listed it. */
  readonly workerIds: readonly string[];
  readonly reason: string;
}

/**
 * The heartbeat monitor's decision, pure: an active operation (SCHEDULED or IN_PROGRESS) listed at
 * its current attempt by worker heartbeats that are all older than the timeout sits with a worker
 * that died or stalled: reset it. One listed by any fresh heartbeat is alive; one listed by none
 * is not the monitor's to judge (the reconciler's floor covers a lost heartbeat, a queued dispatch
 * is left alone).
 *
 * @example
 * ```ts
 * findAbandoned({ now: Date.now(), timeoutMs: 300_000, beats: await heartbeats.list(),
 *   operations: [{ id, kind, status: 'SCHEDULED', attempt: 1 }] });
 * ```
 */
export function findAbandoned(input: {
  readonly now: number;
  readonly timeoutMs: number;
  readonly beats: readonly WorkerHeartbeat[];
  readonly operations: readonly ActiveAttempt[];
}): Abandoned[] {
  const { now, timeoutMs, beats, operations } = input;
  const holders = new Map<string, WorkerHeartbeat[]>();
  for (const beat of beats) {
    for (const h of beat.held) {
      const key = `${h.kind}.${h.operationId}.${h.attempt}`;
      const list = holders.get(key) ?? [];
      list.push(beat);
      holders.set(key, list);
    }
  }
  const abandoned: Abandoned[] = [];
  for (const op of operations) {
    if (op.status !== 'SCHEDULED' && op.status !== 'IN_PROGRESS') continue;
    const held = holders.get(`${op.kind}.${op.id}.${op.attempt}`) ?? [];
    if (held.length === 0 || held.some((b) => now - b.at < timeoutMs)) continue;
    const newest = Math.max(...held.map((b) => b.at));
    abandoned.push({
      id: op.id,
      kind: op.kind,
      attempt: op.attempt,
      status: op.status,
      workerIds: held.map((b) => b.workerId),
      reason: `${op.status === 'SCHEDULED' ? 'dispatch held' : 'running'} by ${held
        .map((b) => b.workerId)
        .join(
          ', ',
        )}, whose last heartbeat was ${Math.round((now - newest) / 1000)} s ago (timeout ${timeoutMs / 1000} s)`,
    });
  }
  return abandoned;
}
