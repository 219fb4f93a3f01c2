import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { WorkerHeartbeat } from './Transport.ts';

const FIX =
  'stop the other process, or give this one another id (--id, or workerId when embedding)';

/**
 * The rule of `Heartbeats.claim`, pure: a worker id whose stored heartbeat is fresh (younger than
 * `timeoutMs` at `now`) and was written by another process instance belongs to a live process,
 * and a second one starting with it is refused with `CONFIG` naming the id and when it frees up.
 * A stale heartbeat (its process died or stopped), one of the same instance, or none, is taken
 * over: returns undefined.
 *
 * @example
 * ```ts
 * const refusal = refuseClaim({ workerId, instance, stored, now: clock.now(), timeoutMs });
 * if (refusal) throw refusal;
 * ```
 */
export function refuseClaim(input: {
  readonly workerId: string;
  readonly instance: string;
  readonly stored: WorkerHeartbeat | undefined;
  readonly now: number;
  readonly timeoutMs: number;
}): OpstateError | undefined {
  const { workerId, stored, now, timeoutMs } = input;
  if (stored === undefined || stored.instance === input.instance) return undefined;
  const age = now - stored.at;
  if (age >= timeoutMs) return undefined;
  return new OpstateError(
    OpstateErrorCode.CONFIG,
    `Worker id ${JSON.stringify(workerId)} is in use: another process (instance ${stored.instance ?? 'unknown'}) wrote its heartbeat ${Math.round(age / 1000)} s ago. Two live processes with one id would vouch for each other's operations; ${FIX}. If that process has died, its heartbeat goes stale in ${Math.ceil((timeoutMs - age) / 1000)} s and the id can be used again.`,
    {
      details: {
        workerId,
        otherInstance: stored.instance ?? null,
        ageMs: age,
        freeInMs: timeoutMs - age,
      },
    },
  );
}

/**
 * The refusal of a claim that lost its compare-and-set: another instance wrote the key between
 * the read and the write.
 *
 * @example
 * ```ts
 * throw claimRaced('w-1');
 * ```
 */
export function claimRaced(workerId: string): OpstateError {
  return new OpstateError(
    OpstateErrorCode.CONFIG,
    `Worker id ${JSON.stringify(workerId)} was taken by another process starting at the same moment: ${FIX}.`,
    { details: { workerId } },
  );
}
