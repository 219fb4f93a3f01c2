import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createProgram } from '../../cli/Command.ts';
import { loadCommands } from '../../cli/commands/index.ts';
import { isOperationKind, type OperationKind } from '../../machines/OperationKind.ts';
import { SETTINGS } from '../../runtime/Configuration.ts';
import { resolveRuntimeTiming } from '../../runtime/Runtime.ts';
import { REPO_ROOT } from '../helpers/opstateCli.ts';

/**
 * The Dockerfile and docker-compose.yml are for users (no container engine runs here): every
 * command, flag, path and variable they use is checked against the CLI and the repository.
 */
const read = (path: string) => readFileSync(`${REPO_ROOT}${path}`, 'utf8');
const dockerfile = read('Dockerfile');

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
  healthcheck?: { test?: string[]; disable?: boolean; interval?: string };
  depends_on?: Record<string, { condition: string }>;
  volumes?: string[];
  deploy?: { replicas?: number };
}
const compose = parse(read('docker-compose.yml'), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const services = compose.services;
const opstateServices = Object.entries(services).filter(([, s]) => s.build === '.');
const natsConf = read('deploy/nats.conf');
const commands = await loadCommands();

/** The `--flag`s a command takes, from the CLI's own definition. */
function flagsOf(name: string): string[] {
  const { program } = createProgram(commands, { out: () => {}, err: () => {} });
  const command = program.commands.find((c) => c.name() === name);
  if (command === undefined) throw new Error(`opstate has no command '${name}'`);
  return command.options.map((o) => o.long as string);
}

/** The allow list of a user in deploy/nats.conf. */
function allowedFor(user: string): string[] {
  const start = natsConf.indexOf(`user: ${user}\n`);
  expect(start, `deploy/nats.conf has no user ${user}`).toBeGreaterThan(-1);
  const end = natsConf.indexOf('subscribe:', start);
  return [...natsConf.slice(start, end).matchAll(/"([^"]+)"/g)].map((m) => m[1] as string);
}

describe('Dockerfile', () => {
  const stages = [...dockerfile.matchAll(/^FROM (\S+)(?: AS (\S+))?/gm)];

  it('builds in one stage and runs the built package in a slim Node 22 LTS one, as a non-root user', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const s of stages) expect(s[1]).toMatch(/^node:22(\.\d+)*-\w+-slim$/);
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('FROM '));
    expect(runtime).toMatch(/npm ci --omit=dev/);
    expect(runtime).toMatch(/COPY --from=build \/app\/dist dist/);
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(/^HEALTHCHECK .*\/healthz/ms);
    expect(runtime).toMatch(/^ENTRYPOINT \["node", "bin\/opstate\.js"\]$/m);
  });

  it('runs the driver fixes from the build itself: no install-time patching, no patched modules', () => {
    expect(dockerfile).not.toMatch(/patch-package|COPY patches/);
    expect(dockerfile).not.toMatch(/COPY --from=build \/app\/node_modules/);
    expect(existsSync(`${REPO_ROOT}persistence/vendor/postgres/connection.js`)).toBe(true);
  });

  it('copies files that exist, and every folder the build compiles', () => {
    for (const m of dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)) {
      for (const path of (m[1] as string).split(/\s+/)) {
        expect(existsSync(`${REPO_ROOT}${path}`), `COPY ${path}`).toBe(true);
      }
    }
    const build = JSON.parse(read('tsconfig.build.json').replace(/^\s*\/\/.*$/gm, '')) as {
      include: string[];
    };
    for (const folder of build.include)
      expect(dockerfile).toMatch(new RegExp(`COPY .*\\b${folder}\\b`));
    expect(dockerfile).toContain('RUN npm run build');
  });
});

