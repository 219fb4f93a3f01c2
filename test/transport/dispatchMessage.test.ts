import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { OPERATION_KINDS } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { OPERATION_TYPES_IN_USE } from '../../machines/routing.ts';
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  type DecodeResult,
  decodeDispatch,
  dispatchMessageSchema,
  encodeDispatch,
  PREVIEW_BYTES,
  previewPayload,
} from '../../transport/DispatchMessage.ts';
import type { DispatchMessage } from '../../transport/Transport.ts';
import {
  anyJsonValue,
  deepArray,
  expectNoPollution,
  hostileJsonText,
  parseOrRefuse,
  withinTime,
} from '../helpers/hostileInput.ts';

const MIB = 1024 * 1024;

const messageArb: fc.Arbitrary<DispatchMessage> = fc.record({
  operationId: fc.stringMatching(/^[A-Za-z0-9_=-]{1,128}$/),
  kind: fc.constantFrom(...OPERATION_KINDS),
  operationType: fc.constantFrom(...OPERATION_TYPES_IN_USE),
  attempt: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
});

const bytesOf = (text: string) => Buffer.from(text, 'utf8');

/** A message's fields, each kept or replaced by any JSON value or hostile JSON text. */
const nearMessageText: fc.Arbitrary<string> = fc
  .tuple(
    messageArb,
    fc.array(
      fc.tuple(
        fc.constantFrom('operationId', 'kind', 'operationType', 'attempt', '__proto__', 'x'),
        fc.oneof(hostileJsonText, fc.json({ maxDepth: 3 })),
      ),
      { maxLength: 3 },
    ),
  )
  .map(([m, changes]) => {
    const fields = new Map(Object.entries(m).map(([k, v]) => [k, JSON.stringify(v)]));
    for (const [k, text] of changes) fields.set(k, text);
    return `{${[...fields].map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`;
  });

/** Bytes off the wire: random, any JSON, near-valid messages, and valid ones mutated or cut. */
const wireArb: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.uint8Array({ maxLength: 512 }),
  fc.json({ maxDepth: 3 }).map(bytesOf),
  hostileJsonText.map(bytesOf),
  nearMessageText.map(bytesOf),
  fc
    .tuple(messageArb, fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 6 }), fc.nat())
    .map(([m, at, bytes, cut]) => {
      const wire = Buffer.from(encodeDispatch(m));
      wire.set(bytes.subarray(0, wire.length - (at % wire.length)), at % wire.length);
      return wire.subarray(0, cut % (wire.length + 1));
    }),
);

/** Decodes under the hang detector; decoding never throws, so any exception fails the test. */
function decode(bytes: Uint8Array, maxBytes?: number): DecodeResult {
  return withinTime(() => decodeDispatch(bytes, maxBytes));
}

/** Every rule a decoded message keeps: the schema's, and nothing but its four fields. */
function expectValid(message: DispatchMessage): void {
  expect(dispatchMessageSchema.safeParse(message).success).toBe(true);
  expect(Object.keys(message).sort()).toEqual(['attempt', 'kind', 'operationId', 'operationType']);
  expect(Object.isFrozen(message)).toBe(true);
  expect(Object.getPrototypeOf(message)).toBe(Object.prototype);
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('decoding a dispatch message from the wire', () => {
  it('returns a valid message or a reason, never an exception, for any bytes', () => {
    fc.assert(
      fc.property(wireArb, (bytes) => {
        const r = decode(bytes, MIB);
        if (r.ok) expectValid(r.message);
        else expect(r.reason).toMatch(/^(not JSON|wrong shape): /);
        expectNoPollution();
      }),
      { numRuns: 250 },
    );
  });

  it('says why in a reason of bounded length, however large the value', () => {
    // A 1 MiB payload (allowed by a large maxBytes) nested 500,000 deep, or one long string.
    for (const text of [deepArray(500_000), `{"operationId":"${'a'.repeat(MIB - 20)}"}`]) {
      const r = decode(bytesOf(text), 2 * MIB);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.reason.length).toBeLessThan(2000);
    }
  });

  it('refuses a payload over maxBytes by its size, before decoding it', () => {
    const parse = vi.spyOn(JSON, 'parse');
    fc.assert(
      fc.property(messageArb, fc.integer({ min: 1, max: 8 }), (m, over) => {
        const wire = encodeDispatch(m, MIB);
        const padded = Buffer.concat([wire, Buffer.alloc(DEFAULT_MAX_MESSAGE_BYTES + over, ' ')]);
        parse.mockClear();
        const r = decode(padded);
        expect(r).toEqual({
          ok: false,
          reason: `oversized: ${padded.length} bytes > ${DEFAULT_MAX_MESSAGE_BYTES}`,
        });
        expect(parse).not.toHaveBeenCalled();
        // The same bytes under a cap they fit are read: the refusal was the size alone.
        expect(decode(padded, padded.length)).toEqual({ ok: true, message: m });
      }),
      { numRuns: 50 },
    );
  });

  it('round-trips every valid message, byte for byte', () => {
    fc.assert(
      fc.property(messageArb, (m) => {
        const wire = encodeDispatch(m);
        const r = decode(wire);
        expect(r).toEqual({ ok: true, message: m });
        if (r.ok)
          expect(Buffer.from(encodeDispatch(r.message)).equals(Buffer.from(wire))).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe('encoding a dispatch message', () => {
  it('returns bytes that decode to the same message, or refuses with BAD_INPUT', () => {
    const valueArb = fc.oneof(
      nearMessageText.map((t) => {
        try {
          return JSON.parse(t) as unknown;
        } catch {
          return t;
        }
      }),
      anyJsonValue,
    );
    fc.assert(
      fc.property(valueArb, (value) => {
        const r = parseOrRefuse(
          () => encodeDispatch(value as DispatchMessage),
          OpstateErrorCode.BAD_INPUT,
        );
        if (r instanceof OpstateError) return;
        const back = decode(r);
        expect(back.ok).toBe(true);
        if (back.ok) expectValid(back.message);
      }),
      { numRuns: 300 },
    );
  });
});

describe('previewing a payload for a log line', () => {
  it('shows at most PREVIEW_BYTES bytes, each printable ASCII or \\xNN', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), (bytes) => {
        const shown = previewPayload(bytes);
        expect(shown).toMatch(/^([\x20-\x7e]|\\x[0-9a-f]{2})*…?$/);
        expect(shown.length).toBeLessThanOrEqual(PREVIEW_BYTES * 4 + 1);
      }),
      { numRuns: 200 },
    );
  });
});
