import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import type { OperationRecord } from '../../persistence/OperationRecord.ts';
import { afterRun, isRetryable, movedOn, onRefusal } from '../../worker/decideRun.ts';
import { type Triage, type TriageInput, triageDelivery } from '../../worker/triageDelivery.ts';
import { createWorkerRegistry, type Lease } from '../../worker/workerRegistry.ts';

const NOW = Date.UTC(2030, 0, 1);
const KIND = OperationKind.TRANSFER;
const stored = (status: OperationStatus, attempt = 2, kind = KIND) =>
  ({ id: 'op-1', kind, status, attempt, version: 5 }) as OperationRecord;
const input = (over: Partial<TriageInput> & { stored: OperationRecord }): TriageInput => ({
  message: { operationId: 'op-1', kind: KIND, operationType: 'transfer' as never, attempt: 2 },
  handled: true,
  localAttempt: undefined,
  deliveryCount: 1,
  now: NOW,
  ...over,
});

describe('triageDelivery: every branch', () => {
  const rows: [string, TriageInput, Triage][] = [
    [
      'the stored kind differs from the message: drop',
      input({ stored: stored('SCHEDULED', 2, OperationKind.UNPACK) }),
      { action: 'drop', reason: 'the dispatch says transfer, the operation is unpack' },
    ],
    [
      'no handler here for the kind: drop',
      input({ stored: stored('SCHEDULED'), handled: false }),
      { action: 'drop', reason: 'this worker has no handler for transfer' },
    ],
    [
      'COMPLETED: ack (early return), whatever the attempt',
      input({ stored: stored('COMPLETED', 3) }),
      { action: 'ack' },
    ],
    [
      'a superseded attempt: term',
      input({ stored: stored('SCHEDULED', 3) }),
      { action: 'term', reason: 'stale dispatch: attempt 3 is current' },
    ],
    ['SCHEDULED at this attempt: run', input({ stored: stored('SCHEDULED') }), { action: 'run' }],
    [
      'IN_PROGRESS here at this attempt: a redelivery of what runs here',
      input({ stored: stored('IN_PROGRESS'), localAttempt: 2 }),
      { action: 'running_here' },
    ],
    [
      'IN_PROGRESS elsewhere, holder not asked yet: check the heartbeats',
      input({ stored: stored('IN_PROGRESS') }),
      { action: 'check_holder' },
    ],
    [
      'IN_PROGRESS here under an older attempt counts as elsewhere',
      input({ stored: stored('IN_PROGRESS'), localAttempt: 1 }),
      { action: 'check_holder' },
    ],
    [
      'IN_PROGRESS elsewhere and a live worker holds it: leave it',
      input({ stored: stored('IN_PROGRESS'), holderAlive: true }),
      { action: 'held_elsewhere' },
    ],
    [
      'IN_PROGRESS elsewhere and nobody holds it: reclaim by the broker path',
      input({ stored: stored('IN_PROGRESS'), holderAlive: false, deliveryCount: 3 }),
      {
        action: 'reclaim',
        event: {
          type: 'RESET',
          by: 'broker',
          reason: 'redelivered (delivery 3) with no live holder',
          attempt: 2,
          at: new Date(NOW).toISOString(),
        },
      },
    ],
    [
      'PENDING at this attempt (reset meanwhile): term',
      input({ stored: stored('PENDING') }),
      { action: 'term', reason: 'the operation is PENDING' },
    ],
    [
      'FAILED at this attempt: term',
      input({ stored: stored('FAILED') }),
      { action: 'term', reason: 'the operation is FAILED' },
    ],
  ];
  it.each(rows)('%s', (_, i, triage) => {
    expect(triageDelivery(i)).toEqual(triage);
  });
});

