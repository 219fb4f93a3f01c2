import { InvalidArgumentError } from 'commander';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CommandFailure, type Io, runProgram, wholeNumber } from '../../cli/Command.ts';
import { createListCommand } from '../../cli/commands/list.ts';
import { createLocationCommand } from '../../cli/commands/location.ts';
import { createSubmitCommand } from '../../cli/commands/submit.ts';
import { createWaitCommand } from '../../cli/commands/wait.ts';
import { parseDuration, parseNotBefore, parseSince } from '../../cli/duration.ts';
import type { DatabaseOpener } from '../../cli/runtimeFromEnv.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { routeNameProblem } from '../../machines/routing.ts';
import { checkId } from '../../persistence/applyEvents.ts';
import {
  anyJsonValue,
  HANG_MS,
  hostileJsonText,
  parseOrRefuse,
  withinTime,
} from '../helpers/hostileInput.ts';

const NOW = Date.parse('2026-12-06T00:00:00Z');
/** Years 0 to 9999, which an ISO time writes in four digits (others as `+010000-…`). */
const YEAR_0_MS = Date.parse('0000-01-01T00:00:00Z');
const YEAR_10000_MS = Date.parse('+010000-01-01T00:00:00Z');

/** Returns what `parse` returned, or the usage error it threw; anything else fails the test. */
function parsedOrUsage<T>(parse: () => T): T | InvalidArgumentError {
  try {
    return withinTime(parse);
  } catch (err) {
    if (err instanceof InvalidArgumentError) return err;
    throw err;
  }
}

/** What an operator may type: anything, near-valid durations and times, and very long ones. */
const typedArb: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc
    .tuple(
      fc.oneof(
        fc.nat().map(String),
        fc.stringMatching(/^\d{1,400}(\.\d{0,20})?$/),
        fc.double({ noNaN: true }).map(String),
      ),
      fc.constantFrom('', 'ms', 's', 'm', 'h', 'd', 'y', ' ', 'S'),
    )
    .map(([n, unit]) => `${n}${unit}`),
  fc.tuple(fc.integer({ min: -1e16, max: 1e16 }), fc.string({ maxLength: 8 })).map(([t, tail]) => {
    const at = new Date(t);
    return Number.isNaN(at.getTime()) ? `${t}${tail}` : `${at.toISOString()}${tail}`;
  }),
  fc.stringMatching(/^\d{4}-\d{2}-\d{2}.{0,30}$/),
  fc.constantFrom(
    '9'.repeat(1 << 20),
    `2026-01-01${'x'.repeat(1 << 20)}`,
    `${'1'.repeat(1 << 20)}d`,
  ),
);

