import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isOperationKind, OPERATION_KINDS } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import {
  encodeHeld,
  heldThatFits,
  MAX_HEARTBEAT_BYTES,
  type ReadHeartbeat,
  readWorkerHeartbeat,
} from '../../transport/HeartbeatKey.ts';
import type { HeldOperation, WorkerReads } from '../../transport/Transport.ts';
import {
  anyJsonValue,
  deepArray,
  expectNoPollution,
  hostileJsonText,
  parseOrRefuse,
  withinTime,
} from '../helpers/hostileInput.ts';

const KEY_SAFE = /^[A-Za-z0-9_=-]{1,128}$/;
const AT = 1_700_000_000_000;

const idArb = fc.stringMatching(KEY_SAFE);
const heldArb: fc.Arbitrary<HeldOperation> = fc.record({
  kind: fc.constantFrom(...OPERATION_KINDS),
  operationId: idArb,
  attempt: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
});
const instanceArb = fc.option(fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/), { nil: undefined });
const readsArb: fc.Arbitrary<WorkerReads | undefined> = fc.option(
  fc.record({
    queues: fc.uniqueArray(fc.stringMatching(/^[a-z0-9][a-z0-9_]{0,60}$/), { maxLength: 6 }),
    kinds: fc.uniqueArray(fc.constantFrom(...OPERATION_KINDS)),
  }),
  { nil: undefined },
);
const beatArb = fc.record({
  held: fc.array(heldArb, { maxLength: 20 }),
  instance: instanceArb,
  reads: readsArb,
});

/** A stored value: any text, any JSON, hostile JSON in any field, or a valid one mutated. */
const valueArb: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.json({ maxDepth: 3 }),
  hostileJsonText,
  fc
    .tuple(
      fc.constantFrom('held', 'instance', 'queues', 'kinds', '__proto__'),
      fc.oneof(hostileJsonText, fc.json({ maxDepth: 3 })),
      beatArb,
    )
    .map(([field, bad, b]) => {
      const value = JSON.parse(encodeHeld(b.held, b.instance, b.reads)) as Record<string, unknown>;
      const fields = Object.entries(value).map(([k, v]) => `"${k}":${JSON.stringify(v)}`);
      return `{${[...fields, `"${field}":${bad}`].join(',')}}`;
    }),
  fc
    .tuple(beatArb, fc.nat(), fc.string({ minLength: 1, maxLength: 6 }), fc.nat())
    .map(([b, at, text, cut]) => {
      const value = encodeHeld(b.held, b.instance, b.reads);
      const i = at % (value.length + 1);
      return `${value.slice(0, i)}${text}${value.slice(i + text.length)}`.slice(0, cut % 4000);
    }),
);

const keyArb = fc.oneof(
  idArb.map((id) => `worker.${id}`),
  fc.string({ maxLength: 40 }).map((s) => `worker.${s}`),
  fc.string({ maxLength: 40 }),
);

