import { describe, expect, it } from 'vitest';
import type { Io } from '../../cli/Command.ts';
import { main } from '../../cli/main.ts';

function capture(): Io & { out_: string[]; err_: string[] } {
  const out_: string[] = [];
  const err_: string[] = [];
  return { out_, err_, out: (l) => out_.push(l), err: (l) => err_.push(l) };
}

describe('opstate diagram', () => {
  it('prints the lifecycle from the machine definition: five states, RESET and RETRY edges', async () => {
    const io = capture();
    expect(await main(['diagram'], io)).toBe(0);
    const text = io.out_.join('\n');
    expect(text.split('\n')[0]).toBe('stateDiagram-v2');
    for (const state of ['PENDING', 'SCHEDULED', 'IN_PROGRESS', 'COMPLETED', 'FAILED']) {
      expect(text).toContain(state);
    }
    expect(text).toContain('[*] --> PENDING');
    expect(text).toMatch(/IN_PROGRESS --> PENDING : RESET \[/);
    expect(text).toMatch(/SCHEDULED --> PENDING : RESET \[/);
    expect(text).toContain('FAILED --> PENDING : RETRY');
    expect(text).toContain('COMPLETED --> [*]');
  });

  it('prints the physical-copy deletion machine on request and refuses unknown ones', async () => {
    const io = capture();
    expect(await main(['diagram', '--machine', 'physical-copy'], io)).toBe(0);
    expect(io.out_.join('\n')).toContain('DELETION_IN_PROGRESS --> DELETED : DELETION_SUCCEEDED');
    const bad = capture();
    expect(await main(['diagram', '--machine', 'nope'], bad)).toBe(2);
    expect(bad.err_.join('\n')).toMatch(
      /argument 'nope' is invalid\. Allowed choices are operation, physical-copy[\s\S]*opstate diagram --help/,
    );
  });

  it('answers unknown commands with exit 2 and the way to the list', async () => {
    const io = capture();
    expect(await main(['frobnicate'], io)).toBe(2);
    expect(io.err_.join('\n')).toMatch(/unknown command 'frobnicate'[\s\S]*opstate --help/);
  });
});
