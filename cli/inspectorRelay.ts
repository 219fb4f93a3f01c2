import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { escapeHtml } from '../dashboard/html.ts';
import { allowedHosts, hostOrOriginProblem } from '../dashboard/requestGuard.ts';
import { systemClock } from '../machines/Clock.ts';

/** Where the Stately inspector UI is loaded from (by the browser, not by opstate). */
export const INSPECTOR_UI = 'https://stately.ai/inspect';

/** How long the page waits for the inspector to say it is ready before saying why it is not. */
const INSPECTOR_READY_MS = 20_000;

/** A value as a JavaScript literal that cannot end the `<script>` it is written into. */
const scriptLiteral = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');

/**
 * The bridge page's script: it hands every event the relay forwards to the inspector frame, and
 * only to the inspector's origin (`postMessage` with that origin as the target, never `*`),
 * listening only to that frame's messages.
 */
function bridgeScript(ui: string): string {
  return `
  const UI = ${scriptLiteral(ui)};
  const UI_ORIGIN = new URL(UI).origin;
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
    if (m.origin !== UI_ORIGIN || m.source !== frame.contentWindow) return;
    if (m.data && m.data.type === '@statelyai.connected') {
      ready = true;
      notice.hidden = true;
      frame.hidden = false;
      for (const e of held.splice(0)) frame.contentWindow.postMessage(e, UI_ORIGIN);
    }
  });
  const socket = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host);
  socket.onmessage = (m) => {
    const event = JSON.parse(m.data);
    if (ready) frame.contentWindow.postMessage(event, UI_ORIGIN); else held.push(event);
    document.getElementById('held').textContent = String(held.length);
  };
`;
}

/**
 * The page a browser opens: it embeds the Stately inspector and hands it every event the relay
 * forwards, holding them until the inspector says it is ready. When the inspector cannot load
 * (the browser offline, the site unreachable, or no answer in time), the page says why and what
 * to do instead of showing an empty frame; without JavaScript it says that it needs it.
 */
function bridgePage(ui: string, keep: number, script: string): string {
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
<script>${script}</script></body></html>`;
}

/** The bridge page's headers: its own script only, framing only the inspector, framed by no one. */
function bridgeHeaders(ui: string, script: string, host: string): Record<string, string> {
  const origin = new URL(ui).origin;
  const hash = createHash('sha256').update(script, 'utf8').digest('base64');
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'content-security-policy': [
      "default-src 'none'",
      `script-src 'sha256-${hash}'`,
      "style-src 'unsafe-inline'",
      `frame-src ${origin}`,
      `connect-src 'self' ws://${host} wss://${host} ${origin}`,
      "base-uri 'none'",
      "form-action 'none'",
      "frame-ancestors 'none'",
    ].join('; '),
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
  };
}

/** Most bytes one message may have (default): an inspection event is a few kilobytes. */
export const RELAY_MAX_MESSAGE_BYTES = 1024 * 1024;

/** Most bytes of messages kept for late clients (default), whatever `keep` allows. */
export const RELAY_KEEP_BYTES = 32 * 1024 * 1024;

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
 * `keep` messages (and at most `keepBytes` bytes of them) go to a client that connects late (so a
 * browser opened after the start still sees each operation from its registration). It listens on
 * `host` (default 127.0.0.1) and closes every connection when stopped, so a process never waits
 * on an open browser tab.
 *
 * A peer is not trusted: a request naming a Host other than the loopback names and `host` (DNS
 * rebinding), or sent from a page of another origin, is refused (403, and no WebSocket upgrade);
 * a message over `maxMessageBytes` closes its sender's connection (1009) and is neither kept nor
 * forwarded.
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
  /** Most bytes of kept messages (default `RELAY_KEEP_BYTES`); the oldest go first. */
  readonly keepBytes?: number;
  /** Most bytes of one message (default `RELAY_MAX_MESSAGE_BYTES`). */
  readonly maxMessageBytes?: number;
  /** Where the page loads the inspector UI from (default `INSPECTOR_UI`). */
  readonly ui?: string;
}): Promise<InspectorRelay> {
  const host = options.host ?? '127.0.0.1';
  const keep = options.keep ?? 10_000;
  const keepBytes = options.keepBytes ?? RELAY_KEEP_BYTES;
  const ui = options.ui ?? INSPECTOR_UI;
  const hosts = allowedHosts(host, []);
  const script = bridgeScript(ui);
  const refused = (req: IncomingMessage) => hostOrOriginProblem(req, hosts);
  const server = createServer((req, res) => {
    const problem = refused(req);
    if (problem !== undefined) {
      res.writeHead(403, {
        'content-type': 'text/plain; charset=utf-8',
        'x-content-type-options': 'nosniff',
      });
      res.end(problem);
      return;
    }
    res.writeHead(200, bridgeHeaders(ui, script, String(req.headers.host)));
    res.end(bridgePage(ui, keep, script));
  });
  const wss = new WebSocketServer({
    server,
    maxPayload: options.maxMessageBytes ?? RELAY_MAX_MESSAGE_BYTES,
    verifyClient: ({ req }, done) => {
      const problem = refused(req);
      if (problem === undefined) done(true);
      else done(false, 403, 'Forbidden');
    },
  });
  const kept: string[] = [];
  let keptBytes = 0;
  const remember = (message: string) => {
    kept.push(message);
    keptBytes += Buffer.byteLength(message);
    while (kept.length > keep || (keptBytes > keepBytes && kept.length > 0)) {
      keptBytes -= Buffer.byteLength(kept.shift() as string);
    }
  };
  wss.on('connection', (socket) => {
    for (const message of kept) socket.send(message);
    // A message over maxPayload closes the socket (1009); the error is that, nothing more.
    socket.on('error', () => socket.terminate());
    socket.on('message', (data) => {
      const message = String(data);
      remember(message);
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
      const bound = new AbortController();
      await Promise.race([Promise.all(gone), systemClock.sleep(1_000, bound.signal)]);
      bound.abort(); // a pending timer would hold the process for the rest of the second
      for (const client of wss.clients) client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
