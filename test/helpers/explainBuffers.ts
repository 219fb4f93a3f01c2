import { type SQL, sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Database, Executor } from '../../persistence/openDatabase.ts';

/** The top node of `explain (analyze, buffers, format json)`: its counts include its children. */
interface PlanNode {
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  'Shared Dirtied Blocks': number;
}

const dialect = new PgDialect();
const textOf = (q: SQL | string) => (typeof q === 'string' ? q : dialect.sqlToQuery(q).sql);

/**
 * Wraps a Postgres database so that every statement whose text contains `marker` is first run
 * under `explain (analyze, buffers)` inside a savepoint that is rolled back, then run for real.
 * Pushes the shared buffers each such statement touched onto `buffers`: a count that does not
 * depend on the machine's speed, so a test can hold a statement's cost to a bound. With `dirtied`,
 * also the pages it dirtied (after a checkpoint: the distinct pages it wrote, each of which costs
 * a full-page image in the WAL and a write back).
 *
 * @example
 * ```ts
 * const buffers: number[] = [];
 * const store = new OperationStore(measuringBuffers(database, 'insert into operation_output', buffers));
 * ```
 */
export function measuringBuffers(
  database: Database,
  marker: string,
  buffers: number[],
  dirtied?: number[],
): Database {
  const marked = (q: SQL | string) => textOf(q).includes(marker);
  const measure = async (tx: Executor, q: SQL | string) => {
    await tx.execute('savepoint measure');
    const explain =
      typeof q === 'string'
        ? `explain (analyze, buffers, format json) ${q}`
        : sql`explain (analyze, buffers, format json) ${q}`;
    const [row] = await tx.execute<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(explain);
    await tx.execute('rollback to savepoint measure');
    const plan = row?.['QUERY PLAN'][0]?.Plan;
    if (plan === undefined) throw new Error('explain returned no plan');
    buffers.push(plan['Shared Hit Blocks'] + plan['Shared Read Blocks']);
    dirtied?.push(plan['Shared Dirtied Blocks']);
  };
  const wrap = (tx: Executor): Executor => ({
    execute: async (q) => {
      if (marked(q)) await measure(tx, q);
      return tx.execute(q);
    },
  });
  return {
    ...database,
    execute: (q) =>
      marked(q) ? database.transaction((tx) => wrap(tx).execute(q)) : database.execute(q),
    transaction: (fn) => database.transaction((tx) => fn(wrap(tx))),
  };
}
