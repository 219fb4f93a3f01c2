import type { PlannedReset } from '../loops/PlannedReset.ts';
import {
  type Deadlines,
  deadlineOf,
  describeDeadline,
  formatRunTime,
} from '../machines/deadlines.ts';
import type { RunningAttempt } from '../persistence/ActiveOperation.ts';

/**
 * The deadline path's pass, pure: each IN_PROGRESS attempt that has run for at least its deadline
 * (the operation's own `deadlineMs`, else its kind's) since its START gets a RESET by `deadline`,
 * fenced on that attempt, with one WARNING naming the operation, the worker, how long it ran and
 * the deadline. Heartbeats are not consulted: a handler that hangs inside a live worker, which
 * goes on beating, or a heartbeat that lists it falsely, cannot keep the attempt past its deadline.
 * The reset returns the operation to PENDING under a new attempt and spends a retry, as every
 * reset does (FAILED once the budget is spent).
 *
 * @example
 * ```ts
 * const running = await store.listPastDeadline(new Date(now), timing.deadlines);
 * const resets = planDeadlineResets({ now, deadlines: timing.deadlines, running });
 * ```
 */
export function planDeadlineResets(input: {
  readonly now: number;
  readonly deadlines: Deadlines;
  readonly running: readonly RunningAttempt[];
}): PlannedReset[] {
  const { now, deadlines } = input;
  const at = new Date(now).toISOString();
  const resets: PlannedReset[] = [];
  for (const op of input.running) {
    const deadline = deadlineOf(op.kind, op.deadlineMs, deadlines);
    const ranMs = now - op.startedAt.getTime();
    if (ranMs < deadline.ms) continue;
    const reason = `deadline passed: IN_PROGRESS on ${op.workerId ?? 'an unknown worker'} for ${formatRunTime(ranMs)} since its START, past its deadline of ${describeDeadline(op.kind, deadline)}; reset whatever its heartbeats say`;
    resets.push({
      id: op.id,
      kind: op.kind,
      status: 'IN_PROGRESS',
      attempt: op.attempt,
      event: { type: 'RESET', by: 'deadline', reason, attempt: op.attempt, at },
      line: {
        level: 'WARNING',
        message: 'deadline reset operation',
        fields: {
          operationId: op.id,
          kind: op.kind,
          status: 'IN_PROGRESS',
          attempt: op.attempt,
          workerId: op.workerId,
          deadlineMs: deadline.ms,
          ranMs,
          reason,
        },
      },
    });
  }
  return resets;
}
