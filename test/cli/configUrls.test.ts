import { describe, expect, it } from 'vitest';
import { main } from '../../cli/main.ts';
import { loadConfiguration, secretsOf } from '../../runtime/Configuration.ts';
import { redactUrl } from '../../transport/jetstream/natsCredentials.ts';

/** `opstate <args>` in this process with `env` set for the call: exit code and what it printed. */
async function opstate(args: string[], env: Record<string, string>) {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  const out: string[] = [];
  try {
    const code = await main(args, { out: (l) => out.push(l), err: (l) => out.push(l) });
    return { code, text: out.join('\n') };
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe('URLs with secrets, read as a URL parser reads them', () => {
  it('a password holding a raw @ is redacted whole by opstate config', async () => {
    const url = 'postgres://app:pa@ss-w0rd@db.internal:5432/app';
    expect(redactUrl(url)).toBe('postgres://app:***@db.internal:5432/app');
    for (const args of [['config'], ['config', '--json']]) {
      const { code, text } = await opstate(args, {
        DATABASE_URL: url,
        NATS_URL: 'nats://ops:n@ts@127.0.0.1:4222',
      });
      expect(code).toBe(0);
      expect(text).toContain('app:***@db.internal:5432/app');
      expect(text).toContain('nats://ops:***@127.0.0.1:4222');
      for (const leaked of ['pa@ss', 'ss-w0rd', 'n@ts', 'ts@127'])
        expect(text).not.toContain(leaked);
    }
    // The logger keeps the whole password out of every line, not the part before its '@'.
    expect(secretsOf(loadConfiguration({ DATABASE_URL: url }))).toContain('pa@ss-w0rd');
    expect(redactUrl('postgres://db/app?password=hunter2&x=1')).toBe(
      'postgres://db/app?password=***&x=1',
    );
  });

  it('a badly percent-encoded DATABASE_URL or NATS_URL is a CONFIG error, not a stack trace', async () => {
    for (const [variable, value] of [
      ['DATABASE_URL', 'postgres://app:100%@127.0.0.1:5432/app'],
      ['DATABASE_URL', 'postgres://app:x@127.0.0.1:5432/a%zzpp'],
      ['NATS_URL', 'nats://ops:%E0%A4%A@127.0.0.1:4222'],
    ] as const) {
      for (const args of [['config'], ['migrate']]) {
        const { code, text } = await opstate(args, { [variable]: value });
        expect(code, `${args[0]} ${value}`).toBe(2);
        expect(text).toMatch(new RegExp(`${variable} must be .*percent-encoded.*\\[CONFIG\\]`));
        expect(text).not.toMatch(/URIError|\n\s+at /);
      }
    }
  });
});
