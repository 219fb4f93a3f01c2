import { sql } from 'drizzle-orm';
import { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { DEFAULT_LOCATION_TYPE, type RoutedLocation } from '../machines/routing.ts';
import { toOperationInsert } from './CreateOperationInput.ts';
import type { Database, Executor } from './openDatabase.ts';
import type { StagedOnRequest, StageRequest } from './publicRecords.ts';
import { selectLocationIds } from './reads/selectLocationIds.ts';
import { selectRoutedLocations } from './reads/selectRoutedLocations.ts';
import { insertOperations } from './sql/insertOperations.ts';
import { selectStagingSource } from './sql/selectStagingSource.ts';
import { isUuid, UUID_EXAMPLE } from './subtypeFields.ts';
import { timeOrderedId } from './timeOrderedId.ts';

/** The location type a staging writes into (`processing`). */
const STAGES_INTO = DEFAULT_LOCATION_TYPE[OperationKind.STAGING];

const bad = (message: string, details: Record<string, unknown> = {}) =>
  new OpstateError(OpstateErrorCode.BAD_INPUT, message, { details });

/** The processing location `to` names (its id or `site/name`), checked to take a staging. */
async function destinationOf(
  exec: Executor,
  to: unknown,
): Promise<{ id: string; at: RoutedLocation }> {
  if (typeof to !== 'string' || to === '') {
    throw bad(
      `a staging needs a processing location to stage into: its id or site/name, e.g. cologne/processing`,
    );
  }
  const slash = to.indexOf('/');
  const named = slash > 0 ? { site: to.slice(0, slash), name: to.slice(slash + 1) } : undefined;
  const id = isUuid(to as unknown)
    ? to
    : named === undefined
      ? undefined
      : (await selectLocationIds(exec, [named])).get(to);
  const at = id === undefined ? undefined : (await selectRoutedLocations(exec, [id])).get(id);
  if (id === undefined || at === undefined) {
    throw new OpstateError(
      OpstateErrorCode.NOT_FOUND,
      `unknown location '${to}'; give a registered ${STAGES_INTO} location's id or site/name (opstate location add registers one)`,
      { details: { to } },
    );
  }
  if (at.locationType !== STAGES_INTO) {
    throw bad(
      `${at.site}/${at.name} is a ${at.locationType} location; a staging writes into a ${STAGES_INTO} location`,
      { to, locationType: at.locationType },
    );
  }
  return { id, at };
}

/** Refuses a package id that is no uuid (`BAD_INPUT`) or names no raw data package (`NOT_FOUND`). */
async function checkPackage(exec: Executor, packageId: unknown): Promise<string> {
  if (!isUuid(packageId)) {
    throw bad(
      `the package to stage must be a raw data package's id (a uuid such as ${UUID_EXAMPLE})`,
      {
        package: packageId,
      },
    );
  }
  const [row] = await exec.execute(
    sql`select 1 as found from raw_data_package where id = ${packageId}::uuid`,
  );
  if (row === undefined) {
    throw new OpstateError(
      OpstateErrorCode.NOT_FOUND,
      `no raw data package ${packageId}; opstate artifact lists what is registered`,
      { details: { package: packageId } },
    );
  }
  return packageId;
}

/**
 * Stages a raw data package on request, in ONE transaction: an active operation group (the
 * retention claim, recorded as created by `by`) and its STAGING operation (PENDING), which reads
 * the package's verified archive copy and writes into the processing location `to`. The copy is
 * the operation's input, so the group's claim holds it from the commit on (and, once the staging
 * completes, the copy it produced): the deletion path refuses to delete either until the group is
 * released. An unknown package or location is `NOT_FOUND`; a location that is not a processing
 * location, or a package with no verified archive copy, is `BAD_INPUT`; nothing is written then.
 *
 * @example
 * ```ts
 * const s = await stageOnRequest(database, { package: pkg, to: 'cologne/processing', by: 'operator' }, new Date(clock.now()));
 * s.groupId; // release it with groups.release(s.groupId, by)
 * ```
 */
export async function stageOnRequest(
  database: Database,
  request: StageRequest & { readonly by: string },
  now: Date,
): Promise<StagedOnRequest> {
  return database.transaction(async (tx) => {
    const packageId = await checkPackage(tx, request.package);
    const to = await destinationOf(tx, request.to);
    const source = await selectStagingSource(tx, packageId);
    if (source === undefined) {
      throw bad(
        `raw data package ${packageId} has no verified archive copy to stage from (a PRESENT copy at a long-term-archive location whose archive operation COMPLETED, was last VERIFIED and is not redone by a rollback); archive it first, verify its archive (opstate archive verify), or wait for a rollback's re-run to archive it again`,
        { package: packageId },
      );
    }
    const groupId = timeOrderedId(now.getTime());
    const row = toOperationInsert(
      {
        kind: OperationKind.STAGING,
        fields: {
          rawDataPackageId: packageId,
          sourceLocationId: source.locationId,
          destinationLocationId: to.id,
        },
        inputs: [source.copyId],
        groupId,
        by: request.by,
      },
      now,
      new Map([[to.id, to.at]]),
    );
    await tx.execute(sql`
      insert into operation_group (id, name, active, created_by, created_at)
      values (${groupId}::uuid, ${`staging of ${packageId} to ${to.at.site}/${to.at.name}`}, true,
        ${request.by}, ${now.toISOString()}::timestamptz)`);
    const [operationId] = await insertOperations(tx, [row]);
    return {
      groupId,
      operationId: operationId as string,
      package: packageId,
      from: {
        copyId: source.copyId,
        locationId: source.locationId,
        location: `${source.site}/${source.name}`,
      },
      to: { locationId: to.id, location: `${to.at.site}/${to.at.name}` },
    };
  });
}
