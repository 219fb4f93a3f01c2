import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { node22Binary } from './node22.ts';
import { packageVersion } from './packageVersion.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** What bench/peers/restateDriver.ts measured, as it printed it. */
export interface RestateResult {
  readonly jobs: number;
  readonly seconds: number;
  /** The Node version the service and the driver ran on. */
  readonly node: string;
  /** Queries of the server's invocation table the timed drain made to see it done. */
  readonly completion_polls: number;
  /** What one such query cost the server, measured after the drain. */
  readonly restate_server_cpu_ms_per_poll: number;
  readonly cpu_ms_per_invocation: {
    readonly restate_server: number;
    readonly service: number;
    readonly driver: number;
  };
}

/** The installed versions of the Restate server and SDK. */
export function restateVersions(): { server: string; sdk: string } {
  return {
    server: packageVersion('@restatedev/restate-server'),
    sdk: packageVersion('@restatedev/restate-sdk'),
  };
}

/** The note of Restate's figure: what ran, on which Node, and where. */
export function restateNote(versions: { server: string; sdk: string }, node: string): string {
  return `Restate: restate-server ${versions.server} (its own RocksDB log and state, default settings, a fresh base directory) and a service on @restatedev/restate-sdk ${versions.sdk} (Node ${node}, the SDK needs Node 22) whose handler takes one no-op ctx.run step; invocations sent to the ingress (/send, 500 concurrent at a time) by a driver process on the same Node; done when the server's sys_invocation_status shows them all completed; all three processes in a network namespace of their own with only loopback up (unshare -n: the server calls an outside release feed at every start)`;
}

/**
 * Runs bench/peers/restateDriver.ts on a Node 22 binary (node22Binary) inside a
 * network namespace of its own with only loopback up (`unshare -n`, which needs root), where it
 * starts restate-server and the service, drains the invocations and prints what it measured.
 * The driver's diagnostics go to this process's stderr.
 *
 * @example
 * ```ts
 * const { seconds, jobs } = await runRestate({ OPSTATE_BENCH_PEERS_JOBS: '5000' });
 * ```
 */
export function runRestate(env: Record<string, string>): Promise<RestateResult> {
  if (process.getuid?.() !== 0) {
    throw new Error(
      'the Restate peer needs root: restate-server runs in a network namespace of its own (unshare -n) so that it reaches no network but loopback',
    );
  }
  const node = node22Binary();
  const driver = fileURLToPath(new URL('./restateDriver.ts', import.meta.url));
  const child = spawn(
    'unshare',
    ['-n', 'sh', '-c', 'ip link set lo up && exec "$0" --import tsx "$1"', node, driver],
    { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      const last = out.trim().split('\n').at(-1) ?? '';
      if (code !== 0 || !last.startsWith('{')) {
        reject(new Error(`restate: the driver exited ${code} without a result`));
        return;
      }
      resolve(JSON.parse(last) as RestateResult);
    });
  });
}
