import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { operatorEvent } from '../machines/operatorEvent.ts';
import type { Logger } from '../observe/Logger.ts';
import { checkId } from '../persistence/applyEvents.ts';
import type { Runtime } from '../runtime/Runtime.ts';
import type { RequestActor } from './requestGuard.ts';

/** Most operations one bulk retry takes (a page of the list is fewer). */
export const BULK_RETRY_MAX = 100;

/** What became of one operation of a bulk retry. */
export type BulkRetryOutcome =
  | { readonly id: string; readonly outcome: 'retried'; readonly message: string }
  | {
      readonly id: string;
      readonly outcome: 'refused';
      readonly message: string;
      readonly code: string;
    };

/** Checks a bulk retry's ids: a non-empty array of uuids, at most `BULK_RETRY_MAX`, deduplicated. */
export function bulkRetryIds(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      'ids must be a non-empty array of operation ids, such as {"ids": ["0190c3d2-…"]}',
    );
  }
  if (value.length > BULK_RETRY_MAX) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `at most ${BULK_RETRY_MAX} operations per bulk retry, got ${value.length}; retry them a page at a time`,
    );
  }
  return [...new Set(value.map((id) => checkId(id)))];
}

/**
 * Retries each operation, one after the other, through the machine exactly as `opstate retry`
 * does: one that is no longer FAILED (or whose RETRY the machine refuses) is refused with the
 * machine's reason, and the others go on. The ids are checked first: a malformed request retries
 * nothing.
 *
 * @example
 * ```ts
 * const results = await bulkRetry(runtime.command, ['0190c3d2-…'], 'tool fixed', logger, actor);
 * results.filter((r) => r.outcome === 'refused');
 * ```
 */
export async function bulkRetry(
  command: Runtime['command'],
  ids: unknown,
  reason: string | undefined,
  logger: Logger,
  actor: RequestActor,
): Promise<BulkRetryOutcome[]> {
  const checked = bulkRetryIds(ids);
  const results: BulkRetryOutcome[] = [];
  for (const id of checked) {
    try {
      const t = await command(id, operatorEvent('retry', reason), { by: actor.by });
      logger.log('INFO', 'operator action from the dashboard', {
        operationId: id,
        action: 'retry',
        operator: actor.operator,
        address: actor.address,
        bulk: true,
        from: t.from,
        to: t.status,
      });
      results.push({
        id,
        outcome: 'retried',
        message: `${t.from} → ${t.status} (attempt ${t.context.attempt})`,
      });
    } catch (err) {
      // A refusal by the machine (or the id unknown) is this operation's answer; anything else
      // (the database unreachable) stops the batch and is the request's.
      if (!(err instanceof OpstateError) || err.code === OpstateErrorCode.DATABASE) throw err;
      results.push({ id, outcome: 'refused', message: err.message, code: err.code });
    }
  }
  return results;
}
