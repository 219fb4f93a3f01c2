import type { WorkerHeartbeat } from '../transport/Transport.ts';
import { type ActiveAttempt, findAbandoned } from './findAbandoned.ts';
import type { PlannedReset } from './PlannedReset.ts';

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
  return findAbandoned(input).map((op) => ({
    id: op.id,
    kind: op.kind,
    status: op.status,
    attempt: op.attempt,
    event: {
      type: 'RESET',
      by: 'heartbeat_monitor',
      reason: `stale heartbeat: ${op.reason}`,
      attempt: op.attempt,
      at,
    },
    line: {
      level: 'INFO',
      message: 'heartbeat monitor reset operation',
      fields: {
        operationId: op.id,
        kind: op.kind,
        status: op.status,
        attempt: op.attempt,
        workerIds: op.workerIds,
        reason: op.reason,
      },
    },
  }));
}
