import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../machines/Clock.ts';
import { createSimulatedClock, SimulatedClock } from '../../machines/SimulatedClock.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The runtime's sources: everything but tests, benches and dependencies. */
const RUNTIME = [
  'machines',
  'observe',
  'loops',
  'worker',
  'control-plane',
  'deleter',
  'runtime',
  'persistence',
  'transport',
  'stages',
  'cli',
  'dashboard',
  'index.ts',
];
/**
 * The one place allowed to read the time or set a timer, and the dashboard's page script (it runs
 * in the browser, not in opstate).
 */
const CLOCK_FILES = new Set([
  'machines/Clock.ts',
  'machines/SimulatedClock.ts',
  'dashboard/layout.ts',
]);
const DIRECT_TIME =
  /(?<![.\w])(setTimeout|setInterval|setImmediate)\(|Date\.now\(\)|new Date\(\)|performance\.now\(\)/;

function sources(path: string): string[] {
  const full = join(ROOT, path);
  if (statSync(full).isFile()) return path.endsWith('.ts') ? [path] : [];
  return readdirSync(full).flatMap((name) => sources(join(path, name)));
}

describe('one clock', () => {
  it('no runtime source reads the time or sets a timer except through the Clock', () => {
    const files = RUNTIME.flatMap(sources);
    expect(files.length).toBeGreaterThan(50);
    const offenders = files
      .filter((f) => !CLOCK_FILES.has(relative(ROOT, join(ROOT, f))))
      .flatMap((f) =>
        readFileSync(join(ROOT, f), 'utf8')
          .split('\n')
          .map((line, i) => ({ where: `${f}:${i + 1}`, line: line.trim() }))
          .filter(({ line }) => DIRECT_TIME.test(line)),
      );
    expect(offenders).toEqual([]);
  });

  it('the scan would find a direct timer', () => {
    expect(DIRECT_TIME.test('const t = setTimeout(done, 10);')).toBe(true);
    expect(DIRECT_TIME.test('const t = clock.setTimeout(done, 10);')).toBe(false);
    expect(DIRECT_TIME.test('stamp(Date.now())')).toBe(true);
    expect(DIRECT_TIME.test('new Date(clock.now())')).toBe(false);
  });

  it('the system clock sleeps for real and wakes early on abort', async () => {
    const t0 = systemClock.now();
    await systemClock.sleep(20);
    expect(systemClock.now() - t0).toBeGreaterThanOrEqual(19);
    const stop = new AbortController();
    const woken = systemClock.sleep(60_000, stop.signal);
    stop.abort();
    await woken; // would time the test out if the abort did not wake it
  });
});

describe('SimulatedClock', () => {
  it('fires timers in time order, ties in the order they were set, each at its own time', async () => {
    const clock = new SimulatedClock(1_000);
    const fired: [string, number][] = [];
    const note = (name: string) => () => fired.push([name, clock.now()]);
    clock.setTimeout(note('c'), 30);
    clock.setTimeout(note('a'), 10);
    clock.setTimeout(note('b1'), 20);
    clock.setTimeout(note('b2'), 20);
    const cancelled = clock.setTimeout(note('never'), 15);
    clock.clearTimeout(cancelled);
    expect(clock.pending).toBe(4);
    expect(clock.nextAt).toBe(1_010);
    await clock.advance(25);
    expect(fired).toEqual([
      ['a', 1_010],
      ['b1', 1_020],
      ['b2', 1_020],
    ]);
    expect(clock.now()).toBe(1_025);
    await clock.advance(5);
    expect(fired.at(-1)).toEqual(['c', 1_030]);
    expect(clock.pending).toBe(0);
    expect(await clock.runNext()).toBe(false);
  });

  it('a loop that sleeps runs once per interval as time advances, and timers set on the way fire in the same span', async () => {
    const clock = new SimulatedClock(0);
    const passes: number[] = [];
    const stop = new AbortController();
    const loop = (async () => {
      while (!stop.signal.aborted) {
        passes.push(clock.now());
        await Promise.resolve(); // some asynchronous work between sleeps
        await clock.sleep(100, stop.signal);
      }
    })();
    await clock.advance(350);
    expect(passes).toEqual([0, 100, 200, 300]);
    stop.abort();
    await loop;
    expect(clock.pending).toBe(0); // the aborted sleep cleared its timer
  });

  it('an aborted sleep resolves at once and leaves no timer behind', async () => {
    const clock = createSimulatedClock();
    const stop = new AbortController();
    const slept = clock.sleep(60_000, stop.signal);
    expect(clock.pending).toBe(1);
    stop.abort();
    await slept;
    expect(clock.pending).toBe(0);
    expect(clock.now()).toBe(Date.UTC(2030, 0, 1));
  });

  it('runNext jumps to the next timer whatever its time; time never goes back', async () => {
    const clock = new SimulatedClock(0);
    let woke = 0;
    void clock.sleep(3_600_000).then(() => {
      woke = clock.now();
    });
    expect(await clock.runNext()).toBe(true);
    expect(woke).toBe(3_600_000);
    await clock.advanceTo(10);
    expect(clock.now()).toBe(3_600_000);
    const past = clock.setTimeout(() => {}, -5); // a negative delay is due now
    expect(clock.nextAt).toBe(3_600_000);
    clock.clearTimeout(past);
    clock.clearTimeout(undefined);
  });
});
