import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import { replayTransitions, type StoredTransition } from '../../machines/replayTransitions.ts';

let id = 0;
const row = (
  from: OperationStatus | null,
  to: OperationStatus,
  event: string,
  by: string,
  attempt: number,
  reason: string | null = null,
): StoredTransition => ({
  id: ++id,
  from,
  to,
  event,
  by,
  attempt,
  reason,
  at: new Date(Date.UTC(2026, 10, 30, 12, 0, id)),
});

const op = { kind: OperationKind.TRANSFER, maxRetries: 1 };

describe('replaying stored transitions through the lifecycle machine', () => {
  it('rebuilds each event from its row and reaches each stored status, budget included', () => {
    const history = [
      row(null, 'PENDING', 'CREATE', 'ingest', 1),
      row('PENDING', 'SCHEDULED', 'SCHEDULE', 'scheduler', 1),
      row('SCHEDULED', 'IN_PROGRESS', 'START', 'worker-1', 1),
      row('IN_PROGRESS', 'PENDING', 'FAIL', 'worker-1', 1, 'disk full'),
      row('PENDING', 'SCHEDULED', 'SCHEDULE', 'scheduler', 2),
      // The budget (1) is spent: the broker's reset fails the operation.
      row('SCHEDULED', 'FAILED', 'RESET', 'broker', 2, 'redelivered with no live task'),
      row('FAILED', 'PENDING', 'RETRY', 'operator', 2, 'disk replaced'),
      row('PENDING', 'FAILED', 'CANCEL', 'operator', 3, 'superseded'),
    ];
    const steps = replayTransitions(op, history);
    expect(steps.map((s) => [s.event.type, s.snapshot.value, s.snapshot.context.attempt])).toEqual([
      ['xstate.init', 'PENDING', 1],
      ['SCHEDULE', 'SCHEDULED', 1],
      ['START', 'IN_PROGRESS', 1],
      ['FAIL', 'PENDING', 2],
      ['SCHEDULE', 'SCHEDULED', 2],
      ['RESET', 'FAILED', 2],
      ['RETRY', 'PENDING', 3],
      ['CANCEL', 'FAILED', 3],
    ]);
    expect(steps.every((s) => !s.diverged)).toBe(true);
    expect(steps[2]?.event).toMatchObject({ workerId: 'worker-1', attempt: 1 });
    expect(steps[3]?.event).toMatchObject({ error: { message: 'disk full', retryable: true } });
    expect(steps[5]?.event).toMatchObject({ by: 'broker', attempt: 2 });
    expect(steps[5]?.snapshot.context.lastError?.code).toBe('RETRIES_EXHAUSTED');
    expect(steps[6]?.snapshot.context.retryCount).toBe(0);
    expect(steps[7]?.snapshot.context.lastError?.code).toBe('CANCELLED');
  });

  it('uses the failure breadcrumb when there is one, and a non-retryable failure goes to FAILED', () => {
    const steps = replayTransitions(op, [
      row(null, 'PENDING', 'CREATE', 'ingest', 1),
      row('PENDING', 'SCHEDULED', 'SCHEDULE', 'scheduler', 1),
      row('SCHEDULED', 'IN_PROGRESS', 'START', 'w', 1),
      {
        ...row('IN_PROGRESS', 'FAILED', 'FAIL', 'w', 1, 'bad'),
        error: { message: 'checksum mismatch', retryable: false, code: 'CHECKSUM' },
      },
    ]);
    expect(steps.at(-1)?.snapshot).toMatchObject({
      value: 'FAILED',
      context: { lastError: { code: 'CHECKSUM' } },
    });
  });

  it('shows the stored status where the machine would not take the step, and says so', () => {
    const steps = replayTransitions(op, [
      row(null, 'PENDING', 'CREATE', 'ingest', 1),
      row('PENDING', 'COMPLETED', 'COMPLETE', 'hand-edited', 1),
    ]);
    expect(steps[1]).toMatchObject({ diverged: true, snapshot: { value: 'COMPLETED' } });
  });

  it('continues from the snapshot a live stream last showed', () => {
    const [first, second] = replayTransitions(op, [
      row(null, 'PENDING', 'CREATE', 'ingest', 1),
      row('PENDING', 'SCHEDULED', 'SCHEDULE', 'scheduler', 1),
    ]);
    const more = replayTransitions(
      op,
      [row('SCHEDULED', 'IN_PROGRESS', 'START', 'w-2', 1)],
      second?.snapshot,
    );
    expect(first?.snapshot.value).toBe('PENDING');
    expect(more.map((s) => [s.snapshot.value, s.diverged])).toEqual([['IN_PROGRESS', false]]);
  });
});
