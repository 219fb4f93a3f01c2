import { systemClock } from '../../machines/Clock.ts';
import { classifyPackageStep } from '../../machines/classifyPackageStep.ts';
import { formatDeadline } from '../../machines/deadlines.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { checkId } from '../../persistence/applyEvents.ts';
import { inspectOperation } from '../../persistence/inspectOperation.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { selectPackage } from '../../persistence/reads/selectPackage.ts';
import { loadResumeRecord } from '../../persistence/resumeRecord.ts';
import {
  argumentsOf,
  type Command,
  defineCommand,
  type Io,
  optionsOf,
  UsageError,
} from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';
import { inspectTargetOf, withInspectOptions } from '../statelyInspection.ts';
import { inspectStately } from './inspectStately.ts';
import { packageJson, printPackage } from './printPackage.ts';
import { printResumeRecord } from './printResumeRecord.ts';

const iso = (d: Date | null) => (d === null ? '-' : d.toISOString());

type Inspection = Awaited<ReturnType<typeof inspectOperation>>;
type Resume = Awaited<ReturnType<typeof loadResumeRecord>>;

/** `opstate inspect --json`: the operation, its resume record if it has one, its transitions. */
function inspectionJson(view: Inspection, resume: Resume): unknown {
  return {
    ...view,
    ...(resume === undefined ? {} : { resume }),
    transitions: view.transitions.map((t) => ({
      from: t.from,
      to: t.to,
      event: t.event,
      by: t.by,
      attempt: t.attempt,
      at: t.at,
      reason: t.reason,
    })),
  };
}

/** `opstate inspect`: the operation as text, section by section. */
function printInspection(view: Inspection, resume: Resume, io: Io): void {
  io.out(`operation ${view.id}`);
  io.out(`  kind        ${view.kind}`);
  io.out(`  status      ${view.status}`);
  io.out(`  attempt     ${view.attempt}  (retries ${view.retryCount}/${view.maxRetries})`);
  io.out(`  queue       ${view.queue}`);
  io.out(`  worker      ${view.workerId ?? '-'}`);
  io.out(`  group       ${view.groupId ?? '-'}`);
  io.out(`  created     ${iso(view.createdAt)}`);
  io.out(`  scheduled   ${iso(view.scheduledAt)}`);
  io.out(`  started     ${iso(view.startedAt)}`);
  io.out(`  finished    ${iso(view.finishedAt)}`);
  io.out(`  not before  ${iso(view.notBefore)}`);
  io.out(`  priority    ${view.priority}`);
  io.out(
    `  deadline    ${view.deadlineMs === null ? "its kind's (OPSTATE_DEADLINES)" : `${formatDeadline(view.deadlineMs)} per attempt (set at submit)`}`,
  );
  if (view.lastError !== null) io.out(`  last error  ${view.lastError.message}`);
  io.out('  fields');
  for (const [k, v] of Object.entries(view.fields)) io.out(`    ${k}: ${v ?? '-'}`);
  for (const [label, copies] of [
    ['inputs', view.inputs],
    ['outputs', view.outputs],
  ] as const) {
    io.out(`  ${label} (${copies.length})`);
    for (const c of copies) {
      io.out(`    ${c.artifactType} ${c.artifactId} @ ${c.locationId} ${c.status}`);
    }
  }
  io.out(`  transitions (${view.transitions.length})`);
  for (const t of view.transitions) {
    const reason = t.reason === null ? '' : `: ${t.reason}`;
    io.out(
      `    ${iso(t.at)}  ${t.from ?? '∅'} → ${t.to}  ${t.event} #${t.attempt} by ${t.by}${reason}`,
    );
  }
  io.out(`  steps (${view.steps.length})`);
  for (const s of view.steps) {
    const plan = s.generation > 1 ? ` (plan ${s.generation})` : '';
    io.out(`    ${iso(s.at)}  ${s.name} #${s.attempt}${plan} ${s.state}`);
  }
  if (view.failures.length > 0) {
    io.out(`  failures (${view.failures.length})`);
    for (const f of view.failures) io.out(`    #${f.attempt} ${JSON.stringify(f.error)}`);
  }
  if (view.unreadable.length > 0) {
    io.out(`  unreadable (${view.unreadable.length})`);
    for (const u of view.unreadable) io.out(`    ${u.column}: ${u.reason}: ${u.raw}`);
  }
  if (resume !== undefined) printResumeRecord(resume, io);
}

