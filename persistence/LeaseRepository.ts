import { sql } from 'drizzle-orm';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { type LeaseFence, leaseRowOf } from './LeaseFence.ts';
import { toDate } from './OperationRecord.ts';
import type { Executor } from './openDatabase.ts';

/** A lease as stored: who holds it, under which epoch, since when, until when. */
export interface Lease {
  readonly name: string;
  readonly holder: string;
  readonly epoch: number;
  readonly acquiredAt: Date;
  readonly renewedAt: Date;
  readonly expiresAt: Date;
  /** Whether it has lapsed by the database's clock (a standby may take it). */
  readonly expired: boolean;
}

function toLease(r: Record<string, unknown>): Lease {
  return {
    name: String(r.name),
    holder: String(r.holder),
    epoch: Number(r.epoch),
    acquiredAt: toDate(r.acquired_at) as Date,
    renewedAt: toDate(r.renewed_at) as Date,
    expiresAt: toDate(r.expires_at) as Date,
    expired: r.expired === true,
  };
}

const COLUMNS = sql.raw(
  'name, holder, epoch, acquired_at, renewed_at, expires_at, expires_at <= now() as expired',
);

function checkDuration(ms: number): number {
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `a lease lasts a positive whole number of milliseconds; got ${String(ms)}`,
    );
  }
  return ms;
}

/**
 * The control plane's leases (`control_plane_lease`), one row per deployment name. Every call is
 * one statement and uses the database's clock, so the processes' clocks never have to agree.
 *
 * @example
 * ```ts
 * const leases = new LeaseRepository(database);
 * const won = await leases.acquire('opstate', 'host:123', 10_000); // Lease or undefined
 * if (won) await leases.renew({ name: 'opstate', epoch: won.epoch }, 10_000);
 * ```
 */
export class LeaseRepository {
  readonly #exec: Executor;

  constructor(exec: Executor) {
    this.#exec = exec;
  }

  /**
   * Takes the lease when nobody holds it or it has lapsed, under a new epoch; `undefined` while
   * another holder's lease runs.
   */
  async acquire(name: string, holder: string, durationMs: number): Promise<Lease | undefined> {
    const ms = checkDuration(durationMs);
    const [row] = await this.#exec.execute(sql`
      insert into control_plane_lease as l (name, holder, epoch, acquired_at, renewed_at, expires_at)
      values (${name}, ${holder}, 1, now(), now(), now() + ${ms} * interval '1 millisecond')
      on conflict (name) do update set holder = excluded.holder, epoch = l.epoch + 1,
        acquired_at = now(), renewed_at = now(), expires_at = excluded.expires_at
      where l.expires_at <= now()
      returning ${COLUMNS}`);
    return row === undefined ? undefined : toLease(row);
  }

  /**
   * Extends the lease of `fence.epoch` by `durationMs` from now; `undefined` when another epoch
   * has taken it over (this holder must stop). A lapsed lease nobody took is renewed: no one else
   * led in between, so nothing it wrote can be stale.
   */
  async renew(fence: LeaseFence, durationMs: number): Promise<Lease | undefined> {
    const ms = checkDuration(durationMs);
    const [row] = await this.#exec.execute(sql`
      update control_plane_lease l set renewed_at = now(),
        expires_at = now() + ${ms} * interval '1 millisecond'
      where ${leaseRowOf(fence)}
      returning ${COLUMNS}`);
    return row === undefined ? undefined : toLease(row);
  }

  /** Ends the lease of `fence.epoch` now, so a standby takes over at its next poll. */
  async release(fence: LeaseFence): Promise<void> {
    await this.#exec.execute(sql`
      update control_plane_lease l set expires_at = now()
      where ${leaseRowOf(fence)} and l.expires_at > now()`);
  }

  /** Whether `fence` still holds an unexpired lease. */
  async holds(fence: LeaseFence): Promise<boolean> {
    const [row] = await this.#exec.execute(sql`
      select 1 as ok from control_plane_lease l
      where ${leaseRowOf(fence)} and l.expires_at > now()`);
    return row !== undefined;
  }

  /** Every lease, for `opstate status`. */
  async list(): Promise<Lease[]> {
    const rows = await this.#exec.execute(
      sql`select ${COLUMNS} from control_plane_lease order by name`,
    );
    return rows.map(toLease);
  }
}
