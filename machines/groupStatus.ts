import { type OperationStatus, OperationStatus as S } from './operationMachine.ts';

/** A group's status is derived from its children, never stored. `EMPTY` is a group with none. */
export type GroupStatus = OperationStatus | 'EMPTY';

/**
 * Derives an operation group's status from its children:
 * none → EMPTY; all COMPLETED → COMPLETED; all finished with at least one FAILED → FAILED;
 * otherwise the least advanced live state: all PENDING → PENDING, all PENDING/SCHEDULED →
 * SCHEDULED, else IN_PROGRESS (work under way, or some done and some not).
 *
 * @example
 * ```ts
 * deriveGroupStatus(['COMPLETED', 'IN_PROGRESS']); // 'IN_PROGRESS'
 * deriveGroupStatus(['COMPLETED', 'FAILED']);      // 'FAILED'
 * ```
 */
export function deriveGroupStatus(children: readonly OperationStatus[]): GroupStatus {
  if (children.length === 0) return 'EMPTY';
  let completed = 0;
  let failed = 0;
  let pending = 0;
  let scheduled = 0;
  for (const s of children) {
    if (s === S.COMPLETED) completed++;
    else if (s === S.FAILED) failed++;
    else if (s === S.PENDING) pending++;
    else if (s === S.SCHEDULED) scheduled++;
  }
  const n = children.length;
  if (completed === n) return S.COMPLETED;
  if (completed + failed === n) return S.FAILED;
  if (pending === n) return S.PENDING;
  if (pending + scheduled === n) return S.SCHEDULED;
  return S.IN_PROGRESS;
}
