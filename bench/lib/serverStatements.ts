/** What the server spent per statement (pg_stat_statements), for profile mode. */
import type postgres from 'postgres';
import { PROFILE } from './statementCounter.ts';

/** One statement's cumulative figures from pg_stat_statements. */
export interface ServerStatement {
  query: string;
  calls: number;
  ms: number;
  /** Planning time: 0 unless the server sets `pg_stat_statements.track_planning`. */
  plan_ms: number;
  blks: number;
  wal: number;
  wal_records: number;
}

/**
 * What the server spent per operation on each statement between two samples (pg_stat_statements:
 * execution time, buffers touched, WAL), the costliest first. Nested statements (foreign-key
 * checks, trigger bodies) are listed too, and are also inside the time of the statement that ran
 * them.
 */
export function printServerStatements(
  label: string,
  before: Map<string, ServerStatement> | undefined,
  after: Map<string, ServerStatement> | undefined,
  n: number,
): void {
  if (before === undefined || after === undefined) return;
  const rows = [...after]
    .map(([id, a]) => {
      const b = before.get(id);
      const d = (k: 'calls' | 'ms' | 'plan_ms' | 'blks' | 'wal' | 'wal_records') =>
        a[k] - (b?.[k] ?? 0);
      return {
        a,
        calls: d('calls'),
        ms: d('ms'),
        plan: d('plan_ms'),
        blks: d('blks'),
        wal: d('wal'),
        rec: d('wal_records'),
      };
    })
    .filter((r) => r.calls > 0)
    .sort((x, y) => y.ms - x.ms)
    .slice(0, 25);
  for (const r of rows) {
    process.stderr.write(
      `[e2e server ${label}] ${((r.ms / n) * 1000).toFixed(1)} µs/op (+ ${((r.plan / n) * 1000).toFixed(1)} planning)  ${(r.calls / n).toFixed(3)} calls/op  ${(r.blks / n).toFixed(1)} buffers/op  ${Math.round(r.wal / n)} WAL B/op (${(r.rec / n).toFixed(1)} records)  ${r.a.query.replace(/\s+/g, ' ').trim().slice(0, 110)}\n`,
    );
  }
}

/**
 * The server's own statement figures for database `name` (profile mode, and only where the
 * server has pg_stat_statements: a private server started with it preloaded), by query id.
 */
export async function serverStatements(
  admin: postgres.Sql,
  name: string,
): Promise<Map<string, ServerStatement> | undefined> {
  if (!PROFILE) return undefined;
  try {
    const rows = await admin.unsafe(
      `select s.queryid::text as id, s.query, s.calls::float8 as calls, s.total_exec_time as ms,
         s.total_plan_time as plan_ms,
         (s.shared_blks_hit + s.shared_blks_read)::float8 as blks, s.wal_bytes::float8 as wal,
         s.wal_records::float8 as wal_records
       from pg_stat_statements s join pg_database d on d.oid = s.dbid where d.datname = $1`,
      [name],
    );
    return new Map(rows.map((r) => [String(r.id), r as unknown as ServerStatement]));
  } catch {
    return undefined; // no pg_stat_statements on this server
  }
}
