import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { hostname, networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startInspectorRelay } from '../../cli/inspectorRelay.ts';
import { main } from '../../cli/main.ts';
import { startDashboard } from '../../dashboard/startDashboard.ts';
import { systemClock } from '../../machines/Clock.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { JournalRepository } from '../../persistence/JournalRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { applyOperatorCommand } from '../../runtime/operatorCommand.ts';
import type { Runtime } from '../../runtime/Runtime.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';
import { PLANT_TIMING } from './plant.ts';

/** One HTTP request with the headers given as they are (fetch will not send a Host of its own). */
function send(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: options.method ?? 'GET', headers: options.headers ?? {} },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** An action's POST as the dashboard's own page sends it, plus `headers`. */
const action = (base: string, id: string, verb: string, headers: Record<string, string> = {}) =>
  send(`${base}/api/operations/${id}/${verb}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-opstate-action': '1',
      origin: base,
      ...headers,
    },
    body: JSON.stringify({ reason: 'trust drill' }),
  });

/** This machine's first address other than loopback, else every interface (both are not loopback). */
function exposedAddress(): { listen: string; connect: string } {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.family === 'IPv4' && !a.internal) return { listen: a.address, connect: a.address };
    }
  }
  return { listen: '0.0.0.0', connect: '127.0.0.1' };
}

describe('the dashboard and the relay, against a network peer', () => {
  let testDb: TestDatabase;
  let database: Database;
  let store: OperationStore;
  let journal: JournalRepository;
  let world: Awaited<ReturnType<typeof makeWorld>>;
  const closers: (() => Promise<void>)[] = [];

  const command: Runtime['command'] = (id, event, options) =>
    applyOperatorCommand(store, systemClock, id, event, options?.by);
  const common = () => ({
    database,
    timing: PLANT_TIMING,
    heartbeats: null,
    port: 0,
    logger: memoryLogger(),
    pollMs: 60_000,
  });
  const pending = () => store.create(inputFor(OperationKind.TRANSFER, world));
  const lastBy = async (id: string) => (await journal.listTransitions(id)).at(-1);

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_dashtrust', { migrated: true });
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
    store = new OperationStore(database);
    journal = new JournalRepository(database);
    world = await makeWorld(database);
  });

  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    await database?.close();
    await dropTestDatabase(testDb);
  });

  describe('on loopback, with actions', () => {
    let base: string;
    let port: number;

    beforeAll(async () => {
      const dashboard = await startDashboard({ ...common(), command, operator: 'alice' });
      closers.push(() => dashboard.close());
      base = dashboard.url;
      port = dashboard.port;
      expect(dashboard.tokenRequired).toBe(false);
    });

    it('refuses a DNS-rebinding request: a Host that is not its own gets 403 and no page', async () => {
      const rebound = await send(`${base}/api/overview`, {
        headers: { host: `evil.example:${port}` },
      });
      expect(rebound.status).toBe(403);
      expect(JSON.parse(rebound.body).code).toBe('FORBIDDEN');
      expect(rebound.body).toContain('evil.example');
      const id = await pending();
      const acted = await action(base, id, 'cancel', {
        host: `evil.example:${port}`,
        origin: `http://evil.example:${port}`,
      });
      expect(acted.status).toBe(403);
      expect((await store.load(id)).status).toBe('PENDING');
      // Its own names are answered.
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`]) {
        expect((await send(`${base}/api/overview`, { headers: { host } })).status).toBe(200);
      }
    });

    it('refuses a cross-origin POST, even from another port of this machine', async () => {
      const id = await pending();
      for (const origin of ['http://evil.example', `http://localhost:${port + 1}`, 'null']) {
        const acted = await action(base, id, 'cancel', { origin });
        expect(acted.status, origin).toBe(403);
        expect(JSON.parse(acted.body).code).toBe('FORBIDDEN');
      }
      expect((await store.load(id)).status).toBe('PENDING');
    });

    it('sends a CSP that runs only its own script and lets no page frame it, and nosniff', async () => {
      const page = await send(`${base}/`, { headers: { accept: 'text/html' } });
      expect(page.status).toBe(200);
      const csp = String(page.headers['content-security-policy']);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("default-src 'none'");
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(page.headers['x-frame-options']).toBe('DENY');
      // The one inline script is the one the policy names by hash, and nothing else runs.
      const scripts = [...page.body.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]);
      expect(scripts).toHaveLength(1);
      const hash = createHash('sha256')
        .update(scripts[0] as string)
        .digest('base64');
      expect(/script-src ([^;]*)/.exec(csp)?.[1]).toBe(`'sha256-${hash}'`);
      // Every answer carries them: JSON, an error, a refusal.
      for (const r of [
        await send(`${base}/api/overview`),
        await send(`${base}/nowhere`),
        await send(`${base}/`, { headers: { host: 'evil.example' } }),
      ]) {
        expect(r.headers['x-content-type-options']).toBe('nosniff');
        expect(String(r.headers['content-security-policy'])).toContain("frame-ancestors 'none'");
      }
    });

    it("records the operator's name and address in the operation's history", async () => {
      const id = await pending();
      const acted = await action(base, id, 'cancel');
      expect(acted.status).toBe(200);
      expect(await lastBy(id)).toMatchObject({
        event: 'CANCEL',
        by: 'operator:alice (dashboard, 127.0.0.1)',
      });
      const page = await send(`${base}/operations/${id}`, { headers: { accept: 'text/html' } });
      expect(page.body).toContain('operator:alice (dashboard, 127.0.0.1)');
    });

    it('answers to a host name the operator allows', async () => {
      const named = await startDashboard({
        ...common(),
        command: null,
        allowedHosts: ['ops.example.org'],
      });
      closers.push(() => named.close());
      const ok = await send(`${named.url}/api/overview`, {
        headers: { host: `ops.example.org:${named.port}` },
      });
      expect(ok.status).toBe(200);
      const other = await send(`${named.url}/api/overview`, {
        headers: { host: `ops.example.com:${named.port}` },
      });
      expect(other.status).toBe(403);
    });
  });

  describe('at a non-loopback address, with actions', () => {
    const exposed = exposedAddress();
    let base: string;
    let token: string;

    beforeAll(async () => {
      const dashboard = await startDashboard({ ...common(), command, host: exposed.listen });
      closers.push(() => dashboard.close());
      base = `http://${exposed.connect}:${dashboard.port}`;
      expect(dashboard.tokenRequired).toBe(true);
      token = dashboard.generatedToken as string;
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    });

    it('refuses every request without its token, and an action with a wrong one', async () => {
      const id = await pending();
      expect((await action(base, id, 'cancel')).status).toBe(401);
      expect(
        (await action(base, id, 'cancel', { authorization: `Bearer ${token.slice(0, -1)}x` }))
          .status,
      ).toBe(401);
      expect((await send(`${base}/api/overview`)).status).toBe(401);
      // A browser is sent to sign in.
      const page = await send(`${base}/`, { headers: { accept: 'text/html' } });
      expect(page.status).toBe(303);
      expect(page.headers.location).toBe('/signin');
      expect((await store.load(id)).status).toBe('PENDING');
    });

    it('takes the token as a bearer header or as the cookie the sign-in sets, and records who and from where', async () => {
      const id = await pending();
      const viaHeader = await action(base, id, 'cancel', { authorization: `Bearer ${token}` });
      expect(viaHeader.status).toBe(200);
      expect(await lastBy(id)).toMatchObject({
        event: 'CANCEL',
        by: `operator:operator (dashboard, ${exposed.connect})`,
      });

      const form = { 'content-type': 'application/x-www-form-urlencoded', origin: base };
      const wrong = await send(`${base}/signin`, {
        method: 'POST',
        headers: form,
        body: 'token=not-the-token',
      });
      expect(wrong.status).toBe(401);
      expect(wrong.headers['set-cookie']).toBeUndefined();
      const signed = await send(`${base}/signin`, {
        method: 'POST',
        headers: form,
        body: new URLSearchParams({ token }).toString(),
      });
      expect(signed.status).toBe(303);
      const cookie = String(signed.headers['set-cookie']);
      expect(cookie).toMatch(/HttpOnly/);
      expect(cookie).toMatch(/SameSite=Strict/);
      const retried = await action(base, id, 'retry', { cookie: cookie.split(';')[0] as string });
      expect(retried.status).toBe(200);
      expect((await store.load(id)).status).toBe('PENDING');
    });

    it("records a named token's name as the operator", async () => {
      const secret = 'bob-0123456789abcdef';
      const named = await startDashboard({
        ...common(),
        command,
        host: exposed.listen,
        tokens: [{ name: 'bob', secret }],
        operator: 'alice',
      });
      closers.push(() => named.close());
      expect(named.generatedToken).toBeUndefined();
      const at = `http://${exposed.connect}:${named.port}`;
      const id = await pending();
      expect((await action(at, id, 'cancel', { authorization: `Bearer ${secret}` })).status).toBe(
        200,
      );
      expect((await lastBy(id))?.by).toBe(`operator:bob (dashboard, ${exposed.connect})`);
    });

    it('read-only, it asks for no token', async () => {
      const readOnly = await startDashboard({ ...common(), command: null, host: exposed.listen });
      closers.push(() => readOnly.close());
      expect(readOnly.tokenRequired).toBe(false);
      const r = await send(`http://${exposed.connect}:${readOnly.port}/api/overview`);
      expect(r.status).toBe(200);
    });
  });

  it("the CLI's operator verbs record who sent them and from which host", async () => {
    const saved = { url: process.env.DATABASE_URL, operator: process.env.OPSTATE_OPERATOR };
    process.env.DATABASE_URL = testDb.url;
    const io = { out: () => {}, err: () => {} };
    try {
      const flagged = await pending();
      expect(await main(['cancel', flagged, '--operator', 'carol'], io)).toBe(0);
      expect((await lastBy(flagged))?.by).toBe(`operator:carol (cli, ${hostname()})`);
      process.env.OPSTATE_OPERATOR = 'dave';
      const fromEnv = await pending();
      expect(await main(['cancel', fromEnv], io)).toBe(0);
      expect((await lastBy(fromEnv))?.by).toBe(`operator:dave (cli, ${hostname()})`);
      // A name that is not one is refused before anything is written.
      const refused = await pending();
      const errors: string[] = [];
      const code = await main(['cancel', refused, '--operator', 'eve <script>'], {
        out: () => {},
        err: (l) => errors.push(l),
      });
      expect(code).toBe(2);
      expect(errors.join('\n')).toMatch(/OPSTATE_OPERATOR \/ --operator must be .*\[CONFIG\]/);
      expect((await store.load(refused)).status).toBe('PENDING');
    } finally {
      for (const [key, value] of [
        ['DATABASE_URL', saved.url],
        ['OPSTATE_OPERATOR', saved.operator],
      ] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });

  describe('the inspector relay', () => {
    /** A WebSocket to the relay: open, or the HTTP status it was refused with. */
    function connect(url: string, headers: Record<string, string> = {}, into?: string[]) {
      const socket = new WebSocket(url, { headers });
      // Listening from the start: the replay may arrive with the handshake's answer.
      socket.on('message', (m) => into?.push(String(m)));
      return new Promise<{ socket: WebSocket } | { refused: number }>((resolve, reject) => {
        socket.once('open', () => resolve({ socket }));
        socket.once('unexpected-response', (_req, res) =>
          resolve({ refused: res.statusCode ?? 0 }),
        );
        socket.once('error', reject);
      });
    }
    const opened = async (url: string, into?: string[]) => {
      const r = await connect(url, {}, into);
      if (!('socket' in r)) throw new Error(`refused with ${r.refused}`);
      return r.socket;
    };

    it('refuses a foreign Origin and a rebound Host, for the socket and the page', async () => {
      const relay = await startInspectorRelay({ port: 0 });
      closers.push(() => relay.stop());
      const { port } = new URL(relay.url);
      expect(await connect(relay.url, { origin: 'http://evil.example' })).toEqual({ refused: 403 });
      expect(await connect(relay.url, { host: `evil.example:${port}` })).toEqual({ refused: 403 });
      const page = await send(relay.page, { headers: { host: `evil.example:${port}` } });
      expect(page.status).toBe(403);
      // Its own page, and the inspector (no Origin), are let in.
      const own = await connect(relay.url, { origin: relay.page });
      expect('socket' in own).toBe(true);
      if ('socket' in own) own.socket.close();
      const bridge = await send(relay.page);
      expect(bridge.status).toBe(200);
      expect(String(bridge.headers['content-security-policy'])).toContain("frame-ancestors 'none'");
      expect(String(bridge.headers['content-security-policy'])).toContain(
        'frame-src https://stately.ai',
      );
      expect(bridge.headers['x-content-type-options']).toBe('nosniff');
      // Events go to the inspector's origin only, and only its frame is listened to.
      expect(bridge.body).not.toMatch(/postMessage\([^)]*'\*'\)/);
      expect(bridge.body).toMatch(/postMessage\(event, UI_ORIGIN\)/);
      expect(bridge.body).toContain('m.origin !== UI_ORIGIN');
    });

    it('cuts off a sender of an oversized message and neither keeps nor forwards it', async () => {
      const relay = await startInspectorRelay({ port: 0, maxMessageBytes: 64 * 1024 });
      closers.push(() => relay.stop());
      const received: string[] = [];
      const receiver = await opened(relay.url, received);
      const sender = await opened(relay.url);
      let closedWith: number | undefined;
      sender.once('close', (code) => {
        closedWith = code;
      });
      sender.send('x'.repeat(64 * 1024 + 1));
      await waitFor(() => closedWith !== undefined, 'the sender cut off');
      expect(closedWith).toBe(1009);
      const small = await opened(relay.url);
      small.send('{"ok":1}');
      await waitFor(() => received.length > 0, 'the small message');
      expect(received).toEqual(['{"ok":1}']);
      const replayed: string[] = [];
      const late = await opened(relay.url, replayed);
      await waitFor(() => replayed.length > 0, 'the replay');
      expect(replayed).toEqual(['{"ok":1}']);
      for (const s of [receiver, small, late]) s.close();
    });

    it('keeps at most keepBytes for late clients, dropping the oldest', async () => {
      const relay = await startInspectorRelay({ port: 0, keepBytes: 10_000 });
      closers.push(() => relay.stop());
      const sender = await opened(relay.url);
      const heard: string[] = [];
      const listener = await opened(relay.url, heard);
      for (let n = 0; n < 50; n++) sender.send(`${String(n).padStart(2, '0')}${'y'.repeat(998)}`);
      await waitFor(() => heard.length === 50, 'the 50 messages forwarded');
      const replayed: string[] = [];
      const late = await opened(relay.url, replayed);
      // A marker sent now reaches the late client after everything replayed to it.
      sender.send('end');
      await waitFor(() => replayed.at(-1) === 'end', 'the marker after the replay');
      // 10 of 1,000 bytes fit in 10,000: the newest ten, in order.
      expect(replayed.slice(0, -1).map((m) => m.slice(0, 2))).toEqual(
        Array.from({ length: 10 }, (_, i) => String(40 + i)),
      );
      for (const s of [sender, listener, late]) s.close();
    });
  });
});
