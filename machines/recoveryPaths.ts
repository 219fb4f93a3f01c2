/**
 * The recovery paths: who may RESET an operation without an operator, as the transition history
 * names them. The one list: the machine's `ResetBy`, the submitter names opstate keeps for itself,
 * the metrics' `path` label and the logs' recovery lines all derive from it.
 * - `heartbeat_monitor`: held only by workers whose heartbeats went stale (primary);
 * - `deadline`: IN_PROGRESS past its attempt's deadline, whatever the heartbeats say;
 * - `reconciler`: live past the floor and held by no live worker (backstop);
 * - `broker`: redelivered after ack-wait with no live holder (last resort).
 */
export const RECOVERY_PATHS = ['heartbeat_monitor', 'deadline', 'reconciler', 'broker'] as const;
export type RecoveryPath = (typeof RECOVERY_PATHS)[number];

const PATHS: ReadonlySet<string> = new Set(RECOVERY_PATHS);

/**
 * Whether a transition's `by` is one of the recovery paths.
 *
 * @example
 * ```ts
 * if (t.event === 'RESET' && isRecoveryPath(t.by)) recoveries.inc({ kind: t.kind, path: t.by });
 * ```
 */
export function isRecoveryPath(by: unknown): by is RecoveryPath {
  return typeof by === 'string' && PATHS.has(by);
}
