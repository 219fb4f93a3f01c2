/**
 * Kills this process with SIGKILL at once, as a crash would: no `finally`, no exit handler, no
 * last write. Crash drills use it as a worker fault point.
 *
 * @example
 * ```ts
 * export const faults: WorkerFaults = { beforeFirstHeartbeat: crashHere };
 * ```
 */
export function crashHere(): never {
  process.kill(process.pid, 'SIGKILL');
  throw new Error('SIGKILL did not stop the process');
}
