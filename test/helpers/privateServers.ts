/** Private Postgres and nats-server processes a drill may restart or kill (shared with the chaos run). */
export { NatsServerProcess, PrivatePostgres } from '../../chaos/privateServers.ts';
