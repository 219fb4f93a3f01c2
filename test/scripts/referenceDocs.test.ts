import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadCommands } from '../../cli/commands/index.ts';
import { OpstateError } from '../../machines/OpstateError.ts';
import { SETTINGS } from '../../runtime/Configuration.ts';
import { resolveRuntimeTiming } from '../../runtime/RuntimeTiming.ts';
import {
  framed,
  generatedSectionOf,
  replaceGeneratedSection,
} from '../../scripts/generatedSection.ts';
import { typeMembers } from '../../scripts/typeMembers.ts';
import { referenceSections } from '../../scripts/writeReferenceDocs.ts';

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

describe('the reference pages', () => {
  it('are what npm run docs writes from the program, the settings and the timers', async () => {
    for (const [file, sections] of Object.entries(await referenceSections())) {
      const page = read(file);
      for (const [name, body] of Object.entries(sections)) {
        // When this fails, run `npm run docs` and commit the pages it rewrote.
        expect(generatedSectionOf(page, name), `${file}: ${name}`).toBe(framed(body));
      }
    }
  });

  it('name every command and every flag of the program', async () => {
    const cli = read('docs/cli.md');
    const commands = await loadCommands();
    expect(commands.length).toBeGreaterThan(20);
    for (const c of commands) {
      expect(cli, c.name).toContain(`## opstate ${c.name}\n`);
      expect(cli, c.name).toContain(c.summary.split('\n')[0]);
    }
    for (const flag of ['--kinds <kinds>', '--allow-actions', '--replan', '--by <name>']) {
      expect(cli).toContain(flag);
    }
  });

  it('list every variable, every createRuntime option and every timer', () => {
    const configuration = read('docs/configuration.md');
    for (const s of SETTINGS) expect(configuration).toContain(`| \`${s.variable}\` |`);
    for (const m of typeMembers('runtime/RuntimeOptions.ts', 'RuntimeOptions')) {
      expect(configuration).toContain(`| \`${m.name}\` |`);
    }
    for (const [timer, value] of Object.entries(resolveRuntimeTiming({}))) {
      expect(configuration).toContain(`| \`${timer}\` | ${value}`);
    }
  });
});

describe('generated sections', () => {
  const page = [
    '# Page',
    'by hand',
    '<!-- generated: part — written by `npm run docs`; edit the source, not this part -->',
    'old',
    '<!-- end of generated: part -->',
    'by hand again',
  ].join('\n');

  it('replace only the text between their markers', () => {
    const next = replaceGeneratedSection(page, 'part', 'new\n');
    expect(generatedSectionOf(next, 'part')).toBe('\n\nnew\n\n');
    expect(next.startsWith('# Page\nby hand\n<!-- generated: part')).toBe(true);
    expect(next.endsWith('<!-- end of generated: part -->\nby hand again')).toBe(true);
    expect(replaceGeneratedSection(next, 'part', 'new')).toBe(next);
  });

  it('refuse a page without the markers, naming the lines to add', () => {
    expect(() => generatedSectionOf('# Page\n', 'part')).toThrow(OpstateError);
    expect(() => replaceGeneratedSection('# Page\n', 'part', 'x')).toThrow(
      /put the lines <!-- generated: part/,
    );
  });
});

describe('typeMembers', () => {
  it('reads each property with its TSDoc, from an interface and from an intersection', () => {
    const options = typeMembers('runtime/RuntimeOptions.ts', 'RuntimeOptions');
    expect(options.find((m) => m.name === 'databaseUrl')).toEqual({
      name: 'databaseUrl',
      type: 'string',
      optional: true,
      doc: 'Postgres URL; default `DATABASE_URL`, else an embedded database in `dataDir`.',
    });
    expect(typeMembers('runtime/RuntimeTiming.ts', 'RuntimeTiming').map((m) => m.name)).toEqual([
      'leaderPollMs',
      'leaderLeaseMs',
      'deadlines',
    ]);
  });

  it('refuses a type the file does not declare', () => {
    expect(() => typeMembers('runtime/Runtime.ts', 'NoSuchType')).toThrow(
      /declares no interface or type NoSuchType/,
    );
  });
});
