import { sql } from 'drizzle-orm';
import {
  ArtifactRepository,
  type PhysicalCopyRecord,
  toCopyRecord,
} from '../persistence/ArtifactRepository.ts';
import { OperationStore } from '../persistence/OperationStore.ts';
import type { Database } from '../persistence/openDatabase.ts';
import { registerSampleData, type SampleLocations } from '../stages/sampleData.ts';
import { SAMPLE_PIPELINE } from '../stages/samplePipeline.ts';

const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Runs a database call again until it answers or `deadlineAt` (epoch ms) passes: the chaos run
 * restarts the database under its own driver too.
 */
export async function persist<T>(
  what: string,
  fn: () => Promise<T>,
  deadlineAt: number,
): Promise<T> {
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadlineAt) {
        throw new Error(`${what}: still failing at the deadline: ${(err as Error).message}`);
      }
      await pause(250);
    }
  }
}

/** How one pipeline of the workload ended. */
export interface PipelineResult {
  readonly name: string;
  /** Every operation it submitted. */
  readonly operations: string[];
  /** `completed` when every stage completed; else the stage it stopped at and why. */
  readonly outcome: 'completed' | { stoppedAt: string; because: string };
}

const TERMINAL = new Set(['COMPLETED', 'FAILED']);

/**
 * The workload: sample pipelines (packaging → bundling → transfer → unpack → long-term archive
 * of every package → staging of one), each its own packages and bundle on four shared
 * locations, every stage submitted once the one before completed.
 */
export class Workload {
  readonly store: OperationStore;
  readonly artifacts: ArtifactRepository;
  #locations: SampleLocations | undefined;
  #count = 0;

  constructor(
    readonly database: Database,
    readonly storageDir: string,
    readonly options: { packages: number; files: number; maxRetries: number },
  ) {
    this.store = new OperationStore(database);
    this.artifacts = new ArtifactRepository(database);
  }

  /** Registers the four locations every pipeline shares (before the faults begin). */
  async init(): Promise<SampleLocations> {
    const sample = await registerSampleData(this.artifacts, this.storageDir, {
      site: 'chaos',
      namePrefix: 'setup-',
      packageCount: 0,
    });
    this.#locations = sample.locations;
    return sample.locations;
  }

  /** Runs one pipeline to its end (or until `deadlineAt`). */
  async pipeline(deadlineAt: number): Promise<PipelineResult> {
    const name = `p${++this.#count}`;
    const locations = this.#locations;
    if (locations === undefined) throw new Error('Workload.init() first');
    let tries = 0;
    // A registration cut short by a restart leaves names taken: the next try uses new ones.
    const sample = await persist(
      `registering pipeline ${name}`,
      () =>
        registerSampleData(this.artifacts, this.storageDir, {
          site: 'chaos',
          namePrefix: `${name}.${++tries}-`,
          packageCount: this.options.packages,
          filesPerPackage: this.options.files,
          locations,
        }),
      deadlineAt,
    );
    const operations: string[] = [];
    let previous: PhysicalCopyRecord[] = [];
    for (const stage of SAMPLE_PIPELINE) {
      const inputs = stage
        .inputs(sample, previous)
        .map((i) => ({ ...i, maxRetries: this.options.maxRetries, by: 'chaos' }));
      const ids = await persist(
        `submitting ${stage.kind}`,
        () => this.store.createMany(inputs),
        deadlineAt,
      );
      operations.push(...ids);
      const statuses = await this.settle(ids, deadlineAt);
      if (statuses === undefined) {
        return { name, operations, outcome: { stoppedAt: stage.kind, because: 'deadline' } };
      }
      if ([...statuses.values()].some((s) => s !== 'COMPLETED')) {
        return { name, operations, outcome: { stoppedAt: stage.kind, because: 'FAILED' } };
      }
      previous = await persist('reading outputs', () => this.outputsOf(ids), deadlineAt);
    }
    return { name, operations, outcome: 'completed' };
  }

  /** Waits until every operation is terminal; undefined at the deadline. */
  private async settle(
    ids: string[],
    deadlineAt: number,
  ): Promise<Map<string, string> | undefined> {
    for (;;) {
      const rows = await this.database
        .execute<{ id: string; status: string }>(
          sql`select id::text as id, status from operation where id = any(${`{${ids.join(',')}}`}::uuid[])`,
        )
        .catch(() => undefined);
      if (rows?.every((r) => TERMINAL.has(r.status))) {
        return new Map(rows.map((r) => [r.id, r.status]));
      }
      if (Date.now() > deadlineAt) return undefined;
      await pause(200);
    }
  }

  private async outputsOf(ids: string[]): Promise<PhysicalCopyRecord[]> {
    const rows = await this.database.execute(sql`
      select c.* from operation_output o join physical_copy c on c.id = o.physical_copy_id
      where o.operation_id = any(${`{${ids.join(',')}}`}::uuid[])`);
    return rows.map(toCopyRecord);
  }
}
