import { OPERATOR } from '../../machines/actors.ts';
import { systemClock } from '../../machines/Clock.ts';
import { STEP_LABEL } from '../../machines/classifyPackageStep.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OperationStatus } from '../../machines/operationMachine.ts';
import { shortId } from '../../machines/shortId.ts';
import { countPackageStates } from '../../persistence/reads/countPackageStates.ts';
import { selectRollbackOutcomes } from '../../persistence/reads/selectRollbackOutcomes.ts';
import { type DemoRun, seconds, settled } from './demoPipeline.ts';
import { describeRollback } from './rollback.ts';

/** What an operator step did: whether it held, and one line for the demo's summary. */
export interface StepOutcome {
  readonly ok: boolean;
  readonly summary: string;
}

/**
 * One thing the operator does once the pipeline has stopped, in order: it prints what it does as
 * it goes, and returns whether it held with a line for the summary.
 */
export interface OperatorStep {
  readonly title: string;
  run(run: DemoRun): Promise<StepOutcome>;
}

/** Who the demo's operator is recorded as: a named operator, as `opstate … --operator alice`. */
export const DEMO_OPERATOR = 'alice';

/**
 * Once the cause is fixed, the operator retries the FAILED stage through the runtime's operator
 * command (what `opstate retry` applies), recorded with the operator's name; the branch resumes,
 * and every package reaches ARCHIVED (worker-A is crashed on the way, while it holds an archive).
 */
const retryFailedStage: OperatorStep = {
  title: 'retry the failed stage',
  async run({ runtime, sample, cast, follow, out }) {
    const id = cast.failed() as string;
    const reason = 'the destination accepts sessions again';
    cast.fix();
    out(`  $ opstate retry ${id} --operator ${DEMO_OPERATOR} --reason '${reason}'`);
    const t = await runtime.command(
      id,
      { type: 'RETRY', reason },
      { by: `${OPERATOR}:${DEMO_OPERATOR} (demo)` },
    );
    out(`    ${t.from} → ${t.status} (attempt ${t.context.attempt}); the branch resumes:`);
    const started = systemClock.now();
    const archived = await follow.until('every package ARCHIVED', async (ops) => {
      if (!settled(ops)) return false;
      const states = await countPackageStates(runtime.database);
      return (
        states.raw_data_package.ARCHIVED === sample.packages.length &&
        states.data_transfer_package.ARCHIVED === 1
      );
    });
    if (!follow.crashed()) {
      out(`  (${cast.workerA.id} never held an archive, so nothing was crashed this time.)`);
    }
    const view = await runtime.get(id);
    const what = `${STEP_LABEL[view.kind]} ${shortId(id)}`;
    if (!archived) return { ok: false, summary: `${what} retried, but not every package ARCHIVED` };
    out(`  every package ARCHIVED ${seconds(systemClock.now() - started)} after the retry`);
    return {
      ok: view.status === OperationStatus.COMPLETED,
      summary: `${what} FAILED for good and its branch stopped; retried by operator ${DEMO_OPERATOR}, it ${view.status} (attempt ${view.attempt}) and the branch went on to ARCHIVED`,
    };
  },
};

/**
 * An operator stages one archived package into the processing location on request (a STAGING
 * operation with a retention claim on the archive copy it reads), waits for it, and releases it.
 */
const stageOnRequest: OperatorStep = {
  title: 'stage one package on request, then release it',
  async run({ runtime, sample, follow, out }) {
    const pkg = sample.packages[0];
    if (pkg === undefined) return { ok: false, summary: 'no package to stage' };
    const to = `${sample.locations.processing.site}/${sample.locations.processing.name}`;
    const by = `${OPERATOR}:${DEMO_OPERATOR}`;
    out(`  $ opstate stage ${pkg.id} --to ${to} --operator ${DEMO_OPERATOR}`);
    const staged = await runtime.stage({ package: pkg.id, to, by });
    out(
      `    group ${shortId(staged.groupId)} holds the archive copy at ${staged.from.location} while it stages`,
    );
    const done = await follow.until('the staging COMPLETED', (ops) =>
      ops.some((o) => o.id === staged.operationId && o.status === OperationStatus.COMPLETED),
    );
    if (!done) return { ok: false, summary: `${pkg.name}: the staging did not complete` };
    out(`  $ opstate release ${staged.groupId} --operator ${DEMO_OPERATOR}`);
    await runtime.release(staged.groupId, { by });
    out('    released: the deletion policy may take what the group held again');
    return {
      ok: true,
      summary: `${pkg.name} staged into ${to} from its verified archive copy, held by a claim until released`,
    };
  },
};

/** The stage the demo's rollback redoes from. */
export const ROLLBACK_STAGE = 'transfer-1';

