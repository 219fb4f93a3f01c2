import type { OperationKind } from '../machines/OperationKind.ts';
import {
  type CircuitBreakerRecord,
  CircuitBreakerRepository,
  type CircuitBreakerWrite,
  type CircuitFailure,
  CircuitState,
  type TransitionOutcome,
} from '../persistence/CircuitBreakerRepository.ts';
import type { Executor } from '../persistence/openDatabase.ts';
import type { Clock } from './Clock.ts';
import type { LeadershipTerm } from './Leadership.ts';
import type { Logger } from './Logger.ts';
import { type Loop, startLoop } from './Loop.ts';
import { TransitionCursor } from './TransitionCursor.ts';

/** When a breaker opens and how long it stays open before it lets a probe through. */
export interface CircuitBreakerPolicy {
  /** Consecutive failures of a (kind, location) pair that open its breaker. */
  readonly threshold: number;
  /** How long an OPEN breaker waits before it turns HALF_OPEN. */
  readonly cooldownMs: number;
}

/** A pair's breaker as a pass folds outcomes into it. */
export interface BreakerState {
  readonly state: CircuitState;
  readonly consecutiveFailures: number;
  readonly openedAt: Date | null;
  readonly lastFailure: CircuitFailure | null;
}

/** One outcome of a pair's operation: a failure (retryable or not) or a completion. */
export type BreakerOutcome =
  | { readonly type: 'FAIL'; readonly failure: CircuitFailure }
  | { readonly type: 'COMPLETE' };

export const CLOSED_BREAKER: BreakerState = Object.freeze({
  state: CircuitState.CLOSED,
  consecutiveFailures: 0,
  openedAt: null,
  lastFailure: null,
});

/**
 * The breaker's rules, pure. A failure counts (and re-opens a HALF_OPEN breaker: its probe
 * failed); reaching the threshold opens a CLOSED breaker; a completion closes any breaker and
 * clears the count (a straggler that succeeds while OPEN is as good a sign as a probe).
 *
 * @example
 * ```ts
 * let b = CLOSED_BREAKER;
 * for (let n = 0; n < 5; n++) b = nextBreaker(b, { type: 'FAIL', failure }, now, policy);
 * b.state; // 'OPEN'
 * nextBreaker(b, { type: 'COMPLETE' }, now, policy).state; // 'CLOSED'
 * ```
 */
export function nextBreaker(
  b: BreakerState,
  outcome: BreakerOutcome,
  now: Date,
  policy: CircuitBreakerPolicy,
): BreakerState {
  if (outcome.type === 'COMPLETE') {
    return b.state === CircuitState.CLOSED && b.consecutiveFailures === 0
      ? b
      : { ...CLOSED_BREAKER, lastFailure: b.lastFailure };
  }
  const counted = {
    ...b,
    consecutiveFailures: b.consecutiveFailures + 1,
    lastFailure: outcome.failure,
  };
  const opens =
    b.state === CircuitState.HALF_OPEN ||
    (b.state === CircuitState.CLOSED && counted.consecutiveFailures >= policy.threshold);
  return opens ? { ...counted, state: CircuitState.OPEN, openedAt: now } : counted;
}

/**
 * An OPEN breaker whose cooldown has passed turns HALF_OPEN (the scheduler then admits one probe);
 * any other breaker is returned as it is.
 *
 * @example
 * ```ts
 * cooledDown(openBreaker, new Date(opened + 60_000), policy).state; // 'HALF_OPEN'
 * ```
 */
export function cooledDown(b: BreakerState, now: Date, policy: CircuitBreakerPolicy): BreakerState {
  if (b.state !== CircuitState.OPEN || b.openedAt === null) return b;
  return now.getTime() - b.openedAt.getTime() >= policy.cooldownMs
    ? { ...b, state: CircuitState.HALF_OPEN }
    : b;
}

export interface CircuitBreakerOptions {
  readonly database: Executor;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly policy: CircuitBreakerPolicy;
  /** Transition rows read per pass at most. */
  readonly batchSize: number;
  /** Called when a pass half-opened or closed a breaker: work may be schedulable again. */
  readonly onRelease?: () => void;
  /** The leadership term: passes run only while it is valid, writes carry its fence. */
  readonly term?: LeadershipTerm;
}

/** The breaker's pass, run by the control-plane loop (or by a test, one pass at a time). */
export interface CircuitBreaker {
  /** One pass; true when a full batch was read (more may be waiting). */
  pass(): Promise<boolean>;
}

