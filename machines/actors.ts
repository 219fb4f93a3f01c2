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

const OPERATOR_NAME = /^[A-Za-z0-9._@-]{1,64}$/;

/**
 * What is wrong with an operator's name (`--operator`, `OPSTATE_OPERATOR`, a dashboard token's
 * name), or `undefined` when it is fine: 1 to 64 letters, digits and `. _ @ -`.
 *
 * @example
 * ```ts
 * operatorNameProblem('alice');     // undefined
 * operatorNameProblem('alice bob'); // "must be 1 to 64 …; got 'alice bob'"
 * ```
 */
export function operatorNameProblem(value: unknown): string | undefined {
  if (typeof value === 'string' && OPERATOR_NAME.test(value)) return undefined;
  const shown = typeof value === 'string' ? `'${value.slice(0, 70)}'` : typeof value;
  return `must be 1 to 64 characters of letters, digits and . _ @ -; got ${shown}`;
}

/**
 * Who an operator command is recorded as by in the transition history: the operator's name and
 * where the command came from, `operator:alice (dashboard, 10.0.0.7)` or
 * `operator:alice (cli, host-1)`. `isOperatorActor` knows it as the operator.
 *
 * @example
 * ```ts
 * await store.apply(id, { type: 'RETRY' }, { by: operatorActor('alice', 'cli, host-1') });
 * ```
 */
export function operatorActor(name: string, from: string): string {
  return `${OPERATOR}:${name} (${from})`;
}

/**
 * Whether a transition's `by` is the operator: `operator` itself or a named operator
 * (`operatorActor`).
 *
 * @example
 * ```ts
 * isOperatorActor('operator:alice (cli, host-1)'); // true
 * ```
 */
export function isOperatorActor(by: unknown): boolean {
  return typeof by === 'string' && (by === OPERATOR || by.startsWith(`${OPERATOR}:`));
}
