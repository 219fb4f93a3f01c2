import { type Clock, systemClock } from '../machines/Clock.ts';
import type { Deadlines } from '../machines/deadlines.ts';
import type { OpstateError } from '../machines/OpstateError.ts';
import type { OperationEvent } from '../machines/operationMachine.ts';
import type { RoutedLocation } from '../machines/routing.ts';
import type {
  ActiveOperation,
  ActivePage,
  InProgressOperation,
  RunningAttempt,
} from './ActiveOperation.ts';
import {
  type AppliedTransition,
  type ApplyItem,
  type ApplyResult,
  applyEvents,
  applyLoaded,
  checkId,
  notFound,
} from './applyEvents.ts';
import {
  type CreateOperationInput,
  routedLocationId,
  toOperationInsert,
} from './CreateOperationInput.ts';
import { type ClaimOptions, type ClaimResult, claimDue } from './claimDue.ts';
import {
  type CompleteItem,
  type CompleteResult,
  type Completion,
  completeWithOutputs,
} from './completeWithOutputs.ts';
import { type HistoryMaintenance, HistoryRetentionRepository } from './HistoryRetention.ts';
import { JournalRetentionRepository } from './JournalRetention.ts';
import type { LeaseFence } from './LeaseFence.ts';
import type { OperationRecord } from './OperationRecord.ts';
import type { OutboxEntry, ScheduledTransition } from './OutboxEntry.ts';
import type { OutputCopy } from './OutputCopy.ts';
import type { Database } from './openDatabase.ts';
import { selectLocationsAt, selectRoutedLocations } from './reads/selectRoutedLocations.ts';
import { selectStatusCounts } from './reads/selectStatusCounts.ts';
import type { StatusCounts, TallyDrift } from './StatusCounts.ts';
import {
  foldStatusTally,
  recountStatusTally,
  selectActiveOlderThan,
  selectInProgress,
  selectScheduledCount,
} from './sql/controlPlaneQueries.ts';
import {
  dispatchBarrier,
  saveRelayCursor,
  selectDispatches,
  selectRelayPosition,
  selectScheduled,
} from './sql/dispatchRelay.ts';
import { insertOperations } from './sql/insertOperations.ts';
import { selectOperations } from './sql/selectOperations.ts';
import { selectPastDeadline } from './sql/selectPastDeadline.ts';

export interface OperationStoreOptions {
  /** The clock that stamps events (`at`) and decides what is due [systemClock]. */
  readonly clock?: Clock;
}

function unwrap<T extends { ok: true }>(result: T | { ok: false; error: OpstateError }): T {
  if (result.ok === false) throw result.error;
  return result as T;
}

/**
 * The operation store: creates operations, applies lifecycle events through the pure machine with
 * a compare-and-set on `version`, and writes each transition together with its history
 * and breadcrumb rows in one statement. Batch forms (`createMany`, `applyMany`, `claimDue`,
 * `completeMany`) cost a fixed number of statements per batch, not per operation.
 *
 * @example
 * ```ts
 * const store = new OperationStore(database);
 * const op = await store.create({ kind: OperationKind.LONG_TERM_ARCHIVE,
 *   fields: { rawDataPackageId, sourceLocationId, destinationLocationId } });
 * const { claimed } = await store.claimDue(100);           // PENDING → SCHEDULED, dispatch recorded
 * await store.apply(op.id, { type: 'START', attempt: 1, workerId: 'w1' });
 * await store.complete(op.id, 1, [{ artifactType: 'raw_data_package', artifactId, locationId }]);
 * ```
 */
export class OperationStore {
  readonly database: Database;
  readonly #clock: Clock;

  constructor(database: Database, options: OperationStoreOptions = {}) {
    this.database = database;
    this.#clock = options.clock ?? systemClock;
  }

