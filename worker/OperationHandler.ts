/**
 * The handler contract: what a stage handler is given and returns. Stage code imports these from
 * here and nothing else of the worker.
 */
import type { OperationKind } from '../machines/OperationKind.ts';
import type {
  DatabaseHandle,
  InputRelations,
  OperationInspection,
  OutputCopy,
} from '../persistence/publicRecords.ts';

/** What a handler sees of its operation. */
export interface OperationView {
  readonly id: string;
  readonly kind: OperationKind;
  readonly attempt: number;
  readonly retryCount: number;
}

/** The context a stage handler runs with. */
export interface HandlerContext {
  readonly operation: OperationView;
  /**
   * A durable journal step: runs `fn` once and records its result; a re-run (a later attempt
   * after a crash) returns the recorded result instead of repeating the side effect. The result
   * is any JSON value (a string stays a string) or `undefined` for none, and comes back
   * deep-equal. A result JSON cannot hold exactly (a bigint, a Date, a Map, a function, NaN…)
   * fails the attempt for good with `BAD_INPUT` naming where it is and what to return instead.
   *
   * @example
   * ```ts
   * const etag = await ctx.step('upload', () => upload(fields, ctx.signal)); // a string: kept as is
   * const at = new Date(await ctx.step('stamp', async () => new Date(clock.now()).toISOString()));
   * ```
   */
  step<T>(name: string, fn: () => Promise<T>): Promise<T>;
  /** Writes the worker's heartbeat now (it also beats at the interval on its own). */
  heartbeat(): Promise<void>;
  /**
   * Aborts when the operation is reset or cancelled, the worker stops, or the attempt passes its
   * deadline (then its `reason` is an `OpstateError` with code `DEADLINE_PASSED`). Pass it to every
   * call that can hang: a handler that ignores it keeps its slot of the worker until it returns,
   * and whatever it returns after is not written.
   */
  readonly signal: AbortSignal;
  /** The whole operation: subtype fields, input copies, history (one read, on demand). */
  inspect(): Promise<OperationInspection>;
  /**
   * Each input copy with its artifact's relations (one indexed query, on demand): the raw data
   * packages a data transfer package holds, the files of a raw data package, and the package a
   * file or a package belongs to.
   *
   * @example
   * ```ts
   * const [bundle] = await ctx.relations();
   * for (const pkg of bundle?.members ?? []) await unpackOne(bundle.path, pkg.id);
   * ```
   */
  relations(): Promise<readonly InputRelations[]>;
  /**
   * What this operation must return among its outputs by its kind's output contract
   * (`OUTPUT_CONTRACT`): the completion fails the attempt for good (`OUTPUT_CONTRACT`) when one
   * is missing. One query, on demand.
   *
   * @example
   * ```ts
   * const required = await ctx.requiredOutputs(); // [{ artifactType, artifactId, locationId }]
   * return { outputs: required.map((c) => ({ ...c, path: pathOf(c), checksum })) };
   * ```
   */
  requiredOutputs(): Promise<readonly OutputCopy[]>;
  /**
   * Runs `statement` on the worker's own database (as `runtime.database`: the connection opstate's
   * own stages write with, e.g. the archive record `defineArchiveStage` appends), waiting out a
   * Postgres outage — a restart, a failover — as `step`, `inspect` and the worker's own writes do,
   * until the attempt is aborted. `what` names the statement in the log lines that say it waits.
   * After an outage took its reply, `statement` runs again, so it must be idempotent: a write that
   * committed must be found, not repeated.
   *
   * @example
   * ```ts
   * const entry = await ctx.withDatabase('appending to the archive record of', (database) =>
   *   new ArchiveRecordRepository(database as Database).append(row));
   * ```
   */
  withDatabase<T>(what: string, statement: (database: DatabaseHandle) => Promise<T>): Promise<T>;
}

/** What a handler returns: the copies it produced, created with the completion. */
export interface HandlerResult {
  readonly outputs?: readonly OutputCopy[];
}

/** A stage handler: runs one attempt of one operation. */
export type OperationHandler = (ctx: HandlerContext) => Promise<HandlerResult | undefined>;
