import { CommandFailure } from './Command.ts';

/**
 * A listen that failed because the port is taken, as the one line an operator needs: the port,
 * what wanted it, and the flag that picks another. Any other error comes back as it is.
 *
 * @example
 * ```ts
 * await startDashboard({ port }).catch((err: unknown) => {
 *   throw portInUse(err, { port, wanted: 'the dashboard', fix: 'pass --port with another port' });
 * });
 * ```
 */
export function portInUse(
  err: unknown,
  at: { readonly port: number; readonly wanted: string; readonly fix: string },
): unknown {
  if ((err as { code?: unknown } | null)?.code !== 'EADDRINUSE') return err;
  return new CommandFailure(
    `port ${at.port} is already in use, so ${at.wanted} cannot listen there; ${at.fix}, or stop what holds it`,
  );
}
