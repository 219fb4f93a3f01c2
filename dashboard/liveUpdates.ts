import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../actors/Logger.ts';

/**
 * Server-sent events for open pages: one poll of `changeMark` for the whole server (only while a
 * page is open), and a `change` event to every page when it moves; the page then fetches its
 * content again.
 *
 * @example
 * ```ts
 * const live = createLiveUpdates({ changeMark: data.changeMark, pollMs: 1000, logger });
 * live.attach(req, res); // GET /events
 * live.close();
 * ```
 */
export function createLiveUpdates(options: {
  readonly changeMark: () => Promise<string>;
  readonly pollMs: number;
  readonly logger: Logger;
}) {
  const clients = new Set<ServerResponse>();
  let lastMark = '';
  let polling: NodeJS.Timeout | undefined;
  const poll = async () => {
    try {
      const mark = await options.changeMark();
      if (mark !== lastMark) {
        lastMark = mark;
        for (const c of clients) c.write(`event: change\ndata: ${JSON.stringify(mark)}\n\n`);
      }
    } catch (err) {
      options.logger.log('WARNING', 'dashboard could not look for changes', {
        error: err instanceof Error ? err.message : String(err),
      });
    }
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
      polling ??= setInterval(() => void poll(), options.pollMs);
      req.on('close', () => {
        clients.delete(res);
        if (clients.size === 0 && polling !== undefined) {
          clearInterval(polling);
          polling = undefined;
        }
      });
    },
    close(): void {
      if (polling !== undefined) clearInterval(polling);
      polling = undefined;
      for (const c of clients) c.end();
      clients.clear();
    },
  };
}
