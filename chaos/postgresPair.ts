import { PrivatePostgres } from './privateServers.ts';
import { waitFor } from './waitFor.ts';

/** The name the standby streams under and its replication slot on the primary. */
const STANDBY = 'standby';

/**
 * A Postgres primary and a streaming standby of a drill's own on loopback ports, run as the
 * `postgres` OS user: the standby is a `pg_basebackup -R` of the primary through a replication
 * slot, and (unless `synchronous` is false) the one the primary's `synchronous_standby_names`
 * waits for, so a commit returns only once the standby has flushed it. A drill kills the primary
 * (SIGKILL, every process of it) and promotes the standby (`pg_ctl promote`); the clients find the
 * new primary through `url`, which lists both hosts with `target_session_attrs=read-write`.
 *
 * @example
 * ```ts
 * const pair = await PostgresPair.start();
 * process.env.DATABASE_URL = pair.url();
 * await pair.killPrimary(); await pair.promote(); await pair.dispose();
 * ```
 */
export class PostgresPair {
  private constructor(
    readonly primary: PrivatePostgres,
    readonly standby: PrivatePostgres,
    readonly synchronous: boolean,
  ) {}

  /** Makes and starts both, and waits until the standby streams (as the synchronous one). */
  static async start(options: { synchronous?: boolean } = {}): Promise<PostgresPair> {
    const synchronous = options.synchronous ?? true;
    const primary = await PrivatePostgres.create();
    // Waiting for a standby that does not exist yet is no problem here: making the base backup
    // commits nothing, and nothing else writes before the standby streams.
    await primary.start(synchronous ? { synchronous_standby_names: STANDBY } : {});
    let standby: PrivatePostgres | undefined;
    try {
      standby = await PrivatePostgres.standbyOf(primary, STANDBY);
      // The copy holds no synchronous_standby_names (the primary's is on its command line):
      // promoted, it must not wait for a standby of its own.
      await standby.start({ cluster_name: STANDBY });
      const pair = new PostgresPair(primary, standby, synchronous);
      const state = synchronous ? 'sync' : 'async';
      await waitFor(
        async () => (await pair.replicationState()) === `streaming ${state}`,
        `the standby to stream as the ${state} standby`,
        30_000,
        50,
      );
      return pair;
    } catch (err) {
      await standby?.dispose();
      await primary.dispose();
      throw err;
    }
  }

  /**
   * A URL for `database` naming both servers, primary first, that keeps only a connection taking
   * writes (what `DATABASE_URL` is in a deployment with a standby).
   */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.primary.port},127.0.0.1:${this.standby.port}/${database}?target_session_attrs=read-write`;
  }

  /** `state sync_state` of the standby as the primary's `pg_stat_replication` reports it. */
  async replicationState(): Promise<string | undefined> {
    const row = await this.primary
      .psql(
        `select state || ' ' || sync_state from pg_stat_replication where application_name = '${STANDBY}'`,
      )
      .catch(() => '');
    return row === '' ? undefined : row;
  }

  /** SIGKILL to every process of the primary. */
  async killPrimary(): Promise<void> {
    await this.primary.kill();
  }

  /** Promotes the standby and waits until it is out of recovery. */
  async promote(): Promise<void> {
    await this.standby.promote();
    await waitFor(
      async () => (await this.standby.psql('select pg_is_in_recovery()')) === 'f',
      'the promoted standby to leave recovery',
      30_000,
      50,
    );
  }

  async dispose(): Promise<void> {
    await Promise.all([this.primary.dispose(), this.standby.dispose()]);
  }
}
