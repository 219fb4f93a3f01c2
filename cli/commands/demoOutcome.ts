import { systemClock } from '../../machines/Clock.ts';
import { classifyPackageStep } from '../../machines/classifyPackageStep.ts';
import { OperationStatus } from '../../machines/operationMachine.ts';
import { PACKAGE_STATES, PACKAGE_TYPES } from '../../machines/packageState.ts';
import { shortId } from '../../machines/shortId.ts';
import type { LogLevel, memoryLogger } from '../../observe/Logger.ts';
import type { PhysicalCopyRecord } from '../../persistence/ArtifactRepository.ts';
import type { OperationInspection } from '../../persistence/inspectOperation.ts';
import {
  countPackageStates,
  type PackageStateCounts,
} from '../../persistence/reads/countPackageStates.ts';
import { selectPackage } from '../../persistence/reads/selectPackage.ts';
import { selectRollbackMarks } from '../../persistence/reads/selectRollbackOutcomes.ts';
import type { Runtime } from '../../runtime/Runtime.ts';
import type { SampleData } from '../../stages/sampleData.ts';
import { describePath, recoveryOf, stepsOf } from './demoReport.ts';
import { createStatusCommand } from './status.ts';

/** What the demo's closing sections read: the runtime, the sample and where lines go. */
export interface DemoScene {
  readonly runtime: Runtime;
  readonly sample: SampleData;
  /** A location's name by its id. */
  readonly locationName: ReadonlyMap<string, string>;
  readonly out: (line?: string) => void;
}

/** An artifact's sample name, or its short id. */
const nameOf = (scene: DemoScene, id: string | null | undefined) =>
  id == null ? '-' : (scene.sample.artifacts.get(id)?.name ?? shortId(id));

/** One output copy of an operation: how many live copies are at its location, and whether deleted. */
async function outputLine(scene: DemoScene, c: PhysicalCopyRecord): Promise<string> {
  const here = (await scene.runtime.artifacts.copiesOf(c.artifactType, c.artifactId)).filter(
    (x) => x.locationId === c.locationId,
  );
  const live = here.filter((x) => x.status !== 'DELETED');
  // A buffer copy may already be gone: the deleter runs beside the pipeline (see 10.).
  const deleted = live.length === 0 && here.some((x) => x.status === 'DELETED');
  const mark =
    live.length > 1 ? '  <-- DUPLICATE' : live.length === 0 && !deleted ? '  <-- MISSING' : '';
  return `    output    ${c.artifactType} ${nameOf(scene, c.artifactId)} at ${scene.locationName.get(c.locationId)}: ${deleted ? 'deleted after its verified archive' : `${live.length} live cop${live.length === 1 ? 'y' : 'ies'}`}${mark}`;
}

/**
 * Section 5: each operation's path through the lifecycle, who recovered it, the rollback it is a
 * re-run of or was superseded by, its journal steps, its error if it FAILED, and each output copy.
 *
 * @example
 * ```ts
 * await reportOperations(scene, await Promise.all(ids.map((id) => runtime.get(id))));
 * ```
 */
export async function reportOperations(
  scene: DemoScene,
  views: readonly OperationInspection[],
): Promise<void> {
  const { out } = scene;
  out();
  out('5. What happened to each operation');
  const marks = await selectRollbackMarks(scene.runtime.database);
  for (const view of views) {
    const subject = nameOf(
      scene,
      view.fields.rawDataPackageId ?? view.fields.dataTransferPackageId,
    );
    out(
      `  ${view.kind.padEnd(22)} ${view.status.padEnd(9)} attempt ${view.attempt}  ${subject}  (operation ${shortId(view.id)})`,
    );
    out(`    created   by ${view.transitions[0]?.by ?? '-'}`);
    describePath(view.transitions).forEach((line, i) => {
      out(`    ${i === 0 ? 'path     ' : '         '} ${line}`);
    });
    out(`    recovery  ${recoveryOf(view.transitions)}`);
    const mark = marks.get(view.id);
    if (mark?.rollbackId != null) out(`    rollback  re-run of rollback ${mark.rollbackId}`);
    if (mark?.supersededBy != null) {
      out(`    rollback  superseded by rollback ${mark.supersededBy}: redone, out of the chain`);
    }
    if (view.steps.length > 0) out(`    steps     ${stepsOf(view)}`);
    if (view.lastError !== null && view.status === OperationStatus.FAILED) {
      out(`    error     ${view.lastError.message}`);
    }
    for (const c of view.outputs) out(await outputLine(scene, c));
  }
}

/**
 * Each sample package's derived state with its step and why it waits there (as `opstate inspect
 * <package>` says), then the packages per state (as `opstate status` counts them); the counts.
 *
 * @example
 * ```ts
 * const counts = await reportPackages(scene, 'each package as it stands');
 * ```
 */
