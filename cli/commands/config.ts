import { loadConfiguration, redactConfiguration, SETTINGS } from '../../actors/Configuration.ts';
import { redactUrl } from '../../transport/jetstream/natsCredentials.ts';
import { type Command, parseFlags, UsageError } from '../Command.ts';

/**
 * `opstate config [--json]`: the configuration this process would run with, resolved from the
 * environment and validated, every secret shown as `***`. A bad value exits 2 naming the variable
 * and what it allows.
 *
 * @example
 * ```ts
 * await configCommand.run(['--json'], io);
 * ```
 */
export const configCommand: Command = {
  name: 'config',
  summary: 'Show the resolved configuration (environment and flags), secrets redacted',
  usage: 'opstate config [--json] [--metrics-port PORT]',
  async run(args, io) {
    const { values, positionals } = parseFlags(args, {
      json: { type: 'boolean' },
      'metrics-port': { type: 'string' },
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
    const metricsPort = values['metrics-port'];
    const config = loadConfiguration(process.env, metricsPort === undefined ? {} : { metricsPort });
    if (values.json === true) {
      io.out(JSON.stringify(redactConfiguration(config)));
      return 0;
    }
    const width = Math.max(...SETTINGS.map((s) => s.variable.length));
    for (const s of SETTINGS) {
      const raw = process.env[s.variable];
      const shown =
        raw === undefined || raw === ''
          ? '(not set)'
          : s.secret
            ? '***'
            : s.variable.endsWith('_URL')
              ? raw.split(',').map(redactUrl).join(',')
              : raw;
      io.out(`${s.variable.padEnd(width)}  ${shown}`);
    }
    const r = redactConfiguration(config);
    io.out('');
    io.out(
      `database   ${r.database.url ?? `embedded PGlite in ${r.database.dataDir}`}${r.database.tls === 'disable' ? '' : ` (TLS ${r.database.tls})`}`,
    );
    io.out(
      `transport  ${r.nats.url ?? 'in-process'}${r.nats.url === undefined ? '' : ` (auth ${r.nats.auth.type}${r.nats.tls === undefined ? '' : ', TLS'})`}`,
    );
    io.out(`prefix     ${r.prefix}`);
    io.out(`log level  ${r.logLevel}`);
    io.out(`metrics    ${r.metricsPort === undefined ? 'off' : `port ${r.metricsPort}`}`);
    return 0;
  },
};