  private clock(): Date {
    return new Date(this.#clock.now());
  }

  /**
   * Creates one operation (base + subtype + inputs + creation transition, one statement) and
   * returns its id. `BAD_INPUT` for an unknown kind, bad fields or a missing referenced row;
   * nothing is written then.
   *
   * @example
   * ```ts
   * const id = await store.create({ kind: OperationKind.TRANSFER,
   *   fields: { dataTransferPackageId, sourceLocationId, destinationLocationId } });
   * ```
   */
  async create(input: CreateOperationInput): Promise<string> {
    const [id] = await this.createMany([input]);
    return id as string;
  }

  /**
   * Creates many operations in one statement; all or none.
   *
   * @example
   * ```ts
   * const ids = await store.createMany(packages.map((p) => ({ kind, fields: { ... } })));
   * ```
   */
  async createMany(inputs: readonly CreateOperationInput[]): Promise<string[]> {
    const now = this.clock();
    const locations = await selectRoutedLocations(this.database, inputs.map(routedLocationId));
    const rows = inputs.map((input) => toOperationInsert(input, now, locations));
    return insertOperations(this.database, rows);
  }

  /**
   * The registered locations of a site (every site's when not given), as routing sees them: what
   * a worker discovers its queues from (`routesAt`).
   *
   * @example
   * ```ts
   * routesAt(await store.routedLocations('cologne'), [OperationType.DATA_TRANSFER]);
   * ```
   */
  routedLocations(site?: string): Promise<RoutedLocation[]> {
    return selectLocationsAt(this.database, site);
  }

  /**
   * Loads one operation; `NOT_FOUND` when there is none, `BAD_INPUT` for a malformed id.
   *
   * @example
   * ```ts
   * const { status, attempt, version } = await store.load(id);
   * ```
   */
  async load(id: string): Promise<OperationRecord> {
    const record = (await selectOperations(this.database, [checkId(id)])).get(id);
    if (record === undefined) throw notFound(id);
    return record;
  }

  /**
   * Loads many operations in one statement; missing ids are absent from the map.
   *
   * @example
   * ```ts
   * const records = await store.loadMany(ids);
   * ```
   */
  async loadMany(ids: readonly string[]): Promise<Map<string, OperationRecord>> {
    return selectOperations(
      this.database,
      ids.map((id) => checkId(id)),
    );
  }

  /**
   * Applies one event: load, pure `decide`, and one compare-and-set statement that also writes
   * the transition and breadcrumb rows (a dispatch is its SCHEDULE transition). Throws `CONFLICT` (lost compare-and-set, with
   * current and expected version), `NOT_FOUND`, or the machine's `INVALID_EVENT` /
   * `STALE_ATTEMPT`; nothing is written then.
   *
   * @example
   * ```ts
   * const t = await store.apply(id, { type: 'RESET', by: 'heartbeat_monitor', reason: 'stale' });
   * for (const e of t.effects) if (e.type === 'abortWork') abort(e);
   * ```
   */
  async apply(
    id: string,
    event: OperationEvent,
    options: { expectedVersion?: number; by?: string; fence?: LeaseFence } = {},
  ): Promise<AppliedTransition> {
    const { fence, ...item } = options;
    const [result] = await this.applyMany([{ id, event, ...item }], fence);
    return unwrap<AppliedTransition>(result as ApplyResult);
  }

  /**
   * Applies a batch of events in two statements, with a result per item (in order). A control
   * plane passes its leadership `fence`: once that epoch has lost its lease, nothing is written
   * and each item is refused with `NOT_LEADER`.
   *
   * @example
   * ```ts
   * const results = await store.applyMany(starts.map((s) =>
   *   ({ id: s.id, event: { type: 'START', attempt: s.attempt, workerId } })));
   * ```
   */
  async applyMany(items: readonly ApplyItem[], fence?: LeaseFence): Promise<ApplyResult[]> {
    return applyEvents(this.database, items, this.clock(), fence);
  }

  /**
   * Applies an event to a row the caller has just loaded, skipping the reload: one statement,
   * fenced on `record.version` (`CONFLICT` if the row moved since it was read).
   *
   * @example
   * ```ts
   * const op = await store.load(message.operationId);
   * await store.applyTo(op, { type: 'START', attempt: op.attempt, workerId });
   * ```
   */
  async applyTo(
    record: OperationRecord,
    event: OperationEvent,
    options: { by?: string } = {},
  ): Promise<AppliedTransition> {
    const [result] = await this.applyManyTo([{ record, event, ...options }]);
    return unwrap<AppliedTransition>(result as ApplyResult);
  }

  /**
   * The batch form of `applyTo`: one statement for the whole batch, a result per item.
   *
   * @example
   * ```ts
   * await store.applyManyTo(records.map((record) => ({ record, event: { type: 'START', attempt: record.attempt, workerId } })));
   * ```
   */
  async applyManyTo(
    items: readonly { record: OperationRecord; event: OperationEvent; by?: string }[],
  ): Promise<ApplyResult[]> {
    const results: (ApplyResult | undefined)[] = new Array(items.length);
    await applyLoaded(
      this.database,
      items.map((item, n) => ({ n, record: item.record, event: item.event, by: item.by })),
      this.clock(),
      results,
    );
    return results as ApplyResult[];
  }

  /**
   * Moves up to `limit` due PENDING operations to SCHEDULED and queues their dispatches, in one
   * short transaction with `FOR UPDATE SKIP LOCKED` (concurrent claimers never overlap). With a
   * leadership `fence`, throws `NOT_LEADER` and writes nothing once that epoch lost its lease.
   *
   * @example
   * ```ts
   * const { claimed } = await store.claimDue(256);
   * ```
   */
  async claimDue(
    limit: number,
    fence?: LeaseFence,
    options: ClaimOptions = {},
  ): Promise<ClaimResult> {
    return claimDue(
      this.database,
      Math.max(0, Math.floor(limit)),
      this.clock(),
      fence,
      options.starvationAgeMs,
    );
  }

  /**
   * Completes an attempt: inserts the output copies (a live copy already there = already done),
   * links them, and moves to COMPLETED with a compare-and-set on attempt, atomically. A repeat of
   * the same attempt returns `alreadyCompleted: true`. Outputs that lack what the kind must
   * produce (`OUTPUT_CONTRACT`) are refused with a non-retryable `OUTPUT_CONTRACT` error naming
   * what is missing, and nothing is written.
   *
   * @example
   * ```ts
   * await store.complete(id, attempt, [{ artifactType: ArtifactType.RAW_DATA_PACKAGE,
   *   artifactId: packageId, locationId: archiveId, checksum }]);
   * ```
   */
  async complete(
    id: string,
    attempt: number,
    outputs: readonly OutputCopy[] = [],
    options: { by?: string } = {},
  ): Promise<Completion> {
    const [result] = await this.completeMany([{ id, attempt, outputs, ...options }]);
    return unwrap<Completion>(result as CompleteResult);
  }

  /**
   * The batch form of `complete`, with a result per item.
   *
   * @example
   * ```ts
   * const results = await store.completeMany(done.map((d) => ({ id: d.id, attempt: d.attempt, outputs: d.outputs })));
   * ```
   */
  async completeMany(items: readonly CompleteItem[]): Promise<CompleteResult[]> {
    return completeWithOutputs(this.database, items, this.clock());
  }

  /**
   * The relay's barrier: when no transaction writing a SCHEDULE transition is open, the newest
   * transition id visible; `undefined` at once while one is (try again later). Every dispatch at
   * or below it is final, every later one gets a higher id (`fetchDispatches` may read up to it
   * and leave nothing behind).
   *
   * @example
   * ```ts
   * const upTo = await store.dispatchBarrier();
   * ```
   */
  async dispatchBarrier(): Promise<number | undefined> {
    return dispatchBarrier(this.database);
  }

  /**
   * The committed dispatches (SCHEDULE transitions) with ids in (`after`, `upTo`], oldest first,
   * at most `limit`, each with its queue, its message and whether its operation has moved on.
   *
   * @example
   * ```ts
   * for (const e of await store.fetchDispatches(after, upTo, 256)) if (!e.stale) await publish(e.route, e.payload);
   * ```
   */
  async fetchDispatches(after: number, upTo: number, limit: number): Promise<OutboxEntry[]> {
    return selectDispatches(this.database, { after, upTo, limit: Math.max(0, Math.floor(limit)) });
  }

  /**
   * The SCHEDULE transitions with ids in (`after`, `upTo`], oldest first, at most `limit`: the
   * history's rows alone (no operation read), for the relay to pass over what went out.
   *
   * @example
   * ```ts
   * const rows = await store.fetchScheduled(after, upTo, 1024);
   * ```
   */
  async fetchScheduled(after: number, upTo: number, limit: number): Promise<ScheduledTransition[]> {
    return selectScheduled(this.database, after, upTo, Math.max(0, Math.floor(limit)));
  }

  /**
   * The dispatches of the given SCHEDULE transitions, with their queues, messages and whether
   * their operations have moved on.
   *
   * @example
   * ```ts
   * const entries = await store.loadDispatches(plan.load);
   * ```
   */
  async loadDispatches(ids: readonly number[]): Promise<OutboxEntry[]> {
    if (ids.length === 0) return [];
    return selectDispatches(this.database, { ids });
  }

  /**
   * Where the relay stands in the history (`after`: every dispatch at or below it is published or
   * moot), and the newest transition id visible now.
   */
  async relayPosition(): Promise<{ after: number; newest: number }> {
    return selectRelayPosition(this.database);
  }

  /**
   * Moves the relay's cursor forward (never back); with a `fence`, only while that leadership
   * epoch holds its lease. Returns whether it moved.
   *
   * @example
   * ```ts
   * await store.saveRelayCursor(passedUpTo, term.fence);
   * ```
   */
  async saveRelayCursor(after: number, fence?: LeaseFence): Promise<boolean> {
    return saveRelayCursor(this.database, after, fence);
  }

  /**
   * Every IN_PROGRESS operation (id, kind, attempt, startedAt, workerId), for the heartbeat monitor.
   *
   * @example
   * ```ts
   * for (const op of await store.listInProgress()) if (!(await alive(op))) reset(op);
   * ```
   */
  async listInProgress(): Promise<InProgressOperation[]> {
    return selectInProgress(this.database);
  }

  /**
   * SCHEDULED / IN_PROGRESS operations whose current phase began before `before`, oldest first, a
   * page of at most `limit`, for the reconciler and the monitor. A pass reads every page
   * (`page.after`: the last row's `position`); one page alone would show it only the oldest.
   *
   * @example
   * ```ts
   * const suspects = await store.listActiveOlderThan(new Date(clock.now() - floorMs));
   * ```
   */
  async listActiveOlderThan(
    before: Date,
    limit = 1000,
    page: ActivePage = {},
  ): Promise<ActiveOperation[]> {
    return selectActiveOlderThan(this.database, before, limit, page);
  }

  /**
   * IN_PROGRESS attempts that have run past their deadline by `now` (the operation's own
   * `deadlineMs`, else its kind's in `deadlines`), counted from their START, longest past first:
   * for the deadline path.
   *
   * @example
   * ```ts
   * const late = await store.listPastDeadline(new Date(clock.now()), timing.deadlines);
   * ```
   */
  async listPastDeadline(now: Date, deadlines: Deadlines, limit = 1000): Promise<RunningAttempt[]> {
    return selectPastDeadline(this.database, now, deadlines, limit);
  }

  /**
   * Counts per kind × status, every kind and status present.
   *
   * @example
   * ```ts
   * (await store.countByKindAndStatus()).long_term_archive.IN_PROGRESS; // 2
   * ```
   */
  async countByKindAndStatus(): Promise<StatusCounts> {
    return selectStatusCounts(this.database);
  }

  /**
   * Folds the rows the counts are summed from into one per kind × status, so counting stays as
   * cheap as the number of kinds and statuses; the control plane's leader calls it now and then.
   * Returns how many rows it folded.
   *
   * @example
   * ```ts
   * await store.foldCounts(); // 1,280 rows since the last fold → one per kind and status
   * ```
   */
  async foldCounts(): Promise<number> {
    return foldStatusTally(this.database);
  }

  /**
   * The leader's care of the transition history: partitions made ahead of its ids, the rows that
   * overflowed into its default partition counted, and every partition the retention policy lets
   * go dropped (`HistoryRetentionRepository`; nothing is dropped while the policy keeps
   * everything, the default); then the same for the step journal and failure breadcrumbs, by spans
   * of days of operations created (`JournalRetentionRepository`). Ages are judged at `now` (the control plane's clock).
   *
   * @example
   * ```ts
   * const { made, dropped } = await store.maintainHistory(new Date(clock.now()));
   * ```
   */
  async maintainHistory(now: Date): Promise<HistoryMaintenance> {
    const history = new HistoryRetentionRepository(this.database);
    const made = await history.extend();
    const spilled = await history.spilled();
    const { dropped, kept } = await history.prune(now);
    const journal = new JournalRetentionRepository(this.database);
    const journalMade = await journal.extend();
    const journalSpilled = await journal.spilled();
    const pruned = await journal.prune(now);
    return {
      made,
      spilled,
      dropped,
      kept,
      journal: { made: journalMade, spilled: journalSpilled, ...pruned },
    };
  }

  /**
   * Counts the rows again and makes that the tally the counts are summed from, returning the
   * kinds and statuses whose count was wrong (none when it matched). Only needed after something
   * wrote to `operation` with its triggers off. One pass over the table; writers go on meanwhile
   * (their changes count on top), a fold waits for it.
   *
   * @example
   * ```ts
   * await store.recountCounts(); // [{ kind: 'transfer', status: 'SCHEDULED', tallied: 7, stored: 0 }]
   * ```
   */
  async recountCounts(): Promise<TallyDrift[]> {
    return recountStatusTally(this.database);
  }

  /**
   * How many operations are SCHEDULED now, for the scheduler's backpressure.
   *
   * @example
   * ```ts
   * const room = maxScheduled - (await store.countScheduled());
   * ```
   */
  async countScheduled(): Promise<number> {
    return selectScheduledCount(this.database);
  }
}
