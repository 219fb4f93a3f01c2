/**
 * `startDashboard` as the `opstate` entry publishes it: the same function and options, with the
 * database typed as the runtime hands it on (`runtime.database`), so the published types carry
 * no database types.
 */
import type { AttentionTiming } from '../machines/attention.ts';
import type { Clock } from '../machines/Clock.ts';
import type { Logger } from '../observe/Logger.ts';
import type { DatabaseHandle, Runtime } from '../runtime/PublicRuntime.ts';
import type { Heartbeats } from '../transport/Transport.ts';
import {
  type DashboardOptions as InternalDashboardOptions,
  startDashboard as startInternalDashboard,
} from './startDashboard.ts';

export interface DashboardOptions {
  /** The runtime's database (`runtime.database`). */
  readonly database: DatabaseHandle;
  /** The timers the attention rules measure against (the runtime's). */
  readonly timing: AttentionTiming;
  /** Where heartbeats are read; null when they are not visible from this process. */
  readonly heartbeats: Heartbeats | null;
  /**
   * Sends an operator event the way `opstate retry|reset|cancel` does (`runtime.command`); null
   * makes the dashboard read-only (actions answer 403).
   */
  readonly command: Runtime['command'] | null;
  /** Port to listen on (0: any free port; default 8090). */
  readonly port?: number;
  /** Interface to listen on (default 127.0.0.1: an operator's own machine). */
  readonly host?: string;
  readonly clock?: Clock;
  readonly logger: Logger;
  /** How often to look for changes to push to open pages (default 1000 ms). */
  readonly pollMs?: number;
}

/** A running dashboard. */
export interface Dashboard {
  /** `http://host:port`. */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/**
 * The operator's web dashboard on a runtime's database: the overview, every operation searched
 * and paged, a page per operation, the workers and queues, the copies and deletions, live
 * updates, and, only when given `command`, the operator actions (docs/dashboard.md).
 *
 * @example
 * ```ts
 * const dashboard = await startDashboard({ database: runtime.database, timing: runtime.timing,
 *   heartbeats: runtime.transport.heartbeats, command: runtime.command, logger: runtime.logger });
 * console.log(dashboard.url);
 * ```
 */
export function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  // The only handle the public API gives out is a runtime's own database, which is the whole
  // connection the dashboard reads through.
  return startInternalDashboard(options as unknown as InternalDashboardOptions);
}
