import type { Clock } from '../machines/Clock.ts';
import { GroupRepository } from '../persistence/GroupRepository.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { ReleasedClaim, StagedOnRequest, StageRequest } from '../persistence/publicRecords.ts';
import { stageOnRequest } from '../persistence/stageOnRequest.ts';

/**
 * `runtime.stage`: creates the staging (an active group holding the retention claim and its
 * PENDING STAGING operation, in one transaction; see `stageOnRequest`), recorded as by
 * `request.by`, else `by`, then wakes the local control plane to schedule it.
 *
 * @example
 * ```ts
 * const s = await stageFor({ database, clock, wake }, { package: pkg, to: 'obs/processing' }, 'svc');
 * ```
 */
export async function stageFor(
  runtime: { readonly database: Database; readonly clock: Clock; readonly wake: () => void },
  request: StageRequest,
  by: string,
): Promise<StagedOnRequest> {
  const staged = await stageOnRequest(
    runtime.database,
    { package: request.package, to: request.to, by: request.by ?? by },
    new Date(runtime.clock.now()),
  );
  runtime.wake();
  return staged;
}

/**
 * `runtime.release`: releases a staging's retention claim, recorded as by `by`. An unknown group is
 * `NOT_FOUND`, one already released `BAD_INPUT`; either changes nothing.
 *
 * @example
 * ```ts
 * await releaseClaim(database, s.groupId, 'operator:alice (cli, host-1)');
 * ```
 */
export async function releaseClaim(
  database: Database,
  groupId: string,
  by: string,
): Promise<ReleasedClaim> {
  const group = await new GroupRepository(database).release(groupId, by);
  return { groupId: group.id, releasedAt: group.releasedAt as Date, releasedBy: by };
}
