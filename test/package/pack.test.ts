import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staleBuild } from '../../chaos/builtPackage.ts';
import { REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';

/**
 * The package as a user gets it: `npm pack`, then the tarball installed into a plain Node 20 ESM
 * project (no loader) and into a strict TypeScript `nodenext` project. Each runs an operation to
 * COMPLETED on the embedded default and `npx opstate --help` from the installed package. Neither
 * the install nor a process of it says anything about drivers: the guarded postgres.js ships in
 * the package and is what runs, and PGlite, an optional peer, is named when chosen without it.
 */
const run = promisify(execFile);

/** The environment of a consumer: no servers, so the embedded default is what runs. */
function consumerEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ['DATABASE_URL', 'NATS_URL', 'OPSTATE_DATA_DIR', 'NODE_OPTIONS']) {
    delete env[name];
  }
  return env;
}

async function sh(cmd: string, args: string[], cwd: string) {
  try {
    return await run(cmd, args, { cwd, env: consumerEnv(), maxBuffer: 64 * 1024 * 1024 });
  } catch (err) {
    const e = err as Error & { stdout?: string; stderr?: string };
    throw new Error(`${cmd} ${args.join(' ')} failed in ${cwd}:\n${e.stdout}\n${e.stderr}`);
  }
}

/**
 * One program for both consumers: register two locations and a package, run a control plane and
 * a worker, submit a long-term archive and wait for COMPLETED. `typed` adds the annotations a
 * TypeScript consumer writes, so the declarations are what get checked.
 */
function consumerProgram(typed: boolean): string {
  const t = (annotation: string) => (typed ? annotation : '');
  return `import { createRuntime, LocationType, OperationKind, OperationStatus${t(', type Runtime')} } from 'opstate';
import { archiveStandIn, crash, createSimulatedClock${t(', type SimulatedClock')} } from 'opstate/testing';

const clock${t(': SimulatedClock')} = createSimulatedClock();
await clock.advance(1);
const runtime${t(': Runtime')} = await createRuntime();
const source = await runtime.artifacts.findOrAddLocation({
  site: 'pack', name: 'source', locationType: LocationType.SOURCE, storageRoot: '/data/source',
});
const archive = await runtime.artifacts.addLocation({
  site: 'pack', name: 'lta', locationType: LocationType.LONG_TERM_ARCHIVE, storageRoot: '/data/lta',
});
const pkg = await runtime.artifacts.addRawDataPackage({ name: 'pkg-1' });
const { copy } = await runtime.artifacts.addCopy({
  artifactType: 'raw_data_package', artifactId: pkg, locationId: source.id,
});
runtime.startControlPlane();
const worker = runtime.startWorker({
  kinds: [OperationKind.LONG_TERM_ARCHIVE],
  handlers: {
    // No source on disk here: a stand-in package goes through the archive protocol, whose VERIFIED
    // record a long-term archive needs to complete.
    [OperationKind.LONG_TERM_ARCHIVE]: (ctx) => archiveStandIn(ctx),
  },
});
const id = await runtime.submit({
  kind: OperationKind.LONG_TERM_ARCHIVE,
  fields: { rawDataPackageId: pkg, sourceLocationId: source.id, destinationLocationId: archive.id },
  inputs: [copy.id],
  by: 'pack-consumer',
});
// The fields are checked per kind by the published declarations: a misspelt one does not compile.
${typed ? '// @ts-expect-error destinatonLocationId is no field of long_term_archive\n' : ''}const misspelt = () => runtime.submit({ kind: OperationKind.LONG_TERM_ARCHIVE, fields: { rawDataPackageId: pkg, sourceLocationId: source.id, destinatonLocationId: archive.id } });
const deadline = Date.now() + 120_000;
let status${t(': string')} = '';
while (status !== OperationStatus.COMPLETED) {
  if (Date.now() > deadline) throw new Error('operation ' + id + ' still ' + status);
  status = (await runtime.get(id)).status;
  await new Promise((resolve) => setTimeout(resolve, 50));
}
// A drill's crash is reached through opstate/testing only: the public Worker has none.
${typed ? '// @ts-expect-error crash is not on the public Worker type\n' : ''}const publicCrash = typeof worker.crash;
const drillCrash = typeof crash;
let deepImport = 'allowed';
try {
  await import('opstate/' + 'dist/worker/Worker.js');
} catch (err) {
  deepImport = String(${typed ? '(err as { code?: string })' : 'err'}.code);
}
const by = (await runtime.get(id)).transitions[0]?.by;
console.log(JSON.stringify({ id, status, mode: runtime.mode, deepImport, publicCrash, drillCrash, by, misspelt: typeof misspelt }));
await runtime.close();
`;
}

/**
 * The driver guard, through `opstate/internal` against the real Postgres: a query on a reserved
 * connection whose backend was terminated, sent after the driver saw the close, is rejected with
 * CONNECTION_CLOSED (upstream postgres.js 3.4.9 kills the process with a TypeError instead).
 */
