import { readFileSync } from 'node:fs';

/**
 * The network interfaces in a `/proc/net/dev` text: those of the reading process's network
 * namespace (`/sys/class/net` may list the host's even inside `unshare -n`).
 */
export function networkInterfaces(procNetDev: string): string[] {
  return procNetDev
    .split('\n')
    .slice(2)
    .map((line) => line.split(':')[0]?.trim() ?? '')
    .filter((name) => name !== '');
}

/**
 * Throws unless this process's network namespace has no interface but loopback: restate-server
 * calls an outside release feed at every start, with no setting that turns it off, so the peers
 * bench never starts it where any other network is reachable.
 *
 * @example
 * ```ts
 * assertLoopbackOnly(); // inside `unshare -n`: passes; on the host: throws
 * ```
 */
export function assertLoopbackOnly(procNetDev = readFileSync('/proc/net/dev', 'utf8')): void {
  const found = networkInterfaces(procNetDev);
  if (found.length !== 1 || found[0] !== 'lo') {
    throw new Error(
      `restate-server must run in a network namespace with only loopback (found ${found.join(', ') || 'none'}): start it through bench/peers/restateRun.ts (unshare -n, as root)`,
    );
  }
}
