import { notFound } from '../../persistence/applyEvents.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { replayOperation } from '../../runtime/InspectionStream.ts';
import type { Io } from '../Command.ts';
import { untilSignal } from '../runtimeFromEnv.ts';
import { openStatelyInspection } from '../statelyInspection.ts';

/**
 * `opstate inspect <id> --stately`: replays one operation's stored history to the Stately
 * inspector (registration, then one event and one snapshot per stored transition) and prints the
 * steps. With its own relay it stays up until SIGINT/SIGTERM so a browser can open the page; with
 * `--inspect-url` it returns once the events have gone out.
 *
 * @example
 * ```ts
 * await inspectStately(database, id, { 'inspect-url': 'ws://localhost:8080' }, io);
 * ```
 */
export async function inspectStately(
  database: Database,
  id: string,
  values: { 'inspect-port'?: string | undefined; 'inspect-url'?: string | undefined },
  io: Io,
): Promise<number> {
  const inspection = await openStatelyInspection(values, io);
  let sent = 0;
  try {
    const steps = await replayOperation(database, inspection.inspector, id);
    if (steps.length === 0) throw notFound(id);
    sent = steps.length;
    for (const s of steps) {
      const t = s.transition;
      io.out(
        `  ${t.at.toISOString()}  ${s.event.type.padEnd(11)} by ${t.by.padEnd(17)} → ${s.snapshot.value} (attempt ${s.snapshot.context.attempt})${s.diverged ? '  [the machine would not take this step; shown as stored]' : ''}`,
      );
    }
    if (inspection.page !== null) {
      const stopping = untilSignal();
      io.out(`${sent} transitions of ${id} sent; open ${inspection.page}. Ctrl-C to stop.`);
      await stopping;
    }
  } finally {
    await inspection.close();
  }
  if (inspection.page === null) io.out(`${sent} transitions of ${id} sent to the inspector relay`);
  return 0;
}
