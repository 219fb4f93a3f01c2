import {
  chmodSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

/**
 * Where handed-out ports are marked, one file per port holding the owner's process id. A port
 * free when asked is free only until something binds it: two processes (two test files, a drill
 * and a bench) that each asked and then started a server on the answer could start two servers on
 * one port. A nats-server whose cluster port was taken listens for clients first and then exits,
 * so the clash showed as a cluster that never formed, not as a server that failed to start. A fixed
 * folder, not the temporary folder of the environment: a bench child runs with a `TMPDIR` of its
 * own and must still see the marks of the test that started it.
 */
export const PORT_MARKS = '/tmp/opstate-ports';

/** The ports this process has marked, unmarked when it exits. */
const mine = new Set<number>();
let unmarkOnExit = false;

/**
 * A free TCP port on 127.0.0.1 that no other process using this function holds: marked as this
 * process's until it exits, so each call gives a different port, and a port handed to another
 * live process is never given again (a mark left by a dead process is cleared and skipped).
 */
export async function freePort(): Promise<number> {
  // Below the kernel's ephemeral range (32768–60999 by default): a port from that range, free
  // when asked, may be taken as the local port of some outgoing connection before the server
  // binds it (seen on a busy machine, where a private nats-server never came up).
  for (let tries = 0; tries < 200; tries++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (markPort(port) && (await canListen(port))) return port;
  }
  throw new Error(`no free port in 20000–31999 after 200 tries (marks in ${PORT_MARKS})`);
}

/**
 * Marks `port` as this process's; false when it is (or was just) another's or already ours.
 * Exported for its tests; {@link freePort} is what a caller wants.
 */
export function markPort(port: number): boolean {
  if (mine.has(port)) return false;
  // Shared by every user, as /tmp is: world-writable with the sticky bit.
  if (mkdirSync(PORT_MARKS, { recursive: true }) !== undefined) chmodSync(PORT_MARKS, 0o1777);
  if (!swept) sweepDeadMarks();
  const file = join(PORT_MARKS, String(port));
  // Written whole under a name of this process's, then linked into place (a link fails if the
  // mark exists): no other process ever reads a mark still empty and takes its owner for dead.
  const draft = join(PORT_MARKS, `.${port}.${process.pid}`);
  try {
    writeFileSync(draft, String(process.pid));
    linkSync(draft, file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Marks that cannot be written (a read-only or foreign folder): the port is only checked.
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') {
      mine.add(port);
      return true;
    }
    if (code !== 'EEXIST') throw err;
    // Another process's mark: left alone while it lives. A dead owner's mark is cleared, and the
    // port still skipped this time, so two processes clearing the same mark cannot both take it.
    if (!alive(ownerOf(file))) unlinkQuietly(file);
    return false;
  } finally {
    unlinkQuietly(draft);
  }
  mine.add(port);
  if (!unmarkOnExit) {
    unmarkOnExit = true;
    process.once('exit', () => {
      for (const p of mine) unlinkQuietly(join(PORT_MARKS, String(p)));
    });
  }
  return true;
}

let swept = false;

/**
 * Clears the marks of processes that are gone, once per process: a process killed by a signal
 * (a test worker the runner stops, a drill's child) never runs its exit handler, and its marks
 * would otherwise stay until another process happened to draw the same port.
 */
function sweepDeadMarks(): void {
  swept = true;
  let names: string[];
  try {
    names = readdirSync(PORT_MARKS);
  } catch {
    return;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const file = join(PORT_MARKS, name);
    if (!alive(ownerOf(file))) unlinkQuietly(file);
  }
}

function ownerOf(file: string): number {
  try {
    return Number(readFileSync(file, 'utf8'));
  } catch {
    return Number.NaN;
  }
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process lives under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

/** Whether a server can listen on `port` of 127.0.0.1 now. */
const canListen = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