/**
 * An operator rolls the data transfer package back to its transfer, so its transfer, unpack and
 * every member's archive run again: the dry run's plan first (what it redoes, the copies it
 * supersedes), then the rollback, then its re-run followed until every package is ARCHIVED again.
 * The transfer reads the bundle's source copy, which the deletion policy keeps. Not one raw data
 * package: to its archive is refused (`UNSAFE`: the policy deleted the buffer copy the archive
 * reads), and from an earlier stage the unpack's re-run writes every member's buffer copy again
 * while only that package is archived again, so its bundle-mates' new buffer copies would wait
 * for a deletion no archive vouches for. The re-run unpacks at the buffer, so the buffer settles
 * first (`letGo`): no copy mid-deletion, none kept by a failed one (the pass archives a PRESENT
 * copy only).
 */
const rollBack: OperatorStep = {
  title: `roll the transfer package back to '${ROLLBACK_STAGE}'`,
  async run({ runtime, sample, cast, follow, out }) {
    const pkg = sample.dataTransferPackage;
    // A rollback's `by` is a submitter name, as `opstate rollback --operator alice` records it.
    const by = `${OPERATOR}:${DEMO_OPERATOR}`;
    const what = `${pkg.name} back to '${ROLLBACK_STAGE}'`;
    const archives = (await Promise.all(follow.ids().map((i) => runtime.get(i))))
      .filter((v) => v.kind === OperationKind.LONG_TERM_ARCHIVE)
      .map((v) => v.id);
    out('  the re-run unpacks at the buffer again, so first every buffer deletion ends:');
    if (!(await cast.deletion.letGo(archives))) {
      return { ok: false, summary: `${what}: the buffer deletions did not all end DELETED` };
    }
    const args = `${pkg.id} --to ${ROLLBACK_STAGE} --pipeline <module> --operator ${DEMO_OPERATOR}`;
    out(`  $ opstate rollback ${args} --dry-run`);
    const plan = await runtime.rollback({ artifact: pkg.id, to: ROLLBACK_STAGE, by, dryRun: true });
    for (const l of describeRollback(plan).split('\n')) out(`    ${l}`);
    out(`  $ opstate rollback ${args}`);
    const r = await runtime.rollback({ artifact: pkg.id, to: ROLLBACK_STAGE, by });
    out(
      `    rollback ${r.rollbackId}: ${r.redone.length} operations superseded, ${r.created.length} created by ${r.by}; the pass creates the rest from the re-run:`,
    );
    const mine = async () =>
      (await selectRollbackOutcomes(runtime.database)).find((x) => x.id === r.rollbackId);
    const started = systemClock.now();
    const home = await follow.until('the re-run ARCHIVED', async (ops) => {
      if (!settled(ops) || ((await mine())?.caused ?? 0) < r.redone.length) return false;
      const states = await countPackageStates(runtime.database);
      return (
        states.raw_data_package.ARCHIVED === sample.packages.length &&
        states.data_transfer_package.ARCHIVED === 1
      );
    });
    if (!home) return { ok: false, summary: `${what}: the re-run did not reach ARCHIVED` };
    out(
      `  every package ARCHIVED again ${seconds(systemClock.now() - started)} after the rollback`,
    );
    const done = await mine();
    return {
      ok: done?.caused === r.redone.length && done.completed === done.caused,
      summary: `${what} by operator ${DEMO_OPERATOR} (rollback ${r.rollbackId}): ${r.redone.length} operations redone (${r.stages.join(', ')}), ${r.superseded.length} copies superseded; ${done?.completed} of ${done?.caused} new operations COMPLETED and every package is ARCHIVED again`,
    };
  },
};

/**
 * What the operator does, in order, once the pipeline has stopped at its failed stage. A further
 * step is one more entry.
 */
export const OPERATOR_STEPS: readonly OperatorStep[] = Object.freeze([
  retryFailedStage,
  stageOnRequest,
  rollBack,
]);

/**
 * Section 4: runs the operator's steps in order, stopping at the first that does not hold; each
 * step's title, whether it held and its summary line.
 *
 * @example
 * ```ts
 * for (const s of await runOperatorSteps(run)) out(`${s.title}: ${s.summary}`);
 * ```
 */
export async function runOperatorSteps(
  run: DemoRun,
  steps: readonly OperatorStep[] = OPERATOR_STEPS,
): Promise<(StepOutcome & { readonly title: string })[]> {
  run.out();
  run.out("4. The operator's steps");
  const outcomes: (StepOutcome & { readonly title: string })[] = [];
  for (const [i, step] of steps.entries()) {
    run.out(`  ${String.fromCharCode(97 + i)}) ${step.title}`);
    const outcome = await step.run(run);
    outcomes.push({ title: step.title, ...outcome });
    if (!outcome.ok) break;
  }
  return outcomes;
}
