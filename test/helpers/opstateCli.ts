import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BUILT_CLI, ensureBuilt, REPO_ROOT } from '../../chaos/builtPackage.ts';

export { REPO_ROOT };

/**
 * Node arguments that run `opstate <args>` as users run it: the built package (`dist/`, which the
 * test run's global setup brings up to date with the sources). A worker it starts loads its
 * handlers as JavaScript: pass a fixture through `handlersModule`. Spawn with `cwd: REPO_ROOT`.
 *
 * @example
 * ```ts
 * spawn(process.execPath, opstateArgs(['status', '--json']), { cwd: REPO_ROOT });
 * ```
 */
export function opstateArgs(args: readonly string[]): string[] {
  return [BUILT_CLI, ...args];
}

/**
 * The test and bench fixtures that spawned workers load as handlers modules, and the fixture
 * processes tests start with plain `node` (no TypeScript loader to start up on every restart),
 * compiled by `prepareBuiltProcesses`.
 */
const FIXTURE_MODULES = [
  'test/actors/fixtures/handlers.ts',
  'test/archive/fixtures/stageWorker.ts',
  'bench/fixtures/noopHandlers.ts',
  'bench/fixtures/holdHandlers.ts',
  'bench/fixtures/signalHandlers.ts',
  'test/pipeline/fixtures/crashingPlane.ts',
];
const isFixture = (rel: string) => rel.startsWith('test/') || rel.startsWith('bench/');

// Under the checkout itself (ignored by git and biome), not under node_modules: checkouts that
// share one node_modules would otherwise overwrite each other's fixtures, each pointing its
// imports at its own dist/.
const FIXTURE_OUT = join(REPO_ROOT, '.opstate', 'fixtures');

/**
 * The JavaScript a spawned worker loads for a TypeScript handlers module: a product module's
 * build in `dist/`, or a test fixture's compiled copy, which imports the product from `dist/` too
 * (one copy of every class in the worker process, `OpstateError` included).
 */
export function handlersModule(source: string | URL): string {
  const path = source instanceof URL ? fileURLToPath(source) : source;
  const rel = relative(REPO_ROOT, path).split('\\').join('/');
  if (!isFixture(rel)) return join(REPO_ROOT, 'dist', rel.replace(/\.ts$/, '.js'));
  if (!FIXTURE_MODULES.includes(rel)) {
    throw new Error(`${rel} is not among the compiled fixtures; add it to FIXTURE_MODULES`);
  }
  return join(FIXTURE_OUT, rel.replace(/\.ts$/, '.mjs'));
}

/** Rewrites each relative `.ts` import of a compiled fixture to the product module in `dist/`. */
function toDist(code: string, sourceDir: string, fixture: string): string {
  return code.replace(
    /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.{1,2}\/[^'"]+)\2/g,
    (_all, lead: string, quote: string, spec: string) => {
      const target = relative(REPO_ROOT, resolve(sourceDir, spec)).split('\\').join('/');
      if (isFixture(target) || target.startsWith('..') || !target.endsWith('.ts')) {
        throw new Error(`${fixture} imports ${spec}: a fixture may import only product modules`);
      }
      const built = join(REPO_ROOT, 'dist', target.replace(/\.ts$/, '.js'));
      return `${lead}${quote}${pathToFileURL(built).href}${quote}`;
    },
  );
}

/**
 * Before starting `opstate` processes (the tests' global setup, the benches): rebuilds `dist/`
 * when a source changed since the last build, then compiles each fixture in FIXTURE_MODULES to
 * the `.mjs` `handlersModule` names (type-only imports dropped, product imports pointed at
 * `dist/`).
 */
export async function prepareBuiltProcesses(
  log: (line: string) => void = () => undefined,
): Promise<void> {
  ensureBuilt(log);
  // Loaded here only: the test files that import this module never pay for the compiler.
  const ts = (await import('typescript')).default;
  for (const rel of FIXTURE_MODULES) {
    const source = join(REPO_ROOT, rel);
    const { outputText } = ts.transpileModule(readFileSync(source, 'utf8'), {
      fileName: source,
      compilerOptions: {
        module: ts.ModuleKind.ESNext,
        target: ts.ScriptTarget.ES2022,
        verbatimModuleSyntax: true,
      },
    });
    const out = handlersModule(source);
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, toDist(outputText, dirname(source), rel));
  }
}
