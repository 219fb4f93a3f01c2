import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { systemClock } from '../machines/Clock.ts';

/** Where the Stately inspector UI is loaded from (by the browser, not by opstate). */
const INSPECTOR_UI = 'https://stately.ai/inspect';

/**
 * The page a browser opens: it embeds the Stately inspector and hands it every event the relay
 * forwards, holding them until the inspector says it is ready.
 */
function bridgePage(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>opstate · Stately inspector</title>
<style>html,body{margin:0;height:100%}iframe{border:0;width:100%;height:100%}</style></head>
<body><iframe id="inspector" src="${INSPECTOR_UI}"></iframe>
<script>
  const frame = document.getElementById('inspector');
  const held = [];
  let ready = false;
  addEventListener('message', (m) => {
    if (m.data && m.data.type === '@statelyai.connected') {
      ready = true;
      for (const e of held.splice(0)) frame.contentWindow.postMessage(e, '*');
    }
  });
  const socket = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host);
  socket.onmessage = (m) => {
    const event = JSON.parse(m.data);
    if (ready) frame.contentWindow.postMessage(event, '*'); else held.push(event);
  };
</script></body></html>`;
}

/** A running relay. */
export interface InspectorRelay {
  /** `ws://host:port`: where an inspector sends and a receiver listens. */
  readonly url: string;
  /** `http://host:port`: the page to open in a browser. */
  readonly page: string;
  /** Disconnects every client (browsers included) and stops listening. */
  stop(): Promise<void>;
}

/**
 * A relay between `@statelyai/inspect`'s WebSocket inspector and the browsers that show the
 * Stately inspector: every message one client sends goes to every other client, and the last
 * `keep` messages go to a client that connects late (so a browser opened after the start still
 * sees each operation from its registration). It listens on `host` (default 127.0.0.1) and
 * closes every connection when stopped, so a process never waits on an open browser tab.
 *
 * @example
 * ```ts
 * const relay = await startInspectorRelay({ port: 8080 });
 * const inspector = createWebSocketInspector({ url: relay.url });
 * await relay.stop();
 * ```
 */
export async function startInspectorRelay(options: {
  readonly port: number;
  readonly host?: string;
  readonly keep?: number;
}): Promise<InspectorRelay> {
  const host = options.host ?? '127.0.0.1';
  const keep = options.keep ?? 10_000;
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(bridgePage());
  });
  const wss = new WebSocketServer({ server });
  const kept: string[] = [];
  wss.on('connection', (socket) => {
    for (const message of kept) socket.send(message);
    socket.on('message', (data) => {
      const message = String(data);
      kept.push(message);
      if (kept.length > keep) kept.splice(0, kept.length - keep);
      for (const client of wss.clients) {
        if (client !== socket && client.readyState === WebSocket.OPEN) client.send(message);
      }
    });
  });
  // A failed listen reaches the WebSocket server too, which re-emits it: both reject.
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    wss.once('error', reject);
    server.listen(options.port, host, () => resolve());
  }).catch(async (err: unknown) => {
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    throw err;
  });
  const { port } = server.address() as AddressInfo;
  const name = host.includes(':') ? `[${host}]` : host;
  return {
    url: `ws://${name}:${port}`,
    page: `http://${name}:${port}`,
    async stop() {
      // A close handshake first (what was sent to a browser still reaches it), then whoever did
      // not answer within a second is cut off.
      const clients = [...wss.clients];
      const gone = clients.map((c) => new Promise<void>((r) => c.once('close', () => r())));
      for (const client of clients) client.close(1001, 'opstate stopped');
      await Promise.race([Promise.all(gone), systemClock.sleep(1_000)]);
      for (const client of wss.clients) client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
