import type postgres from 'postgres';

/** Connections the raw baseline uses: where single-row commit throughput levels off here. */
export const RAW_CONNECTIONS = 8;

/**
 * Creates the table the raw baseline updates (1,024 rows) in the database `sql` is connected to.
 *
 * @example
 * ```ts
 * await prepareRawCommitRate(sql); const rate = await rawCommitRate(sql, 3);
 * ```
 */
export async function prepareRawCommitRate(sql: postgres.Sql): Promise<void> {
  await sql.unsafe('create table if not exists bench_raw (id int primary key, n int not null)');
  await sql.unsafe(
    'insert into bench_raw select g, 0 from generate_series(0, 1023) g on conflict do nothing',
  );
}

let next = 0;

/**
 * The raw single-row commit rate of this Postgres: UPDATE one row by primary key, one commit
 * each, on `RAW_CONNECTIONS` connections for `seconds`. `sql` needs a pool of that size.
 *
 * @example
 * ```ts
 * const sql = postgres(url, { max: RAW_CONNECTIONS });
 * const commitsPerSecond = await rawCommitRate(sql, 3);
 * ```
 */
export async function rawCommitRate(sql: postgres.Sql, seconds: number): Promise<number> {
  const deadline = performance.now() + seconds * 1000;
  const t0 = performance.now();
  let updates = 0;
  await Promise.all(
    Array.from({ length: RAW_CONNECTIONS }, async () => {
      while (performance.now() < deadline) {
        await sql`update bench_raw set n = n + 1 where id = ${next++ % 1024}`;
        updates++;
      }
    }),
  );
  return updates / ((performance.now() - t0) / 1000);
}