const guardProgram = `import { openDatabase } from 'opstate/internal';
const database = await openDatabase({ databaseUrl: process.argv[2], max: 1 });
const admin = await openDatabase({ databaseUrl: process.argv[2], max: 1 });
const reserved = await database.reserve();
const [me] = await reserved.execute('select pg_backend_pid() as pid');
await admin.execute('select pg_terminate_backend(' + me.pid + ')');
let code;
for (let i = 0; i < 200 && code !== 'CONNECTION_CLOSED'; i++) {
  code = await reserved.execute('select 1').then(() => 'answered', (err) => err.cause?.code ?? err.code);
}
await reserved.release();
const [after] = await database.execute('select 1 as one');
console.log(JSON.stringify({ code, after: after.one }));
await database.close();
await admin.close();
`;

let work: string;
let tarball: string;
let guardDb: TestDatabase | undefined;
let packed: {
  filename: string;
  size: number;
  unpackedSize: number;
  entryCount: number;
  files: { path: string }[];
};

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'opstate-pack-'));
  // As root, the embedded Postgres server runs as another user, who must reach the projects.
  await chmod(work, 0o711);
  // The global setup rebuilt dist/ if any source changed since its build, so a stale dist/ is
  // never what gets packed. It is not rebuilt here: other test files run processes from it now.
  const stale = staleBuild();
  if (stale !== undefined) throw new Error(`dist/ is stale (${stale}); run npm run build`);
  const { stdout } = await sh(
    'npm',
    ['pack', '--json', '--ignore-scripts', '--pack-destination', work],
    REPO_ROOT,
  );
  packed = (JSON.parse(stdout) as (typeof packed)[])[0] as typeof packed;
  tarball = join(work, packed.filename);
  process.stdout.write(
    `opstate tarball: ${packed.size} bytes packed, ${packed.unpackedSize} unpacked, ${packed.entryCount} files\n`,
  );
});

afterAll(async () => {
  if (work !== undefined) await rm(work, { recursive: true, force: true });
  await dropTestDatabase(guardDb);
});

describe('the packed tarball', () => {
  it('holds the build, the bin and the migrations, and no sources, tests, benchmarks or CI', () => {
    const paths = packed.files.map((f) => f.path);
    expect(paths).toContain('dist/index.js');
    expect(paths).toContain('dist/index.d.ts');
    expect(paths).toContain('dist/index.js.map');
    expect(paths).toContain('dist/testing.js');
    expect(paths).toContain('dist/internal.js');
    expect(paths).toContain('dist/cli/run.js');
    expect(paths).toContain('bin/opstate.js');
    expect(paths).toContain('dist/persistence/migrations/0000_init.sql');
    expect(paths).toContain('dist/persistence/migrations/meta/_journal.json');
    // The licence the manifest names, and the vendored driver with its own.
    expect(paths).toContain('LICENSE');
    expect(paths).toContain('dist/persistence/vendor/postgres/connection.js');
    expect(paths).toContain('dist/persistence/vendor/postgres/UNLICENSE');
    const unwanted = paths.filter(
      (p) =>
        /^(test|bench|\.ci|dist\/test|dist\/bench)\//.test(p) ||
        (p.endsWith('.ts') && !p.endsWith('.d.ts')) ||
        p.endsWith('_snapshot.json'),
    );
    expect(unwanted).toEqual([]);
  });

  it('names tsx nowhere among what it needs at run time, and PGlite and ssh2 only as optional peers', async () => {
    const manifest = JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      peerDependenciesMeta?: Record<string, { optional?: boolean }>;
      scripts: Record<string, string>;
    };
    expect(Object.keys(manifest.dependencies)).not.toContain('tsx');
    expect(Object.keys(manifest.dependencies)).not.toContain('@electric-sql/pglite');
    expect(manifest.peerDependenciesMeta?.['@electric-sql/pglite']?.optional).toBe(true);
    expect(Object.keys(manifest.dependencies)).not.toContain('ssh2');
    expect(manifest.peerDependenciesMeta?.ssh2?.optional).toBe(true);
    expect(Object.values(manifest.scripts).join(' ')).not.toContain('patch-package');
  });
});