describe('docker-compose.yml', () => {
  it('runs Postgres 15, NATS 2.9 with JetStream on its config file, the migration, two control planes and two workers', () => {
    expect(services.postgres?.image).toBe('postgres:15');
    expect(services.nats?.image).toMatch(/^nats:2\.9/);
    expect(services.nats?.command).toEqual(['-c', '/etc/nats/nats.conf', '-sd', '/data']);
    expect(natsConf).toMatch(/^jetstream: enabled$/m);
    expect(services.nats?.volumes).toContain('./deploy/nats.conf:/etc/nats/nats.conf:ro');
    expect(services.nats?.volumes?.some((v) => v.endsWith(':/data'))).toBe(true);
    expect(services.migrate?.command).toEqual(['migrate']);
    expect(services['control-plane']?.command?.[0]).toBe('control-plane');
    expect(services['control-plane']?.deploy?.replicas).toBe(2);
    const workers = opstateServices.filter(([, s]) => s.command?.[0] === 'worker');
    expect(workers).toHaveLength(2);
  });

  it('runs only commands and flags the CLI has, with a handlers module the build produces', () => {
    expect(opstateServices.map(([name]) => name)).toEqual([
      'migrate',
      'control-plane',
      'worker-a',
      'worker-b',
    ]);
    for (const [name, s] of opstateServices) {
      const [command, ...args] = s.command ?? [];
      const flags = flagsOf(command as string);
      for (const arg of args.filter((a) => a.startsWith('--'))) {
        expect(flags, `${name}: opstate ${command} ${arg}`).toContain(arg);
      }
      if (command === 'worker') {
        const handlers = args[args.indexOf('--handlers') + 1] as string;
        const source = handlers.replace(/^dist\//, '').replace(/\.js$/, '.ts');
        expect(existsSync(`${REPO_ROOT}${source}`), `${handlers} is built from ${source}`).toBe(
          true,
        );
        const kinds = (args[args.indexOf('--kinds') + 1] as string).split(',');
        for (const k of kinds) expect(isOperationKind(k), k).toBe(true);
      }
    }
  });

  it('sets only variables opstate reads, with timers in the order the runtime demands', () => {
    const known = new Set(SETTINGS.map((s) => s.variable));
    for (const [name, s] of opstateServices) {
      for (const variable of Object.keys(s.environment ?? {})) {
        expect(known.has(variable), `${name}: ${variable}`).toBe(true);
      }
      const timing = JSON.parse(s.environment?.OPSTATE_TIMING ?? '{}') as Record<string, number>;
      expect(() => resolveRuntimeTiming(timing)).not.toThrow();
      expect(s.environment?.OPSTATE_METRICS_PORT).toBe('9464');
      expect(s.environment?.DATABASE_URL).toMatch(/^postgres:\/\/opstate:\$\{POSTGRES_PASSWORD:\?/);
    }
    for (const variable of Object.keys(services.nats?.environment ?? {})) {
      expect(natsConf).toContain(`$${variable}`);
    }
  });

  it('checks the health of every long-running service; the one-shot migration is waited on to complete', () => {
    for (const [name, s] of Object.entries(services)) {
      if (name === 'migrate') {
        expect(s.healthcheck?.disable).toBe(true);
        continue;
      }
      expect(s.healthcheck?.test?.length, name).toBeGreaterThan(1);
    }
    for (const [name, s] of opstateServices) {
      if (name === 'migrate') continue;
      expect(s.healthcheck?.test?.join(' ')).toContain('127.0.0.1:9464/readyz');
      expect(s.depends_on).toBeDefined();
    }
    expect(services['control-plane']?.depends_on?.migrate?.condition).toBe(
      'service_completed_successfully',
    );
    for (const w of ['worker-a', 'worker-b']) {
      expect(services[w]?.depends_on?.['control-plane']?.condition).toBe('service_healthy');
    }
  });

  it('gives each role its own NATS user, and a worker the dispatch queues to read and nothing to write there', () => {
    for (const [name, s] of opstateServices) {
      if (name === 'migrate') continue;
      const user = s.environment?.OPSTATE_NATS_USER as string;
      const allowed = allowedFor(user);
      const consumers = allowed
        .filter((a) => a.startsWith('$JS.API.CONSUMER.MSG.NEXT.opstate_dispatch.'))
        .map((a) => a.split('.').at(-1));
      if (s.command?.[0] === 'worker') {
        const args = s.command;
        const kinds = (args[args.indexOf('--kinds') + 1] as string).split(',') as OperationKind[];
        // A site queue is one subject token (`<site>_<location>_…`), which no pattern can cut by
        // kind: the sample lets a worker pull from any dispatch queue, and ack there.
        expect(kinds.length).toBeGreaterThan(0);
        expect(consumers).toEqual(['*']);
        expect(allowed).toContain('$JS.API.CONSUMER.INFO.opstate_dispatch.*');
        expect(allowed).toContain('$JS.ACK.opstate_dispatch.*.>');
        // Its heartbeat is the one key it may write: the worker runs under that id.
        const id = args[args.indexOf('--id') + 1] as string;
        expect(allowed.filter((a) => a.startsWith('$KV.'))).toEqual([
          `$KV.opstate_heartbeats.worker.${id}`,
        ]);
        // A worker publishes no dispatch and creates no stream or consumer.
        expect(allowed.filter((a) => a.startsWith('opstate.dispatch'))).toEqual([]);
        expect(
          allowed.filter((a) => /CONSUMER\.(CREATE|DURABLE|DELETE)|STREAM\.\*/.test(a)),
        ).toEqual([]);
      } else {
        expect(allowed).toContain('opstate.dispatch.>');
      }
    }
  });
});
