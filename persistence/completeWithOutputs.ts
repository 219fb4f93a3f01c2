import { missingOutputs, outputContractError } from '../machines/missingOutputs.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { OperationStatus } from '../machines/operationMachine.ts';
import { checkId, conflict, notFound } from './applyEvents.ts';
import { type OutputCopy, toOutputInserts } from './OutputCopy.ts';
import type { Executor } from './openDatabase.ts';
import { planTransition, type TransitionWrite } from './planTransition.ts';
import {
  completeOperations,
  linkExistingOutputs,
  type OutputCopyInsert,
} from './sql/completeOperations.ts';
import { selectForCompletion } from './sql/selectForCompletion.ts';
import { selectVersions } from './sql/selectOperations.ts';

/** One completion in a batch. */
export interface CompleteItem {
  readonly id: string;
  /** The attempt the worker ran: the completion is fenced on it. */
  readonly attempt: number;
  readonly outputs: readonly OutputCopy[];
  /** Who the transition row names (default: the worker that holds the attempt). */
  readonly by?: string;
}

export interface Completion {
  readonly ok: true;
  readonly id: string;
  readonly version: number;
  /**
   * True when the operation was already COMPLETED by this attempt (a duplicate delivery or a
   * racing completion): nothing was written, and that is success.
   */
  readonly alreadyCompleted: boolean;
  /** Output copies this call inserted; the rest were already there (conflict = already done). */
  readonly copiesCreated: number;
  readonly copiesAlreadyPresent: number;
}

export type CompleteResult = Completion | { ok: false; id: string; error: OpstateError };

function done(id: string, version: number): Completion {
  return {
    ok: true,
    id,
    version,
    alreadyCompleted: true,
    copiesCreated: 0,
    copiesAlreadyPresent: 0,
  };
}

/**
 * Completes a batch in two statements (one select, one write) plus a link statement in the rare
 * case a concurrent completion inserted the same copy. Per row: output copies are inserted with
 * ON CONFLICT DO NOTHING (a live copy already there counts as done), linked as outputs, and the
 * operation moves to COMPLETED with a compare-and-set on version and attempt, all atomically.
 * A repeated completion of the same attempt returns `alreadyCompleted`; a stale attempt gets
 * `STALE_ATTEMPT` and writes nothing. Outputs that lack what the operation's kind must produce
 * (`OUTPUT_CONTRACT` in machines/outputContract.ts, checked against facts the select reads) get a
 * non-retryable `OUTPUT_CONTRACT` error naming what is missing, and nothing is written for them.
 */
export async function completeWithOutputs(
  exec: Executor,
  items: readonly CompleteItem[],
  now: Date,
): Promise<CompleteResult[]> {
  const results: (CompleteResult | undefined)[] = new Array(items.length);
  const outputsById = new Map<string, OutputCopyInsert[]>();
  items.forEach((item, n) => {
    try {
      const id = checkId(item.id);
      if (outputsById.has(id)) {
        throw new OpstateError(
          OpstateErrorCode.BAD_INPUT,
          `operation ${id} appears twice in one completion batch`,
          { details: { id } },
        );
      }
      if (!Number.isInteger(item.attempt) || item.attempt < 1) {
        throw new OpstateError(
          OpstateErrorCode.BAD_INPUT,
          `attempt must be a whole number ≥ 1, got ${String(item.attempt)}`,
          { details: { id } },
        );
      }
      outputsById.set(id, toOutputInserts(id, item.outputs));
    } catch (err) {
      if (!(err instanceof OpstateError)) throw err;
      results[n] = { ok: false, id: String(item.id), error: err };
    }
  });
  const rows = await selectForCompletion(exec, [...outputsById.keys()]);

  const writes: TransitionWrite[] = [];
  const outputs: OutputCopyInsert[] = [];
  const index = new Map<string, number>();
  items.forEach((item, n) => {
    if (results[n] !== undefined) return;
    const row = rows.get(item.id);
    const record = row?.record;
    try {
      if (row === undefined || record === undefined) throw notFound(item.id);
      if (record.status === OperationStatus.COMPLETED && record.attempt === item.attempt) {
        results[n] = done(item.id, record.version);
        return;
      }
      const { write } = planTransition(
        record,
        { type: 'COMPLETE', attempt: item.attempt },
        now,
        item.by,
      );
      const produced = (outputsById.get(item.id) ?? []).map((o) => ({
        artifactType: o.artifact_type,
        artifactId: o.artifact_id,
        locationId: o.location_id,
        checksum: o.checksum,
      }));
      const missing = missingOutputs(record.kind, row.facts, produced);
      if (missing.length > 0) throw outputContractError(record.kind, item.id, missing);
      writes.push(write);
      outputs.push(...(outputsById.get(item.id) ?? []));
      index.set(item.id, n);
    } catch (err) {
      if (!(err instanceof OpstateError)) throw err;
      results[n] = { ok: false, id: item.id, error: err };
    }
  });

  const completed = new Map(
    (await completeOperations(exec, writes, outputs)).map((c) => [c.id, c]),
  );
  const unlinked = outputs.filter((o) => {
    const c = completed.get(o.operation_id);
    return c !== undefined && c.linked < (outputsById.get(o.operation_id)?.length ?? 0);
  });
  await linkExistingOutputs(exec, unlinked);

  const lost = writes.filter((w) => !completed.has(w.id)).map((w) => w.id);
  const current = await selectVersions(exec, lost);
  for (const write of writes) {
    const n = index.get(write.id) as number;
    const c = completed.get(write.id);
    if (c !== undefined) {
      const expected = outputsById.get(write.id)?.length ?? 0;
      results[n] = {
        ok: true,
        id: write.id,
        version: c.version,
        alreadyCompleted: false,
        copiesCreated: c.created,
        copiesAlreadyPresent: expected - c.created,
      };
      continue;
    }
    const now = current.get(write.id);
    if (now === undefined) {
      results[n] = { ok: false, id: write.id, error: notFound(write.id) };
    } else if (now.status === OperationStatus.COMPLETED && now.attempt === write.t_attempt) {
      // A racing completion of the same attempt won: its copy is the one, ours was never written.
      results[n] = done(write.id, now.version);
    } else {
      results[n] = {
        ok: false,
        id: write.id,
        error: conflict(write.id, write.expected_version, now.version),
      };
    }
  }
  return results as CompleteResult[];
}
