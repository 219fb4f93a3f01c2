import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/**
 * The markers around a generated part of a Markdown page: the text between them is written by
 * `npm run docs` and held to its source by a test; the rest of the page is written by hand.
 */
function markers(name: string): { begin: string; end: string } {
  return {
    begin: `<!-- generated: ${name} — written by \`npm run docs\`; edit the source, not this part -->`,
    end: `<!-- end of generated: ${name} -->`,
  };
}

function bounds(page: string, name: string): { from: number; to: number } {
  const { begin, end } = markers(name);
  const start = page.indexOf(begin);
  const stop = page.indexOf(end);
  if (start === -1 || stop === -1 || stop < start) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `the page has no generated part '${name}'; put the lines ${begin} and ${end} where it belongs`,
    );
  }
  return { from: start + begin.length, to: stop };
}

/**
 * The generated part called `name` of a page, without its markers.
 *
 * @example
 * ```ts
 * const current = generatedSectionOf(readFileSync('docs/cli.md', 'utf8'), 'cli');
 * ```
 */
export function generatedSectionOf(page: string, name: string): string {
  const { from, to } = bounds(page, name);
  return page.slice(from, to);
}

/**
 * The page with its generated part called `name` replaced by `body` (set between blank lines).
 *
 * @example
 * ```ts
 * writeFileSync('docs/cli.md', replaceGeneratedSection(page, 'cli', await cliReference()));
 * ```
 */
export function replaceGeneratedSection(page: string, name: string, body: string): string {
  const { from, to } = bounds(page, name);
  return `${page.slice(0, from)}${framed(body)}${page.slice(to)}`;
}

/** A generated body as it sits between its markers. */
export function framed(body: string): string {
  return `\n\n${body.trim()}\n\n`;
}
