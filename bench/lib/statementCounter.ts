/**
 * Counting what a runtime sends to Postgres, in this process: every statement and every commit,
 * and by SQL text when OPSTATE_BENCH_PROFILE=1.
 */
import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Database, Executor } from '../../persistence/openDatabase.ts';

/** OPSTATE_BENCH_PROFILE=1: statements are also counted by their SQL text, and printed. */
export const PROFILE = process.env.OPSTATE_BENCH_PROFILE === '1';

/** Statements and commits a runtime sent, by SQL text in profile mode. */
export interface StatementCounter {
  /** Statements sent, BEGIN and COMMIT of a transaction included. */
  statements: number;
  /** Commits: an autocommit statement is one, a transaction is one. */
  transactions: number;
  readonly byText: Map<string, number>;
}

/** A counter at zero. */
export const newCounter = (): StatementCounter => ({
  statements: 0,
  transactions: 0,
  byText: new Map(),
});
const dialect = new PgDialect();

/**
 * Wraps a runtime's database so every statement is counted (the store and the actors share the
 * object). Leadership's own reserved connection (`select 1` per leader poll) is not counted.
 */
export function instrument(database: Database, counter: StatementCounter): void {
  const execute = database.execute.bind(database);
  const transaction = database.transaction.bind(database);
  const note = (q: SQL | string) => {
    counter.statements++;
    if (!PROFILE) return;
    const text = (typeof q === 'string' ? q : dialect.sqlToQuery(q).sql)
      .replace(/\s+/g, ' ')
      .trim()
      .slice(0, 110);
    counter.byText.set(text, (counter.byText.get(text) ?? 0) + 1);
  };
  const wrapped = database as {
    execute: Executor['execute'];
    transaction: Database['transaction'];
  };
  wrapped.execute = ((q: SQL | string) => {
    note(q);
    counter.transactions++;
    return execute(q);
  }) as Executor['execute'];
  wrapped.transaction = ((fn: (tx: Executor) => Promise<unknown>) => {
    counter.transactions++;
    counter.statements += 2;
    return transaction((tx) =>
      fn({
        execute: ((q: SQL | string) => {
          note(q);
          return tx.execute(q);
        }) as Executor['execute'],
      }),
    );
  }) as Database['transaction'];
}

/** A copy of a counter as it is now. */
export function snapshotCounter(c: StatementCounter): StatementCounter {
  return { statements: c.statements, transactions: c.transactions, byText: new Map(c.byText) };
}

/** Profile mode: the statements run between two snapshots, by SQL text, most frequent first. */
export function printProfile(
  label: string,
  before: StatementCounter,
  after: StatementCounter,
  n: number,
) {
  if (!PROFILE) return;
  const rows = [...after.byText]
    .map(([text, count]) => ({ text, count: count - (before.byText.get(text) ?? 0) }))
    .filter((r) => r.count > 0)
    .sort((a, b) => b.count - a.count);
  for (const r of rows) {
    process.stderr.write(
      `[e2e profile ${label}] ${(r.count / n).toFixed(3)}/op  ${r.count}  ${r.text}\n`,
    );
  }
}