describe('durations (--deadline, --timeout)', () => {
  it('are a whole, safe number of milliseconds, or a usage error', () => {
    fc.assert(
      fc.property(typedArb, (typed) => {
        const r = parsedOrUsage(() => parseDuration(typed));
        if (r instanceof InvalidArgumentError) return;
        expect(Number.isSafeInteger(r) && r >= 0).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('refuse one too long for exact milliseconds (9999…d was Infinity)', () => {
    for (const typed of ['9'.repeat(400), '99999999999999999d', `${'1'.repeat(1 << 20)}d`]) {
      expect(parsedOrUsage(() => parseDuration(typed))).toBeInstanceOf(InvalidArgumentError);
    }
  });

  it('read back every duration in any unit', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1e6 }),
        fc.constantFrom(['ms', 1], ['s', 1000], ['m', 60_000], ['h', 3_600_000], ['d', 86_400_000]),
        (n, [unit, ms]) => {
          expect(parseDuration(`${n}${unit}`)).toBe(n * (ms as number));
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('--since and --not-before times', () => {
  it('--since is a valid Date or a usage error (an age past what a Date holds was Invalid Date)', () => {
    expect(parsedOrUsage(() => parseSince('999999999d', NOW))).toBeInstanceOf(InvalidArgumentError);
    fc.assert(
      fc.property(typedArb, (typed) => {
        const r = parsedOrUsage(() => parseSince(typed, NOW));
        if (r instanceof InvalidArgumentError) return;
        expect(r).toBeInstanceOf(Date);
        expect(Number.isNaN(r.getTime())).toBe(false);
        expect(r.toISOString()).toMatch(/^[+-]?\d{4,6}-\d{2}-\d{2}T/);
      }),
      { numRuns: 300 },
    );
  });

  it('--not-before is an ISO time from a delay, the time as typed, or a usage error', () => {
    fc.assert(
      fc.property(typedArb, (typed) => {
        const r = parsedOrUsage(() => parseNotBefore(typed, NOW));
        if (r instanceof InvalidArgumentError) return;
        // A typed date-time goes on as typed, for the store to check with its zone.
        if (r === typed) expect(typed).toMatch(/^\d{4}-\d{2}-\d{2}/);
        else expect(Date.parse(r) - NOW).toBe(parseDuration(typed));
      }),
      { numRuns: 300 },
    );
  });

  it('read back every time of years 0 to 9999', () => {
    fc.assert(
      fc.property(fc.integer({ min: YEAR_0_MS, max: YEAR_10000_MS - 1 }), (t) => {
        const iso = new Date(t).toISOString();
        expect(parseSince(iso, NOW).getTime()).toBe(t);
        expect(parseNotBefore(iso, NOW)).toBe(iso);
      }),
      { numRuns: 100 },
    );
  });
});

describe('whole numbers (--limit, --max, --max-retries, --size)', () => {
  it('are safe integers at least the minimum, or a usage error, and read back', () => {
    fc.assert(
      fc.property(typedArb, fc.constantFrom(0, 1), (typed, min) => {
        const r = parsedOrUsage(() => wholeNumber(min)(typed));
        if (r instanceof InvalidArgumentError) return;
        expect(Number.isSafeInteger(r) && r >= min).toBe(true);
        expect(wholeNumber(min)(String(r))).toBe(r);
      }),
      { numRuns: 300 },
    );
  });
});

describe('names and ids', () => {
  it('a site or location name is one that can name a queue, or a problem in words', () => {
    fc.assert(
      fc.property(fc.oneof(typedArb, anyJsonValue), fc.constantFrom('site', 'location'), (v, w) => {
        const problem = withinTime(() => routeNameProblem(w as 'site', v));
        if (problem === undefined) expect(v).toMatch(/^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/);
        else expect(problem.length).toBeLessThan(1000);
      }),
      { numRuns: 300 },
    );
  });

  it('an operation id is a uuid, or refused with BAD_INPUT', () => {
    fc.assert(
      fc.property(fc.oneof(typedArb, fc.uuid(), anyJsonValue), (id) => {
        const r = parseOrRefuse(() => checkId(id), OpstateErrorCode.BAD_INPUT);
        if (typeof r === 'string') expect(r).toMatch(/^[0-9a-f-]{36}$/i);
      }),
      { numRuns: 300 },
    );
  });
});

/** An opener that stops the command once its arguments are parsed: exit 1, no database. */
const stopAtDatabase: DatabaseOpener = async () => {
  throw new CommandFailure('stopped before the database');
};
const quiet: Io = { out: () => {}, err: () => {} };
const commands = [
  createSubmitCommand(stopAtDatabase),
  createWaitCommand(stopAtDatabase),
  createListCommand(stopAtDatabase),
  createLocationCommand(stopAtDatabase),
];

describe('a command line of any values', () => {
  it('is parsed to the command, or refused as usage (exit 2), never with another error', async () => {
    const value = fc.oneof(typedArb, hostileJsonText);
    const argvArb = fc.oneof(
      fc
        .tuple(
          fc.constantFrom('transfer', 'unpack', 'nope'),
          fc.oneof(value, fc.constant('{"sourceLocationId":null}')),
          fc.array(
            fc.tuple(
              fc.constantFrom(
                '--priority',
                '--deadline',
                '--not-before',
                '--max-retries',
                '--inputs',
              ),
              value,
            ),
            { maxLength: 3 },
          ),
        )
        .map(([kind, fields, options]) => ['submit', kind, '--fields', fields, ...options.flat()]),
      fc.tuple(value, value).map(([id, t]) => ['wait', id, '--timeout', t]),
      fc
        .tuple(value, value, fc.constantFrom('--kind', '--status'), value)
        .map(([since, limit, o, v]) => ['list', '--since', since, '--limit', limit, o, v]),
      fc
        .tuple(value, value, value)
        .map(([site, name, type]) => [
          'location',
          'add',
          '--site',
          site,
          '--name',
          name,
          '--type',
          type,
          '--root',
          '/r',
        ]),
    );
    await fc.assert(
      fc.asyncProperty(argvArb, async (argv) => {
        const code = await runProgram(commands, argv, quiet);
        expect([1, 2]).toContain(code);
      }),
      // `timeout` fails a run that never settles: a hang detector, not a measure of speed.
      { numRuns: 150, timeout: HANG_MS },
    );
  });

  it('refuses a priority out of range or not whole as usage', async () => {
    for (const p of ['101', '-101', '1.5', '1e2', '9'.repeat(400), 'NaN']) {
      const argv = ['submit', 'transfer', '--fields', '{}', '--priority', p];
      expect(await runProgram(commands, argv, quiet), p).toBe(2);
    }
    const ok = ['submit', 'transfer', '--fields', '{}', '--priority', '-100'];
    expect(await runProgram(commands, ok, quiet)).toBe(1);
  });
});
