import { isAbsolute, resolve } from 'node:path';
import { sql } from 'drizzle-orm';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { isLocationType, type LocationType } from '../machines/routing.ts';
import { toDate } from './OperationRecord.ts';
import type { Database, Row } from './openDatabase.ts';

/**
 * What the deleters clean after a verified archive, and what they never touch. Stored in the
 * `deletion_policy` table and read by every deleter at every pass and before every unlink, so a
 * change applies to deletions already planned.
 */
export interface DeletionPolicy {
  /** Location types whose copies are deleted once a verified archive of them exists. */
  readonly cleanLocationTypes: readonly LocationType[];
  /** How long after the archive completed a copy becomes eligible. */
  readonly graceSeconds: number;
  /** Absolute path prefixes under which nothing is ever deleted, whatever the plan says. */
  readonly protectedPrefixes: readonly string[];
  /** Interruptions a deletion may take before it fails for an operator. */
  readonly maxFailures: number;
  readonly updatedBy: string;
  readonly updatedAt: Date;
}

/** The defaults a fresh database starts with (written by the migration). */
export const DEFAULT_DELETION_POLICY = Object.freeze({
  cleanLocationTypes: ['buffer'] as LocationType[],
  graceSeconds: 3600,
  protectedPrefixes: [] as string[],
  maxFailures: 3,
});

function textArray(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  if (typeof value === 'string' && value.startsWith('{')) {
    return value
      .slice(1, -1)
      .split(',')
      .filter((v) => v !== '')
      .map((v) => v.replace(/^"(.*)"$/, '$1'));
  }
  return [];
}

function bad(message: string): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, message);
}

/**
 * Reads and changes the deletion policy (the `default` row).
 *
 * @example
 * ```ts
 * const policies = new DeletionPolicyRepository(database);
 * await policies.set({ graceSeconds: 0, protectedPrefixes: ['/data/buffer/keep'] }, 'operator');
 * (await policies.get()).cleanLocationTypes; // ['buffer']
 * ```
 */
export class DeletionPolicyRepository {
  constructor(private readonly database: Database) {}

  /**
   * The policy in force now.
   *
   * @example
   * ```ts
   * const { graceSeconds } = await policies.get();
   * ```
   */
  async get(): Promise<DeletionPolicy> {
    const [r] = await this.database.execute(
      sql`select * from deletion_policy where name = 'default'`,
    );
    if (r === undefined) {
      return { ...DEFAULT_DELETION_POLICY, updatedBy: 'default', updatedAt: new Date(0) };
    }
    return toPolicy(r);
  }

  /**
   * Changes some fields of the policy (the rest stay); validated first, `BAD_INPUT` otherwise.
   *
   * @example
   * ```ts
   * await policies.set({ cleanLocationTypes: ['buffer', 'processing'] }, 'operator');
   * ```
   */
  async set(
    change: Partial<
      Pick<
        DeletionPolicy,
        'cleanLocationTypes' | 'graceSeconds' | 'protectedPrefixes' | 'maxFailures'
      >
    >,
    by: string,
  ): Promise<DeletionPolicy> {
    const current = await this.get();
    const next = { ...current, ...change };
    for (const t of next.cleanLocationTypes) {
      if (!isLocationType(t)) throw bad(`'${t}' is not a location type`);
      if (t === 'long_term_archive') {
        throw bad('long-term-archive copies are never cleaned by the deletion policy');
      }
    }
    if (!Number.isSafeInteger(next.graceSeconds) || next.graceSeconds < 0) {
      throw bad('graceSeconds must be a whole number ≥ 0');
    }
    if (!Number.isSafeInteger(next.maxFailures) || next.maxFailures < 1) {
      throw bad('maxFailures must be a whole number ≥ 1');
    }
    const prefixes = next.protectedPrefixes.map((p) => {
      if (typeof p !== 'string' || !isAbsolute(p))
        throw bad(`protected prefix '${p}' must be absolute`);
      return resolve(p);
    });
    const [r] = await this.database.execute(sql`
      insert into deletion_policy (name, clean_location_types, grace_seconds, protected_prefixes,
        max_failures, updated_by, updated_at)
      values ('default',
        array(select jsonb_array_elements_text(${JSON.stringify(next.cleanLocationTypes)}::jsonb)),
        ${next.graceSeconds}::int,
        array(select jsonb_array_elements_text(${JSON.stringify(prefixes)}::jsonb)),
        ${next.maxFailures}::int, ${by}, now())
      on conflict (name) do update set clean_location_types = excluded.clean_location_types,
        grace_seconds = excluded.grace_seconds, protected_prefixes = excluded.protected_prefixes,
        max_failures = excluded.max_failures, updated_by = excluded.updated_by, updated_at = now()
      returning *`);
    return toPolicy(r as Row);
  }
}

function toPolicy(r: Row): DeletionPolicy {
  return {
    cleanLocationTypes: textArray(r.clean_location_types) as LocationType[],
    graceSeconds: Number(r.grace_seconds),
    protectedPrefixes: textArray(r.protected_prefixes),
    maxFailures: Number(r.max_failures),
    updatedBy: String(r.updated_by),
    updatedAt: toDate(r.updated_at) as Date,
  };
}
