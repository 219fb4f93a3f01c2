import postgres from 'postgres';
import type { Logger } from '../../observe/Logger.ts';
import { ADMIN_URL } from './settings.ts';

/**
 * A bench's log: WARNING and ERROR lines to stderr, tagged with the bench's name (the rest would
 * only cost time), and `say` for the bench's own progress lines.
 *
 * @example
 * ```ts
 * const { quietLogger, say } = benchLog('scheduler');
 * say('round 1');
 * ```
 */
export function benchLog(tag: string): { quietLogger: Logger; say: (line: string) => void } {
  return {
    quietLogger: {
      log(level, message, fields) {
        if (level !== 'WARNING' && level !== 'ERROR') return;
        process.stderr.write(`[${tag}] ${level} ${message} ${JSON.stringify(fields ?? {})}\n`);
      },
    },
    say: (line) => process.stderr.write(`[${tag}] ${line}\n`),
  };
}

/**
 * The databases a bench creates on the server of `ADMIN_URL` (a template and its copies), over
 * one admin connection: `create` returns the new database's URL, `dropAll` drops every one it
 * created and ends the connection.
 *
 * @example
 * ```ts
 * const dbs = benchDatabases();
 * try { const url = await dbs.create('bench_x'); … } finally { await dbs.dropAll(); }
 * ```
 */
export function benchDatabases() {
  const admin = postgres(ADMIN_URL, { max: 2, onnotice: () => {} });
  const created: string[] = [];
  const urlOf = (name: string) => {
    const url = new URL(ADMIN_URL);
    url.pathname = `/${name}`;
    return url.toString();
  };
  return {
    admin,
    urlOf,
    async create(name: string, template?: string): Promise<string> {
      await admin.unsafe(
        `create database "${name}"${template === undefined ? '' : ` template "${template}"`}`,
      );
      created.push(name);
      return urlOf(name);
    },
    async dropAll(): Promise<void> {
      for (const name of created) {
        await admin.unsafe(`drop database if exists "${name}" with (force)`);
      }
      await admin.end();
    },
  };
}
