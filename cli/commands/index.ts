import type { Command } from '../Command.ts';

/**
 * Every sub-command by name, in the order `opstate --help` lists them, each loaded when it is
 * wanted: a process imports what its one command needs (`opstate diagram` no database driver,
 * a worker no dashboard), not the whole command line.
 */
const LOADERS: ReadonlyMap<string, () => Promise<Command>> = new Map([
  ['location', async () => (await import('./location.ts')).locationCommand],
  ['artifact', async () => (await import('./artifact.ts')).artifactCommand],
  ['copy', async () => (await import('./copy.ts')).copyCommand],
  ['submit', async () => (await import('./submit.ts')).submitCommand],
  ['list', async () => (await import('./list.ts')).listCommand],
  ['wait', async () => (await import('./wait.ts')).waitCommand],
  ['status', async () => (await import('./status.ts')).statusCommand],
  ['recount', async () => (await import('./recount.ts')).recountCommand],
  ['inspect', async () => (await import('./inspect.ts')).inspectCommand],
  ['retry', async () => (await import('./operatorCommands.ts')).retryCommand],
  ['reset', async () => (await import('./operatorCommands.ts')).resetCommand],
  ['cancel', async () => (await import('./operatorCommands.ts')).cancelCommand],
  ['stage', async () => (await import('./stage.ts')).stageCommand],
  ['release', async () => (await import('./stage.ts')).releaseCommand],
  ['rollback', async () => (await import('./rollback.ts')).rollbackCommand],
  ['breaker', async () => (await import('./breaker.ts')).breakerCommand],
  ['limit', async () => (await import('./limit.ts')).limitCommand],
  ['archive', async () => (await import('./archive.ts')).archiveCommand],
  ['policy', async () => (await import('./policy.ts')).policyCommand],
  ['retention', async () => (await import('./retention.ts')).retentionCommand],
  ['migrate', async () => (await import('./migrate.ts')).migrateCommand],
  ['control-plane', async () => (await import('./controlPlane.ts')).controlPlaneCommand],
  ['worker', async () => (await import('./worker.ts')).workerCommand],
  ['dashboard', async () => (await import('./dashboard.ts')).dashboardCommand],
  ['config', async () => (await import('./config.ts')).configCommand],
  ['diagram', async () => (await import('./diagram.ts')).diagramCommand],
  ['demo', async () => (await import('./demo.ts')).demoCommand],
]);

/** Every sub-command, in the order `opstate --help` lists them. */
export function loadCommands(): Promise<Command[]> {
  return Promise.all([...LOADERS.values()].map((load) => load()));
}

/**
 * The commands a command line needs: the one it names, none for `--version`, or, for anything
 * else (no command, `--help`, `help`, a misspelt name that commander suggests a fix for), all of
 * them.
 */
export async function commandsFor(argv: readonly string[]): Promise<Command[]> {
  if (argv[0] === '--version' || argv[0] === '-V') return [];
  const load = LOADERS.get(argv[0] ?? '');
  return load === undefined ? loadCommands() : [await load()];
}
