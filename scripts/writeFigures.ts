/**
 * `npm run figures [-- bench …]`: runs the benchmarks (`bench/run.ts`, all of them or the ones
 * named), keeps every JSON line they print, and writes `docs/figures.md` from those lines alone:
 * the machine and the date of the run, a table per benchmark, and where each figure stands
 * against its target. Nothing on the page is typed by hand; `docs/benchmarks.md` keeps the dated
 * history and its reading.
 *
 *   npm run figures                      # every bench, then the page
 *   npm run figures -- e2e peers         # only those (the page says which ran)
 *   npm run figures -- --from run.jsonl  # the page from lines kept earlier, with their header
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** One line a benchmark printed, tagged by `bench/run.ts` with the bench that printed it. */
export interface FigureLine {
  readonly bench: string;
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  readonly baseline?: number;
  readonly ratio?: number;
  readonly note?: string;
}

/** What the page says of the run: where and when it ran, and on which build. */
export interface RunHeader {
  readonly started: string;
  readonly finished: string;
  readonly commit: string;
  readonly machine: string;
  readonly node: string;
  readonly postgres: string;
  readonly nats: string;
  readonly loadBefore: readonly number[];
  readonly loadAfter: readonly number[];
  readonly benches: readonly string[];
  readonly failed: readonly string[];
}

/** A target a figure is held to: its text, and whether a measured line meets it. */
interface Target {
  readonly match: RegExp;
  readonly text: string;
  readonly met: (f: FigureLine) => boolean;
}

const ratioAtLeast = (x: number) => (f: FigureLine) => (f.ratio ?? f.value) >= x;

/**
 * The open targets, by figure name; a figure that matches none is reported without one. The
 * throughput targets are ratios to peers measured in the same run; the absolute CPU target
 * (0.5 ms per operation) and the ratio to the raw single-row commit rate are withdrawn (they
 * followed the machine's disk more than the build). The WAL and CPU targets for fewer writes per
 * operation compare two builds, which one run of the benches does not: docs/benchmarks.md keeps
 * them, measured side by side.
 */
export const TARGETS: readonly Target[] = [
  {
    match: /^peers_opstate_vs_(dbos_queue|restate)$/,
    text: '≥ 6 × the durable-execution engine, same run',
    met: ratioAtLeast(6),
  },
  {
    match: /^peers_opstate_vs_graphile_worker_batched$/,
    text: '≥ 0.3 × graphile-worker batched, same run, on the way to ≥ 0.5 ×',
    met: ratioAtLeast(0.3),
  },
  { match: /^e2e_statements_per_op_/, text: '≤ 2, then well under 1', met: (f) => f.value <= 2 },
  {
    match: /^trickle_latency_.*_p99$/,
    text: '≤ 5 × p50 under half of the peak load',
    met: (f) => f.ratio === undefined || f.ratio <= 5,
  },
  {
    match: /^control_plane_memory_ratio$/,
    text: '≤ 1.2 × the memory with 1,000 stored',
    met: (f) => f.value <= 1.2,
  },
  { match: /^snapshot_size_max$/, text: '≤ 1 KB', met: (f) => f.value <= 1024 },
  {
    match: /^inflight_.*_ratio$/,
    text: '≤ 1.2 × the cost per operation in flight at the smallest size',
    met: (f) => typeof f.ratio === 'number' && f.ratio <= 1.2,
  },
  {
    match: /^e2e_stored_history_ratio$/,
    text: '≥ 0.91 × the throughput on an empty database, same run (the target is over 10,000,000 stored: OPSTATE_BENCH_STORED)',
    met: ratioAtLeast(0.91),
  },
  {
    match: /^e2e_with_limits$/,
    text: '≥ 0.9 × the throughput without limits, same run',
    met: ratioAtLeast(0.9),
  },
];

function targetOf(f: FigureLine): Target | undefined {
  return TARGETS.find((t) => t.match.test(f.name));
}

const cell = (x: unknown) => (x === undefined ? '' : String(x).replaceAll('|', '\\|'));

/**
 * The page for one run: its header, then a table per bench in the order they ran.
 *
 * @example
 * ```ts
 * writeFileSync('docs/figures.md', figuresPage(header, lines));
 * ```
 */
