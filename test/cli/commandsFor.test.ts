import { describe, expect, it } from 'vitest';
import { commandsFor, loadCommands } from '../../cli/commands/index.ts';
import { main } from '../../cli/main.ts';

describe('loading the commands a command line needs', () => {
  it('loads the named command alone, under the name it registers', async () => {
    const all = await loadCommands();
    expect(all).toHaveLength(22);
    for (const { name } of all) {
      const loaded = await commandsFor([name, '--help']);
      expect(loaded.map((c) => c.name)).toEqual([name]);
    }
  });

  it('loads every command, in help order, for help, no command, or a name it does not know', async () => {
    const names = (await loadCommands()).map((c) => c.name);
    expect(new Set(names).size).toBe(names.length);
    for (const argv of [[], ['--help'], ['help', 'status'], ['stauts'], ['control_plane']]) {
      expect((await commandsFor(argv)).map((c) => c.name)).toEqual(names);
    }
    const out: string[] = [];
    expect(await main(['--help'], { out: (l) => out.push(l), err: () => {} })).toBe(0);
    const help = out.join('\n');
    for (const name of names) expect(help).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
  });
});
