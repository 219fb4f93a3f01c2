import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { escapeHtml } from '../dashboard/html.ts';
import { systemClock } from '../machines/Clock.ts';

/** Where the Stately inspector UI is loaded from (by the browser, not by opstate). */
export const INSPECTOR_UI = 'https://stately.ai/inspect';

/** How long the page waits for the inspector to say it is ready before saying why it is not. */
const INSPECTOR_READY_MS = 20_000;

/** A value as a JavaScript literal that cannot end the `<script>` it is written into. */
const scriptLiteral = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');

/**
 * The page a browser opens: it embeds the Stately inspector and hands it every event the relay
 * forwards, holding them until the inspector says it is ready. When the inspector cannot load
 * (the browser offline, the site unreachable, or no answer in time), the page says why and what
 * to do instead of showing an empty frame; without JavaScript it says that it needs it.
 */
function bridgePage(ui: string, keep: number): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>opstate · Stately inspector</title>
<style>html,body{margin:0;height:100%;font:15px/1.5 system-ui,sans-serif;color:#1d2330}
iframe{border:0;width:100%;height:100%}iframe[hidden]{display:none}
.notice{max-width:720px;margin:48px auto;padding:18px 22px;border:1px solid #d14b4b;border-radius:8px;background:#fff8f8}
.notice h1{font-size:18px;margin:0 0 8px}.notice code{font-family:ui-monospace,monospace;font-size:13px}</style></head>
<body>
<noscript><div class="notice"><h1>This page needs JavaScript</h1><p>It hands opstate's events to the Stately inspector. Allow scripts for this page, or follow an operation in a terminal with <code>opstate inspect &lt;operation-id&gt;</code>.</p></div></noscript>
<div id="unavailable" class="notice" role="alert" hidden><h1>The Stately inspector could not be loaded</h1>
<p><span id="why">It did not load.</span> The inspector's page comes from <code>${escapeHtml(ui)}</code>, so this browser must reach it (the events themselves come from opstate on this machine).</p>
<p>What to do: connect this browser to the internet, or let it reach that address through your proxy, then reload this page: opstate keeps the last ${keep.toLocaleString('en-US')} events for it (<span id="held">0</span> received and held so far). Meanwhile <code>opstate inspect &lt;operation-id&gt;</code> prints an operation's history in a terminal, and <code>opstate dashboard</code> shows every operation's path.</p></div>
<iframe id="inspector" src="${escapeHtml(ui)}"></iframe>
<script>
  const UI = ${scriptLiteral(ui)};
  const frame = document.getElementById('inspector');
  const notice = document.getElementById('unavailable');
  const held = [];
  let ready = false;
  function unavailable(why) {
    if (ready) return;
    document.getElementById('why').textContent = why;
    notice.hidden = false;
    frame.hidden = true;
  }
  if (navigator.onLine === false) unavailable('This browser is offline.');
  addEventListener('offline', () => unavailable('This browser went offline.'));
  // An iframe reports no load error; a request to the same address does.
  fetch(UI, { mode: 'no-cors', cache: 'no-store' })
    .catch(() => unavailable('This browser cannot reach ' + UI + '.'));
  window.setTimeout(() => unavailable('The inspector at ' + UI + ' did not answer within ${INSPECTOR_READY_MS / 1000} s.'), ${INSPECTOR_READY_MS});
  addEventListener('message', (m) => {
    if (m.data && m.data.type === '@statelyai.connected') {
      ready = true;
      notice.hidden = true;
      frame.hidden = false;
      for (const e of held.splice(0)) frame.contentWindow.postMessage(e, '*');
    }
  });
  const socket = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host);
  socket.onmessage = (m) => {
    const event = JSON.parse(m.data);
    if (ready) frame.contentWindow.postMessage(event, '*'); else held.push(event);
    document.getElementById('held').textContent = String(held.length);
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
  /** Where the page loads the inspector UI from (default `INSPECTOR_UI`). */
  readonly ui?: string;
}): Promise<InspectorRelay> {
  const host = options.host ?? '127.0.0.1';
  const keep = options.keep ?? 10_000;
  const ui = options.ui ?? INSPECTOR_UI;
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(bridgePage(ui, keep));
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
