import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/** Why a value cannot be stored as JSON and read back the same, and how to make it so. */
function refusal(value: unknown, ancestors: readonly object[]): string | undefined {
  switch (typeof value) {
    case 'string':
      if (value.includes('\u0000')) {
        return 'a string holding U+0000, which Postgres jsonb cannot store; encode such text (e.g. as base64)';
      }
      // With the u flag a well-formed pair is one code point: this matches a lone half only.
      if (/\p{Surrogate}/u.test(value)) {
        return 'a string with an unpaired UTF-16 surrogate, which is not Unicode text and Postgres jsonb refuses; encode such text (e.g. as base64)';
      }
      return undefined;
    case 'number':
      return Number.isFinite(value)
        ? undefined
        : `${value}, which JSON cannot hold (it would come back null); use null or a string`;
    case 'boolean':
      return undefined;
    case 'bigint':
      return 'a bigint, which JSON cannot hold; use a string (String(n)), or a number when it fits';
    case 'undefined':
      return 'undefined, which JSON cannot hold here (it would come back null); use null';
    case 'function':
    case 'symbol':
      return `a ${typeof value}, which is not data; record the data it stands for`;
  }
  if (value === null) return undefined;
  if (ancestors.includes(value as object)) {
    return 'a reference to an enclosing value (a cycle), which JSON cannot hold';
  }
  if (Array.isArray(value)) return undefined;
  if (value instanceof Date) {
    return 'a Date, which would come back as a string; record date.toISOString() and parse it where it is read';
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
    return `a ${typeof name === 'string' && name !== '' ? name : 'class instance'}, which JSON would not keep; use a plain object or array (e.g. Object.fromEntries(map), [...set])`;
  }
  return undefined;
}

function keyPath(path: string, key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function walk(value: unknown, path: string, ancestors: object[]): string | undefined {
  const why = refusal(value, ancestors);
  if (why !== undefined) return `${path} is ${why}`;
  if (typeof value !== 'object' || value === null) return undefined;
  ancestors.push(value);
  try {
    if (Array.isArray(value)) {
      for (let n = 0; n < value.length; n++) {
        if (!(n in value))
          return `${path}[${n}] is a hole, which JSON cannot hold (it would come back null); use null`;
        const found = walk(value[n], `${path}[${n}]`, ancestors);
        if (found !== undefined) return found;
      }
      return undefined;
    }
    for (const [key, v] of Object.entries(value)) {
      // Left out, as JSON.stringify does: reading the key gives undefined either way.
      if (v === undefined) continue;
      const found = walk(v, keyPath(path, key), ancestors);
      if (found !== undefined) return found;
    }
    return undefined;
  } finally {
    ancestors.pop();
  }
}

/**
 * Checks that a value is stored as JSON and read back deep-equal: null, booleans, finite
 * numbers, strings Postgres jsonb can hold, arrays and plain objects of them (a property whose
 * value is undefined is left out, as `JSON.stringify` does). Anything else — a bigint, a function,
 * a Date, a Map, NaN, undefined in an array, a cycle, text with U+0000 — throws `BAD_INPUT`
 * naming where it is and what to store instead, rather than coming back changed.
 *
 * @example
 * ```ts
 * checkJsonValue({ etag: 'abc', size: 10n }, "step 'upload' result");
 * // OpstateError BAD_INPUT: step 'upload' result.size is a bigint, which JSON cannot hold; use a string …
 * ```
 */
export function checkJsonValue(value: unknown, what: string): void {
  const problem = walk(value, what, []);
  if (problem !== undefined) {
    throw new OpstateError(OpstateErrorCode.BAD_INPUT, problem, { details: { what } });
  }
}
