import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { defaultRoute, OperationType } from '../../machines/routing.ts';
import {
  decodeDispatch,
  dispatchMessageSchema,
  dispatchMsgId,
  encodeDispatch,
} from '../../transport/DispatchMessage.ts';
import {
  encodeHeld,
  heldThatFits,
  MAX_HEARTBEAT_BYTES,
  parseWorkerHeartbeat,
  readWorkerHeartbeat,
  workerHeartbeatKey,
} from '../../transport/HeartbeatKey.ts';
import { HeartbeatRefusals } from '../../transport/HeartbeatRefusals.ts';
import { createInProcessTransport } from '../../transport/inprocess/createInProcessTransport.ts';
import { type GivenUpEvidence, judgeGivenUp } from '../../transport/jetstream/judgeGivenUp.ts';
import { refuseClaim } from '../../transport/refuseClaim.ts';
import { nakDelayAfter } from '../../transport/runDeliveryHandler.ts';
import type { TransportEvent } from '../../transport/Transport.ts';
import { transportNames } from '../../transport/TransportNames.ts';
import { DEFAULT_TRANSPORT_TIMING, resolveTiming } from '../../transport/TransportTiming.ts';
import { waitFor } from './helpers.ts';

const message = {
  operationId: '0b6f4d2e-1c1a-4f7e-9a53-0d5c2f0e9a11',
  kind: OperationKind.LONG_TERM_ARCHIVE,
  operationType: OperationType.LONG_TERM_ARCHIVE_TRANSFER,
  attempt: 3,
};

describe('resolveTiming', () => {
  it('defaults to the documented timers and derives the heartbeat max age', () => {
    expect(resolveTiming()).toEqual(DEFAULT_TRANSPORT_TIMING);
    expect(resolveTiming({ heartbeatTimeoutMs: 400_000 }).heartbeatMaxAgeMs).toBe(800_000);
  });

  it.each([
    [
      { heartbeatIntervalMs: 300_000 },
      /heartbeatIntervalMs \(300000\) is not below heartbeatTimeoutMs \(300000\)/,
    ],
    [
      { heartbeatTimeoutMs: 3_600_000 },
      /heartbeatTimeoutMs \(3600000\) is not below reconcilerFloorMs/,
    ],
    [{ ackWaitMs: 3_000_000 }, /reconcilerFloorMs \(3600000\) is not below ackWaitMs \(3000000\)/],
    [{ heartbeatMaxAgeMs: 300_000 }, /heartbeatMaxAgeMs \(300000\) must exceed heartbeatTimeoutMs/],
    [{ maxDeliver: 0 }, /maxDeliver must be a positive integer/],
    [{ ackWaitMs: 1.5 }, /ackWaitMs must be a positive integer/],
  ])('refuses %o with CONFIG', (overrides, text) => {
    expect(() => resolveTiming(overrides)).toThrow(text);
    expect(() => resolveTiming(overrides)).toThrow(
      expect.objectContaining({ code: OpstateErrorCode.CONFIG }),
    );
  });
});

