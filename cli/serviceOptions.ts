import type { Command as Program } from 'commander';

/** The help text of `--insecure-nats`, the same on every command that connects to NATS. */
export const INSECURE_NATS_HELP =
  'run on a NATS that accepts clients without credentials (development only; as OPSTATE_NATS_INSECURE=1)';

/**
 * Adds the options of every long-running service command (`worker`, `control-plane`): its metrics
 * server's port and address, and `--insecure-nats`.
 *
 * @example
 * ```ts
 * withServiceOptions(program.command('worker')).option('--kinds <kinds>');
 * ```
 */
export function withServiceOptions(command: Program): Program {
  return command
    .option('--metrics-port <port>', 'serve /metrics, /healthz and /readyz on this port (0: any)')
    .option(
      '--metrics-host <address>',
      'the address the metrics server listens on (default 127.0.0.1; 0.0.0.0: every interface)',
    )
    .option('--insecure-nats', INSECURE_NATS_HELP);
}
