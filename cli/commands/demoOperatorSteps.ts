import { OPERATOR } from '../../machines/actors.ts';
import { systemClock } from '../../machines/Clock.ts';
import { STEP_LABEL } from '../../machines/classifyPackageStep.ts';
import { OperationStatus } from '../../machines/operationMachine.ts';
import { shortId } from '../../machines/shortId.ts';
import { countPackageStates } from '../../persistence/reads/countPackageStates.ts';
import { type DemoRun, seconds, settled } from './demoPipeline.ts';

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

/**
 * What the operator does, in order, once the pipeline has stopped at its failed stage. A further
 * step is one more entry.
 */
export const OPERATOR_STEPS: readonly OperatorStep[] = Object.freeze([
  retryFailedStage,
  stageOnRequest,
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
