/**
 * States of a circuit breaker: CLOSED lets work through, OPEN parks it, HALF_OPEN lets one probe
 * through at a time.
 */
export const CircuitState = {
  CLOSED: 'CLOSED',
  OPEN: 'OPEN',
  HALF_OPEN: 'HALF_OPEN',
} as const;
export type CircuitState = (typeof CircuitState)[keyof typeof CircuitState];
export const CIRCUIT_STATES: readonly CircuitState[] = Object.freeze(Object.values(CircuitState));

/** The last failure a breaker counted: the operation's error plus which attempt raised it. */
export interface CircuitFailure {
  readonly message: string;
  readonly retryable: boolean;
  readonly code?: string;
  readonly operationId: string;
  readonly attempt: number;
  /** When the failure was recorded (ISO). */
  readonly at: string;
}

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

/** Whether two breakers are the same (nothing to write). */
export function sameBreaker(a: BreakerState, b: BreakerState): boolean {
  return (
    a.state === b.state &&
    a.consecutiveFailures === b.consecutiveFailures &&
    a.openedAt?.getTime() === b.openedAt?.getTime() &&
    a.lastFailure === b.lastFailure
  );
}
