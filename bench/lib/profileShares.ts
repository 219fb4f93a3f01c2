/**
 * Where a V8 CPU profile's busy time went, by what the code does rather than by function: socket
 * writes to Postgres and to NATS (the native write with the driver that made it on the stack),
 * garbage collection, the Postgres and NATS clients, XState, drizzle, each of opstate's folders,
 * Node's own modules, and the rest. Idle time and the profiler's own work are left out of the
 * shares and reported apart. Reads the `.cpuprofile` that `OPSTATE_BENCH_CPU_PROFILE` writes.
 */

/** The parts of a `.cpuprofile` this reads (Chrome DevTools' format, as `Profiler.stop` returns it). */
export interface CpuProfile {
  readonly nodes: readonly {
    readonly id: number;
    readonly callFrame: { readonly functionName: string; readonly url: string };
    readonly children?: readonly number[];
  }[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

export interface ProfileShares {
  /** Sampled time that was neither idle nor the profiler's own, in ms. */
  readonly busyMs: number;
  readonly idleMs: number;
  /** The profiler's own work (its `dispatch` under the bench's start call), in ms. */
  readonly profilerMs: number;
  /** Each part's share of the busy time, largest first. */
  readonly parts: readonly { readonly part: string; readonly ms: number; readonly share: number }[];
}

const SOCKET_WRITES = new Set(['writeBuffer', 'writev', 'writeUtf8String', 'writeLatin1String']);

/** The repository's root, as the profile's script URLs name it (sources, or the built `dist/`). */
const ROOT = new URL('../../', import.meta.url).href;

/** The repository folder a script URL is in (`persistence`, `worker`, …), or undefined. */
function opstateFolder(url: string): string | undefined {
  if (!url.startsWith(ROOT) || url.includes('/node_modules/')) return undefined;
  const parts = url
    .slice(ROOT.length)
    .replace(/^dist\//, '')
    .split('/');
  return parts.length > 1 ? parts[0] : undefined;
}

function partOf(
  frame: { functionName: string; url: string },
  stackUrls: readonly string[],
): string {
  const { functionName: fn, url } = frame;
  if (SOCKET_WRITES.has(fn) && url === '') {
    if (stackUrls.some((u) => u.includes('/@nats-io/'))) return 'socket writes: NATS';
    if (stackUrls.some((u) => /\/postgres\/(.*\/)?connection\.js$/.test(u)))
      return 'socket writes: Postgres';
    return 'socket writes: other';
  }
  if (fn === '(garbage collector)') return 'garbage collection';
  if (/\/vendor\/postgres\/|\/node_modules\/postgres\//.test(url)) return 'postgres.js';
  if (url.includes('/node_modules/@nats-io/')) return 'NATS client';
  if (/\/node_modules\/(xstate|@xstate)\//.test(url)) return 'XState';
  if (url.includes('/node_modules/drizzle-orm/')) return 'drizzle';
  const folder = opstateFolder(url);
  if (folder !== undefined) return `opstate: ${folder}`;
  if (url.startsWith('node:')) return 'Node internals';
  if (url.includes('/node_modules/')) return 'other packages';
  return 'native and other';
}

/**
 * Splits `profile`'s sampled time into parts (see the module comment).
 *
 * @example
 * ```ts
 * const shares = profileShares(JSON.parse(readFileSync('run.cpuprofile', 'utf8')));
 * shares.parts[0]; // { part: 'garbage collection', ms: 571, share: 0.2 }
 * ```
 */
export function profileShares(profile: CpuProfile): ProfileShares {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  const timeOf = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    timeOf.set(id, (timeOf.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  let idle = 0;
  let profiler = 0;
  const parts = new Map<string, number>();
  for (const [id, micros] of timeOf) {
    const node = byId.get(id);
    if (node === undefined) continue;
    const stack: { functionName: string; url: string }[] = [];
    for (let p = parentOf.get(id); p !== undefined; p = parentOf.get(p)) {
      const frame = byId.get(p)?.callFrame;
      if (frame !== undefined) stack.push(frame);
    }
    const { functionName } = node.callFrame;
    if (functionName === '(idle)') {
      idle += micros;
    } else if (
      functionName === 'dispatch' &&
      stack.some((f) => f.functionName === 'startCpuProfile')
    ) {
      profiler += micros;
    } else {
      const part = partOf(
        node.callFrame,
        stack.map((f) => f.url),
      );
      parts.set(part, (parts.get(part) ?? 0) + micros);
    }
  }
  const busy = [...parts.values()].reduce((a, b) => a + b, 0);
  return {
    busyMs: busy / 1000,
    idleMs: idle / 1000,
    profilerMs: profiler / 1000,
    parts: [...parts]
      .sort((a, b) => b[1] - a[1])
      .map(([part, micros]) => ({
        part,
        ms: micros / 1000,
        share: busy === 0 ? 0 : micros / busy,
      })),
  };
}