describe('installed from the tarball', () => {
  const installed = new Map<string, string>();
  async function project(name: string, manifest: object, extra: string[]) {
    const dir = join(work, name);
    await mkdir(dir);
    await writeFile(join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
    const { stdout, stderr } = await sh(
      'npm',
      ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball, ...extra],
      dir,
    );
    installed.set(dir, `${stdout}\n${stderr}`);
    return dir;
  }

  /** Anything said about a database or broker driver, its patches or guards. */
  const DRIVER_TALK = /postgres\.js|nextWrite|patch-package|\bpatch(ed|es)?\b/i;

  async function expectCompleted(dir: string, entry: string) {
    const { stdout, stderr } = await sh(process.execPath, [entry], dir);
    expect(`${stdout}\n${stderr}`).not.toMatch(DRIVER_TALK);
    const result = JSON.parse(stdout.trim().split('\n').at(-1) as string) as {
      status: string;
      mode: unknown;
      deepImport: string;
      publicCrash: string;
      drillCrash: string;
      by: string;
    };
    expect(result.status).toBe('COMPLETED');
    expect(result.by).toBe('pack-consumer');
    expect(result.mode).toEqual({ database: 'postgres', transport: 'in-process' });
    // Only the entries (`opstate`, `opstate/testing`, `opstate/internal`) are importable.
    expect(result.deepImport).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
    expect([result.publicCrash, result.drillCrash]).toEqual(['undefined', 'function']);
    const help = await sh('npx', ['--no-install', 'opstate', '--help'], dir);
    expect(help.stdout).toMatch(/Usage: opstate <command>/);
    const { version } = JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as {
      version: string;
    };
    expect((await sh('npx', ['--no-install', 'opstate', '--version'], dir)).stdout.trim()).toBe(
      version,
    );
    // The built CLI loads JavaScript handler modules; a TypeScript one is a usage error.
    await writeFile(join(dir, 'handlers.ts'), 'export default {};\n');
    const refused = await run(
      'npx',
      ['--no-install', 'opstate', 'worker', '--kinds', 'all', '--handlers', 'handlers.ts'],
      {
        cwd: dir,
        env: consumerEnv(),
      },
    ).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => err,
    );
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('compile it to .js or .mjs');
  }

  it('runs in a plain Node ESM project and in a strict nodenext TypeScript project', async () => {
    const typescript = JSON.parse(
      await readFile(join(REPO_ROOT, 'node_modules/typescript/package.json'), 'utf8'),
    ) as { version: string };
    // The plain consumer takes the README's override for Node 20 (the NATS client's nuid declares
    // Node 22): its install then warns of no engine.
    const [plain, typed] = await Promise.all([
      project(
        'plain',
        {
          name: 'plain-consumer',
          private: true,
          type: 'module',
          overrides: { '@nats-io/nuid': '2.0.3' },
        },
        [],
      ),
      project('typed', { name: 'typed-consumer', private: true, type: 'module' }, [
        `typescript@${typescript.version}`,
        '@types/node@20',
      ]),
    ]);

    await writeFile(join(plain, 'main.mjs'), consumerProgram(false));
    await writeFile(join(typed, 'main.ts'), consumerProgram(true));
    await writeFile(
      join(typed, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'ES2022',
          strict: true,
          // Every declaration file is checked, ours and those they reach: the public entries reach
          // no drizzle type (drizzle-orm 0.45's own declarations do not type-check).
          skipLibCheck: false,
          types: ['node'],
          outDir: 'out',
        },
        include: ['main.ts'],
      }),
    );
    // One build that checks every declaration file it reaches: no error anywhere, then the program
    // runs as JavaScript.
    const build = await run('npx', ['--no-install', 'tsc', '-p', '.'], {
      cwd: typed,
      env: consumerEnv(),
      maxBuffer: 64 * 1024 * 1024,
    }).then(
      () => ({ code: 0, stdout: '' }),
      (err: { code: number; stdout: string }) => err,
    );
    expect(build.stdout).toBe('');
    expect(build.code).toBe(0);

    for (const [dir, output] of installed) {
      expect(output, dir).not.toMatch(DRIVER_TALK);
    }
    expect(installed.get(plain)).not.toMatch(/EBADENGINE/);
    // The optional peer is not installed with the package.
    expect(existsSync(join(plain, 'node_modules/@electric-sql/pglite'))).toBe(false);

    await Promise.all([expectCompleted(plain, 'main.mjs'), expectCompleted(typed, 'out/main.js')]);

    // The guarded driver is the one that runs in the consumer's install.
    guardDb = await createTestDatabase('opstate_pack_guard');
    await writeFile(join(plain, 'guard.mjs'), guardProgram);
    const guard = await sh(process.execPath, ['guard.mjs', guardDb.url], plain);
    expect(guard.stderr).toBe('');
    expect(JSON.parse(guard.stdout.trim())).toEqual({ code: 'CONNECTION_CLOSED', after: 1 });

    // PGlite chosen without the package: the line saying which database, then one naming its
    // install, and no data folder.
    const dataDir = join(plain, 'pglite-data');
    const refused = await run('npx', ['--no-install', 'opstate', 'migrate'], {
      cwd: plain,
      env: { ...consumerEnv(), OPSTATE_EMBEDDED_ENGINE: 'pglite', OPSTATE_DATA_DIR: dataDir },
    }).then(
      (ok) => ({ code: 0, stdout: ok.stdout, stderr: ok.stderr }),
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expect(refused.code).not.toBe(0);
    const said = refused.stderr.trim().split('\n');
    expect(said, refused.stderr).toHaveLength(2);
    expect(said[0]).toMatch(/^opstate: database embedded PGlite in /);
    expect(said[1]).toContain('npm install @electric-sql/pglite');
    expect(existsSync(dataDir)).toBe(false);
  });
});
