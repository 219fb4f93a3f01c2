/**
 * 04 — The operator's dashboard embedded in a service: the service opens its runtime, starts the
 * dashboard on it (here on a free port of 127.0.0.1), submits an operation and reads the
 * dashboard's list of operations, which shows it, then closes both.
 *
 *   node --import tsx examples/04_dashboard_embedded.ts
 *
 * Without DATABASE_URL and NATS_URL it runs embedded (./.opstate); with them, on those servers.
 * A real service keeps the dashboard open for as long as it runs and gives `port` a fixed value.
 */
import { createRuntime, LocationType, OperationKind, startDashboard } from 'opstate';

const runtime = await createRuntime({ serviceName: 'example-dashboard' });
const dashboard = await startDashboard({
  database: runtime.database,
  timing: runtime.timing,
  heartbeats: runtime.transport.heartbeats,
  command: runtime.command, // null: a read-only dashboard (its actions answer 403)
  logger: runtime.logger,
  host: '127.0.0.1',
  port: 0, // any free port; dashboard.url says which
});
console.log(`dashboard at ${dashboard.url}`);

try {
  const source = await runtime.artifacts.findOrAddLocation({
    site: 'cologne',
    name: 'instrument',
    locationType: LocationType.SOURCE,
    storageRoot: '/data/raw',
  });
  const archive = await runtime.artifacts.findOrAddLocation({
    site: 'cologne',
    name: 'lta',
    locationType: LocationType.LONG_TERM_ARCHIVE,
    storageRoot: 's3://lta',
  });
  const pkg = await runtime.artifacts.addRawDataPackage({
    name: `obs-${new Date().toISOString().replace(/[:.]/g, '-')}`,
  });
  const { copy } = await runtime.artifacts.addCopy({
    artifactType: 'raw_data_package',
    artifactId: pkg,
    locationId: source.id,
  });
  // No worker here: the operation waits, and the dashboard shows it waiting.
  const id = await runtime.submit({
    kind: OperationKind.LONG_TERM_ARCHIVE,
    fields: {
      rawDataPackageId: pkg,
      sourceLocationId: source.id,
      destinationLocationId: archive.id,
    },
    inputs: [copy.id],
  });
  console.log(`submitted ${id}`);

  // What an operator's browser gets: the list of operations, newest first, each linking its page.
  const response = await fetch(
    `${dashboard.url}/operations?kind=${OperationKind.LONG_TERM_ARCHIVE}`,
  );
  const page = await response.text();
  console.log(
    `GET /operations: ${response.status}, lists ${id}: ${page.includes(`/operations/${id}`)}`,
  );
} finally {
  await dashboard.close();
  await runtime.close();
}
