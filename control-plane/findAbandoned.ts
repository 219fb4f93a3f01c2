import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationStatus } from '../machines/operationMachine.ts';
import type { WorkerHeartbeat } from '../transport/Transport.ts';

/** What the heartbeat monitor knows of an active operation. */
export interface ActiveAttempt {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  readonly attempt: number;
  /** The worker that started it (recorded by START); null while it is not IN_PROGRESS. */
  readonly workerId: string | null;
}

/** An operation to reset, and why. */
export interface Abandoned {
  readonly id: string;
  readonly kind: OperationKind;
  readonly attempt: number;
  readonly status: OperationStatus;
  /** The worker(s) whose heartbeat counted for it: the one that started it, when one did. */
  readonly workerIds: readonly string[];
  readonly reason: string;
}

/**
 * The heartbeat monitor's decision, pure. What keeps an active operation alive depends on whether
 * it was started:
 * - IN_PROGRESS, started by worker W (the START recorded W): only W's heartbeat counts. It is
 *   alive while W's fresh heartbeat lists it at its current attempt, however many other heartbeats
 *   list it; once some heartbeat listing it has gone stale and W's fresh one does not list it (W
 *   stopped beating, or let it go), it is reset. Another worker listing it, by mistake or on
 *   purpose, cannot keep it pinned.
 * - SCHEDULED (pulled, not started; no worker recorded yet), or IN_PROGRESS with no worker
 *   recorded: any heartbeat counts, as no START says whose it is. Listed at its attempt by
 *   heartbeats that are all stale, it is reset; listed by any fresh one, it is alive.
 *
 * One listed by no heartbeat at its attempt is not the monitor's to judge (the reconciler's floor
 * covers a lost heartbeat, a queued dispatch is left alone).
 *
 * @example
 * ```ts
 * findAbandoned({ now: clock.now(), timeoutMs: 300_000, beats: await heartbeats.list(),
 *   operations: [{ id, kind, status: 'IN_PROGRESS', attempt: 1, workerId: 'w-1' }] });
 * ```
 */
export function findAbandoned(input: {
  readonly now: number;
  readonly timeoutMs: number;
  readonly beats: readonly WorkerHeartbeat[];
  readonly operations: readonly ActiveAttempt[];
}): Abandoned[] {
  const { now, timeoutMs, beats, operations } = input;
  const fresh = (b: WorkerHeartbeat) => now - b.at < timeoutMs;
  const holders = new Map<string, WorkerHeartbeat[]>();
  for (const beat of beats) {
    for (const h of beat.held) {
      const key = `${h.kind}.${h.operationId}.${h.attempt}`;
      const list = holders.get(key) ?? [];
      list.push(beat);
      holders.set(key, list);
    }
  }
  const abandoned: Abandoned[] = [];
  for (const op of operations) {
    if (op.status !== 'SCHEDULED' && op.status !== 'IN_PROGRESS') continue;
    const listing = holders.get(`${op.kind}.${op.id}.${op.attempt}`) ?? [];
    if (listing.length === 0) continue;
    const started = op.status === 'IN_PROGRESS' ? (op.workerId ?? null) : null;
    const seconds = (ms: number) => Math.round(ms / 1000);
    if (started !== null) {
      const own = listing.find((b) => b.workerId === started);
      if (own !== undefined && fresh(own)) continue;
      // Only positive news of a death resets: a stale heartbeat that lists it. One listed by
      // fresh heartbeats of other workers alone is the reconciler's, past its floor.
      if (own === undefined && listing.every(fresh)) continue;
      const others = listing.filter((b) => b.workerId !== started).map((b) => b.workerId);
      abandoned.push({
        id: op.id,
        kind: op.kind,
        attempt: op.attempt,
        status: op.status,
        workerIds: [started],
        reason: `running on ${started}, ${
          own === undefined
            ? 'whose heartbeat no longer lists it'
            : `whose last heartbeat was ${seconds(now - own.at)} s ago`
        } (timeout ${timeoutMs / 1000} s)${
          others.length === 0 ? '' : `; also listed by ${others.join(', ')}, which did not start it`
        }`,
      });
      continue;
    }
    if (listing.some(fresh)) continue;
    const newest = Math.max(...listing.map((b) => b.at));
    abandoned.push({
      id: op.id,
      kind: op.kind,
      attempt: op.attempt,
      status: op.status,
      workerIds: listing.map((b) => b.workerId),
      reason: `${op.status === 'SCHEDULED' ? 'dispatch held' : 'running'} by ${listing
        .map((b) => b.workerId)
        .join(
          ', ',
        )}, whose last heartbeat was ${seconds(now - newest)} s ago (timeout ${timeoutMs / 1000} s)`,
    });
  }
  return abandoned;
}
