import {
  type BreakerOutcome,
  type BreakerState,
  type CircuitBreakerPolicy,
  type CircuitFailure,
  CircuitState,
  CLOSED_BREAKER,
  cooledDown,
  nextBreaker,
  sameBreaker,
} from '../machines/circuitBreaker.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import type { LogLine } from '../observe/LogLine.ts';
import type {
  CircuitBreakerRecord,
  CircuitBreakerView,
  CircuitBreakerWrite,
  TransitionOutcome,
} from '../persistence/CircuitBreakerRepository.ts';

/** A (kind, target location) pair a breaker guards. */
export interface BreakerPair {
  readonly kind: OperationKind;
  readonly locationId: string;
}

type CountedOutcome = TransitionOutcome & {
  outcome: 'FAIL' | 'COMPLETE';
  kind: OperationKind;
  locationId: string;
};

const keyOf = (kind: string, locationId: string) => `${kind}|${locationId}`;

const counted = (r: TransitionOutcome): r is CountedOutcome =>
  r.outcome !== null && r.kind !== null && r.locationId !== null;

/**
 * The pairs whose breakers a pass must load: those with a FAIL or COMPLETE among the rows read.
 *
 * @example
 * ```ts
 * const loaded = await repo.loadForPass(breakerPairs(rows));
 * ```
 */
export function breakerPairs(rows: readonly TransitionOutcome[]): BreakerPair[] {
  const pairs = new Map<string, BreakerPair>();
  for (const o of rows.filter(counted)) {
    pairs.set(keyOf(o.kind, o.locationId), { kind: o.kind, locationId: o.locationId });
  }
  return [...pairs.values()];
}

function failureOf(o: TransitionOutcome): CircuitFailure {
  const e = o.error ?? { message: 'failed', retryable: true };
  return {
    message: e.message,
    retryable: e.retryable,
    ...(e.code === undefined ? {} : { code: e.code }),
    operationId: o.operationId,
    attempt: o.attempt,
    at: o.at.toISOString(),
  };
}

/**
 * The circuit breaker's pass, pure: folds the outcomes read (in id order) into their pairs'
 * breakers with `nextBreaker`, half-opens every OPEN breaker whose cooldown has passed (those of
 * pairs loaded, and the OPEN ones the pass was given), and returns the rows to write — only the
 * breakers that changed, each a compare-and-set on the version read (an insert for a pair with
 * no row yet), so an operator's reset in between wins.
 *
 * @example
 * ```ts
 * const writes = planBreakerPass({ rows, loaded, now: new Date(clock.now()), policy });
 * await repo.write(writes, fence);
 * ```
 */
export function planBreakerPass(input: {
  readonly rows: readonly TransitionOutcome[];
  readonly loaded: readonly CircuitBreakerRecord[];
  readonly now: Date;
  readonly policy: CircuitBreakerPolicy;
}): CircuitBreakerWrite[] {
  const { rows, now, policy } = input;
  const loaded = new Map(input.loaded.map((r) => [keyOf(r.kind, r.locationId), r]));
  const next = new Map<string, BreakerState>();
  const stateOf = (key: string) => next.get(key) ?? loaded.get(key) ?? CLOSED_BREAKER;
  for (const o of rows.filter(counted)) {
    const key = keyOf(o.kind, o.locationId);
    const event: BreakerOutcome =
      o.outcome === 'FAIL' ? { type: 'FAIL', failure: failureOf(o) } : { type: 'COMPLETE' };
    next.set(key, nextBreaker(stateOf(key), event, now, policy));
  }
  for (const key of new Set([...loaded.keys(), ...next.keys()])) {
    next.set(key, cooledDown(stateOf(key), now, policy));
  }
  const writes: CircuitBreakerWrite[] = [];
  for (const [key, b] of next) {
    const before = loaded.get(key);
    if (sameBreaker(b, before ?? CLOSED_BREAKER)) continue;
    const [kind, locationId] = key.split('|') as [OperationKind, string];
    writes.push({
      kind,
      locationId,
      expectedVersion: before?.version ?? null,
      state: b.state,
      consecutiveFailures: b.consecutiveFailures,
      openedAt: b.openedAt,
      lastFailure: b.lastFailure,
      updatedAt: now,
    });
  }
  return writes;
}

/**
 * What a pass says about the breakers it wrote, pure: a WARNING for each one that opened or
 * re-opened (its probe failed), an INFO for each one that half-opened or closed, a DEBUG when some
 * rows moved under the pass (an operator's reset); `released` when scheduling may resume for some
 * pair (the scheduler should be woken).
 *
 * @example
 * ```ts
 * const { lines, released } = reportBreakerWrites({ written, planned: writes.length, loaded, policy });
 * ```
 */
export function reportBreakerWrites(input: {
  readonly written: readonly CircuitBreakerView[];
  readonly planned: number;
  readonly loaded: readonly CircuitBreakerRecord[];
  readonly policy: CircuitBreakerPolicy;
}): { lines: LogLine[]; released: boolean } {
  const { written, planned, policy } = input;
  const loaded = new Map(input.loaded.map((r) => [keyOf(r.kind, r.locationId), r]));
  const lines: LogLine[] = [];
  let released = false;
  for (const w of written) {
    const from = loaded.get(keyOf(w.kind, w.locationId))?.state ?? CircuitState.CLOSED;
    if (from === w.state) continue;
    const fields = {
      kind: w.kind,
      locationId: w.locationId,
      location: w.location,
      consecutiveFailures: w.consecutiveFailures,
      lastError: w.lastFailure?.message,
      operationId: w.lastFailure?.operationId,
    };
    if (w.state === CircuitState.OPEN) {
      lines.push({
        level: 'WARNING',
        message:
          from === CircuitState.HALF_OPEN
            ? 'circuit breaker probe failed; re-opened, scheduling stays parked for the pair'
            : 'circuit breaker opened; scheduling parked for the pair',
        fields: { ...fields, cooldownMs: policy.cooldownMs },
      });
    } else {
      released = true;
      lines.push({
        level: 'INFO',
        message:
          w.state === CircuitState.HALF_OPEN
            ? 'circuit breaker half-open; letting one probe through'
            : 'circuit breaker closed; scheduling resumed for the pair',
        fields,
      });
    }
  }
  if (written.length < planned) {
    lines.push({
      level: 'DEBUG',
      message: 'circuit breaker rows moved during the pass (operator reset?)',
      fields: { skipped: planned - written.length },
    });
  }
  return { lines, released };
}