/**
 * An id that names no operation: the package it names (its derived state, its step and why, its
 * lineage), or a usage error saying what the id may name.
 */
async function inspectPackage(
  database: Database,
  id: string,
  json: boolean,
  io: Io,
): Promise<number> {
  const record = await selectPackage(database, id);
  if (record === undefined) {
    throw new OpstateError(
      OpstateErrorCode.NOT_FOUND,
      `no operation or package has id ${id}: 'opstate list' prints operation ids, 'opstate list --package-state <state>' package ids`,
    );
  }
  const step = classifyPackageStep(record.facts, systemClock.now());
  if (json) io.out(JSON.stringify(packageJson(record, step)));
  else printPackage(record, step, io);
  return 0;
}

/**
 * `opstate inspect <id> [--json]`: one operation with its subtype fields, inputs, outputs,
 * transition history (`transitions: [{from, to, event, by, attempt, at}]`), journal steps and
 * failure breadcrumbs; for a long-term archive also its resume record (`resume`: last durable
 * state, source and archive identity, deletion progress, receipt, `nextSafeAction`). Never shows a
 * key: only the fingerprint of the key that sealed the archive. A stored value it cannot read (a
 * damaged snapshot or error record) is listed under `unreadable` with the row's text, and the rest
 * is shown as usual. An id that names a raw data package or data transfer package instead shows
 * the package (`packageJson`): its derived state, the step it is in and why it waits, its transfer
 * package, members, files, operations in pipeline order and copies. An id that names neither is
 * `NOT_FOUND` (exit 1).
 *
 * @example
 * ```ts
 * await createInspectCommand(() => Promise.resolve(database)).run([id, '--json'], io);
 * ```
 */
export function createInspectCommand(open: DatabaseOpener = databaseFromEnv): Command {
  const summary =
    "Show one operation (state, fields, copies, transitions, journal steps; an archive's resume record) or one package (its derived state, step and lineage)";
  return defineCommand('inspect', summary, (program, ctx) => {
    withInspectOptions(
      program
        .command('inspect')
        .description(summary)
        .argument(
          '<id>',
          'an operation, or a raw data package or data transfer package (a uuid, as `opstate list` prints it)',
        )
        .option('--json', 'print the operation as one JSON object')
        .option('--stately', 'replay its transitions into the Stately inspector'),
    ).action(
      ctx.action(async (cmd) => {
        const io = ctx.io;
        const [id] = argumentsOf(cmd) as [string];
        const values = optionsOf<{
          json?: boolean;
          stately?: boolean;
          inspectPort?: string;
          inspectUrl?: string;
        }>(cmd);
        if (values.stately !== true && (values.inspectPort ?? values.inspectUrl) !== undefined) {
          throw new UsageError('--inspect-port and --inspect-url go with --stately');
        }
        checkId(id);
        const database = await open({ io: ctx.io });
        try {
          if (values.stately === true) {
            return await inspectStately(database, id, inspectTargetOf(values), io);
          }
          const view = await inspectOperation(database, id).catch((err: unknown) => {
            if (err instanceof OpstateError && err.code === OpstateErrorCode.NOT_FOUND) return null;
            throw err;
          });
          if (view === null) return await inspectPackage(database, id, values.json === true, io);
          const resume = await loadResumeRecord(database, view);
          if (values.json === true) io.out(JSON.stringify(inspectionJson(view, resume)));
          else printInspection(view, resume, io);
          return 0;
        } finally {
          await database.close();
        }
      }),
    );
  });
}

export const inspectCommand: Command = createInspectCommand();
