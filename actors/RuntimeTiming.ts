import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { TransportTiming } from '../transport/Transport.ts';
import { resolveTiming } from '../transport/TransportTiming.ts';
import { type ControlPlaneTiming, DEFAULT_CONTROL_PLANE_TIMING } from './ControlPlane.ts';

/** Every timer of a runtime: the transport's (validated in order) plus the control plane's. */
export type RuntimeTiming = TransportTiming &
  ControlPlaneTiming & {
    /** How often the leader renews its lease and a standby tries to take a lapsed one [1 s]. */
    readonly leaderPollMs: number;
    /**
     * How long the leadership lease runs without renewal [10 s]: a frozen or dead leader is
     * replaced within this plus one poll. More than two polls.
     */
    readonly leaderLeaseMs: number;
  };

/** Resolves and validates every timer; a broken order is refused with `CONFIG`. */
export function resolveRuntimeTiming(overrides: Partial<RuntimeTiming> = {}): RuntimeTiming {
  const transport = resolveTiming(overrides);
  const plane: ControlPlaneTiming & { leaderPollMs: number; leaderLeaseMs: number } = {
    ...DEFAULT_CONTROL_PLANE_TIMING,
    monitorIntervalMs: Math.max(
      1,
      Math.min(transport.heartbeatIntervalMs, DEFAULT_CONTROL_PLANE_TIMING.monitorIntervalMs),
    ),
    reconcilerIntervalMs: Math.max(
      1,
      Math.min(
        Math.floor(transport.reconcilerFloorMs / 4),
        DEFAULT_CONTROL_PLANE_TIMING.reconcilerIntervalMs,
      ),
    ),
    leaderPollMs: 1_000,
    leaderLeaseMs: 10_000,
  };
  const picked = Object.fromEntries(
    Object.entries(overrides).filter(([k, v]) => v !== undefined && k in plane),
  );
  const merged = { ...transport, ...plane, ...picked } as RuntimeTiming;
  for (const k of Object.keys(plane) as (keyof typeof plane)[]) {
    const v = merged[k];
    if (!Number.isSafeInteger(v) || v <= 0) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `timer ${k} must be a positive integer; got ${String(v)}`,
      );
    }
  }
  if (!(merged.leaderLeaseMs > 2 * merged.leaderPollMs)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `leaderLeaseMs (${merged.leaderLeaseMs}) must exceed two leader polls (leaderPollMs ${merged.leaderPollMs}): a leader renews at every poll and must not lose its lease to one slow renewal; raise leaderLeaseMs`,
    );
  }
  return merged;
}
