/**
 * The settings the benches share, read from the environment: where the servers are, and how much
 * each end-to-end and peers run drains untimed before it is timed.
 */

/** A number from the environment, `fallback` when the variable is unset or empty. */
export function envNumber(name: string, fallback: number): number {
  const v = process.env[name];
  return v === undefined || v === '' ? fallback : Number(v);
}

/** The Postgres the benches create their databases on (OPSTATE_BENCH_ADMIN_URL). */
export const ADMIN_URL =
  process.env.OPSTATE_BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** The nats-server opstate's runs use (NATS_URL). */
export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

// The benches run on a development nats-server that takes clients without credentials, which
// the runtime refuses unless told it is meant: every runtime a bench opens and every process it
// starts (they inherit the environment) is told so here, unless the caller said otherwise.
process.env.OPSTATE_NATS_INSECURE ??= '1';

/**
 * Operations (or jobs) drained untimed through each set of timed workers, opstate's and each
 * peer's, before its run (OPSTATE_BENCH_WARM_UP, default 5000): the pools' prepared statements
 * and backend caches, the consumers, and V8's optimizing compiler, which was still compiling in
 * 15–30% of a worker process's samples through a run timed after 500 (7–16% after 5,000).
 */
export const WARM_UP = envNumber('OPSTATE_BENCH_WARM_UP', 5000);
