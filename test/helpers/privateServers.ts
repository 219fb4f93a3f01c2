/** Private Postgres and nats-server processes a drill may restart or kill (shared with the chaos run). */
export {
  NatsClusterProcess,
  NatsServerProcess,
  PrivatePostgres,
  postgresIds,
} from '../../chaos/privateServers.ts';