describe('dispatch wire format', () => {
  it('round-trips and names the dedup id', () => {
    const decoded = decodeDispatch(encodeDispatch(message));
    expect(decoded).toEqual({ ok: true, message });
    expect(dispatchMsgId(message)).toBe(`${message.operationId}:3`);
  });

  it('strips unknown fields so a newer producer is not terminated', () => {
    const bytes = new TextEncoder().encode(JSON.stringify({ ...message, traceId: 'x' }));
    expect(decodeDispatch(bytes)).toEqual({ ok: true, message });
  });

  // decode and encode check well-formed messages without the schema: they must accept exactly
  // what the schema accepts, and strip to the same four fields.
  it.each([
    ['valid', message],
    ['an extra field', { ...message, traceId: 'x' }],
    ['id of 128', { ...message, operationId: 'a'.repeat(128) }],
    ['id of 129', { ...message, operationId: 'a'.repeat(129) }],
    ['empty id', { ...message, operationId: '' }],
    ['id with a dot', { ...message, operationId: 'a.b' }],
    ['id with a newline', { ...message, operationId: 'ab\n' }],
    ['numeric id', { ...message, operationId: 7 }],
    ['unknown kind', { ...message, kind: 'packaging' }],
    ['unknown type', { ...message, operationType: 'copy' }],
    ['attempt 0', { ...message, attempt: 0 }],
    ['attempt 1.5', { ...message, attempt: 1.5 }],
    ['attempt as text', { ...message, attempt: '3' }],
    ['unsafe attempt', { ...message, attempt: Number.MAX_SAFE_INTEGER + 1 }],
    ['no attempt', { ...message, attempt: undefined }],
    ['an array', [message]],
    ['null', null],
  ])('decodes and encodes %s as the schema judges it', (_, value) => {
    const schema = dispatchMessageSchema.safeParse(value);
    const decoded = decodeDispatch(new TextEncoder().encode(JSON.stringify(value)));
    const reparsed = dispatchMessageSchema.safeParse(JSON.parse(JSON.stringify(value)));
    expect(decoded.ok).toBe(reparsed.success);
    if (decoded.ok) expect(decoded.message).toEqual(reparsed.data);
    else expect(decoded.reason).toMatch(/^wrong shape: /);
    if (schema.success) {
      expect(JSON.parse(Buffer.from(encodeDispatch(value as never)).toString())).toEqual(
        schema.data,
      );
    } else {
      expect(() => encodeDispatch(value as never)).toThrow(/Invalid dispatch message/);
    }
  });

  it.each([
    [
      'an unknown kind and no attempt',
      { ...message, kind: 'packaging', attempt: undefined },
      "wrong shape: kind must be one of raw_data_package, data_transfer_package, transfer, unpack, long_term_archive, staging; got 'packaging'; attempt is required",
    ],
    [
      'an id with a dot and attempt 0',
      { ...message, operationId: 'a.b', attempt: 0 },
      'wrong shape: operationId must be 1 to 128 letters, digits, "-", "_" or "="; got \'a.b\'; attempt must be a whole number ≥ 1; got 0',
    ],
    [
      'an array',
      [message],
      'wrong shape: a dispatch message is a JSON object { operationId, kind, operationType, attempt }; got an array',
    ],
  ])('says what is wrong with %s in words', (_, value, reason) => {
    const decoded = decodeDispatch(new TextEncoder().encode(JSON.stringify(value)));
    expect(decoded.ok).toBe(false);
    if (!decoded.ok) expect(decoded.reason.startsWith(reason)).toBe(true);
    expect(() => encodeDispatch(value as never)).toThrow(
      `Invalid dispatch message: ${reason.slice('wrong shape: '.length)}`,
    );
  });

  it('rejects routing/identity values it does not know', () => {
    const bytes = new TextEncoder().encode(JSON.stringify({ ...message, kind: 'packaging' }));
    expect(decodeDispatch(bytes).ok).toBe(false);
  });
});

