import { sql } from 'drizzle-orm';
import { deriveGroupStatus, type GroupStatus } from '../machines/groupStatus.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { OperationStatus } from '../machines/operationMachine.ts';
import { checkId } from './applyEvents.ts';
import { toDate } from './OperationRecord.ts';
import type { Database } from './openDatabase.ts';
import { activeClaimsOn } from './sql/activeClaimsOn.ts';

export interface OperationGroupRecord {
  readonly id: string;
  readonly name: string | null;
  /** The retention claim: while true, copies its operations consume must not be deleted. */
  readonly active: boolean;
  readonly createdAt: Date;
  readonly releasedAt: Date | null;
  /** Who created it, when it was created by someone named (a staging on request). */
  readonly createdBy: string | null;
  /** Who released the claim, when it was released by someone named (`release`). */
  readonly releasedBy: string | null;
}

const COLUMNS = sql`id, name, active, created_at, released_at, created_by, released_by`;

/**
 * Operation groups: N co-created operations whose status is derived from the children, plus the
 * retention claim a staging job holds.
 *
 * @example
 * ```ts
 * const groups = new GroupRepository(database);
 * const job = await groups.create({ name: 'staging job 42', active: true });
 * await store.createMany(pkgs.map((p) => ({ kind: OperationKind.STAGING, groupId: job.id, fields: {...} })));
 * await groups.status(job.id); // 'PENDING' … 'COMPLETED'
 * ```
 */
export class GroupRepository {
  constructor(private readonly database: Database) {}

  /**
   * Creates a group; `active: true` makes it a retention claim from the start.
   *
   * @example
   * ```ts
   * const g = await groups.create({ name: 'reduction 7' });
   * ```
   */
  async create(
    input: { name?: string; active?: boolean; by?: string } = {},
  ): Promise<OperationGroupRecord> {
    const [r] = await this.database.execute(sql`
      insert into operation_group (name, active, created_by)
      values (${input.name ?? null}, ${input.active ?? false}, ${input.by ?? null})
      returning ${COLUMNS}`);
    return toGroup(r as Record<string, unknown>);
  }

  /**
   * Loads a group, or undefined.
   *
   * @example
   * ```ts
   * const g = await groups.get(id);
   * ```
   */
  async get(groupId: string): Promise<OperationGroupRecord | undefined> {
    const [r] = await this.database.execute(sql`
      select ${COLUMNS} from operation_group
      where id = ${checkId(groupId, 'group id')}::uuid`);
    return r === undefined ? undefined : toGroup(r);
  }

  /**
   * Holds or releases the retention claim. Returns false when the group does not exist. Holding
   * it bumps every copy the group's operations consume or produce (so no deletion decided before
   * it can land), and is refused with `CONFLICT` while one of them is being deleted.
   *
   * @example
   * ```ts
   * await groups.setActive(job.id, false); // staged data may now be cleaned up
   * ```
   */
  async setActive(groupId: string, active: boolean): Promise<boolean> {
    const rows = await this.database.execute(sql`
      update operation_group set active = ${active},
        released_at = case when ${active} then null else now() end, released_by = null
      where id = ${checkId(groupId, 'group id')}::uuid returning id`);
    return rows.length === 1;
  }

  /**
   * Releases the retention claim, recorded as by `by`: the group is no longer active, so nothing
   * it holds is kept from the deletion path any more. A group that does not exist is `NOT_FOUND`;
   * one that holds no claim (released before, or created without one) is `BAD_INPUT` saying when
   * and by whom; either changes nothing.
   *
   * @example
   * ```ts
   * await groups.release(job.id, 'operator:alice (cli, host-1)');
   * ```
   */
  async release(groupId: string, by: string): Promise<OperationGroupRecord> {
    const id = checkId(groupId, 'group id');
    const [r] = await this.database.execute(sql`
      update operation_group set active = false, released_at = now(), released_by = ${by}
      where id = ${id}::uuid and active returning ${COLUMNS}`);
    if (r !== undefined) return toGroup(r);
    const group = await this.get(id);
    if (group === undefined) {
      throw new OpstateError(
        OpstateErrorCode.NOT_FOUND,
        `no operation group ${id}; opstate stage prints the group id of each staging`,
        { details: { groupId: id } },
      );
    }
    const when =
      group.releasedAt === null
        ? 'it was created without one'
        : `it was released at ${group.releasedAt.toISOString()}${group.releasedBy === null ? '' : ` by ${group.releasedBy}`}`;
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `operation group ${id} holds no retention claim to release (${when}); nothing changed`,
      { details: { groupId: id, releasedAt: group.releasedAt, releasedBy: group.releasedBy } },
    );
  }

  /**
   * The statuses of a group's children.
   *
   * @example
   * ```ts
   * const statuses = await groups.childStatuses(id);
   * ```
   */
  async childStatuses(groupId: string): Promise<OperationStatus[]> {
    const rows = await this.database.execute<{ status: OperationStatus }>(sql`
      select status from operation where group_id = ${checkId(groupId, 'group id')}::uuid`);
    return rows.map((r) => r.status);
  }

  /**
   * The group's status, derived from its children by `deriveGroupStatus` (never stored).
   *
   * @example
   * ```ts
   * await groups.status(id); // 'IN_PROGRESS'
   * ```
   */
  async status(groupId: string): Promise<GroupStatus> {
    return deriveGroupStatus(await this.childStatuses(groupId));
  }

  /**
   * Whether an active retention claim holds a copy: an active group has an operation that consumes
   * it or produced it (a staging job holds what it stages from and what it staged). The deletion
   * path reads the same fact in the statement that writes each of its steps (`CopyLifecycle`), and
   * taking a claim on a copy whose deletion was decided is refused by the database.
   *
   * @example
   * ```ts
   * if (await groups.isCopyRetained(copy.id)) return keep(copy);
   * ```
   */
  async isCopyRetained(copyId: string): Promise<boolean> {
    const id = checkId(copyId, 'physical copy id');
    const [r] = await this.database.execute<{ held: boolean }>(
      sql`select exists (${activeClaimsOn(sql`${id}::uuid`)}) as held`,
    );
    return r?.held === true;
  }
}

function toGroup(r: Record<string, unknown>): OperationGroupRecord {
  return {
    id: String(r.id),
    name: r.name == null ? null : String(r.name),
    active: r.active === true,
    createdAt: toDate(r.created_at) as Date,
    releasedAt: toDate(r.released_at),
    createdBy: r.created_by == null ? null : String(r.created_by),
    releasedBy: r.released_by == null ? null : String(r.released_by),
  };
}
