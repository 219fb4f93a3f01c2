import fc from 'fast-check';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { type Configuration, loadConfiguration, secretsOf } from '../../runtime/Configuration.ts';
import { redactUrl, redactUrlList } from '../../transport/jetstream/natsCredentials.ts';
import { expectRefused, parseOrRefuse } from '../helpers/hostileInput.ts';

const { CONFIG } = OpstateErrorCode;

/** Characters that URLs get wrong: delimiters, percent signs, spaces, brackets, non-ASCII. */
const urlChars = fc.constantFrom(
  ...'abcXYZ019-._~:@/?#[]%!$&\'()*+,;= é日\u0000\\"'.split(''),
  '%41',
  '%zz',
  '%E0%A4%A',
  '%40',
);
const urlText = (maxLength: number) =>
  fc.array(urlChars, { maxLength }).map((parts) => parts.join(''));

/** A password that appears nowhere else in a URL built below (hosts and users are lower-case). */
const passwordArb = fc
  .tuple(fc.stringMatching(/^[A-Z]{4}$/), urlText(8))
  .map(([mark, rest]) => `PW${mark}${rest}`);

const hostArb = fc.oneof(
  fc.stringMatching(/^[a-z0-9.-]{1,20}$/),
  fc.constantFrom('[::1]', '[::1', 'db:5432', 'db:99999', 'h1:5432,h2:5433', 'db%zz', 'db%41'),
  urlText(10).map((t) => t.toLowerCase()),
);

/** A URL of `scheme`: near-valid parts, a password of its own, and parts of any characters. */
function urlArb(scheme: fc.Arbitrary<string>): fc.Arbitrary<{ url: string; password: string }> {
  return fc
    .record({
      scheme,
      user: fc.oneof(
        fc.stringMatching(/^[a-z]{1,8}$/),
        urlText(6).map((t) => t.toLowerCase()),
      ),
      password: fc.option(passwordArb, { nil: undefined }),
      host: hostArb,
      path: fc.oneof(fc.constant(''), fc.stringMatching(/^\/[a-z]{1,8}$/), urlText(8)),
      query: fc.oneof(
        fc.constant(''),
        urlText(10).map((t) => `?${t.toLowerCase()}`),
      ),
    })
    .map((u) => ({
      url: `${u.scheme}${u.user}${u.password === undefined ? '' : `:${u.password}`}@${u.host}${u.path}${u.query}`,
      password: u.password ?? '',
    }));
}

const databaseUrlArb = fc.oneof(
  urlArb(fc.constantFrom('postgres://', 'postgresql://', 'postgres:/', 'mysql://', '')),
  fc.string({ unit: 'binary', maxLength: 60 }).map((url) => ({ url, password: '' })),
);
const natsUrlArb = fc.oneof(
  fc
    .array(urlArb(fc.constantFrom('nats://', 'tls://', 'http://')), { minLength: 1, maxLength: 3 })
    .map((urls) => ({
      url: urls.map((u) => u.url).join(','),
      passwords: urls.map((u) => u.password).filter((p) => p !== ''),
    })),
  fc.string({ unit: 'binary', maxLength: 60 }).map((url) => ({ url, passwords: [] as string[] })),
);

/** The password percent-decoded, or as it is when it holds a `%` that decodes to nothing. */
function decodedOrAsIs(p: string): string {
  try {
    return decodeURIComponent(p);
  } catch {
    return p;
  }
}

function load(env: Record<string, string>): Configuration | OpstateError {
  return parseOrRefuse(() => loadConfiguration(env), CONFIG);
}

