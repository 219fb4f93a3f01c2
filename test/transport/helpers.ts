import { waitFor } from '../helpers/waitFor.ts';

export { waitFor };

/** An observation window (to show that something does NOT happen), never a wait for a condition. */
export function observe(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A promise with its resolver, to hold a handler until the test releases it. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => {
    open = r;
  });
  return { promise, open };
}

let counter = 0;
/** A prefix unique to this process and call, so test files and runs never share streams. */
export function uniquePrefix(tag: string): string {
  counter++;
  return `t_${tag}_${process.pid}_${counter}_${Math.random().toString(36).slice(2, 8)}`;
}

export { freePort, NatsServerProcess, reachable } from '../../chaos/privateServers.ts';
