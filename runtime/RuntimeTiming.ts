import { DEFAULT_CONTROL_PLANE_TIMING } from '../control-plane/ControlPlane.ts';
import type { ControlPlaneTiming } from '../control-plane/ControlPlaneTiming.ts';
import { type Deadlines, resolveDeadlines } from '../machines/deadlines.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { TransportTiming } from '../transport/Transport.ts';
import { resolveTiming } from '../transport/TransportTiming.ts';

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
    /**
     * How long one attempt of each kind may stay IN_PROGRESS from its START unless the operation
     * says otherwise (`deadlineMs` at submit): `OPSTATE_DEADLINES` over `DEFAULT_DEADLINES_MS`.
     */
    readonly deadlines: Deadlines;
  };

/** The timers given as milliseconds (`OPSTATE_TIMING`, the `timing` option): all but deadlines. */
export type RuntimeTimers = Omit<RuntimeTiming, 'deadlines'>;

/** Deadlines given per kind (`OPSTATE_DEADLINES`, the `deadlines` option), in ms. */
export type DeadlineOverrides = Readonly<Partial<Record<OperationKind, number>>>;

/**
 * Resolves and validates every timer; a broken order is refused with `CONFIG`. The deadlines are
 * the defaults with the kinds `deadlines` names replaced (`resolveDeadlines`).
 *
 * @example
 * ```ts
 * const timing = resolveRuntimeTiming({ heartbeatIntervalMs: 1_000 }, { transfer: 7_200_000 });
 * ```
 */
export function resolveRuntimeTiming(
  overrides: Partial<RuntimeTimers> = {},
  deadlines: DeadlineOverrides = {},
): RuntimeTiming {
  // A resolved timing passed back in keeps its deadlines, which are not timers of the transport.
  const { deadlines: given, ...timers } = overrides as Partial<RuntimeTiming>;
  overrides = timers;
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
  const merged = {
    ...transport,
    ...plane,
    ...picked,
    deadlines: resolveDeadlines({ ...given, ...deadlines }),
  } as RuntimeTiming;
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
