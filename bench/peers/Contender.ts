/**
 * What the peers bench drives for each system it times in its own process: set up on a database
 * of its own, create jobs, say whether any is left, tear down. See bench/peers.ts.
 */

/** Jobs created per call (or per batch of concurrent calls), for every system. */
export const CREATE_BATCH = 500;
/** How often every system's own tables are polled for a job still to run. */
export const POLL_MS = 20;

/** A system under test: set up on its database, drain `n` jobs, tear down. */
export interface Contender {
  readonly name: string;
  readonly unit: string;
  readonly note: string;
  /** Whether it uses nats-server (opstate only): otherwise that shared server's CPU is left out. */
  readonly usesNats?: boolean;
  /** Extra fields printed on the figure's line (the Node version, a polling interval). */
  readonly fields?: Readonly<Record<string, unknown>>;
  setUp(url: string): Promise<void>;
  /** Creates `n` jobs in batches of CREATE_BATCH. */
  create(n: number): Promise<void>;
  /** Whether any job is still waiting or running (one cheap query). */
  busy(): Promise<boolean>;
  /** Throws unless at least `n` jobs were completed so far. */
  checkCompleted(n: number): Promise<void>;
  tearDown(): Promise<void>;
}
