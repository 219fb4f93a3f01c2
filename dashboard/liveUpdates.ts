import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Loop, startLoop } from '../loops/Loop.ts';
import type { Clock } from '../machines/Clock.ts';
import type { Logger } from '../observe/Logger.ts';

/**
 * Server-sent events for open pages: one poll of `changeMark` for the whole server (only while a
 * page is open), and a `change` event to every page when it moves; the page then fetches its
 * content again.
 *
 * @example
 * ```ts
 * const live = createLiveUpdates({ changeMark: data.changeMark, pollMs: 1000, logger });
 * live.attach(req, res); // GET /events
 * await live.close();
 * ```
 */
export function createLiveUpdates(options: {
  readonly changeMark: () => Promise<string>;
  readonly pollMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
}) {
  const clients = new Set<ServerResponse>();
  let lastMark = '';
  let polling: Loop | undefined;
  const poll = async () => {
    const mark = await options.changeMark();
    if (mark !== lastMark) {
      lastMark = mark;
      for (const c of clients) c.write(`event: change\ndata: ${JSON.stringify(mark)}\n\n`);
    }
    return false;
  };
  return {
    attach(req: IncomingMessage, res: ServerResponse): void {
      res.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-store',
        connection: 'keep-alive',
      });
      res.write(': connected\n\n');
      clients.add(res);
      polling ??= startLoop({
        name: 'dashboard live updates',
        intervalMs: options.pollMs,
        clock: options.clock,
        logger: options.logger,
        pass: poll,
      });
      req.on('close', () => {
        clients.delete(res);
        if (clients.size === 0 && polling !== undefined) {
          void polling.stop();
          polling = undefined;
        }
      });
    },
    async close(): Promise<void> {
      const loop = polling;
      polling = undefined;
      for (const c of clients) c.end();
      clients.clear();
      await loop?.stop();
    },
  };
}
