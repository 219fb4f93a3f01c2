import { SYSTEM_ACTORS, type SystemActor } from './actors.ts';
import { describeValue } from './describeValue.ts';

/** What a submitter name may be, in words (messages and `opstate config` use it). */
export const SUBMITTER_ALLOWED = `1 to 64 characters of letters, digits and . _ : @ / -, other than ${SYSTEM_ACTORS.join(', ')}`;

const SUBMITTER = /^[A-Za-z0-9._:@/-]{1,64}$/;
const SYSTEM: ReadonlySet<string> = new Set(SYSTEM_ACTORS);

/**
 * Whether a name is one of opstate's own actors (`SYSTEM_ACTORS`).
 *
 * @example
 * ```ts
 * isSystemActor('reconciler'); // true
 * ```
 */
export function isSystemActor(value: unknown): value is SystemActor {
  return typeof value === 'string' && SYSTEM.has(value);
}

/**
 * What is wrong with a submitter name (who a `CREATE` is recorded as by: a service name such as
 * `ingest` or `@acme/ingest`, a person, `operator`), or `undefined` when it is fine.
 *
 * @example
 * ```ts
 * submitterProblem('ingest');      // undefined
 * submitterProblem('my service');  // "must be 1 to 64 characters of …; got 'my service'"
 * submitterProblem('reconciler');  // "'reconciler' is one of opstate's own actors; …"
 * ```
 */
export function submitterProblem(value: unknown): string | undefined {
  if (isSystemActor(value)) {
    return `'${value}' is one of opstate's own actors; name the service or person that submits`;
  }
  if (typeof value === 'string' && SUBMITTER.test(value)) return undefined;
  return `must be ${SUBMITTER_ALLOWED}; got ${describeValue(value)}`;
}
