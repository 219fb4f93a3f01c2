import type { CreateOperationInput } from '../../persistence/CreateOperationInput.ts';
import type { OperationStore } from '../../persistence/OperationStore.ts';
import type { Database } from '../../persistence/openDatabase.ts';

/** The server's WAL position now. */
export async function walLsn(db: Database): Promise<string> {
  const [r] = await db.execute<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn');
  return String(r?.lsn);
}

/** WAL bytes written on the server since `lsn`. */
export async function walSince(db: Database, lsn: string): Promise<number> {
  const [r] = await db.execute<{ b: string }>(
    `select pg_wal_lsn_diff(pg_current_wal_lsn(), '${lsn}')::bigint as b`,
  );
  return Number(r?.b);
}

/** Times `fn` in milliseconds. */
export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/**
 * A writer creating and cancelling operations until stopped, each step's span kept: the longest
 * span overlapping a window is what a writer waited in it, whenever the span ended.
 */
export async function startWriter(
  store: OperationStore,
  input: () => Promise<CreateOperationInput>,
) {
  const spans: [number, number][] = [];
  let writing = true;
  const ready = await Promise.all(Array.from({ length: 64 }, () => input()));
  const done = (async () => {
    let i = 0;
    while (writing) {
      const t0 = performance.now();
      const id = await store.create(ready[i++ % ready.length] as CreateOperationInput);
      await store.apply(id, { type: 'CANCEL', reason: 'bench' }, { by: 'operator' });
      spans.push([t0, performance.now()]);
    }
  })();
  return {
    longestIn: (from: number, to: number) =>
      Math.max(0, ...spans.filter(([a, b]) => b >= from && a <= to).map(([a, b]) => b - a)),
    stop: async () => {
      writing = false;
      await done;
    },
  };
}

/**
 * Runs `prune` beside a writer, then lets the writer go on alone for as long (at least 2 s):
 * how long the prune took, the WAL it wrote (with the writer's), the longest the writer waited
 * during it, and the longest it waited alone afterwards.
 */
export async function pruneBesideWriter<T>(
  db: Database,
  writer: Awaited<ReturnType<typeof startWriter>>,
  prune: () => Promise<T>,
) {
  await new Promise((r) => setTimeout(r, 500));
  const walAt = await walLsn(db);
  const from = performance.now();
  const result = await prune();
  const to = performance.now();
  const wal = await walSince(db, walAt);
  await new Promise((r) => setTimeout(r, Math.max(to - from, 2000)));
  await writer.stop();
  return {
    result,
    ms: to - from,
    wal,
    stall: writer.longestIn(from, to),
    quietStall: writer.longestIn(to + 200, performance.now()),
  };
}