describe('DATABASE_URL', () => {
  it('is taken or refused with CONFIG; one taken is read by postgres.js, and its password never shown', () => {
    fc.assert(
      fc.property(databaseUrlArb, ({ url, password }) => {
        const config = load({ DATABASE_URL: url });
        if (config instanceof OpstateError) {
          if (password !== '') expect(config.message).not.toContain(password);
          return;
        }
        // A blank value is no value: the embedded database.
        expect(config.database.url).toBe(url.trim() === '' ? undefined : url);
        if (url.trim() === '') return;
        // What the client reads: a URL it would throw on (URIError, TypeError) is not taken.
        const client = postgres(url, { max: 1 });
        const pass = client.options.pass;
        if (typeof pass === 'string' && pass !== '') expect(secretsOf(config)).toContain(pass);
        if (password !== '') expect(redactUrl(url)).not.toContain(password);
      }),
      { numRuns: 400 },
    );
  });

  it('refuses a host postgres.js cannot decode, or a URL it cannot parse (it threw URIError or TypeError)', () => {
    for (const [url, why] of [
      ['postgres://u:PWsecret@db%zz/app', /its host is not well percent-encoded/],
      ['postgres://u:PWsecret@[::1/app', /not a URL a client can read/],
      ['postgres://u:PWsecret@db:99999/app', /not a URL a client can read/],
    ] as const) {
      expect(() => postgres(url)).toThrow();
      const refused = load({ DATABASE_URL: url });
      expectRefused(refused, CONFIG, why);
      expect((refused as OpstateError).message).not.toContain('PWsecret');
    }
    // A comma in a password no longer hides a bad percent-encoding after it from the check.
    const comma = 'postgres://u:PWsecret,%zz@db/app';
    expect(() => postgres(comma)).toThrow(URIError);
    expectRefused(load({ DATABASE_URL: comma }), CONFIG, /not well percent-encoded/);
    // Several hosts are the client's own form: taken, though no WHATWG URL.
    const several = 'postgres://u:p@h1:5432,h2:5433/app';
    expect(load({ DATABASE_URL: several })).not.toBeInstanceOf(OpstateError);
    expect(postgres(several).options.host).toEqual(['h1', 'h2']);
  });
});

describe('a DATABASE_URL whose user info holds a raw @', () => {
  it('keeps out of the logs the password as postgres.js reads it (up to the first @) as well', () => {
    // Found by the property above: the client read PWAAAA, the secrets held only PWAAAA@.,.
    const url = 'postgres://a:PWAAAA@.,@?';
    const config = load({ DATABASE_URL: url });
    expect(config).not.toBeInstanceOf(OpstateError);
    const pass = postgres(url, { max: 1 }).options.pass;
    expect(pass).toBe('PWAAAA');
    expect(secretsOf(config as Configuration)).toContain(pass);
  });
});

describe('a URL shown', () => {
  it('hides a password holding a raw /, ? or #, where a URL parser would end the user info', () => {
    for (const url of [
      'nats://ops:PW/secret@nats-1:4222',
      'postgres://app:PW?secret@db/app',
      'postgres://app:PW#secret@db/app',
      'app:PWsecret@db/app',
    ]) {
      expect(redactUrl(url)).not.toMatch(/PW|secret/);
    }
    const config = loadConfiguration({ NATS_URL: 'nats://ops:PW/secret@nats-1:4222' });
    expect(secretsOf(config)).toContain('PW/secret');
  });
});

describe('NATS_URL', () => {
  it('is taken or refused with CONFIG, and no password in it is ever shown', () => {
    fc.assert(
      fc.property(natsUrlArb, ({ url, passwords }) => {
        const config = load({ NATS_URL: url });
        if (config instanceof OpstateError) {
          for (const p of passwords) expect(config.message).not.toContain(p);
          return;
        }
        expect(config.nats.url).toBe(url.trim() === '' ? undefined : url);
        const shown = redactUrlList(url);
        for (const p of passwords) {
          expect(shown).not.toContain(p);
          // The logger keeps out the password as a URL parser reads it, which holds this one.
          expect(secretsOf(config).some((s) => s.includes(p) || s.includes(decodedOrAsIs(p)))).toBe(
            true,
          );
        }
      }),
      { numRuns: 300 },
    );
  });
});