export function figuresPage(header: RunHeader, lines: readonly FigureLine[]): string {
  const out = [
    '# Figures',
    '',
    "<!-- written by `npm run figures` from the benchmarks' JSON lines; do not edit by hand -->",
    '',
    `The last recorded run of \`npm run bench${header.benches.length > 0 ? ` -- ${header.benches.join(' ')}` : ''}\`, as its lines`,
    'printed it. Compare figures within one run only: absolute times on these machines move 2–3 ×',
    'from day to day, the ratios measured side by side hold. The dated history, and how to read',
    'each figure, is in [benchmarks.md](benchmarks.md).',
    '',
    '| run | |',
    '| --- | --- |',
    `| started | ${header.started} |`,
    `| finished | ${header.finished} |`,
    `| commit | \`${header.commit}\` |`,
    `| machine | ${cell(header.machine)} |`,
    `| Node | ${header.node} |`,
    `| Postgres | ${cell(header.postgres)} |`,
    `| nats-server | ${cell(header.nats)} |`,
    `| load average before, after (1, 5, 15 min) | ${header.loadBefore.join(', ')}; ${header.loadAfter.join(', ')} |`,
  ];
  if (header.failed.length > 0) out.push(`| failed | ${header.failed.join(', ')} |`);
  const met = lines.filter((f) => targetOf(f)?.met(f) === true).length;
  const targeted = lines.filter((f) => targetOf(f) !== undefined).length;
  out.push('', `Against the open targets: ${met} of ${targeted} figures with a target meet it.`);
  for (const bench of [...new Set(lines.map((f) => f.bench))]) {
    out.push('', `## ${bench}`, '');
    out.push('| figure | value | unit | baseline | ratio | target | meets it | note |');
    out.push('| --- | ---: | --- | ---: | ---: | --- | --- | --- |');
    for (const f of lines.filter((l) => l.bench === bench)) {
      const t = targetOf(f);
      const meets = t === undefined ? '' : t.met(f) ? 'yes' : '**no**';
      out.push(
        `| \`${f.name}\` | ${f.value} | ${cell(f.unit)} | ${cell(f.baseline)} | ${cell(f.ratio)} | ${cell(t?.text)} | ${meets} | ${cell(f.note)} |`,
      );
    }
  }
  out.push('', "## The run's lines", '', '```jsonl', `${JSON.stringify(header)}`);
  for (const f of lines) out.push(JSON.stringify(f));
  out.push('```', '');
  return out.join('\n');
}

/** Reads the lines a run printed: figures carry a bench and a numeric value, the rest is dropped. */
export function parseFigureLines(text: string): FigureLine[] {
  const figures: FigureLine[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      continue;
    }
    const f = parsed as Partial<FigureLine>;
    if (typeof f.bench === 'string' && typeof f.name === 'string' && typeof f.value === 'number') {
      figures.push(f as FigureLine);
    }
  }
  return figures;
}

/**
 * The benches `bench/run.ts` said exited non-zero (its `{"bench", "exit"}` line after each),
 * whether or not they printed figures first.
 *
 * @example
 * ```ts
 * failedBenches('{"bench":"peers","exit":1}\n'); // ['peers']
 * ```
 */
export function failedBenches(text: string): string[] {
  const failed: string[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{"bench"')) continue;
    try {
      const r = JSON.parse(line) as { bench?: unknown; exit?: unknown };
      if (typeof r.bench === 'string' && typeof r.exit === 'number' && r.exit !== 0) {
        failed.push(r.bench);
      }
    } catch {
      // not the runner's line
    }
  }
  return failed;
}

function quietly(command: string, args: readonly string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      .trim()
      .split('\n')[0] as string;
  } catch {
    return 'unknown';
  }
}

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const load = () => loadavg().map((x) => Math.round(x * 100) / 100);

async function runBenches(benches: readonly string[]): Promise<{ text: string; code: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...benches], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let text = '';
  child.stdout.on('data', (d: Buffer) => {
    text += d.toString();
    process.stdout.write(d);
  });
  const code = await new Promise<number>((done) => child.on('close', (c) => done(c ?? 1)));
  return { text, code };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const from = args.indexOf('--from');
  let header: RunHeader;
  let lines: FigureLine[];
  if (from >= 0) {
    const text = readFileSync(args[from + 1] ?? '', 'utf8');
    header = JSON.parse(text.split('\n')[0] ?? '{}') as RunHeader;
    lines = parseFigureLines(text);
  } else {
    const started = new Date().toISOString();
    const loadBefore = load();
    const { text, code } = await runBenches(args);
    lines = parseFigureLines(text);
    header = {
      started,
      finished: new Date().toISOString(),
      commit: `${quietly('git', ['rev-parse', '--short', 'HEAD'])}${quietly('git', ['status', '--porcelain']) === '' ? '' : ' (with uncommitted changes)'}`,
      machine: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB`,
      node: process.version,
      postgres: quietly('psql', [
        '-h',
        '127.0.0.1',
        '-U',
        'postgres',
        '-Atc',
        'show server_version',
      ]),
      nats: quietly('nats-server', ['--version']),
      loadBefore,
      loadAfter: load(),
      benches: args,
      failed: failedBenches(text),
    };
    if (code !== 0) process.exitCode = 1;
  }
  writeFileSync(new URL('../docs/figures.md', import.meta.url), figuresPage(header, lines));
  process.stderr.write(`wrote docs/figures.md from ${lines.length} figures\n`);
}
