/**
 * `npm run bench`: runs every benchmark under bench/ one after the other, each in a child process
 * of its own (a fresh heap, its own database and NATS prefix), passing their JSON lines through
 * on stdout, each tagged with the bench that printed it (`"bench": "e2e"`), and their diagnostics
 * on stderr. Exits non-zero if any of them failed, after running the rest. `npm run figures` runs
 * it and writes docs/figures.md from those lines.
 *
 *   npm run bench                        # persistence, transport, e2e, peers, recovery, deletion, …, scheduler, cluster, pipeline, inflight
 *   npm run bench -- e2e                 # only the named ones
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BENCHES = [
  'persistence',
  'transport',
  'e2e',
  'peers',
  'recovery',
  'deletion',
  'embedded',
  'dashboard',
  'scheduler',
  'cluster',
  'pipeline',
  'inflight',
  'retention',
] as const;
const ROOT = fileURLToPath(new URL('../', import.meta.url));

function runOne(name: string): Promise<number> {
  const file = fileURLToPath(new URL(`./${name}.ts`, import.meta.url));
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      cwd: ROOT,
      env: process.env,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    tagLines(child.stdout, name);
    child.on('error', (err) => {
      process.stderr.write(`bench ${name}: ${err.message}\n`);
      resolve(1);
    });
    child.on('close', (code, signal) => resolve(code ?? (signal === null ? 1 : 128)));
  });
}

/** Passes a bench's stdout through line by line, adding `bench` to each JSON object. */
function tagLines(stdout: NodeJS.ReadableStream, bench: string): void {
  let pending = '';
  const emit = (line: string) => {
    let tagged = line;
    if (line.startsWith('{')) {
      try {
        tagged = JSON.stringify({ bench, ...JSON.parse(line) });
      } catch {
        // not a figure: passed on as it came
      }
    }
    process.stdout.write(`${tagged}\n`);
  };
  stdout.on('data', (d: Buffer) => {
    const parts = (pending + d.toString()).split('\n');
    pending = parts.pop() ?? '';
    for (const line of parts) emit(line);
  });
  stdout.on('end', () => {
    if (pending !== '') emit(pending);
  });
}

const wanted = process.argv.slice(2);
const unknown = wanted.filter((w) => !(BENCHES as readonly string[]).includes(w));
if (unknown.length > 0) {
  process.stderr.write(`unknown bench ${unknown.join(', ')}; choose from ${BENCHES.join(', ')}\n`);
  process.exit(2);
}
let failed = 0;
for (const name of wanted.length > 0 ? wanted : BENCHES) {
  const started = performance.now();
  const code = await runOne(name);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  process.stderr.write(
    `bench ${name}: ${code === 0 ? 'done' : `failed (exit ${code})`} in ${seconds} s\n`,
  );
  // On stdout too, as a line of its own (no figure: it has no value), so whoever keeps the lines
  // knows which bench failed even when it printed some figures first.
  process.stdout.write(`${JSON.stringify({ bench: name, exit: code })}\n`);
  if (code !== 0) failed++;
}
process.exitCode = failed > 0 ? 1 : 0;
