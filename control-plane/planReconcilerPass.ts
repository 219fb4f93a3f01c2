import type { PlannedReset } from '../loops/PlannedReset.ts';
import type { LogLine } from '../observe/LogLine.ts';
import type { ActiveOperation } from '../persistence/ActiveOperation.ts';
import type { WaitingDispatches, WorkerHeartbeat } from '../transport/Transport.ts';

/**
 * The reconciler's pass, pure: of the SCHEDULED / IN_PROGRESS operations older than the floor,
 * those no fresh heartbeat holds at their current attempt (a dispatch lost on its way, a worker
 * whose heartbeat was purged) get a RESET by `reconciler`, fenced on that attempt, with one
 * WARNING naming the operation and why. An IN_PROGRESS one counts as held only by the heartbeat of
 * the worker that started it (as `holdsAlive` with the recorded worker), so a fresh heartbeat of
 * another worker that lists it does not pin it. One a live worker holds is left alone, however
 * old (a long-running operation is not lost).
 *
 * @example
 * ```ts
 * const old = await store.listActiveOlderThan(new Date(now - timing.reconcilerFloorMs));
 * const resets = planReconcilerResets({ now, timing, beats: await heartbeats.list(), old });
 * ```
 */
export function planReconcilerResets(input: {
  readonly now: number;
  readonly timing: { readonly heartbeatTimeoutMs: number; readonly reconcilerFloorMs: number };
  readonly beats: readonly WorkerHeartbeat[];
  readonly old: readonly ActiveOperation[];
}): PlannedReset[] {
  const { now, timing, beats } = input;
  const at = new Date(now).toISOString();
  const holders = liveHolders(beats, now, timing.heartbeatTimeoutMs);
  const resets: PlannedReset[] = [];
  for (const op of input.old) {
    if (now - op.since.getTime() < timing.reconcilerFloorMs) continue;
    const held = holders.get(holdKey(op.kind, op.id, op.attempt));
    // IN_PROGRESS: only the heartbeat of the worker that started it vouches for it.
    const holder = op.status === 'IN_PROGRESS' ? (op.workerId ?? undefined) : undefined;
    if (held !== undefined && (holder === undefined || held.has(holder))) continue;
    const age = Math.round((now - op.since.getTime()) / 1000);
    const reason = `${op.status} for ${age} s (floor ${timing.reconcilerFloorMs / 1000} s) with no live worker holding it`;
    resets.push({
      id: op.id,
      kind: op.kind,
      status: op.status,
      attempt: op.attempt,
      event: { type: 'RESET', by: 'reconciler', reason, attempt: op.attempt, at },
      line: {
        level: 'WARNING',
        message: 'reconciler reset operation',
        fields: {
          operationId: op.id,
          kind: op.kind,
          status: op.status,
          attempt: op.attempt,
          workerId: op.workerId,
          reason,
        },
      },
    });
  }
  return resets;
}

const holdKey = (kind: string, id: string, attempt: number) => `${kind}|${id}|${attempt}`;

/**
 * The workers whose fresh heartbeat lists each (kind, operation, attempt), built once per pass:
 * asking every heartbeat about every operation costs the square of the number in flight.
 */
function liveHolders(
  beats: readonly WorkerHeartbeat[],
  now: number,
  timeoutMs: number,
): Map<string, Set<string>> {
  const holders = new Map<string, Set<string>>();
  for (const b of beats) {
    if (now - b.at >= timeoutMs) continue;
    for (const h of b.held) {
      const key = holdKey(h.kind, h.operationId, h.attempt);
      const workers = holders.get(key) ?? new Set<string>();
      workers.add(b.workerId);
      holders.set(key, workers);
    }
  }
  return holders;
}

/**
 * The reconciler's second look, pure: a SCHEDULED operation it would reset whose dispatch of the
 * same attempt still waits in its queue, not yet handed out (`Transport.waiting`), is not lost
 * while a worker with a fresh heartbeat reads that queue: it is waiting for a free slot, behind
 * busy ones, and resetting it would only send it to the back of the same queue. Those resets are
 * dropped and counted per queue for one INFO line. A dispatch waiting in a queue no live worker
 * reads is reset as before, and so is one the read did not reach.
 *
 * @example
 * ```ts
 * const wanted = new Map(resets.filter((r) => r.status === 'SCHEDULED').map((r) => [r.id, r.attempt]));
 * const { resets: kept, spared } = spareWaiting({ resets, waiting: await transport.waiting(wanted), beats, now, heartbeatTimeoutMs });
 * ```
 */
export function spareWaiting(input: {
  readonly resets: readonly PlannedReset[];
  readonly waiting: WaitingDispatches;
  readonly beats: readonly WorkerHeartbeat[];
  readonly now: number;
  readonly heartbeatTimeoutMs: number;
}): { resets: PlannedReset[]; spared: Map<string, number>; line?: LogLine } {
  const read = new Set<string>();
  for (const b of input.beats) {
    if (input.now - b.at >= input.heartbeatTimeoutMs) continue;
    for (const q of b.reads?.queues ?? []) read.add(q);
  }
  const queueOf = new Map<string, string>();
  for (const w of input.waiting.found) {
    if (read.has(w.queue)) queueOf.set(`${w.message.operationId}|${w.message.attempt}`, w.queue);
  }
  const resets: PlannedReset[] = [];
  const spared = new Map<string, number>();
  for (const r of input.resets) {
    const queue = r.status === 'SCHEDULED' ? queueOf.get(`${r.id}|${r.attempt}`) : undefined;
    if (queue === undefined) resets.push(r);
    else spared.set(queue, (spared.get(queue) ?? 0) + 1);
  }
  if (spared.size === 0) return { resets, spared };
  const count = [...spared.values()].reduce((a, b) => a + b, 0);
  const line: LogLine = {
    level: 'INFO',
    message: 'reconciler left dispatches waiting in their queues',
    fields: { count, queues: Object.fromEntries(spared), complete: input.waiting.complete },
  };
  return { resets, spared, line };
}
