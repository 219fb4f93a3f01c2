import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

describe("the README's quick start", () => {
  it('is the quick-start region of examples/01_embedded_pipeline.ts, which tsc checks', () => {
    const example = read('examples/01_embedded_pipeline.ts');
    const region = /\/\/ #region quick-start\n([\s\S]*?)\/\/ #endregion quick-start\n/.exec(
      example,
    );
    expect(region?.[1]).toBeDefined();
    // When this fails, paste the region (between its markers) into the README's ts block.
    expect(read('README.md')).toContain(`\`\`\`ts\n${region?.[1]}\`\`\``);
  });
});
