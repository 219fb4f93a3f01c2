import { OPERATOR } from '../machines/actors.ts';
import { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { OperationStatus } from '../machines/operationMachine.ts';
import { PhysicalCopyStatus } from '../machines/physicalCopyMachine.ts';
import { CopyLifecycle } from '../persistence/CopyLifecycle.ts';
import { inspectOperation } from '../persistence/inspectOperation.ts';
import type { Runtime } from './Runtime.ts';

/** What a re-plan did. */
export type ReplanOutcome =
  | { readonly replanned: 'operation'; readonly generation: number; readonly status: string }
  | { readonly replanned: 'deletion'; readonly copyId: string; readonly status: string };

/**
 * An operator's re-plan after review (`opstate retry <id> --replan`):
 * - a FAILED operation gets a new plan generation beside the old one (the journal keeps the old
 *   steps as history) and is retried, so its handler plans again instead of resuming a stale plan;
 * - a COMPLETED long-term archive whose source deletion ended DELETION_FAILED has that deletion
 *   re-planned (REPLAN_DELETION, a fresh budget): a deleter plans it again against the archive,
 *   revalidating every member that is still there.
 * Anything else is refused with `INVALID_EVENT` saying why. What it writes is recorded as by `by`
 * (default `operator`; a named operator is `operatorActor(name, from)`). It needs only the database (a runtime,
 * or its database, journal and operator command alone, as `opstate retry --replan` passes them).
 *
 * @example
 * ```ts
 * await replan(runtime, operationId, 'source re-exported after review');
 * ```
 */
export async function replan(
  runtime: Pick<Runtime, 'database' | 'journal' | 'command'>,
  id: string,
  reason: string,
  by: string = OPERATOR,
): Promise<ReplanOutcome> {
  const view = await inspectOperation(runtime.database, id);
  if (view.status === OperationStatus.FAILED) {
    const { generation } = await runtime.journal.replan(id, { by, reason });
    const t = await runtime.command(id, { type: 'RETRY', reason }, { by });
    return { replanned: 'operation', generation, status: t.status };
  }
  const source = view.inputs[0];
  if (
    view.kind === OperationKind.LONG_TERM_ARCHIVE &&
    view.status === OperationStatus.COMPLETED &&
    source !== undefined
  ) {
    const copies = new CopyLifecycle(runtime.database);
    const { state } = await copies.facts(source.id);
    if (state.status === PhysicalCopyStatus.DELETION_FAILED) {
      const t = await copies.apply(source.id, { type: 'REPLAN_DELETION' }, { by, reason });
      return { replanned: 'deletion', copyId: source.id, status: t.status };
    }
    throw new OpstateError(
      OpstateErrorCode.INVALID_EVENT,
      `nothing to re-plan: operation ${id} is COMPLETED and its source copy is ${state.status} (a re-plan applies to a FAILED operation or a DELETION_FAILED source)`,
    );
  }
  throw new OpstateError(
    OpstateErrorCode.INVALID_EVENT,
    `re-plan refused: operation ${id} is ${view.status}; only a FAILED operation (or a completed archive whose source deletion failed) is re-planned`,
  );
}
