import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  type FigureLine,
  failedBenches,
  figuresPage,
  parseFigureLines,
  type RunHeader,
} from '../../scripts/writeFigures.ts';

const header: RunHeader = {
  started: '2026-12-05T10:00:00.000Z',
  finished: '2026-12-05T10:20:00.000Z',
  commit: 'abc1234',
  machine: '2 × a CPU, 24 GiB',
  node: 'v20.20.2',
  postgres: '15.20',
  nats: 'nats-server: v2.9.10',
  loadBefore: [0.5, 0.4, 0.3],
  loadAfter: [2, 1, 0.5],
  benches: ['e2e'],
  failed: [],
};

describe('docs/figures.md, written from the benchmarks’ lines', () => {
  it('keeps only figure lines: tagged by a bench, with a numeric value', () => {
    const text = [
      '{"bench":"e2e","name":"e2e_ops_per_s_in_process","value":900,"unit":"ops/s","baseline":3000,"ratio":0.3}',
      'bench e2e: done in 12 s',
      '{"name":"untagged","value":1,"unit":"x"}',
      '{"bench":"e2e","name":"no value","unit":"x"}',
      '{not json',
      '{"bench":"peers","name":"peers_opstate_vs_pg_boss","value":1.2,"unit":"×"}',
    ].join('\n');
    expect(parseFigureLines(text).map((f) => f.name)).toEqual([
      'e2e_ops_per_s_in_process',
      'peers_opstate_vs_pg_boss',
    ]);
  });

  it('names each bench the runner said failed, figures printed first or not', () => {
    const text = [
      '{"bench":"persistence","name":"raw_single_row_update","value":5000,"unit":"rows/s"}',
      '{"bench":"persistence","exit":0}',
      '{"bench":"peers","name":"raw_single_row_update","value":4000,"unit":"rows/s"}',
      '{"bench":"peers","exit":1}',
      '{"bench":"recovery","exit":130}',
    ].join('\n');
    expect(failedBenches(text)).toEqual(['peers', 'recovery']);
    expect(parseFigureLines(text).map((f) => f.bench)).toEqual(['persistence', 'peers']);
  });

  it('says where each figure stands against its target, met or not', () => {
    const lines: FigureLine[] = [
      {
        bench: 'peers',
        name: 'peers_opstate_vs_restate',
        value: 2300,
        unit: 'ops/s',
        baseline: 590,
        ratio: 3.9,
      },
      {
        bench: 'peers',
        name: 'peers_opstate_vs_graphile_worker_batched',
        value: 2300,
        unit: 'ops/s',
        baseline: 7000,
        ratio: 0.33,
      },
      { bench: 'e2e', name: 'e2e_cpu_ms_per_op_in_process', value: 0.42, unit: 'cpu ms/op' },
    ];
    const page = figuresPage(header, lines);
    expect(page).toContain('| commit | `abc1234` |');
    expect(page).toContain('Against the open targets: 1 of 2 figures with a target meet it.');
    expect(page).toMatch(/`peers_opstate_vs_restate` \| 2300 .*≥ 6 × .*\| \*\*no\*\* \|/);
    expect(page).toMatch(
      /`peers_opstate_vs_graphile_worker_batched` \| 2300 .*≥ 0.3 × .*\| yes \|/,
    );
    // A withdrawn target is not read against: the figure is reported without one.
    expect(page).toMatch(
      /`e2e_cpu_ms_per_op_in_process` \| 0.42 \| cpu ms\/op \| {2}\| {2}\| {2}\| {2}\|/,
    );
  });

  it('is exactly what the script writes from the run’s own lines, kept at its end', () => {
    const page = readFileSync(new URL('../../docs/figures.md', import.meta.url), 'utf8');
    const block = /```jsonl\n([\s\S]*?)```/.exec(page)?.[1] ?? '';
    const [first, ...rest] = block.trimEnd().split('\n');
    const recorded = JSON.parse(first ?? '{}') as RunHeader;
    const lines = parseFigureLines(rest.join('\n'));
    expect(lines.length).toBeGreaterThan(10);
    expect(figuresPage(recorded, lines)).toBe(page);
  });
});
