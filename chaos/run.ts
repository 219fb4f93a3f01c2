/**
 * `npm run chaos -- --minutes N [--seed S] [--workers W] [--parallel P] [--report FILE]`: a chaos soak on private
 * servers (see docs/chaos.md). Prints the seed, each fault as it happens (stderr), then one JSON
 * line per figure and per invariant on stdout; exits 1 when an invariant broke or a pipeline did
 * not finish.
 */
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { recoveries } from './figures.ts';
import { runChaos } from './runChaos.ts';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '3' },
    seed: { type: 'string' },
    workers: { type: 'string', default: '3' },
    parallel: { type: 'string', default: '3' },
    report: { type: 'string' },
  },
});
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
const minutes = Number(values.minutes);
if (!Number.isFinite(minutes) || minutes <= 0 || !Number.isSafeInteger(seed)) {
  process.stderr.write(
    'usage: npm run chaos -- --minutes N [--seed S] [--workers W] [--parallel P]\n',
  );
  process.exit(2);
}
const line = (o: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ bench: 'chaos', ...o })}\n`);
process.stderr.write(`chaos: seed ${seed}, ${minutes} min\n`);
const report = await runChaos({
  seed,
  workloadMs: minutes * 60_000,
  parallel: Number(values.parallel),
  workers: Number(values.workers),
  faults: 'random',
  gapMs: [2_000, 8_000],
  settleMs: 180_000,
  log: (l) => process.stderr.write(`chaos: ${l}\n`),
});
line({ figure: 'seed', value: seed, unit: 'seed' });
for (const f of report.figures) line({ ...f });
const unfinished = report.pipelines.filter((p) => p.outcome !== 'completed');
line({ figure: 'pipelines', value: report.pipelines.length, unit: 'count' });
line({
  figure: 'pipelines_not_completed',
  value: unfinished.length,
  unit: 'count',
  note: JSON.stringify(unfinished.map((p) => [p.name, p.outcome])),
});
line({ figure: 'deletions_settled', value: report.deletionsSettled ? 1 : 0, unit: 'bool' });
for (const i of report.invariants) {
  line({
    figure: `invariant ${i.name}`,
    value: i.violations.length,
    unit: 'violations',
    checked: i.checked,
    ...(i.violations.length === 0 ? {} : { violations: i.violations.slice(0, 20) }),
  });
}
// Everything the checks read, with each recovery, for a closer look at a broken run.
const file = values.report ?? join(tmpdir(), `opstate-chaos-${seed}-${process.pid}.json`);
await writeFile(
  file,
  JSON.stringify({ ...report, recoveries: recoveries(report.facts, report.faults) }, null, 1),
);
process.stderr.write(`chaos: the whole report (facts, faults, recoveries) is in ${file}\n`);
const broken = report.invariants.some((i) => i.violations.length > 0);
process.exitCode = broken ? 1 : 0;
