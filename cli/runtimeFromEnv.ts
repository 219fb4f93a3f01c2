import { consoleLogger } from '../actors/Logger.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../actors/Runtime.ts';
import { classifyFailure } from '../machines/classifyFailure.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/**
 * Timer overrides from `OPSTATE_TIMING`, a JSON object of milliseconds, e.g.
 * `{"heartbeatIntervalMs":1000,"heartbeatTimeoutMs":5000,"reconcilerFloorMs":20000,"ackWaitMs":30000}`.
 */
export function timingFromEnv(): Partial<RuntimeTiming> {
  const raw = process.env.OPSTATE_TIMING;
  if (raw === undefined || raw === '') return {};
  try {
    const parsed: unknown = JSON.parse(raw);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new Error('not an object');
    return parsed as Partial<RuntimeTiming>;
  } catch (err) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `OPSTATE_TIMING must be a JSON object of timer names to milliseconds (${err instanceof Error ? err.message : String(err)})`,
    );
  }
}

/**
 * The runtime the CLI runs on: `DATABASE_URL`, `NATS_URL`, `OPSTATE_PREFIX`, `OPSTATE_TIMING`.
 * Long-running commands (`control-plane`, `worker`) pass `waitForServers`: they start while
 * Postgres or NATS is down and wait for them.
 */
export function runtimeFromEnv(options: { waitForServers?: boolean } = {}): Promise<Runtime> {
  return createRuntime({ timing: timingFromEnv(), ...options });
}

/** Resolves on the first SIGINT or SIGTERM. */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (signal: NodeJS.Signals) => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
      resolve(signal);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}

/**
 * Keeps a long-running process up when a connection error surfaces outside any request (a
 * socket reset between queries, a driver callback after a restart): it is logged — an outage as a
 * WARNING, anything else as an ERROR naming it a bug — instead of crashing the process. The
 * runtime recovers connections on its own.
 */
export function surviveStrayRejections(): void {
  process.on('unhandledRejection', (reason) => {
    const outage = classifyFailure(reason) === 'outage';
    consoleLogger.log(
      outage ? 'WARNING' : 'ERROR',
      outage
        ? 'connection error outside any request; the runtime reconnects on its own'
        : 'unhandled rejection (a bug; please report it); the process keeps running',
      { error: reason instanceof Error ? reason.message : String(reason) },
    );
  });
}
