import { RECOVERY_PATHS } from './recoveryPaths.ts';

/**
 * opstate's own actors, as the transition history names them: the control plane's scheduler and
 * the recovery paths (`RECOVERY_PATHS`). A submitter may not take one of these names, so that a
 * row `by reconciler` always means the reconciler did it.
 */
export const SYSTEM_ACTORS = ['scheduler', ...RECOVERY_PATHS] as const;
export type SystemActor = (typeof SYSTEM_ACTORS)[number];

/** Who the command line's and the dashboard's writes are by, unless told otherwise. */
export const OPERATOR = 'operator';

/**
 * Every actor the history names by a name of its own: opstate's (`SYSTEM_ACTORS`) and the
 * operator. Anything else in a `by` is a worker's id or a submitter's name. The one list: the
 * submitter check, the metrics' `by` label and the reports' words derive from it.
 */
export const NAMED_ACTORS = [...SYSTEM_ACTORS, OPERATOR] as const;
export type NamedActor = (typeof NAMED_ACTORS)[number];

/**
 * Who a worker's COMPLETE or FAIL is by when its id is not known, and the metrics' `by` label of
 * every actor `NAMED_ACTORS` does not name (a worker's id would make one series per worker).
 */
export const WORKER = 'worker';

/** How reports name each actor, in words (the demo's recovery line). */
export const ACTOR_WORDS: Readonly<Record<NamedActor, string>> = Object.freeze({
  scheduler: 'scheduler',
  heartbeat_monitor: 'heartbeat monitor',
  deadline: 'deadline',
  reconciler: 'reconciler',
  broker: 'broker redelivery',
  operator: 'operator',
});

const NAMED: ReadonlySet<string> = new Set(NAMED_ACTORS);

/**
 * Whether a transition's `by` is one of the named actors (`NAMED_ACTORS`).
 *
 * @example
 * ```ts
 * const label = isNamedActor(t.by) ? t.by : WORKER; // 'reconciler', 'operator', or 'worker'
 * ```
 */
export function isNamedActor(by: unknown): by is NamedActor {
  return typeof by === 'string' && NAMED.has(by);
}