function read(key: string, value: string): ReadHeartbeat {
  // Reading never throws: any exception fails the test.
  return withinTime(() => readWorkerHeartbeat(key, value, AT));
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('reading a stored heartbeat value', () => {
  it('returns a heartbeat every part of which is checked, or a reason, for any key and value', () => {
    fc.assert(
      fc.property(keyArb, valueArb, (key, value) => {
        const r = read(key, value);
        expectNoPollution();
        if (!r.ok) {
          expect(typeof r.reason).toBe('string');
          return;
        }
        expect(`worker.${r.beat.workerId}`).toBe(key);
        expect(r.beat.workerId).toMatch(KEY_SAFE);
        for (const h of r.beat.held) {
          expect(isOperationKind(h.kind)).toBe(true);
          expect(h.operationId).toMatch(KEY_SAFE);
          expect(Number.isSafeInteger(h.attempt) && h.attempt >= 1).toBe(true);
        }
        if (r.beat.instance !== undefined) expect(r.beat.instance).toMatch(/^[\w-]{1,64}$/);
        if (r.beat.reads !== undefined) {
          expect(new Set(r.beat.reads.queues).size).toBe(r.beat.reads.queues.length);
          expect(r.beat.reads.kinds.every(isOperationKind)).toBe(true);
          expect(new Set(r.beat.reads.kinds).size).toBe(r.beat.reads.kinds.length);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a value nested deeper than any stack, or holding one, with a reason', () => {
    for (const value of [
      deepArray(30_000),
      `{"held":${deepArray(30_000)}}`,
      `{"held":[],"queues":${deepArray(30_000)},"kinds":[]}`,
    ]) {
      expect(read('worker.w-1', value).ok).toBe(false);
    }
  });

  it('refuses a value over MAX_HEARTBEAT_BYTES by its size, before parsing it', () => {
    const parse = vi.spyOn(JSON, 'parse');
    fc.assert(
      fc.property(beatArb, fc.integer({ min: 1, max: 4 }), (b, over) => {
        const value = encodeHeld(b.held, b.instance, b.reads);
        const atCap = value.padEnd(MAX_HEARTBEAT_BYTES, ' ');
        expect(read('worker.w-1', atCap).ok).toBe(true);
        parse.mockClear();
        // Multi-byte characters count as the bytes they take, not as characters.
        const pad = 'é'.repeat(Math.ceil((MAX_HEARTBEAT_BYTES - value.length) / 2) + over);
        const r = read('worker.w-1', `${value}${pad}`);
        expect(r.ok).toBe(false);
        if (!r.ok) expect(r.reason).toMatch(new RegExp(`over the ${MAX_HEARTBEAT_BYTES}-byte cap`));
        expect(parse).not.toHaveBeenCalled();
      }),
      { numRuns: 20 },
    );
  });
});

describe('writing a heartbeat value', () => {
  it('round-trips what it writes: the same held, instance and reads, and the same value again', () => {
    fc.assert(
      fc.property(idArb, beatArb, (workerId, b) => {
        const value = encodeHeld(b.held, b.instance, b.reads);
        const r = read(`worker.${workerId}`, value);
        expect(r.ok).toBe(true);
        if (!r.ok) return;
        expect(r.beat.held).toEqual(b.held);
        expect(r.beat.instance).toBe(b.instance);
        expect(r.beat.reads).toEqual(b.reads);
        expect(encodeHeld(r.beat.held, r.beat.instance, r.beat.reads)).toBe(value);
      }),
      { numRuns: 200 },
    );
  });

  it('writes what fits within the cap and refuses the rest with BAD_INPUT', () => {
    // Entries average about 50 bytes: most lists run over the cap, some do not.
    const manyArb = fc.array(heldArb, { minLength: 8000, maxLength: 16000 });
    let refused = 0;
    fc.assert(
      fc.property(manyArb, instanceArb, readsArb, (held, instance, reads) => {
        const n = heldThatFits(held, instance, reads);
        const value = encodeHeld(held.slice(0, n), instance, reads);
        expect(Buffer.byteLength(value)).toBeLessThanOrEqual(MAX_HEARTBEAT_BYTES);
        if (n < held.length) {
          const over = parseOrRefuse(
            () => encodeHeld(held.slice(0, n + 1), instance, reads),
            OpstateErrorCode.BAD_INPUT,
          );
          expect(over).toBeInstanceOf(OpstateError);
          refused++;
        }
      }),
      { numRuns: 25 },
    );
    expect(refused).toBeGreaterThan(0);
  });

  it('returns a value its reader reads, or refuses with BAD_INPUT, whatever its entries, instance and reads hold', () => {
    // Valid entries with one field replaced: by any JSON, or by a number of any kind.
    const entry = fc
      .tuple(
        heldArb,
        fc.constantFrom('kind', 'operationId', 'attempt', 'none'),
        fc.oneof(anyJsonValue, fc.integer(), fc.double()),
      )
      .map(([h, field, v]) => (field === 'none' ? h : { ...h, [field]: v }));
    const loose = <T>(arb: fc.Arbitrary<T>) =>
      fc.option(fc.oneof(arb, anyJsonValue), { nil: undefined });
    fc.assert(
      fc.property(
        fc.array(entry, { maxLength: 3 }),
        loose(instanceArb),
        loose(readsArb),
        (held, instance, reads) => {
          const value = parseOrRefuse(
            () =>
              encodeHeld(
                held as HeldOperation[],
                instance as string | undefined,
                reads as WorkerReads | undefined,
              ),
            OpstateErrorCode.BAD_INPUT,
          );
          // What it writes, its reader takes: a value it refuses would drop the whole heartbeat.
          if (typeof value === 'string')
            expect(read('worker.w-1', value)).toMatchObject({ ok: true });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses an attempt its reader would refuse, and a kind that is no string, with BAD_INPUT', () => {
    const h = { kind: OPERATION_KINDS[0], operationId: 'op-1', attempt: 1 } as HeldOperation;
    for (const bad of [
      { ...h, attempt: 0 },
      { ...h, attempt: 1.5 },
      { ...h, attempt: '2' as unknown as number },
      { ...h, kind: JSON.parse('{"toString":1}') },
    ]) {
      const r = parseOrRefuse(() => encodeHeld([bad]), OpstateErrorCode.BAD_INPUT);
      expect(r).toBeInstanceOf(OpstateError);
    }
  });
});