export async function reportPackages(
  scene: Pick<DemoScene, 'runtime' | 'sample' | 'out'>,
  title: string,
): Promise<PackageStateCounts> {
  const { runtime, sample, out } = scene;
  out(`  ${title}:`);
  let previous = '';
  for (const p of [...sample.packages, sample.dataTransferPackage]) {
    const record = await selectPackage(runtime.database, p.id);
    if (record === undefined) {
      out(`    ${p.name.padEnd(13)} not found`);
      continue;
    }
    const step = classifyPackageStep(record.facts, systemClock.now());
    // The packages of one bundle often wait for the same reason: say it once.
    const why = step.why === previous ? 'as above' : step.why;
    previous = step.why;
    out(`    ${p.name.padEnd(13)} ${step.state.padEnd(12)} ${step.wait}: ${why}`);
  }
  const counts = await countPackageStates(runtime.database);
  out(`    per state: ${describeCounts(counts)}`);
  return counts;
}

/**
 * The packages per derived state, the states they are in only: `raw_data_package 3 ARCHIVED;
 * data_transfer_package 1 ARCHIVED`.
 *
 * @example
 * ```ts
 * out(describeCounts(await countPackageStates(database)));
 * ```
 */
export function describeCounts(counts: PackageStateCounts): string {
  return PACKAGE_TYPES.map((type) => {
    const states = PACKAGE_STATES.filter((s) => counts[type][s] > 0);
    return `${type} ${states.map((s) => `${counts[type][s]} ${s}`).join(', ') || 'none'}`;
  }).join('; ');
}

/**
 * Section 7: live copies per artifact and location, grouped; false when an artifact has two live
 * copies at one location.
 *
 * @example
 * ```ts
 * ok = (await reportLiveCopies(scene)) && ok;
 * ```
 */
export async function reportLiveCopies(scene: DemoScene): Promise<boolean> {
  const { out } = scene;
  out();
  out('7. Live copies per artifact and location (the database allows one; checked anyway)');
  const perPlace = new Map<string, number>();
  for (const [id, a] of scene.sample.artifacts) {
    for (const c of await scene.runtime.artifacts.copiesOf(a.type, id)) {
      if (c.status === 'DELETED') continue;
      const key = `${a.type}|${id}|${c.locationId}`;
      perPlace.set(key, (perPlace.get(key) ?? 0) + 1);
    }
  }
  const duplicates = [...perPlace].filter(([, n]) => n > 1);
  const byGroup = new Map<string, { artifacts: number; most: number }>();
  for (const [key, n] of perPlace) {
    const [type, , loc] = key.split('|');
    const group = `${scene.locationName.get(loc as string)}: ${type}`;
    const g = byGroup.get(group) ?? { artifacts: 0, most: 0 };
    byGroup.set(group, { artifacts: g.artifacts + 1, most: Math.max(g.most, n) });
  }
  for (const [group, g] of byGroup) {
    const each = g.most === 1 ? '1 live copy each' : `up to ${g.most} live copies`;
    out(`  ${group.padEnd(34)} ${g.artifacts} artifact(s), ${each}`);
  }
  if (duplicates.length === 0) {
    out(`  no artifact has more than one live copy at a location (${perPlace.size} checked)`);
    return true;
  }
  for (const [key, n] of duplicates) {
    out(`  DUPLICATE: ${key.replaceAll('|', ' ')} has ${n} live copies`);
  }
  return false;
}

/**
 * Section 8: the runtime's warnings and errors, one line per message with a count and an example.
 *
 * @example
 * ```ts
 * reportWarnings(logger, out);
 * ```
 */
export function reportWarnings(
  logger: ReturnType<typeof memoryLogger>,
  out: (line?: string) => void,
): void {
  out();
  const notable = logger.lines.filter((l) => l.level === 'WARNING' || l.level === 'ERROR');
  out(`8. Runtime warnings (${notable.length}; the rest of the runtime's log is kept quiet)`);
  const grouped = new Map<
    string,
    { level: LogLevel; n: number; fields: Record<string, unknown> }
  >();
  for (const l of notable) {
    const key = `${l.level} ${l.message}`;
    const g = grouped.get(key);
    if (g === undefined) grouped.set(key, { level: l.level, n: 1, fields: l.fields });
    else g.n++;
  }
  for (const [key, g] of grouped) out(`  ${g.n} x ${key}  e.g. ${JSON.stringify(g.fields)}`);
  if (notable.length === 0) out('  none');
}

/**
 * Section 9: the operation counts, as `opstate status` prints them, from the demo's runtime.
 *
 * @example
 * ```ts
 * await reportStatus(runtime, out);
 * ```
 */
export async function reportStatus(runtime: Runtime, out: (line?: string) => void): Promise<void> {
  out();
  out('9. Operation counts (as `opstate status` prints them)');
  const status = createStatusCommand(
    async () => ({ ...runtime.database, close: async () => {} }),
    async () => ({
      timing: runtime.timing,
      heartbeats: runtime.transport.heartbeats,
      close: async () => {},
    }),
  );
  await status.run([], { out: (l) => out(`  ${l}`), err: (l) => out(`  ${l}`) });
}
