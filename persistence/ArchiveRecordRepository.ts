import { type SQL, sql } from 'drizzle-orm';
import { ARCHIVE_STATES, ArchiveState } from '../machines/ArchiveState.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { checkId, notFound } from './applyEvents.ts';
import { toDate } from './OperationRecord.ts';
import type { Database, Row } from './openDatabase.ts';

/** One row of an archive record. */
export interface ArchiveRecordEntry {
  readonly id: number;
  readonly operationId: string;
  readonly attempt: number | null;
  readonly generation: number;
  readonly state: ArchiveState;
  readonly by: string;
  readonly archiveKey: string | null;
  readonly objectVersion: string | null;
  readonly objectSha256: string | null;
  readonly contentSha256: string | null;
  readonly size: number | null;
  readonly encrypted: boolean | null;
  readonly keyId: string | null;
  readonly manifest: unknown;
  readonly deletionId: string | null;
  readonly detail: Record<string, unknown> | null;
  readonly at: Date;
}

/** The archive identity and content a row may carry. */
export interface ArchiveFields {
  readonly archiveKey?: string | null;
  readonly objectVersion?: string | null;
  readonly objectSha256?: string | null;
  readonly contentSha256?: string | null;
  readonly size?: number | null;
  readonly encrypted?: boolean | null;
  readonly keyId?: string | null;
  readonly manifest?: unknown;
  readonly detail?: Record<string, unknown> | null;
}

const STATES: ReadonlySet<string> = new Set(ARCHIVE_STATES);

/** How often a verification is written when concurrent writers clash (a deadlock, a lock timeout). */
const CLASH_ROUNDS = 3;

const isClash = (err: unknown): boolean =>
  err instanceof OpstateError && err.code === OpstateErrorCode.CONFLICT && err.retryable;

function toEntry(r: Row): ArchiveRecordEntry {
  return {
    id: Number(r.id),
    operationId: String(r.operation_id),
    attempt: r.attempt == null ? null : Number(r.attempt),
    generation: Number(r.generation),
    state: r.state as ArchiveState,
    by: String(r.by),
    archiveKey: r.archive_key == null ? null : String(r.archive_key),
    objectVersion: r.object_version == null ? null : String(r.object_version),
    objectSha256: r.object_sha256 == null ? null : String(r.object_sha256),
    contentSha256: r.content_sha256 == null ? null : String(r.content_sha256),
    size: r.size == null ? null : Number(r.size),
    encrypted: r.encrypted == null ? null : r.encrypted === true,
    keyId: r.key_id == null ? null : String(r.key_id),
    manifest: r.manifest == null ? null : r.manifest,
    deletionId: r.deletion_id == null ? null : String(r.deletion_id),
    detail: r.detail == null ? null : (r.detail as Record<string, unknown>),
    at: toDate(r.at) as Date,
  };
}

const generationOf = (id: string): SQL =>
  sql`coalesce((select max(generation) from operation_replan where operation_id = ${id}::uuid), 1)`;

/**
 * When an archive's verification fails, every live copy of its package is bumped (`version`):
 * their deletions may rely on this archive, and a deletion decided before the failure must not
 * land after it. The copies are locked in id order, whatever plan the update gets: left to the
 * plan, the order was that of whichever join and scan it chose, which can change as the tables
 * grow.
 */
const revokeCte = (id: string): SQL => sql`,
  revoking as (
    select p.id from physical_copy p
    join long_term_archive_operation l on p.artifact_id = l.raw_data_package_id
    where l.operation_id = ${id}::uuid and p.artifact_type = 'raw_data_package'
      and p.status <> 'DELETED'
      and exists (select 1 from ins where ins.state = 'VERIFY_FAILED')
    order by p.id
    for update of p
  ),
  revoke as (
    update physical_copy p set version = p.version + 1
    from revoking r where p.id = r.id
  )`;

