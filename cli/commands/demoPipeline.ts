import { crash } from '../../loops/drill.ts';
import { systemClock } from '../../machines/Clock.ts';
import { STEP_LABEL } from '../../machines/classifyPackageStep.ts';
import { OperationStatus } from '../../machines/operationMachine.ts';
import { shortId } from '../../machines/shortId.ts';
import { listOperations, type OperationSummary } from '../../persistence/reads/listOperations.ts';
import type { Runtime } from '../../runtime/Runtime.ts';
import type { SampleData } from '../../stages/sampleData.ts';
import type { Worker } from '../../worker/Worker.ts';
import type { startDeletionDemo } from './demoDeletion.ts';
import { reportPackages } from './demoOutcome.ts';

/** How long each wait of the demo may take before it gives up and reports what is stuck. */
export const DEADLINE_MS = 120_000;

const LIVE = new Set<string>([
  OperationStatus.PENDING,
  OperationStatus.SCHEDULED,
  OperationStatus.IN_PROGRESS,
]);

export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The demo's two workers, the deleters beside them, and worker-A's crash. */
export interface DemoCast {
  readonly workerA: Worker;
  readonly workerB: Worker;
  readonly deletion: Awaited<ReturnType<typeof startDeletionDemo>>;
  /** The operation worker-A has written the archive object of and is stalled on, once it has. */
  held(): string | undefined;
  /** Lets worker-A's stalled handler end once it is crashed. */
  gone(): void;
  /** The operation that failed for good, once it has. */
  failed(): string | undefined;
  /** Removes the cause of that failure: its next run goes through. */
  fix(): void;
}

/** What the pipeline run, its operator steps and the follower share. */
export interface DemoRun {
  readonly runtime: Runtime;
  readonly sample: SampleData;
  readonly cast: DemoCast;
  readonly follow: OperationFollower;
  readonly out: (line?: string) => void;
}

/** Crashes worker-A once it holds, IN_PROGRESS, the operation it stalled on; true once crashed. */
async function crashWhenHeld(
  cast: DemoCast,
  ops: readonly OperationSummary[],
  out: (line?: string) => void,
): Promise<boolean> {
  const { workerA, workerB } = cast;
  const onA = ops.find(
    (s) =>
      s.id === cast.held() && s.status === OperationStatus.IN_PROGRESS && s.workerId === workerA.id,
  );
  if (onA === undefined) return false;
  out(
    `  ! ${onA.kind} ${shortId(onA.id)} is IN_PROGRESS on ${workerA.id}, which has written the archive object`,
  );
  out('    but not yet recorded the step. Crashing worker-A now: its heartbeats stop, it');
  out('    writes nothing more, and its delivery stays unsettled, as a killed process would.');
  const crashing = crash(workerA);
  cast.gone();
  await crashing;
  out(`    ${workerB.id} carries on; the control plane has to notice on its own.`);
  return true;
}

/** Follows the demo's operations as the runtime drives them (see `followOperations`). */
export interface OperationFollower {
  /**
   * Polls until `done` holds of every operation there is (true), or the deadline passes (false,
   * saying what was awaited).
   */
  until(
    what: string,
    done: (ops: readonly OperationSummary[]) => boolean | Promise<boolean>,
  ): Promise<boolean>;
  /** Every operation seen, in the order it was first seen. */
  ids(): string[];
  /** Whether worker-A was crashed. */
  crashed(): boolean;
}

/**
 * Follows every operation of the demo's database: prints each one as it appears (its step, its
 * subject and who created it: the demo's submission or the pipeline's pass) and as it ends, and
 * crashes worker-A once it holds the archive it stalled on.
 *
 * @example
 * ```ts
 * await follow.until('every package archived', (ops) => ops.every((o) => o.status === 'COMPLETED'));
 * ```
 */
export function followOperations(
  runtime: Runtime,
  sample: SampleData,
  cast: DemoCast,
  out: (line?: string) => void,
): OperationFollower {
  const seen = new Map<string, { label: string; status: string }>();
  let crashed = false;
  const poll = async (): Promise<OperationSummary[]> => {
    const ops = (await listOperations(runtime.database, { limit: 1_000 })).reverse();
    for (const op of ops) {
      let known = seen.get(op.id);
      if (known === undefined) {
        const view = await runtime.get(op.id);
        const subject = view.fields.rawDataPackageId ?? view.fields.dataTransferPackageId;
        const name = sample.artifacts.get(String(subject))?.name ?? shortId(String(subject));
        known = { label: `${STEP_LABEL[op.kind]} ${name}`, status: '' };
        seen.set(op.id, known);
        out(
          `  + ${known.label.padEnd(32)} created by ${view.transitions[0]?.by ?? '?'}  (operation ${shortId(op.id)})`,
        );
      }
      if (op.status !== known.status && !LIVE.has(op.status)) {
        const why = op.status === OperationStatus.FAILED ? `: ${op.lastError ?? ''}` : '';
        out(`    ${known.label} ${op.status} (attempt ${op.attempt})${why}`);
      }
      known.status = op.status;
    }
    if (!crashed) crashed = await crashWhenHeld(cast, ops, out);
    return ops;
  };
  return {
    async until(what, done) {
      const started = systemClock.now();
      for (;;) {
        if (await done(await poll())) return true;
        if (systemClock.now() - started > DEADLINE_MS) {
          out(`  ${what}: not reached after ${seconds(DEADLINE_MS)}; giving up`);
          return false;
        }
        await systemClock.sleep(100);
      }
    },
    ids: () => [...seen.keys()],
    crashed: () => crashed,
  };
}

/** No operation runs or waits to run. */
export const settled = (ops: readonly OperationSummary[]) => ops.every((o) => !LIVE.has(o.status));

/**
 * Section 3: declares each package's files complete at the source and follows what the runtime
 * does with it: the pipeline's pass creates each packaging, then bundling and the transfer, whose
 * first run fails for good; true once
 * that branch has stopped there (the transfer FAILED, nothing running), with each package's
 * derived state shown.
 */
export async function runUntilStopped(run: DemoRun): Promise<boolean> {
  const { runtime, sample, cast, follow, out } = run;
  out();
  out("3. Declaring each package's files complete; the pipeline creates every stage from there");
  for (const p of sample.packages) {
    await runtime.artifacts.declareFilesComplete({
      rawDataPackageId: p.id,
      locationId: sample.locations.source.id,
      by: 'demo',
    });
  }
  out(
    `  declared the files of ${sample.packages.length} packages complete at the source (by demo); no operation is submitted`,
  );
  const started = systemClock.now();
  const stopped = await follow.until('a failed stage stopping its branch', (ops) => {
    const failed = ops.find((o) => o.id === cast.failed());
    return failed?.status === OperationStatus.FAILED && settled(ops);
  });
  if (!stopped) return false;
  const failed = await runtime.get(cast.failed() as string);
  out(
    `  after ${seconds(systemClock.now() - started)} the ${STEP_LABEL[failed.kind]} FAILED for good and nothing runs: the pipeline's`,
  );
  out('  pass creates nothing after a failed stage, so its branch stops there.');
  await reportPackages(run, 'each package as it stands, derived from its operations and copies');
  return true;
}