describe('afterRun: every branch', () => {
  const operation = { id: 'op-1', kind: KIND, attempt: 2 };
  const retryable = new OpstateError(OpstateErrorCode.TRANSPORT, 'upload timed out', {
    retryable: true,
  });
  const fatal = new OpstateError(OpstateErrorCode.BAD_INPUT, 'no such package');
  const outputs = [
    { artifactType: 'data_transfer_package' as const, artifactId: 'a', locationId: 'l' },
  ];
  const rows: [string, Parameters<typeof afterRun>[0], string, Record<string, unknown>][] = [
    [
      'a result completes with its outputs',
      { operation, outcome: { ok: true, outputs }, abort: undefined, stopping: false, now: NOW },
      'complete',
      { outputs },
    ],
    [
      'a retryable error fails, retryable, with its code',
      {
        operation,
        outcome: { ok: false, error: retryable },
        abort: undefined,
        stopping: false,
        now: NOW,
      },
      'fail',
      {
        event: {
          type: 'FAIL',
          attempt: 2,
          at: new Date(NOW).toISOString(),
          error: { message: 'upload timed out', retryable: true, code: 'TRANSPORT' },
        },
        // A handler's failure is at warn, with the error itself (pino writes its stack).
        line: {
          level: 'WARNING',
          message: 'operation failed',
          fields: { operationId: 'op-1', attempt: 2, retryable: true, err: retryable },
        },
      },
    ],
    [
      'a non-retryable error fails for good',
      {
        operation,
        outcome: { ok: false, error: fatal },
        abort: undefined,
        stopping: false,
        now: NOW,
      },
      'fail',
      {
        event: {
          type: 'FAIL',
          attempt: 2,
          at: new Date(NOW).toISOString(),
          error: { message: 'no such package', retryable: false, code: 'BAD_INPUT' },
        },
        line: { level: 'WARNING', fields: { retryable: false, err: fatal } },
      },
    ],
    [
      'any other throw is retryable, without a code',
      {
        operation,
        outcome: { ok: false, error: 'disk full' },
        abort: undefined,
        stopping: false,
        now: NOW,
      },
      'fail',
      {
        event: {
          type: 'FAIL',
          attempt: 2,
          at: new Date(NOW).toISOString(),
          error: { message: 'disk full', retryable: true },
        },
      },
    ],
    [
      'aborted while stopping: hand it back, even if it returned',
      {
        operation,
        outcome: { ok: true, outputs },
        abort: { reason: new Error('worker stopping') },
        stopping: true,
        now: NOW,
      },
      'hand_back',
      {},
    ],
    [
      'aborted by a reset: let go, even if it returned',
      {
        operation,
        outcome: { ok: true, outputs },
        abort: { reason: new Error('operation moved to PENDING at attempt 3') },
        stopping: false,
        now: NOW,
      },
      'let_go',
      {
        line: {
          level: 'INFO',
          message: 'worker let go of an operation that moved on',
          fields: {
            operationId: 'op-1',
            attempt: 2,
            reason: 'operation moved to PENDING at attempt 3',
          },
        },
      },
    ],
    [
      'aborted past its deadline, even if it returned late: let go with a WARNING, nothing written',
      {
        operation,
        outcome: { ok: true, outputs },
        abort: {
          reason: new OpstateError(
            OpstateErrorCode.DEADLINE_PASSED,
            'deadline passed: attempt 2 of transfer op-1 has run for 3.0 s since its START, past its deadline of 3 s (set at submit); the control plane resets it',
            { retryable: true },
          ),
        },
        stopping: false,
        now: NOW,
      },
      'let_go',
      {
        line: {
          level: 'WARNING',
          message: 'worker let go of an attempt past its deadline; its result is not written',
          fields: {
            operationId: 'op-1',
            kind: KIND,
            attempt: 2,
            outcome: 'returned',
            reason: expect.stringMatching(/^deadline passed: .* past its deadline of 3 s/),
          },
        },
      },
    ],
    [
      'aborted by a cancel while it threw: let go, no FAIL',
      {
        operation,
        outcome: { ok: false, error: fatal },
        abort: { reason: 'cancelled' },
        stopping: false,
        now: NOW,
      },
      'let_go',
      {},
    ],
  ];
  it.each(rows)('%s', (_, i, action, fields) => {
    const next = afterRun(i);
    expect(next.action).toBe(action);
    expect(next).toMatchObject(fields);
  });

  it('a long error message is cut to 2,000 characters in the event, kept whole in the log', () => {
    const next = afterRun({
      operation,
      outcome: { ok: false, error: new Error('x'.repeat(5000)) },
      abort: undefined,
      stopping: false,
      now: NOW,
    });
    if (next.action !== 'fail') throw new Error('expected fail');
    expect(next.event.error.message).toHaveLength(2000);
    expect((next.line.fields?.err as Error | undefined)?.message).toHaveLength(5000);
  });

  const retryables: [string, unknown, boolean][] = [
    ['an OpstateError that says retryable', retryable, true],
    ['an OpstateError that says not', fatal, false],
    ['an object with retryable: false', { retryable: false }, false],
    ['an object with retryable: true', { retryable: true }, true],
    ['a plain Error', new Error('x'), true],
    ['a string', 'x', true],
  ];
  it.each(retryables)('isRetryable: %s', (_, err, yes) => {
    expect(isRetryable(err)).toBe(yes);
  });
});

