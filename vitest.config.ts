import { defineConfig } from 'vitest/config';

// Drills start worker and control-plane processes and judge liveness by timers. They run beside
// everything else, three files at a time on the 2-core machine: most of a drill's time is spent
// waiting on its timers (at two files at a time the suite kept the cores under half busy). Each
// file owns its databases, streams and private servers, so nothing collides, and drill timers are
// sized for a busy machine, where a process starved of CPU for a while must not be mistaken for a
// dead one: a drill that passes only on idle cores is a flaky drill. They are a project of their
// own so they can be run alone (`--project drills`).
const DRILLS = [
  'test/actors/{recovery,longRunning,leadership,outbox,scale,badDispatch,stalledWorker,postgresRestart,natsOutage,strandedDispatch,deadline,flowLimit,siteRoutes,priority,natsCluster,pgFailover}.test.ts',
  'test/cli/{observability,natsAuthorization}.test.ts',
  'test/breaker/runtime.test.ts',
  'test/archive/crashMatrix.test.ts',
  'test/pipeline/{pipelineCli,pipelineCrash,pipelineDrill,pipelinePostgresCrash}.test.ts',
  'test/chaos/chaos.test.ts',
  'test/transport/hostileNetwork.test.ts',
];

export default defineConfig({
  test: {
    // Drills wait on conditions with their own deadlines; this only bounds a stuck test.
    testTimeout: 300_000,
    // Spawned processes run the built package: rebuilt when stale, fixtures compiled against it.
    globalSetup: ['test/globalSetup.ts'],
    // The shared development server (127.0.0.1:4222) and the private servers most tests start
    // take clients without credentials, which the runtime refuses unless told it is meant: every
    // runtime, CLI process and spawned child of the suite is told so here, once. Tests of the
    // refusal clear it; a test that calls createJetStreamTransport itself passes insecureNats.
    env: { OPSTATE_NATS_INSECURE: '1' },
    hookTimeout: 60_000,
    maxWorkers: 3,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit+integration',
          // Files share each worker's module graph instead of importing the runtime afresh (a
          // quarter of this project's time went to imports). Every file owns its databases,
          // streams and servers and restores what it changes in the environment.
          isolate: false,
          include: ['test/**/*.test.ts'],
          exclude: DRILLS,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'drills',
          include: DRILLS,
        },
      },
    ],
  },
});
