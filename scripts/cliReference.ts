import type { Command as Program } from 'commander';
import { createProgram } from '../cli/Command.ts';
import { loadCommands } from '../cli/commands/index.ts';

/** The width the reference wraps help at, whatever terminal runs the script. */
const HELP_WIDTH = 100;

/** `opstate location add` → `#opstate-location-add`, as GitHub anchors a heading. */
function anchorOf(path: string): string {
  return `#${path
    .toLowerCase()
    .replace(/[^a-z0-9 -]/g, '')
    .replace(/ /g, '-')}`;
}

/**
 * The command reference of `docs/cli.md`: what `opstate --help` and every `opstate <command>
 * --help` print, built in process from the commander definitions of every command (no process
 * is started), each under a heading of its own, after a list linking to them.
 *
 * @example
 * ```ts
 * writeFileSync('docs/cli.md', replaceGeneratedSection(page, 'cli', await cliReference()));
 * ```
 */
export async function cliReference(): Promise<string> {
  const lines: string[] = [];
  const io = { out: (line: string) => lines.push(line), err: (line: string) => lines.push(line) };
  const { program } = createProgram(await loadCommands(), io);
  const sections: { path: string; depth: number; summary: string; help: string }[] = [];
  const walk = (command: Program, path: string, depth: number) => {
    command.configureOutput({ getOutHelpWidth: () => HELP_WIDTH, getOutHasColors: () => false });
    lines.length = 0;
    // What `--help` prints: the help and any text added after it.
    command.outputHelp();
    sections.push({ path, depth, summary: command.description(), help: lines.join('\n') });
    for (const sub of command.commands) walk(sub, `${path} ${sub.name()}`, depth + 1);
  };
  walk(program, 'opstate', 0);
  const index = sections
    .slice(1)
    .map((s) => `${'  '.repeat(s.depth - 1)}- [\`${s.path}\`](${anchorOf(s.path)}): ${s.summary}`);
  const bodies = sections.map(
    (s) => `${s.depth <= 1 ? '##' : '###'} ${s.path}\n\n\`\`\`text\n${s.help.trimEnd()}\n\`\`\``,
  );
  return [index.join('\n'), ...bodies].join('\n\n');
}