describe('names and keys', () => {
  it('derives every broker name from the prefix', () => {
    const n = transportNames('prod');
    expect([n.stream, n.streamSubjects, n.heartbeatBucket]).toEqual([
      'prod_dispatch',
      'prod.dispatch.>',
      'prod_heartbeats',
    ]);
    expect(() => transportNames('a.b')).toThrow(
      expect.objectContaining({ code: OpstateErrorCode.CONFIG }),
    );
  });

  it('maps worker heartbeats both ways and ignores what is not one', () => {
    const held = [{ kind: OperationKind.UNPACK, operationId: 'op-1', attempt: 3 }];
    expect(workerHeartbeatKey('worker_2-7')).toBe('worker.worker_2-7');
    expect(parseWorkerHeartbeat('worker.worker_2-7', encodeHeld(held), 5)).toEqual({
      workerId: 'worker_2-7',
      at: 5,
      held,
    });
    expect(parseWorkerHeartbeat('unpack.op-1.t', encodeHeld(held), 5)).toBeUndefined();
    expect(parseWorkerHeartbeat('worker.w', 'not json', 5)).toBeUndefined();
    expect(parseWorkerHeartbeat('worker.w', '{"held":[["nope","op-1",1]]}', 5)).toBeUndefined();
    expect(parseWorkerHeartbeat('worker.w', '{"held":[["unpack","op-1",0]]}', 5)).toBeUndefined();
  });

  const reads = {
    queues: ['buffer_data_transfer_unpacking', 'long_term_archive_long_term_archive_transfer'],
    kinds: [OperationKind.UNPACK, OperationKind.LONG_TERM_ARCHIVE],
  };

  it('carries the queues a worker reads and its kinds, and reads them back', () => {
    const held = [{ kind: OperationKind.UNPACK, operationId: 'op-1', attempt: 3 }];
    const value = encodeHeld(held, 'n1', reads);
    expect(JSON.parse(value)).toEqual({
      instance: 'n1',
      queues: reads.queues,
      kinds: reads.kinds,
      held: [['unpack', 'op-1', 3]],
    });
    expect(readWorkerHeartbeat('worker.w', value, 5)).toEqual({
      ok: true,
      beat: { workerId: 'w', instance: 'n1', at: 5, held, reads },
    });
    // Idle: reads its queues, holds nothing.
    expect(parseWorkerHeartbeat('worker.w', encodeHeld([], 'n1', reads), 5)).toEqual({
      workerId: 'w',
      instance: 'n1',
      at: 5,
      held: [],
      reads,
    });
    // Reading no queue is said, not unknown.
    const none = { queues: [], kinds: [] };
    expect(parseWorkerHeartbeat('worker.w', encodeHeld([], 'n1', none), 5)?.reads).toEqual(none);
  });

  it('reads a value without queues (an older worker) as not saying which queues it reads', () => {
    const old = '{"instance":"n1","held":[["unpack","op-1",3]]}';
    const beat = parseWorkerHeartbeat('worker.w', old, 5);
    expect(beat).toEqual({
      workerId: 'w',
      instance: 'n1',
      at: 5,
      held: [{ kind: OperationKind.UNPACK, operationId: 'op-1', attempt: 3 }],
    });
    expect(beat).not.toHaveProperty('reads');
    expect(JSON.parse(encodeHeld([], 'n1'))).toEqual({ instance: 'n1', held: [] });
  });

  it.each([
    [
      'queues not a list',
      '"queues":"source_data_transfer","kinds":["transfer"]',
      'the queues are not a list of queue names',
    ],
    [
      'a queue name of another shape',
      '"queues":["Source Data/Transfer"],"kinds":["transfer"]',
      'the queues are not a list of queue names',
    ],
    [
      'a queue that is not a string',
      '"queues":[7],"kinds":["transfer"]',
      'the queues are not a list of queue names',
    ],
    [
      'a queue twice',
      '"queues":["source_data_transfer","source_data_transfer"],"kinds":["transfer"]',
      'the queues name one queue twice',
    ],
    [
      'an unknown kind',
      '"queues":["source_data_transfer"],"kinds":["packaging"]',
      'the kinds are not a list of operation kinds',
    ],
    [
      'a kind twice',
      '"queues":["source_data_transfer"],"kinds":["transfer","transfer"]',
      'the kinds name one kind twice',
    ],
    [
      'kinds not a list',
      '"queues":["source_data_transfer"],"kinds":null',
      'the kinds are not a list of operation kinds',
    ],
    [
      'queues without kinds',
      '"queues":["source_data_transfer"]',
      'the value has queues without kinds',
    ],
    ['kinds without queues', '"kinds":["transfer"]', 'the value has kinds without queues'],
    [
      'queues null',
      '"queues":null,"kinds":["transfer"]',
      'the queues are not a list of queue names',
    ],
  ])('refuses the whole value for %s', (_, fields, reason) => {
    const value = `{"instance":"n1",${fields},"held":[["transfer","op-1",1]]}`;
    expect(readWorkerHeartbeat('worker.w', value, 5)).toEqual({ ok: false, reason });
  });

  it('reads a queue this release does not route to (a newer release) as a queue it reads', () => {
    const value =
      '{"instance":"n1","queues":["cologne_lta_long_term_archive_long_term_archive_transfer"],"kinds":["long_term_archive"],"held":[]}';
    const read = readWorkerHeartbeat('worker.w', value, 5);
    expect(read.ok && read.beat.reads?.queues).toEqual([
      'cologne_lta_long_term_archive_long_term_archive_transfer',
    ]);
  });

  it('refuses to write queues or kinds that are not names, or one twice, naming the fix', () => {
    const bad = [
      { queues: ['source/nope'], kinds: [OperationKind.TRANSFER] },
      { queues: ['source_data_transfer', 'source_data_transfer'], kinds: [OperationKind.TRANSFER] },
      { queues: ['source_data_transfer'], kinds: ['packaging' as OperationKind] },
      { queues: ['source_data_transfer'], kinds: [OperationKind.TRANSFER, OperationKind.TRANSFER] },
    ];
    for (const r of bad) {
      expect(() => encodeHeld([], 'n1', r)).toThrow(
        expect.objectContaining({
          code: OpstateErrorCode.BAD_INPUT,
          message: expect.stringMatching(
            /list each queue the worker consumes once, by its queueName\(route\)/,
          ),
        }),
      );
    }
  });

  it('keeps the cap with the queues counted in', () => {
    const many = Array.from({ length: Math.ceil(MAX_HEARTBEAT_BYTES / 40) }, (_, n) => ({
      kind: OperationKind.UNPACK,
      operationId: `0b6f4d2e-1c1a-4f7e-9a53-${String(n).padStart(12, '0')}`,
      attempt: 1,
    }));
    const fits = heldThatFits(many, 'n1', reads);
    expect(fits).toBeLessThan(heldThatFits(many, 'n1'));
    expect(encodeHeld(many.slice(0, fits), 'n1', reads).length).toBeLessThanOrEqual(
      MAX_HEARTBEAT_BYTES,
    );
    expect(() => encodeHeld(many.slice(0, fits + 1), 'n1', reads)).toThrow(
      new RegExp(`over the ${MAX_HEARTBEAT_BYTES}-byte cap`),
    );
  });
});

