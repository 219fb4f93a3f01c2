import type { Decision } from '../machines/decide.ts';
import { describeValue } from '../machines/describeValue.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { OperationEvent, OperationStatus } from '../machines/operationMachine.ts';
import { fenceHolds, type LeaseFence, notLeader } from './LeaseFence.ts';
import type { OperationRecord } from './OperationRecord.ts';
import type { Executor } from './openDatabase.ts';
import { planTransition, type TransitionWrite } from './planTransition.ts';
import type { AppliedTransition } from './publicRecords.ts';
import { selectOperations, selectVersions } from './sql/selectOperations.ts';
import { writeTransitions } from './sql/writeTransitions.ts';
import { isUuid } from './subtypeFields.ts';

export type { AppliedTransition } from './publicRecords.ts';

/** One event for one operation, in a batch. */
export interface ApplyItem {
  readonly id: string;
  readonly event: OperationEvent;
  /** Fail with CONFLICT unless the row is still at this version (what the caller last read). */
  readonly expectedVersion?: number;
  /** Who the transition row names (default: the worker, the RESET's `by`, `scheduler`, `operator`). */
  readonly by?: string;
}

export interface RefusedTransition {
  readonly ok: false;
  readonly id: string;
  readonly error: OpstateError;
}

export type ApplyResult = AppliedTransition | RefusedTransition;

/** `CONFLICT` for a lost compare-and-set, with both versions. */
export function conflict(id: string, expected: number, current: number): OpstateError {
  return new OpstateError(
    OpstateErrorCode.CONFLICT,
    `operation ${id} was changed by another writer (version ${current}, expected ${expected}); reload it and decide again`,
    { details: { id, expectedVersion: expected, currentVersion: current }, retryable: true },
  );
}

export function notFound(id: string): OpstateError {
  return new OpstateError(OpstateErrorCode.NOT_FOUND, `no operation with id ${id}`, {
    details: { id },
  });
}

/** Checks an id from outside before it reaches SQL. */
export function checkId(id: unknown, what = 'operation id'): string {
  if (!isUuid(id)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${what} ${typeof id === 'string' ? JSON.stringify(id) : describeValue(id)} is not a uuid`,
      { details: { id } },
    );
  }
  return id as string;
}

function refused(id: string, err: unknown): RefusedTransition {
  if (err instanceof OpstateError) return { ok: false, id, error: err };
  throw err;
}

/**
 * Applies a batch of events in two statements whatever its size: one select of the rows, the
 * pure `decide` per row in memory, then one multi-row compare-and-set write
 * (`writeTransitions`). Each row gets its own result, in input order: a refused event
 * (`INVALID_EVENT`, `STALE_ATTEMPT`, `BAD_INPUT`), an unknown id (`NOT_FOUND`) or a lost
 * compare-and-set (`CONFLICT`, with current and expected version) writes nothing for that row
 * and does not stop the others.
 */
export async function applyEvents(
  exec: Executor,
  items: readonly ApplyItem[],
  now: Date,
  fence?: LeaseFence,
): Promise<ApplyResult[]> {
  const results: (ApplyResult | undefined)[] = new Array(items.length);
  const seen = new Set<string>();
  const wanted: string[] = [];
  items.forEach((item, n) => {
    try {
      const id = checkId(item.id);
      if (seen.has(id)) {
        throw new OpstateError(
          OpstateErrorCode.BAD_INPUT,
          `operation ${id} appears twice in one batch; send its events one after the other`,
          { details: { id } },
        );
      }
      seen.add(id);
      wanted.push(id);
    } catch (err) {
      results[n] = refused(String(item.id), err);
    }
  });
  const records = await selectOperations(exec, wanted);
  const loaded: LoadedItem[] = [];
  items.forEach((item, n) => {
    if (results[n] !== undefined) return;
    const record = records.get(item.id);
    if (record === undefined) {
      results[n] = { ok: false, id: item.id, error: notFound(item.id) };
    } else if (item.expectedVersion !== undefined && item.expectedVersion !== record.version) {
      results[n] = {
        ok: false,
        id: item.id,
        error: conflict(item.id, item.expectedVersion, record.version),
      };
    } else {
      loaded.push({ n, record, event: item.event, by: item.by });
    }
  });
  await applyLoaded(exec, loaded, now, results, fence);
  return results as ApplyResult[];
}

/** An event for a row the caller has already loaded; the write is fenced on its version. */
export interface LoadedItem {
  readonly n: number;
  readonly record: OperationRecord;
  readonly event: OperationEvent;
  readonly by?: string | undefined;
}

/**
 * Plans and writes events for rows already in memory, in ONE statement: the compare-and-set is
 * against each record's `version`, so a row that moved since it was read gets `CONFLICT`. With a
 * `fence`, nothing is written once that leadership epoch has lost its lease (`NOT_LEADER`). Fills
 * `results[item.n]`.
 */
export async function applyLoaded(
  exec: Executor,
  items: readonly LoadedItem[],
  now: Date,
  results: (ApplyResult | undefined)[],
  fence?: LeaseFence,
): Promise<void> {
  const planned = new Map<
    string,
    { n: number; from: OperationStatus; write: TransitionWrite; decision: Decision }
  >();
  for (const item of items) {
    const id = item.record.id;
    if (planned.has(id)) {
      results[item.n] = refused(
        id,
        new OpstateError(
          OpstateErrorCode.BAD_INPUT,
          `operation ${id} appears twice in one batch; send its events one after the other`,
          { details: { id } },
        ),
      );
      continue;
    }
    try {
      const plan = planTransition(item.record, item.event, now, item.by);
      planned.set(id, { n: item.n, from: item.record.status, ...plan });
    } catch (err) {
      results[item.n] = refused(id, err);
    }
  }

  const writes = [...planned.values()].map((p) => p.write);
  const written = new Map((await writeTransitions(exec, writes, fence)).map((w) => [w.id, w]));
  const lost = writes.filter((w) => !written.has(w.id)).map((w) => w.id);
  const fenced = fence !== undefined && lost.length > 0 && !(await fenceHolds(exec, fence));
  const current = fenced ? new Map() : await selectVersions(exec, lost);

  for (const [id, p] of planned) {
    const w = written.get(id);
    if (w === undefined && fenced) {
      results[p.n] = { ok: false, id, error: notLeader(fence) };
      continue;
    }
    if (w === undefined) {
      const now = current.get(id);
      results[p.n] = {
        ok: false,
        id,
        error:
          now === undefined ? notFound(id) : conflict(id, p.write.expected_version, now.version),
      };
      continue;
    }
    results[p.n] = {
      ok: true,
      id,
      version: w.version,
      from: p.from,
      status: p.decision.status,
      context: p.decision.context,
      effects: p.decision.effects,
    };
  }
}