/**
 * The archive record: the append-only resume record of an archive-then-delete batch (see
 * `ArchiveState`). The archive handler appends its transitions fenced on its attempt (a worker
 * that was reset cannot write here); an operator's independent verification appends VERIFIED or
 * VERIFY_FAILED without a worker. Never stores a key: `keyId` is a fingerprint.
 *
 * @example
 * ```ts
 * const records = new ArchiveRecordRepository(database);
 * await records.append({ operationId, attempt, state: ArchiveState.PLANNED, by: workerId,
 *   archiveKey, contentSha256, size, manifest });
 * const last = (await records.list(operationId)).at(-1);
 * ```
 */
export class ArchiveRecordRepository {
  constructor(private readonly database: Database) {}

  /**
   * Appends a transition of the running attempt: refused with `STALE_ATTEMPT` unless the
   * operation is IN_PROGRESS at `attempt`. An attempt appends each state once: the same append run
   * again (after an outage took the reply of one that committed) returns the row it wrote instead
   * of adding a second, even if the operation has moved on since; another row of that state for
   * the attempt, with other content, is a `CONFLICT` and changes nothing.
   *
   * @example
   * ```ts
   * await records.append({ operationId, attempt, state: ArchiveState.UPLOADED, by, objectSha256, objectVersion });
   * ```
   */
  async append(
    input: ArchiveFields & {
      operationId: string;
      attempt: number;
      state: ArchiveState;
      by: string;
    },
  ): Promise<ArchiveRecordEntry> {
    const id = checkId(input.operationId);
    if (!STATES.has(input.state)) {
      throw new OpstateError(OpstateErrorCode.BAD_INPUT, `unknown archive state ${input.state}`);
    }
    const mine = sql`a.operation_id = ${id}::uuid and a.attempt = ${input.attempt}::int
      and a.state = ${input.state}`;
    const [row] = await this.database.execute(sql`
      with o as (select id, status, attempt from operation where id = ${id}::uuid),
      ins as (
        insert into archive_record (operation_id, attempt, generation, state, by, archive_key,
          object_version, object_sha256, content_sha256, size, encrypted, key_id, manifest, detail)
        select o.id, ${input.attempt}::int, ${generationOf(id)}, ${input.state}, ${input.by},
          ${this.values(input)}
        from o where o.status = 'IN_PROGRESS' and o.attempt = ${input.attempt}::int
        on conflict (operation_id, attempt, state) where attempt is not null do nothing
        returning *
      )${revokeCte(id)}
      select (select row_to_json(ins) from ins) as inserted, (select row_to_json(o) from o) as op,
        (select row_to_json(a) from archive_record a where ${mine}) as existing,
        (select (a.archive_key, a.object_version, a.object_sha256, a.content_sha256, a.size,
            a.encrypted, a.key_id, a.manifest, a.detail) is not distinct from (${this.values(input)})
          from archive_record a where ${mine}) as same`);
    const inserted = row?.inserted as Row | null;
    if (inserted) return toEntry(inserted);
    const existing = row?.existing as Row | null;
    if (existing) {
      if (row?.same === true) return toEntry(existing);
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        `archive record ${input.state} refused: attempt ${input.attempt} of operation ${id} already appended ${input.state} (row ${existing.id}) with other content; an attempt appends each state once`,
        { details: { id, attempt: input.attempt, state: input.state, row: Number(existing.id) } },
      );
    }
    const op = row?.op as { status: string; attempt: number } | null;
    if (op === null) throw notFound(id);
    if (op.status === 'IN_PROGRESS' && op.attempt === input.attempt) {
      // The key was taken by a concurrent append of the same state, committed after this
      // statement's snapshot: not this attempt's to decide again.
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        `archive record ${input.state} refused: attempt ${input.attempt} of operation ${id} appended ${input.state} concurrently; an attempt appends each state once`,
        { details: { id, attempt: input.attempt, state: input.state } },
      );
    }
    throw new OpstateError(
      OpstateErrorCode.STALE_ATTEMPT,
      `archive record ${input.state} refused: operation ${id} is ${op.status} at attempt ${op.attempt}, not IN_PROGRESS at attempt ${input.attempt}`,
      { details: { id, status: op.status, attempt: op.attempt, recordAttempt: input.attempt } },
    );
  }

  /**
   * Appends the outcome of an independent verification (no worker involved): VERIFIED, or
   * VERIFY_FAILED, which bumps the live copies of the package so that no deletion decided on the
   * earlier verification can land.
   *
   * @example
   * ```ts
   * await records.recordVerification({ operationId, state: ArchiveState.VERIFY_FAILED, by: 'operator', detail: { differences } });
   * ```
   */
  async recordVerification(
    input: ArchiveFields & {
      operationId: string;
      state: typeof ArchiveState.VERIFIED | typeof ArchiveState.VERIFY_FAILED;
      by: string;
    },
  ): Promise<ArchiveRecordEntry> {
    const id = checkId(input.operationId);
    if (input.state !== ArchiveState.VERIFIED && input.state !== ArchiveState.VERIFY_FAILED) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        'a verification is VERIFIED or VERIFY_FAILED',
      );
    }
    // A VERIFY_FAILED revokes every live copy of the package, which a deleter may be deciding on
    // at that moment, its locks taken in another order: a deadlock rolls this statement back
    // whole, so it is run again (a few times) before an operator is told to.
    for (let round = 1; ; round++) {
      try {
        const [row] = await this.database.execute(sql`
        with ins as (
          insert into archive_record (operation_id, attempt, generation, state, by, archive_key,
            object_version, object_sha256, content_sha256, size, encrypted, key_id, manifest, detail)
          select o.id, null, ${generationOf(id)}, ${input.state}, ${input.by}, ${this.values(input)}
          from operation o where o.id = ${id}::uuid
          returning *
        )${revokeCte(id)}
        select (select row_to_json(ins) from ins) as inserted`);
        const inserted = row?.inserted as Row | null;
        if (!inserted) throw notFound(id);
        return toEntry(inserted);
      } catch (err) {
        if (round < CLASH_ROUNDS && isClash(err)) continue;
        throw err;
      }
    }
  }

  /**
   * Every row of an operation's archive record, oldest first.
   *
   * @example
   * ```ts
   * const states = (await records.list(operationId)).map((r) => r.state);
   * ```
   */
  async list(operationId: string): Promise<ArchiveRecordEntry[]> {
    const rows = await this.database.execute(sql`
      select * from archive_record where operation_id = ${checkId(operationId)}::uuid order by id`);
    return rows.map(toEntry);
  }

  /**
   * The current archive of every long-term-archive operation that uploaded one: the latest
   * UPLOADED row of each, oldest operation first (what `opstate archive rekey` reports by key).
   *
   * @example
   * ```ts
   * const sealed = (await records.uploaded()).filter((r) => r.keyId === keyId);
   * ```
   */
  async uploaded(): Promise<ArchiveRecordEntry[]> {
    const rows = await this.database.execute(sql`
      select * from (
        select distinct on (operation_id) * from archive_record
        where state = ${ArchiveState.UPLOADED} order by operation_id, id desc) u
      order by id`);
    return rows.map(toEntry);
  }

  private values(input: ArchiveFields): SQL {
    return sql`${input.archiveKey ?? null}, ${input.objectVersion ?? null},
      ${input.objectSha256 ?? null}, ${input.contentSha256 ?? null}, ${input.size ?? null}::bigint,
      ${input.encrypted ?? null}::boolean, ${input.keyId ?? null},
      ${input.manifest === undefined ? null : JSON.stringify(input.manifest)}::jsonb,
      ${input.detail == null ? null : JSON.stringify(input.detail)}::jsonb`;
  }
}
