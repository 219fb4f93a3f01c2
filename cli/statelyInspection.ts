import { connect } from 'node:net';
import { createWebSocketInspector } from '@statelyai/inspect';
import type { Command as Program } from 'commander';
import { systemClock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { Logger } from '../observe/Logger.ts';
import type { Executor } from '../persistence/openDatabase.ts';
import { startInspectionStream } from '../runtime/InspectionStream.ts';
import { type Io, UsageError } from './Command.ts';
import { type InspectorRelay, startInspectorRelay } from './inspectorRelay.ts';
import { portInUse } from './portInUse.ts';

/** Where the Stately inspector's events go, as `--inspect-port` / `--inspect-url` give it. */
export interface InspectTarget {
  'inspect-port'?: string | undefined;
  'inspect-url'?: string | undefined;
}

/**
 * Adds the options of every command that streams to the Stately inspector.
 *
 * @example
 * ```ts
 * withInspectOptions(program.command('demo').option('--inspect'));
 * ```
 */
export function withInspectOptions(command: Program): Program {
  return command
    .option(
      '--inspect-port <port>',
      'the port of the inspector relay this process runs (default 8080)',
    )
    .option('--inspect-url <url>', 'a relay already running, ws://host:port');
}

/** The inspector target of parsed options (`--inspect-port`, `--inspect-url`). */
export function inspectTargetOf(options: {
  inspectPort?: string;
  inspectUrl?: string;
}): InspectTarget {
  return { 'inspect-port': options.inspectPort, 'inspect-url': options.inspectUrl };
}

/**
 * The inspector a long-running command (`control-plane`, `demo`) streams to when `--inspect` is
 * given, else undefined; `--inspect-port`/`--inspect-url` without `--inspect` is a usage error.
 */
export function requestedInspection(options: {
  inspect?: boolean;
  inspectPort?: string;
  inspectUrl?: string;
}): InspectTarget | undefined {
  if (options.inspect === true) return inspectTargetOf(options);
  if ((options.inspectPort ?? options.inspectUrl) !== undefined) {
    throw new UsageError('--inspect-port and --inspect-url go with --inspect');
  }
  return undefined;
}

/** A WebSocket inspector connected to a relay, and how to let go of both. */
export interface StatelyInspection {
  readonly inspector: ReturnType<typeof createWebSocketInspector>;
  /** The page to open in a browser, when this process runs the relay. */
  readonly page: string | null;
  /** Waits (at most `timeoutMs`) until what was sent has gone out, then disconnects. */
  close(timeoutMs?: number): Promise<void>;
}

const pause = (ms: number) => systemClock.sleep(ms);

/**
 * Whether something accepts TCP connections at the URL's host and port, asking again until
 * `timeoutMs` has passed (0: ask once).
 */
async function reachable(url: string, timeoutMs: number): Promise<boolean> {
  const { hostname, port, protocol } = new URL(url);
  const deadline = systemClock.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect({
        host: hostname,
        port: Number(port || (protocol === 'wss:' ? 443 : 80)),
      });
      socket.once('connect', () => {
        socket.end();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return true;
    if (systemClock.now() > deadline) return false;
    await pause(50);
  }
}

/**
 * Connects a `@statelyai/inspect` WebSocket inspector to a relay: with `--inspect-url`, the relay
 * there; otherwise a relay this process runs on 127.0.0.1:`--inspect-port` (`startInspectorRelay`),
 * whose page embeds the Stately inspector (the page loads it from stately.ai, so the browser
 * needs internet; the events stay between this process and the browser). Events sent before the
 * connection opens are held, up to `maxDeferredEvents`.
 *
 * @example
 * ```ts
 * const inspection = openStatelyInspection({ 'inspect-port': '8080' }, io);
 * inspection.inspector.event('op-1', { type: 'SCHEDULE' });
 * await inspection.close();
 * ```
 */
export async function openStatelyInspection(
  values: { 'inspect-port'?: string | undefined; 'inspect-url'?: string | undefined },
  io: Io,
  maxDeferredEvents = 10_000,
): Promise<StatelyInspection> {
  let url = values['inspect-url'];
  let relay: InspectorRelay | null = null;
  let page: string | null = null;
  if (url !== undefined) {
    if (values['inspect-port'] !== undefined) {
      throw new UsageError(
        'give --inspect-port (run a relay) or --inspect-url (use one), not both',
      );
    }
    if (!/^wss?:\/\/[^\s]+$/.test(url)) {
      throw new UsageError(`--inspect-url must be a ws:// or wss:// URL, got '${url}'`);
    }
  } else {
    const port = Number(values['inspect-port'] ?? '8080');
    if (!Number.isInteger(port) || port < 0 || port > 65_535) {
      throw new UsageError(`--inspect-port must be a port number, got '${values['inspect-port']}'`);
    }
    relay = await startInspectorRelay({ port }).catch((err: unknown) => {
      throw portInUse(err, {
        port,
        wanted: 'the Stately inspector relay',
        fix: 'pass --inspect-port with another port, or --inspect-url to use a relay already running',
      });
    });
    url = relay.url;
    page = relay.page;
    io.out(
      `Stately inspector: open ${page} in a browser (the inspector UI itself loads from stately.ai)`,
    );
  }
  // The inspector retries a refused connection only every 5 s, and without end: make sure the
  // relay is there first, so that it connects at once and a wrong URL fails here.
  if (!(await reachable(url, relay === null ? 0 : 5_000))) {
    await relay?.stop();
    throw new OpstateError(
      OpstateErrorCode.TRANSPORT,
      `nothing accepts connections at ${url}; start an inspector relay there, or leave out --inspect-url to run one here`,
      { retryable: true },
    );
  }
  const inspector = createWebSocketInspector({ url, maxDeferredEvents });
  const adapter = inspector.adapter as unknown as {
    status: string;
    ws?: { readyState: number };
  };
  return {
    inspector,
    page,
    async close(timeoutMs = 5_000) {
      // The adapter sends what it held as soon as it connects; a close after that goes out
      // behind the events already written to the socket.
      const deadline = systemClock.now() + timeoutMs;
      while (adapter.status !== 'open' && systemClock.now() < deadline) await pause(20);
      const connected = adapter.status === 'open';
      inspector.stop();
      // The close handshake completes after the relay has read (and forwarded) every event
      // sent before it: only then may the relay go.
      while (connected && adapter.ws?.readyState !== 3 && systemClock.now() < deadline + 1_000) {
        await pause(10);
      }
      await relay?.stop();
      if (!connected) {
        throw new OpstateError(
          OpstateErrorCode.TRANSPORT,
          `could not reach the inspector relay at ${url} within ${timeoutMs} ms; start one (opstate inspect <id> --stately runs its own) or check --inspect-url`,
          { retryable: true },
        );
      }
    },
  };
}

/**
 * `--inspect` of `opstate control-plane` and `opstate demo`: opens the relay and the inspector
 * at once (so the page's address is printed before anything else happens), then `follow` streams
 * every operation's new transitions from a database until `stop`, which sends what was committed
 * by then: call it before the database closes.
 *
 * @example
 * ```ts
 * const stately = await openStatelyStream(values, io, logger);
 * stately.follow(runtime.database);
 * await stately.stop();
 * ```
 */
export async function openStatelyStream(
  values: { 'inspect-port'?: string | undefined; 'inspect-url'?: string | undefined },
  io: Io,
  logger: Logger,
): Promise<{ follow(database: Executor): void; stop(): Promise<void> }> {
  const inspection = await openStatelyInspection(values, io);
  let stream: ReturnType<typeof startInspectionStream> | undefined;
  let stopped: Promise<void> | undefined;
  return {
    follow(database) {
      stream ??= startInspectionStream({
        database,
        inspector: inspection.inspector,
        clock: systemClock,
        logger,
      });
    },
    stop() {
      stopped ??= (async () => {
        try {
          await stream?.drain();
        } finally {
          await inspection.close();
        }
      })();
      return stopped;
    },
  };
}