describe('in-process queue fairness', () => {
  it('takes turns between consumers', async () => {
    const transport = createInProcessTransport();
    const route = defaultRoute(OperationKind.TRANSFER);
    await transport.ensure([route]);
    const got: string[] = [];
    const sub = (name: string) =>
      transport.consume(route, { concurrency: 4 }, async (d) => {
        got.push(name);
        await d.ack();
      });
    const a = sub('A');
    const b = sub('B');
    // Messages arrive one at a time while both consumers have spare slots.
    for (let n = 1; n <= 4; n++) {
      await transport.publish(route, {
        operationId: `op${n}`,
        kind: OperationKind.TRANSFER,
        operationType: route.operationType,
        attempt: 1,
      });
      await waitFor(() => got.length === n, `delivery ${n}`);
    }
    expect(got.filter((n) => n === 'A')).toHaveLength(2);
    expect(got.filter((n) => n === 'B')).toHaveLength(2);
    await a.stop();
    await b.stop();
    await transport.close();
  });
});

describe('nakDelayAfter', () => {
  const backoff = { baseMs: 1000, maxMs: 60_000 };
  it.each([
    [1, 1000],
    [2, 2000],
    [3, 4000],
    [6, 32_000],
    [7, 60_000],
    [10, 60_000],
    [1_000_000, 60_000],
    [0, 1000], // a count below one is read as the first delivery
    [Number.NaN, 1000],
  ])('after delivery %d waits %d ms', (count, expected) => {
    expect(nakDelayAfter(count, backoff)).toBe(expected);
  });

  it('never waits less than the base, even with a cap below it', () => {
    expect(nakDelayAfter(5, { baseMs: 500, maxMs: 100 })).toBe(500);
  });

  it('with the defaults, ten deliveries span about four minutes', () => {
    const waits = Array.from({ length: 9 }, (_, i) => nakDelayAfter(i + 1, backoff));
    expect(waits.reduce((a, b) => a + b, 0)).toBe(243_000);
  });
});

describe('judgeGivenUp: a MAX_DELIVERIES advisory is believed only on the broker’s state', () => {
  const base: GivenUpEvidence = {
    seq: 5,
    storedSubject: 'p.dispatch.a.b',
    consumerSubject: 'p.dispatch.a.b',
    deliveredSeq: 9,
    ackFloorSeq: 2,
    ackPending: 3,
  };
  const rows: [string, Partial<GivenUpEvidence>, string][] = [
    ['outstanding among others (held, or waiting to be redelivered): wait', {}, 'wait'],
    ['nothing outstanding on the consumer: given up, remove', { ackPending: 0 }, 'remove'],
    ['at or below the ack floor and still stored: given up, remove', { ackFloorSeq: 5 }, 'remove'],
    ['no longer stored (settled): ignore', { storedSubject: undefined }, 'ignore'],
    ['on another queue’s subject: ignore', { storedSubject: 'p.dispatch.c.d' }, 'ignore'],
    ['not yet delivered (queued): ignore', { deliveredSeq: 4, ackPending: 0 }, 'ignore'],
  ];
  it.each(rows)('%s', (_, change, action) => {
    expect(judgeGivenUp({ ...base, ...change }).action).toBe(action);
  });
});

describe('worker id claims and refused heartbeats', () => {
  const beat = (instance: string | undefined, at: number) => ({
    workerId: 'w-1',
    at,
    held: [],
    ...(instance === undefined ? {} : { instance }),
  });
  it.each([
    ['no heartbeat: taken', undefined, false],
    ['a fresh one of the same instance: its own', beat('me', 990), false],
    ['a fresh one of another instance: refused', beat('other', 990), true],
    ['a fresh one written without an instance: refused', beat(undefined, 990), true],
    ['a stale one of another instance: taken over', beat('other', 900), false],
  ] as const)('%s', (_, stored, refused) => {
    const refusal = refuseClaim({
      workerId: 'w-1',
      instance: 'me',
      stored,
      now: 1000,
      timeoutMs: 100,
    });
    expect(refusal !== undefined).toBe(refused);
    if (refusal) {
      expect(refusal.code).toBe(OpstateErrorCode.CONFIG);
      expect(refusal.message).toMatch(/Worker id "w-1" is in use/);
    }
  });

  it('reports a refused heartbeat once per key per interval', () => {
    const events: TransportEvent[] = [];
    const refusals = new HeartbeatRefusals(1000, (e) => events.push(e));
    for (let t = 0; t < 1000; t += 10) refusals.refuse('worker.a', 70_000, 'too big', t);
    refusals.refuse('worker.b', 3, 'not JSON', 500);
    expect(events.map((e) => e.type === 'heartbeat_refused' && e.key)).toEqual([
      'worker.a',
      'worker.b',
    ]);
    refusals.refuse('worker.a', 70_000, 'too big', 1000);
    expect(events).toHaveLength(3);
  });
});
