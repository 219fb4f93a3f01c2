import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { TransportTiming } from './Transport.ts';

/** The default timers: a beat every 30 s, dead after 300 s, the floor at an hour, ack-wait above it. */
export const DEFAULT_TRANSPORT_TIMING: TransportTiming = Object.freeze({
  heartbeatIntervalMs: 30_000,
  heartbeatTimeoutMs: 300_000,
  reconcilerFloorMs: 3_600_000,
  ackWaitMs: 4_200_000,
  maxDeliver: 10,
  duplicateWindowMs: 120_000,
  heartbeatMaxAgeMs: 600_000,
});

const ORDER = [
  'heartbeatIntervalMs',
  'heartbeatTimeoutMs',
  'reconcilerFloorMs',
  'ackWaitMs',
] as const;

function configError(message: string, details: Record<string, unknown>): OpstateError {
  return new OpstateError(OpstateErrorCode.CONFIG, message, { details });
}

/**
 * Fills in defaults and validates the timers: every value a positive integer, and
 * `heartbeatIntervalMs < heartbeatTimeoutMs < reconcilerFloorMs < ackWaitMs`, and
 * `heartbeatMaxAgeMs > heartbeatTimeoutMs`. A config that breaks a rule is refused with an
 * `OpstateError` `CONFIG` whose message names the values and the fix.
 *
 * `heartbeatMaxAgeMs` defaults to twice the heartbeat timeout, so a stale heartbeat stays visible
 * to the monitor for a while before the store drops it.
 *
 * @example
 * ```ts
 * const timing = resolveTiming({ heartbeatIntervalMs: 100, heartbeatTimeoutMs: 400,
 *                                reconcilerFloorMs: 800, ackWaitMs: 1500 });
 * resolveTiming({ heartbeatTimeoutMs: 10_000 }); // throws CONFIG: 30000 ≮ 10000
 * ```
 */
export function resolveTiming(overrides: Partial<TransportTiming> = {}): TransportTiming {
  // The transport's own timers only: a runtime passes all of its timing (and its deadlines).
  const defined = Object.fromEntries(
    Object.entries(overrides).filter(([k, v]) => v !== undefined && k in DEFAULT_TRANSPORT_TIMING),
  ) as Partial<TransportTiming>;
  const base = { ...DEFAULT_TRANSPORT_TIMING, heartbeatMaxAgeMs: undefined, ...defined };
  const timing: TransportTiming = {
    ...base,
    heartbeatMaxAgeMs: base.heartbeatMaxAgeMs ?? 2 * base.heartbeatTimeoutMs,
  };
  for (const [name, value] of Object.entries(timing)) {
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
      throw configError(
        `Transport timer ${name} must be a positive integer (milliseconds or a count); got ${String(value)}.`,
        { [name]: value },
      );
    }
  }
  const values = Object.fromEntries(ORDER.map((name) => [name, timing[name]]));
  for (let i = 1; i < ORDER.length; i++) {
    const lower = ORDER[i - 1] as (typeof ORDER)[number];
    const upper = ORDER[i] as (typeof ORDER)[number];
    if (!(timing[lower] < timing[upper])) {
      const got = ORDER.map((name) => `${name}=${timing[name]}`).join(', ');
      throw configError(
        `Transport timers must satisfy ${ORDER.join(' < ')}; got ${got}: ` +
          `${lower} (${timing[lower]}) is not below ${upper} (${timing[upper]}). ` +
          `Raise ${upper} or lower ${lower}.`,
        values,
      );
    }
  }
  if (!(timing.heartbeatMaxAgeMs > timing.heartbeatTimeoutMs)) {
    throw configError(
      `heartbeatMaxAgeMs (${timing.heartbeatMaxAgeMs}) must exceed heartbeatTimeoutMs ` +
        `(${timing.heartbeatTimeoutMs}), or a live heartbeat could vanish from the store; raise it.`,
      {
        heartbeatMaxAgeMs: timing.heartbeatMaxAgeMs,
        heartbeatTimeoutMs: timing.heartbeatTimeoutMs,
      },
    );
  }
  return Object.freeze(timing);
}
