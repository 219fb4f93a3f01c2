/**
 * A seeded generator of random JSON values for property tests: the same seed gives the same
 * values, so a failure names the seed that reproduces it (`OPSTATE_PROPERTY_SEED` overrides the
 * default). It covers what a journal must keep exactly: strings that look like JSON, every kind of
 * Unicode Postgres jsonb can hold (astral, combining, right-to-left, control characters, line and
 * paragraph separators), numbers from the smallest subnormal to the largest double, and nested
 * arrays and objects with awkward keys. Never -0 (JSON has no negative zero), U+0000 or a lone
 * surrogate (jsonb refuses both; the journal refuses them with a clear error).
 */

/** mulberry32: a small, fast PRNG with a 32-bit state; values in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed a property test runs with. */
export function propertySeed(fallback: number): number {
  const given = process.env.OPSTATE_PROPERTY_SEED;
  return given === undefined || given === '' ? fallback : Number(given);
}

/** Strings a second JSON decode would turn into something else, or choke on. */
export const JSON_LOOKING = [
  'plain text',
  '123',
  '{"a":1}',
  '"quoted"',
  '[1,"two",null]',
  'null',
  'true',
  'false',
  '-0',
  '1e400',
  '0.1',
  'NaN',
  '',
  ' ',
  '\\u0041',
  '{"message":"no such bucket","retryable":true}',
] as const;

const SPECIAL_NUMBERS = [
  0,
  1,
  -1,
  0.1,
  0.2 + 0.1,
  1e21,
  1e-7,
  Number.MIN_VALUE,
  -Number.MIN_VALUE,
  Number.MAX_VALUE,
  -Number.MAX_VALUE,
  Number.MAX_SAFE_INTEGER,
  Number.MIN_SAFE_INTEGER,
  2 ** 53 + 2,
  Number.EPSILON,
  123456789.12345679,
];

/** Code point ranges to draw characters from (no U+0000, no surrogates). */
const RANGES: readonly (readonly [number, number])[] = [
  [0x20, 0x7e], // printable ASCII, quotes and backslash among them
  [0x20, 0x7e],
  [0x01, 0x1f], // control characters JSON must escape
  [0x7f, 0xff], // DEL and Latin-1
  [0x300, 0x36f], // combining marks
  [0x590, 0x6ff], // Hebrew and Arabic (right to left)
  [0x2028, 0x2029], // line and paragraph separators
  [0x4e00, 0x4fff], // CJK
  [0xfeff, 0xfeff], // byte order mark
  [0xfff0, 0xffff], // specials and a noncharacter
  [0x1f300, 0x1faff], // emoji: surrogate pairs in UTF-16
  [0x10000, 0x10ffff], // any astral plane
];

export function randomJson(random: () => number, depth = 3): unknown {
  const int = (n: number) => Math.floor(random() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)] as T;
  const text = (max: number): string => {
    if (random() < 0.25) return pick(JSON_LOOKING);
    let s = '';
    for (let n = int(max + 1); n > 0; n--) {
      const [lo, hi] = pick(RANGES);
      s += String.fromCodePoint(lo + int(hi - lo + 1));
    }
    return s;
  };
  const number = (): number => {
    const r = random();
    if (r < 0.3) return pick(SPECIAL_NUMBERS);
    if (r < 0.6) return int(2 ** 32) - 2 ** 31;
    // Any magnitude: subnormal to near the largest double.
    const v = (random() - 0.5) * 10 ** (random() * 616 - 308);
    return Number.isFinite(v) && !Object.is(v, -0) ? v : 0.5;
  };
  const r = random();
  if (depth <= 0 || r < 0.45) {
    const leaf = random();
    if (leaf < 0.4) return text(12);
    if (leaf < 0.75) return number();
    if (leaf < 0.9) return random() < 0.5;
    return null;
  }
  if (r < 0.7) return Array.from({ length: int(6) }, () => randomJson(random, depth - 1));
  const o: Record<string, unknown> = {};
  for (let n = int(6); n > 0; n--) {
    const key =
      random() < 0.2 ? pick(['', 'constructor', 'toString', '__proto__', 'a.b']) : text(6);
    // An own property even for '__proto__', as JSON.parse makes it.
    Object.defineProperty(o, key, {
      value: randomJson(random, depth - 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return o;
}
