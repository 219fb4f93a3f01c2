import { type Loop, startLoop } from '../loops/Loop.ts';
import type { Clock } from '../machines/Clock.ts';
import type { CircuitBreakerPolicy } from '../machines/circuitBreaker.ts';
import type { Logger } from '../observe/Logger.ts';
import { writeLines } from '../observe/LogLine.ts';
import { TransitionCursor } from '../observe/TransitionCursor.ts';
import { CircuitBreakerRepository } from '../persistence/CircuitBreakerRepository.ts';
import type { Executor } from '../persistence/openDatabase.ts';
import type { LeadershipTerm } from './Leadership.ts';
import { breakerPairs, planBreakerPass, reportBreakerWrites } from './planBreakerPass.ts';

export type { CircuitBreakerPolicy } from '../machines/circuitBreaker.ts';

/** What the breaker's pass reads and writes (the database's, or a test's). */
export type BreakerRepository = Pick<
  CircuitBreakerRepository,
  'latestTransitionId' | 'readOutcomes' | 'loadForPass' | 'write'
>;

export interface CircuitBreakerOptions {
  readonly database: Executor;
  /** Replaces the database's breaker rows (tests); default: a repository on `database`. */
  readonly repository?: BreakerRepository;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly policy: CircuitBreakerPolicy;
  /** Transition rows read per pass at most. */
  readonly batchSize: number;
  /** Called when a pass half-opened or closed a breaker: work may be schedulable again. */
  readonly onRelease?: () => void;
  /** The leadership term: passes run only while it is valid, writes carry its fence. */
  readonly term?: LeadershipTerm;
}

/** The breaker's pass, run by the control-plane loop (or by a test, one pass at a time). */
export interface CircuitBreaker {
  /** One pass; true when a full batch was read (more may be waiting). */
  pass(): Promise<boolean>;
}

/**
 * The circuit breaker of each (kind, target location) pair. Each pass reads the FAIL and COMPLETE
 * transitions written since the last one (it starts from the newest when created), decides with
 * `planBreakerPass` (the pure rules of `machines/circuitBreaker.ts`) which breakers change —
 * outcomes folded in, cooled-down OPEN breakers half-opened — writes those (compare-and-set, so an
 * operator's reset wins) and logs what `reportBreakerWrites` says. Opening logs a WARNING naming
 * the kind, the location and the last error; the scheduler then parks the pair (see
 * `selectDueForUpdate`). A pass over successes only writes nothing.
 *
 * @example
 * ```ts
 * const breaker = createCircuitBreaker({ database, clock, logger, batchSize: 1024,
 *   policy: { threshold: 5, cooldownMs: 60_000 }, onRelease: () => scheduler.wake() });
 * await breaker.pass();
 * ```
 */
export function createCircuitBreaker(options: CircuitBreakerOptions): CircuitBreaker {
  const { clock, logger, policy, batchSize, onRelease } = options;
  const repo = options.repository ?? new CircuitBreakerRepository(options.database);
  const cursor = new TransitionCursor();
  return {
    async pass() {
      if (!cursor.started) cursor.start(await repo.latestTransitionId());
      const now = new Date(clock.now());
      const read = await repo.readOutcomes(cursor.after, cursor.gaps(now.getTime()), batchSize);
      const rows = read.outcomes;
      const loaded = await repo.loadForPass(breakerPairs(rows));
      const writes = planBreakerPass({ rows, loaded, now, policy });
      const written = await repo.write(writes, options.term?.fence);
      const report = reportBreakerWrites({ written, planned: writes.length, loaded, policy });
      writeLines(logger, report.lines);
      cursor.advance(read.ids, now.getTime());
      if (report.released) onRelease?.();
      return read.ids.length >= batchSize;
    },
  };
}

/**
 * Runs `createCircuitBreaker`'s pass as a control-plane loop every `intervalMs`.
 *
 * @example
 * ```ts
 * const loop = startCircuitBreakerLoop({ database, clock, logger, batchSize: 1024,
 *   policy: { threshold: 5, cooldownMs: 60_000 }, intervalMs: 1_000 });
 * await loop.stop();
 * ```
 */
export function startCircuitBreakerLoop(
  options: CircuitBreakerOptions & { readonly intervalMs: number },
): Loop {
  const breaker = createCircuitBreaker(options);
  return startLoop({
    name: 'circuit breaker',
    intervalMs: options.intervalMs,
    clock: options.clock,
    logger: options.logger,
    pass: () =>
      options.term === undefined || options.term.valid() ? breaker.pass() : Promise.resolve(false),
  });
}