describe('onRefusal', () => {
  const e = (code: OpstateErrorCode) =>
    new OpstateError(code, code, { retryable: code === 'DATABASE' });
  const rows: [string, unknown, 'start' | 'finish', string][] = [
    [
      'START lost its compare-and-set: judge again',
      e(OpstateErrorCode.CONFLICT),
      'start',
      'retriage',
    ],
    ['START of a superseded attempt: term', e(OpstateErrorCode.STALE_ATTEMPT), 'start', 'term'],
    ['START the state no longer takes: term', e(OpstateErrorCode.INVALID_EVENT), 'start', 'term'],
    [
      'START with the database down: raise (redelivered later)',
      e(OpstateErrorCode.DATABASE),
      'start',
      'raise',
    ],
    [
      'a completion of a superseded attempt: term',
      e(OpstateErrorCode.STALE_ATTEMPT),
      'finish',
      'term',
    ],
    [
      'a completion the state no longer takes: term',
      e(OpstateErrorCode.INVALID_EVENT),
      'finish',
      'term',
    ],
    [
      'a completion that lost its compare-and-set: raise (redelivered, then judged again)',
      e(OpstateErrorCode.CONFLICT),
      'finish',
      'raise',
    ],
    [
      'a completion refused by the kind’s output contract: the handler’s failure',
      e(OpstateErrorCode.OUTPUT_CONTRACT),
      'finish',
      'fail',
    ],
    [
      'a completion refused for malformed outputs: the handler’s failure',
      e(OpstateErrorCode.BAD_INPUT),
      'finish',
      'fail',
    ],
    [
      'START refused as malformed: raise (not a handler’s result)',
      e(OpstateErrorCode.BAD_INPUT),
      'start',
      'raise',
    ],
    ['something else: raise', new Error('boom'), 'finish', 'raise'],
  ];
  it.each(rows)('%s', (_, err, phase, refusal) => {
    expect(onRefusal(err, phase)).toBe(refusal);
  });
});

describe('movedOn', () => {
  it('aborts what is no longer IN_PROGRESS at the attempt it runs, and what is gone', () => {
    const running = [
      { operationId: 'same', attempt: 1 },
      { operationId: 'reset', attempt: 1 },
      { operationId: 'cancelled', attempt: 1 },
      { operationId: 'gone', attempt: 1 },
    ];
    const current = new Map<string, { status: OperationStatus; attempt: number }>([
      ['same', { status: 'IN_PROGRESS', attempt: 1 }],
      ['reset', { status: 'IN_PROGRESS', attempt: 2 }],
      ['cancelled', { status: 'FAILED', attempt: 1 }],
    ]);
    expect(movedOn(running, current)).toEqual([
      { operationId: 'reset', attempt: 1, reason: 'operation moved to IN_PROGRESS at attempt 2' },
      { operationId: 'cancelled', attempt: 1, reason: 'operation moved to FAILED at attempt 1' },
      { operationId: 'gone', attempt: 1, reason: 'operation moved to nowhere at attempt ?' },
    ]);
  });
});

describe('the worker registry', () => {
  const leaseOf = (attempt: number): Lease => ({
    operationId: 'op',
    kind: OperationKind.LONG_TERM_ARCHIVE,
    attempt,
    taskId: `t-${attempt}`,
    startedAt: 0,
    abort: new AbortController(),
  });

  it('fences abort and release on the attempt: what was meant for an attempt whose handler hung never reaches the next attempt started since', () => {
    const registry = createWorkerRegistry();
    const first = leaseOf(1);
    registry.trigger.leased({ lease: first });
    // The next attempt starts here while the first one's handler has not returned.
    const second = leaseOf(2);
    registry.trigger.leased({ lease: second });
    // A beat read the leases before the second started, and found the first moved on.
    registry.trigger.abort({ operationId: 'op', attempt: 1, reason: 'moved on' });
    expect(second.abort.signal.aborted).toBe(false);
    // The first's handler returns at last and lets go of its own lease only.
    registry.trigger.released({ operationId: 'op', attempt: 1 });
    expect(registry.getSnapshot().context.leases.get('op')).toBe(second);
    registry.trigger.abort({ operationId: 'op', attempt: 2, reason: 'reset' });
    expect(second.abort.signal.aborted).toBe(true);
    registry.trigger.released({ operationId: 'op', attempt: 2 });
    expect(registry.getSnapshot().context.leases.has('op')).toBe(false);
  });
});
