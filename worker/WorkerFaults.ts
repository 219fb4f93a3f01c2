import type { Delivery } from '../transport/Transport.ts';

/**
 * Where a crash drill may stop a worker. Each runs synchronously at its point; a drill makes it
 * kill the process (`process.kill(process.pid, 'SIGKILL')`). Set with `withFaults` from
 * `opstate/testing`, never in normal operation.
 */
export interface WorkerFaults {
  /** After a dispatch was received and covered by a heartbeat, before START is written. */
  beforeStart?(message: Delivery['message']): void;
  /** After START was committed, before the handler runs. */
  afterStart?(message: Delivery['message']): void;
}
