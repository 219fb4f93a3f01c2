import { createContext, runInContext } from 'node:vm';
import fc from 'fast-check';
import { expect } from 'vitest';
import { OpstateError, type OpstateErrorCode } from '../../machines/OpstateError.ts';

/*
 * What the parsers' property tests share: a hang detector for synchronous parsers, the check that
 * a refusal is the documented one, and arbitraries of hostile JSON.
 */

/**
 * How long one parse may take before the test calls it a hang: generous, because the machine is
 * shared and busy. It detects a parser that never returns; it is no measure of speed.
 */
export const HANG_MS = 10_000;

const context = createContext({ run: (): unknown => undefined });

/**
 * Runs `fn` under a vm timeout, so a parser that spins for ever fails the test with
 * `Script execution timed out` instead of hanging the run (vitest cannot stop a synchronous loop).
 */
export function withinTime<T>(fn: () => T, ms = HANG_MS): T {
  context.run = fn;
  try {
    return runInContext('run()', context, { timeout: ms }) as T;
  } finally {
    context.run = () => undefined;
  }
}

/**
 * Runs `parse` (under `withinTime`) and returns what it returned, or the `OpstateError` of one of
 * `codes` it threw. Any other exception (a TypeError, a RangeError from a stack overflow, a
 * URIError) is rethrown, failing the property.
 */
export function parseOrRefuse<T>(parse: () => T, ...codes: OpstateErrorCode[]): T | OpstateError {
  try {
    return withinTime(parse);
  } catch (err) {
    if (err instanceof OpstateError && codes.includes(err.code)) return err;
    throw err;
  }
}

/** Asserts that a value is a refusal with `code` (for tests of inputs that must be refused). */
export function expectRefused(value: unknown, code: OpstateErrorCode, message?: RegExp): void {
  expect(value).toBeInstanceOf(OpstateError);
  expect((value as OpstateError).code).toBe(code);
  if (message !== undefined) expect((value as OpstateError).message).toMatch(message);
}

/** `depth` nested arrays, `[[[…]]]`: JSON.parse reads it, but recursion over it overflows. */
export const deepArray = (depth: number): string => `${'['.repeat(depth)}${']'.repeat(depth)}`;

/** `depth` nested objects, `{"a":{"a":…}}`. */
export const deepObject = (depth: number): string =>
  `${'{"a":'.repeat(depth)}null${'}'.repeat(depth)}`;

/**
 * JSON texts that have tripped parsers: nesting deep enough to overflow a recursive walk, keys
 * that name `Object.prototype`'s members (`__proto__`, `constructor`, `toString`, `valueOf`)
 * with values that make `String(value)` or a merge misbehave, and numbers past what a double holds.
 */
export const hostileJsonText: fc.Arbitrary<string> = fc.oneof(
  // A few thousand levels already overflow a recursive JSON.stringify or String(); each overflow
  // costs some milliseconds, so they are a share of the runs, not most of them.
  { arbitrary: fc.integer({ min: 1, max: 20_000 }).map(deepArray), weight: 1 },
  { arbitrary: fc.integer({ min: 1, max: 10_000 }).map(deepObject), weight: 1 },
  {
    arbitrary: fc.constantFrom(
      '{"toString":1}',
      '{"valueOf":{},"toString":{}}',
      '{"__proto__":{"polluted":true}}',
      '{"constructor":{"prototype":{"polluted":true}}}',
      '1e400',
      '-1e400',
      '123456789012345678901234567890',
      '"\\ud800"',
      '[]',
      '{}',
      'null',
      '""',
    ),
    weight: 4,
  },
);

/**
 * A JSON text parsed, printed in a counterexample by the start of its text: fast-check's own
 * printer would overflow the stack on a deeply nested value and hide the failure it reports.
 */
function parsedForReport(text: string): unknown {
  const value = JSON.parse(text) as unknown;
  if (typeof value === 'object' && value !== null) {
    const shown = `JSON.parse(${JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text)})`;
    Object.defineProperty(value, fc.toStringMethod, { value: () => shown });
  }
  return value;
}

/** Any JSON value, and the hostile texts above parsed: what a field read off the wire can hold. */
export const anyJsonValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 3 },
  { arbitrary: hostileJsonText.map(parsedForReport), weight: 1 },
);

/** Asserts nothing reached `Object.prototype` (a parser that merged a `__proto__` key would). */
export function expectNoPollution(): void {
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
}
