/** Private Postgres and nats-server processes a drill may restart or kill (shared with the chaos run). */

/** A Postgres primary with a streaming standby a drill may kill and promote. */
export { PostgresPair } from '../../chaos/postgresPair.ts';
export {
  NatsClusterProcess,
  NatsServerProcess,
  PrivatePostgres,
  postgresIds,
} from '../../chaos/privateServers.ts';
