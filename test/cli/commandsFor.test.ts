import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { commandsFor, loadCommands } from '../../cli/commands/index.ts';
import { main } from '../../cli/main.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';

/** `opstate <args>` as a process of the built package: exit code and what it printed. */
async function opstate(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return promisify(execFile)(process.execPath, opstateArgs(args), { cwd: REPO_ROOT }).then(
    ({ stdout, stderr }) => ({ code: 0, out: stdout, err: stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({
      code: e.code,
      out: e.stdout,
      err: e.stderr,
    }),
  );
}

describe('loading the commands a command line needs', () => {
  it('loads the named command alone, under the name it registers', async () => {
    const all = await loadCommands();
    expect(all).toHaveLength(27);
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

describe('the built command line, as a process', () => {
  // The build rewrites each loader's import to the compiled module: only a process of dist/ shows
  // that a loader still finds its command.
  it('runs a command it loaded alone, and still suggests the fix for a misspelt one', async () => {
    const diagram = await opstate(['diagram']);
    expect(diagram.code).toBe(0);
    expect(diagram.out).toMatch(/^stateDiagram-v2/m);

    const misspelt = await opstate(['stauts']);
    expect(misspelt.code).toBe(2);
    expect(misspelt.err).toMatch(/unknown command 'stauts'[\s\S]*Did you mean status\?/);

    for (const name of ['worker', 'control-plane', 'status']) {
      const help = await opstate([name, '--help']);
      expect(help.code, name).toBe(0);
      expect(help.out, name).toMatch(new RegExp(`^Usage: opstate ${name} `, 'm'));
    }
  });
});
