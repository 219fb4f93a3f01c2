import { randomBytes } from 'node:crypto';
import postgres from 'postgres';

/** What one relation (or one kind of record that names none) wrote over a window, per operation. */
export interface WalShare {
  /** The table or index, `(<resource manager>)` for records of no relation (commits, …). */
  readonly relation: string;
  readonly bytes: number;
  /** Of `bytes`, full-page images: a page's first change after a checkpoint. */
  readonly fpi: number;
  readonly records: number;
}

/** The WAL written between two LSNs, read back record by record with `pg_walinspect`. */
export interface WalBreakdown {
  readonly bytes: number;
  readonly fpi: number;
  readonly records: number;
  /** Largest first. */
  readonly relations: readonly WalShare[];
  /** By resource manager and record type (`Heap/HOT_UPDATE`, `Btree/INSERT_LEAF`, …). */
  readonly recordTypes: readonly WalShare[];
}

/** A window being recorded: `stop()` reads what the server wrote since it opened. */
export interface WalWindow {
  stop(perOperation: number): Promise<WalBreakdown>;
  close(): Promise<void>;
}

/** `n` bytes from LSN 0/0, as an LSN. */
const lsnOf = (n: bigint) => `${(n >> 32n).toString(16)}/${(n & 0xffff_ffffn).toString(16)}`;

const round = (x: number) => Math.round(x * 10) / 10;

/**
 * Opens a window on the server's WAL from now: records are read back from the WAL itself at
 * `stop()`, grouped by the relation of their first block (a record that touches a heap page and
 * an index page is the heap's) and by record type. A temporary physical replication slot holds
 * the window's WAL so a checkpoint inside it cannot recycle it; it goes with this connection,
 * also when the bench dies. The whole server's WAL is read: nothing else may write meanwhile.
 * Undefined when the server has no `pg_walinspect` (PostgreSQL ≥ 15, contrib).
 *
 * @example
 * ```ts
 * const w = await openWalWindow(benchDatabaseUrl);
 * // … the run …
 * const wal = await w?.stop(operations);
 * ```
 */
export async function openWalWindow(databaseUrl: string): Promise<WalWindow | undefined> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await sql`create extension if not exists pg_walinspect`;
  } catch {
    await sql.end({ timeout: 5 });
    return undefined;
  }
  const slot = `opstate_bench_wal_${randomBytes(4).toString('hex')}`;
  await sql`select pg_create_physical_replication_slot(${slot}, true, true)`;
  const [at] = await sql<{ lsn: string }[]>`select (pg_current_wal_lsn() - '0/0')::text as lsn`;
  const start = BigInt(at?.lsn ?? '0');
  return {
    stop: async (n) => {
      const [now] = await sql<
        { lsn: string }[]
      >`select (pg_current_wal_lsn() - '0/0')::text as lsn`;
      const end = BigInt(now?.lsn ?? '0');
      // Records can be read back once flushed; the WAL writer flushes within its delay.
      for (let i = 0; i < 100; i++) {
        const [f] = await sql<{ ok: boolean }[]>`
          select pg_current_wal_flush_lsn() >= ${lsnOf(end)}::pg_lsn as ok`;
        if (f?.ok) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      return breakdown(sql, lsnOf(start), lsnOf(end), n);
    },
    close: () => sql.end({ timeout: 5 }),
  };
}

interface Group {
  relation: string;
  record_type: string;
  bytes: string;
  fpi: string;
  records: string;
}

async function breakdown(
  sql: postgres.Sql,
  from: string,
  to: string,
  n: number,
): Promise<WalBreakdown> {
  // The first block's tablespace, database and file node name the relation; a relation of this
  // database resolves through pg_filenode_relation (0 is the database's default tablespace).
  const groups = await sql<Group[]>`
    with r as (
      select resource_manager || '/' || record_type as record_type, record_length, fpi_length,
        regexp_match(block_ref, 'rel ([0-9]+)/([0-9]+)/([0-9]+)') as b
      from pg_get_wal_records_info(${from}::pg_lsn, ${to}::pg_lsn)
    ), named as (
      select record_type, record_length, fpi_length,
        case
          when b is null then '(' || split_part(record_type, '/', 1) || ')'
          when b[2]::oid <> (select oid from pg_database where datname = current_database())
            then '(another database)'
          else coalesce(pg_filenode_relation(
            case when b[1]::oid = (select oid from pg_tablespace where spcname = 'pg_default')
              then 0 else b[1]::oid end, b[3]::oid)::regclass::text, '(dropped) ' || b[3])
        end as relation
      from r
    )
    select relation, record_type, sum(record_length)::text as bytes, sum(fpi_length)::text as fpi,
      count(*)::text as records
    from named group by relation, record_type`;
  const fold = (key: (g: Group) => string) => {
    const out = new Map<string, { bytes: number; fpi: number; records: number }>();
    for (const g of groups) {
      const s = out.get(key(g)) ?? { bytes: 0, fpi: 0, records: 0 };
      s.bytes += Number(g.bytes);
      s.fpi += Number(g.fpi);
      s.records += Number(g.records);
      out.set(key(g), s);
    }
    return [...out]
      .map(([relation, s]) => ({
        relation,
        bytes: round(s.bytes / n),
        fpi: round(s.fpi / n),
        records: Math.round((s.records / n) * 100) / 100,
      }))
      .sort((a, b) => b.bytes - a.bytes);
  };
  const relations = fold((g) => g.relation);
  const sum = (k: 'bytes' | 'fpi' | 'records') => relations.reduce((t, r) => t + r[k], 0);
  return {
    bytes: round(sum('bytes')),
    fpi: round(sum('fpi')),
    records: Math.round(sum('records') * 100) / 100,
    relations,
    recordTypes: fold((g) => g.record_type),
  };
}