const keyOf = (kind: string, locationId: string) => `${kind}|${locationId}`;

function sameBreaker(a: BreakerState, b: BreakerState): boolean {
  return (
    a.state === b.state &&
    a.consecutiveFailures === b.consecutiveFailures &&
    a.openedAt?.getTime() === b.openedAt?.getTime() &&
    a.lastFailure === b.lastFailure
  );
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
 * The circuit breaker of each (kind, target location) pair. Each pass reads the FAIL and COMPLETE
 * transitions written since the last one (it starts from the newest when created), folds them
 * into the pairs' breakers with `nextBreaker`, half-opens the OPEN breakers whose cooldown has
 * passed, and writes the breakers that changed (compare-and-set, so an operator's reset wins).
 * Opening logs a WARNING naming the kind, the location and the last error; the scheduler then
 * parks the pair (see `selectDueForUpdate`). A pass over successes only writes nothing.
 *
 * @example
 * ```ts
 * const breaker = createCircuitBreaker({ database, clock, logger, batchSize: 1024,
 *   policy: { threshold: 5, cooldownMs: 60_000 }, onRelease: () => scheduler.wake() });
 * await breaker.pass();
 * ```
 */
export function createCircuitBreaker(options: CircuitBreakerOptions): CircuitBreaker {
  const { clock, logger, policy, batchSize, onRelease } = options;
  const repo = new CircuitBreakerRepository(options.database);
  const cursor = new TransitionCursor();

  return {
    async pass() {
      if (!cursor.started) cursor.start(await repo.latestTransitionId());
      const now = new Date(clock.now());
      const rows = await repo.readOutcomes(cursor.after, cursor.gaps(now.getTime()), batchSize);
      const outcomes = rows.filter(
        (
          r,
        ): r is TransitionOutcome & {
          outcome: 'FAIL' | 'COMPLETE';
          kind: OperationKind;
          locationId: string;
        } => r.outcome !== null && r.kind !== null && r.locationId !== null,
      );
      const pairs = new Map<string, { kind: OperationKind; locationId: string }>();
      for (const o of outcomes)
        pairs.set(keyOf(o.kind, o.locationId), { kind: o.kind, locationId: o.locationId });

      const loaded = new Map<string, CircuitBreakerRecord>();
      for (const r of await repo.loadForPass([...pairs.values()]))
        loaded.set(keyOf(r.kind, r.locationId), r);
      const next = new Map<string, BreakerState>();
      const stateOf = (key: string) => next.get(key) ?? loaded.get(key) ?? CLOSED_BREAKER;
      for (const o of outcomes) {
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
      const written = await repo.write(writes, options.term?.fence);
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
          logger.log(
            'WARNING',
            from === CircuitState.HALF_OPEN
              ? 'circuit breaker probe failed; re-opened, scheduling stays parked for the pair'
              : 'circuit breaker opened; scheduling parked for the pair',
            { ...fields, cooldownMs: policy.cooldownMs },
          );
        } else {
          released = true;
          logger.log(
            'INFO',
            w.state === CircuitState.HALF_OPEN
              ? 'circuit breaker half-open; letting one probe through'
              : 'circuit breaker closed; scheduling resumed for the pair',
            fields,
          );
        }
      }
      if (written.length < writes.length) {
        logger.log('DEBUG', 'circuit breaker rows moved during the pass (operator reset?)', {
          skipped: writes.length - written.length,
        });
      }
      cursor.advance(
        rows.map((r) => r.id),
        now.getTime(),
      );
      if (released) onRelease?.();
      return rows.length >= batchSize;
    },
  };
}

/**
 * Runs `createCircuitBreaker`'s pass as a control-plane loop every `intervalMs`.
 *
 * @example
 * ```ts
 * const loop = startCircuitBreakerLoop({ database, clock, logger, batchSize: 1024,
 *   policy: { threshold: 5, cooldownMs: 60_000 }, intervalMs: 1_000 });
 * await loop.stop();
 * ```
 */
export function startCircuitBreakerLoop(
  options: CircuitBreakerOptions & { readonly intervalMs: number },
): Loop {
  const breaker = createCircuitBreaker(options);
  return startLoop({
    name: 'circuit breaker',
    intervalMs: options.intervalMs,
    clock: options.clock,
    logger: options.logger,
    pass: () =>
      options.term === undefined || options.term.valid() ? breaker.pass() : Promise.resolve(false),
  });
}
