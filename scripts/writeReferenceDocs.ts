/**
 * `npm run docs`: writes the generated parts of the reference pages from their sources — the
 * command reference of `docs/cli.md` from the commander program, the tables of
 * `docs/configuration.md` from the settings, `RuntimeOptions` and the timers. A test fails while
 * a page differs from what this would write.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { cliReference } from './cliReference.ts';
import { configurationReference } from './configurationReference.ts';
import { replaceGeneratedSection } from './generatedSection.ts';

/** Every generated part of every reference page, by page and part name. */
export async function referenceSections(): Promise<Record<string, Record<string, string>>> {
  return {
    'docs/cli.md': { commands: await cliReference() },
    'docs/configuration.md': configurationReference(),
  };
}

const ROOT = new URL('../', import.meta.url);

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const [file, sections] of Object.entries(await referenceSections())) {
    const path = new URL(file, ROOT);
    let page = readFileSync(path, 'utf8');
    for (const [name, body] of Object.entries(sections)) {
      page = replaceGeneratedSection(page, name, body);
    }
    writeFileSync(path, page);
    process.stdout.write(`wrote ${file}\n`);
  }
}
