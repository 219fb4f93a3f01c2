import { sql } from 'drizzle-orm';
import type { Executor } from '../openDatabase.ts';

/**
 * Where a pipeline's pass stands in the transition history: every completion at or below it has
 * had its next stages created. 0 when the pipeline has never run (no row yet).
 *
 * @example
 * ```ts
 * cursor.start(await selectPipelineCursor(database, pipeline.name));
 * ```
 */
export async function selectPipelineCursor(exec: Executor, name: string): Promise<number> {
  const [row] = await exec.execute(sql`select after_id from pipeline_cursor where name = ${name}`);
  return row === undefined ? 0 : Number(row.after_id);
}
