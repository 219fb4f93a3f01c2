import { describe, expect, it } from 'vitest';
import { planDeadlineResets } from '../../control-plane/planDeadlinePass.ts';
import { DEFAULT_DEADLINES_MS, resolveDeadlines } from '../../machines/deadlines.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import type { RunningAttempt } from '../../persistence/ActiveOperation.ts';

const NOW = Date.parse('2026-12-01T12:00:00Z');
const HOUR = 3_600_000;
const running = (over: Partial<RunningAttempt> & { ranMs: number }): RunningAttempt => {
  const { ranMs, ...rest } = over;
  return {
    id: 'op-1',
    kind: OperationKind.LONG_TERM_ARCHIVE,
    attempt: 2,
    startedAt: new Date(NOW - ranMs),
    workerId: 'w-1',
    deadlineMs: null,
    ...rest,
  };
};

describe('planDeadlineResets: every branch', () => {
  // [what, attempt, deadlines, reset reason (null: left alone)]
  const rows: [string, RunningAttempt, typeof DEFAULT_DEADLINES_MS, string | null][] = [
    [
      'within its kind’s deadline: left alone, whatever else is known',
      running({ ranMs: 24 * HOUR - 1 }),
      DEFAULT_DEADLINES_MS,
      null,
    ],
    [
      'exactly at its kind’s deadline: reset',
      running({ ranMs: 24 * HOUR }),
      DEFAULT_DEADLINES_MS,
      "deadline passed: IN_PROGRESS on w-1 for 24.0 h since its START, past its deadline of 24 h (long_term_archive's); reset whatever its heartbeats say",
    ],
    [
      'past its kind’s deadline as configured',
      running({ kind: OperationKind.TRANSFER, ranMs: 2 * HOUR + 60_000 }),
      resolveDeadlines({ transfer: 2 * HOUR }),
      "deadline passed: IN_PROGRESS on w-1 for 2.0 h since its START, past its deadline of 2 h (transfer's); reset whatever its heartbeats say",
    ],
    [
      'past its own deadline from submit, though its kind’s is far off',
      running({ ranMs: 3_200, deadlineMs: 3_000 }),
      DEFAULT_DEADLINES_MS,
      'deadline passed: IN_PROGRESS on w-1 for 3.2 s since its START, past its deadline of 3 s (set at submit); reset whatever its heartbeats say',
    ],
    [
      'its own deadline is longer than its kind’s: the own one counts',
      running({ ranMs: 25 * HOUR, deadlineMs: 48 * HOUR }),
      DEFAULT_DEADLINES_MS,
      null,
    ],
    [
      'no worker recorded: reset all the same',
      running({ ranMs: 5_000, deadlineMs: 3_000, workerId: null }),
      DEFAULT_DEADLINES_MS,
      'deadline passed: IN_PROGRESS on an unknown worker for 5.0 s since its START, past its deadline of 3 s (set at submit); reset whatever its heartbeats say',
    ],
  ];
  it.each(rows)('%s', (_, attempt, deadlines, reason) => {
    const resets = planDeadlineResets({ now: NOW, deadlines, running: [attempt] });
    if (reason === null) {
      expect(resets).toEqual([]);
      return;
    }
    expect(resets).toEqual([
      {
        id: attempt.id,
        kind: attempt.kind,
        status: 'IN_PROGRESS',
        attempt: 2,
        // Fenced on the attempt judged late: refused if it moved on meanwhile.
        event: {
          type: 'RESET',
          by: 'deadline',
          reason,
          attempt: 2,
          at: new Date(NOW).toISOString(),
        },
        line: {
          level: 'WARNING',
          message: 'deadline reset operation',
          fields: {
            operationId: attempt.id,
            kind: attempt.kind,
            status: 'IN_PROGRESS',
            attempt: 2,
            workerId: attempt.workerId,
            deadlineMs: attempt.deadlineMs ?? deadlines[attempt.kind],
            ranMs: NOW - attempt.startedAt.getTime(),
            reason,
          },
        },
      },
    ]);
  });
});
