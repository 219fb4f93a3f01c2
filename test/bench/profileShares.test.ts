import { describe, expect, it } from 'vitest';
import { type CpuProfile, profileShares } from '../../bench/lib/profileShares.ts';

/** A script URL in this repository, as V8 names it. */
const inRepo = (path: string) => new URL(`../../${path}`, import.meta.url).href;

/** A profile of the given leaf frames, each under its own stack (outermost first), sampled `ms` each. */
function profileOf(
  leaves: readonly { stack: readonly [string, string][]; ms: number }[],
): CpuProfile {
  const nodes: {
    id: number;
    callFrame: { functionName: string; url: string };
    children: number[];
  }[] = [{ id: 1, callFrame: { functionName: '(root)', url: '' }, children: [] }];
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  for (const leaf of leaves) {
    let parent = nodes[0] as (typeof nodes)[number];
    for (const [functionName, url] of leaf.stack) {
      const node = { id: nodes.length + 1, callFrame: { functionName, url }, children: [] };
      nodes.push(node);
      parent.children.push(node.id);
      parent = node;
    }
    samples.push(parent.id);
    timeDeltas.push(leaf.ms * 1000);
  }
  return { nodes, samples, timeDeltas };
}

describe('the e2e bench’s CPU profile shares', () => {
  it('names socket writes by the client on the stack, and leaves idle time and the profiler out', () => {
    const pgWrite: [string, string][] = [
      ['nextWrite', inRepo('persistence/vendor/postgres/connection.js')],
      ['Socket._write', 'node:net'],
      ['writeBuffer', ''],
    ];
    const natsWrite: [string, string][] = [
      ['send', inRepo('node_modules/@nats-io/transport-node/lib/node_transport.js')],
      ['writeBuffer', ''],
    ];
    const shares = profileShares(
      profileOf([
        { stack: pgWrite, ms: 30 },
        { stack: natsWrite, ms: 10 },
        { stack: [['(garbage collector)', '']], ms: 20 },
        { stack: [['planTransition', inRepo('persistence/planTransition.ts')]], ms: 25 },
        { stack: [['decide', inRepo('dist/machines/decide.js')]], ms: 10 },
        { stack: [['parse', inRepo('node_modules/postgres/src/types.js')]], ms: 5 },
        { stack: [['(idle)', '']], ms: 400 },
        {
          stack: [
            ['startCpuProfile', inRepo('bench/e2e.ts')],
            ['dispatch', ''],
          ],
          ms: 7,
        },
      ]),
    );
    expect(shares.busyMs).toBe(100);
    expect(shares.idleMs).toBe(400);
    expect(shares.profilerMs).toBe(7);
    expect(shares.parts).toEqual([
      { part: 'socket writes: Postgres', ms: 30, share: 0.3 },
      { part: 'opstate: persistence', ms: 25, share: 0.25 },
      { part: 'garbage collection', ms: 20, share: 0.2 },
      { part: 'socket writes: NATS', ms: 10, share: 0.1 },
      { part: 'opstate: machines', ms: 10, share: 0.1 },
      { part: 'postgres.js', ms: 5, share: 0.05 },
    ]);
  });

  it('names a folder only for a script under this repository, its sources or its dist/', () => {
    const shares = profileShares(
      profileOf([
        { stack: [['run', inRepo('dist/worker/Worker.js')]], ms: 4 },
        { stack: [['run', inRepo('worker/Worker.ts')]], ms: 4 },
        { stack: [['main', inRepo('index.ts')]], ms: 1 },
        { stack: [['main', 'file:///elsewhere/worker/main.js']], ms: 1 },
      ]),
    );
    expect(shares.parts.map((p) => [p.part, p.ms])).toEqual([
      ['opstate: worker', 8],
      ['native and other', 2],
    ]);
  });

  it('an empty profile has no busy time and no parts', () => {
    expect(profileShares({ nodes: [], samples: [], timeDeltas: [] })).toEqual({
      busyMs: 0,
      idleMs: 0,
      profilerMs: 0,
      parts: [],
    });
  });
});
