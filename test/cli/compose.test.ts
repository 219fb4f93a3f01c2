import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { commands } from '../../cli/commands/index.ts';

/** docker-compose.yml is for users (no engine runs here): keep it in step with the code. */
const compose = readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8');

describe('docker-compose.yml', () => {
  it('runs only commands the CLI has', () => {
    const used = [...compose.matchAll(/bin\/opstate\.js"?,?\s*"?([a-z-]+)/g)].map((m) => m[1]);
    expect(used.length).toBeGreaterThanOrEqual(3);
    const names = commands.map((c) => c.name);
    for (const name of used) expect(names).toContain(name);
  });

  it('sets the environment the runtime reads', () => {
    const runtime = readFileSync(new URL('../../actors/Runtime.ts', import.meta.url), 'utf8');
    const database = readFileSync(
      new URL('../../persistence/openDatabase.ts', import.meta.url),
      'utf8',
    );
    for (const name of ['NATS_URL', 'OPSTATE_PREFIX']) {
      expect(compose).toContain(`${name}:`);
      expect(runtime).toContain(`'${name}'`);
    }
    expect(compose).toContain('DATABASE_URL:');
    expect(database).toContain('process.env.DATABASE_URL');
  });

  it('starts NATS with JetStream', () => {
    expect(compose).toMatch(/image: nats:2\.9[\s\S]*"-js"/);
  });
});
