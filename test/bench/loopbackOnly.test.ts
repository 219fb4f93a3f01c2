import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { assertLoopbackOnly, networkInterfaces } from '../../bench/peers/loopbackOnly.ts';

const HEADER = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
`;
const row = (name: string) =>
  `${name.padStart(6)}: 3217661341 3625599    0    0    0     0          0         0 3217661341 3625599    0    0    0     0       0          0\n`;

describe('the Restate peer starts its server only where nothing but loopback is reachable', () => {
  it('reads the interfaces of /proc/net/dev', () => {
    expect(networkInterfaces(HEADER + row('lo') + row('eth0') + row('ifb0'))).toEqual([
      'lo',
      'eth0',
      'ifb0',
    ]);
  });

  it('passes with loopback alone', () => {
    expect(() => assertLoopbackOnly(HEADER + row('lo'))).not.toThrow();
  });

  it('refuses any other interface, or none', () => {
    expect(() => assertLoopbackOnly(HEADER + row('lo') + row('eth0'))).toThrow(
      /only loopback \(found lo, eth0\).*unshare -n/,
    );
    expect(() => assertLoopbackOnly(HEADER + row('eth0'))).toThrow(/found eth0/);
    expect(() => assertLoopbackOnly(HEADER)).toThrow(/found none/);
  });

  it('passes in a network namespace of its own (unshare -n, as the bench runs it)', () => {
    const guard = fileURLToPath(new URL('../../bench/peers/loopbackOnly.ts', import.meta.url));
    const script = `import(${JSON.stringify(guard)}).then((m) => { m.assertLoopbackOnly(); console.log('loopback only'); })`;
    const r = spawnSync(
      'unshare',
      [
        '-n',
        'sh',
        '-c',
        'ip link set lo up && exec "$0" --import tsx -e "$1"',
        process.execPath,
        script,
      ],
      { encoding: 'utf8' },
    );
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('loopback only');
  });
});
