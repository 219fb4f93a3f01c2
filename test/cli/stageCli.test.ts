import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GroupRepository } from '../../persistence/GroupRepository.ts';
import { inspectOperation } from '../../persistence/inspectOperation.ts';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { runCliInProcess, spawnCli } from '../helpers/runCli.ts';
import { archivedPackage } from '../persistence/copyFixtures.ts';
import { makeWorld, tableCounts, type World } from '../persistence/fixtures.ts';

/**
 * `opstate stage` and `opstate release` as an operator types them, on the real Postgres: the
 * output, the exit codes (0; 1 for an unknown id; 2 for bad input) and who the database records.
 */
let testDb: TestDatabase;
let database: Database;
let w: World;

beforeAll(async () => {
  testDb = await createTestDatabase(undefined, { migrated: true });
  database = await openDatabase({ databaseUrl: testDb.url });
  await migrate(database);
  w = await makeWorld(database);
});
afterAll(async () => {
  await database?.close();
  if (testDb !== undefined) await dropTestDatabase(testDb);
});

const env = () => ({ DATABASE_URL: testDb.url, OPSTATE_OPERATOR: 'alice' });

/** `opstate <args>` spawned as a user runs it. */
const spawned = (args: string[]) => spawnCli(args, env());

/** `opstate <args>` in this process (the same `main`), with the environment set for the call. */
const inProcess = (args: string[]) => runCliInProcess(args, env());

async function groupRows() {
  const [r] = await database.execute(`select count(*)::int as n,
    count(*) filter (where active)::int as active from operation_group`);
  return { ...(await tableCounts(database)), ...r };
}

describe('opstate stage and opstate release', () => {
  it('stages a package (JSON), holds the claim, and releases it, recording the operator', async () => {
    const p = await archivedPackage(database, w, 'verified');
    const r = await spawned([
      'stage',
      p.pkg,
      '--to',
      `${w.processing.site}/${w.processing.name}`,
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s).toMatchObject({
      package: p.pkg,
      status: 'PENDING',
      by: 'operator:alice',
      from: { copyId: p.archiveCopy?.id, locationId: w.archive.id },
      to: { locationId: w.processing.id },
    });
    const op = await inspectOperation(database, s.operationId);
    expect(op).toMatchObject({ status: 'PENDING', groupId: s.groupId });
    expect(op.transitions[0]?.by).toBe('operator:alice');
    const groups = new GroupRepository(database);
    expect(await groups.isCopyRetained(p.archiveCopy?.id as string)).toBe(true);

    const released = await spawned(['release', s.groupId, '--operator', 'bob']);
    expect(released.code, released.stderr).toBe(0);
    expect(released.stdout).toBe(
      `group ${s.groupId} released by operator:bob (cli, ${hostname()}): its retention claim is gone`,
    );
    expect(await groups.get(s.groupId)).toMatchObject({
      active: false,
      createdBy: 'operator:alice',
      releasedBy: `operator:bob (cli, ${hostname()})`,
    });
    expect(await groups.isCopyRetained(p.archiveCopy?.id as string)).toBe(false);
  });

  it('prints the staging and how to release it', async () => {
    const p = await archivedPackage(database, w, 'verified');
    const r = await inProcess(['stage', p.pkg, '--to', w.processing.id]);
    expect(r.code, r.stderr).toBe(0);
    const [first, second] = r.stdout.split('\n');
    expect(first).toMatch(
      new RegExp(
        `^staging [0-9a-f-]{36} \\(PENDING\\): ${p.pkg} from ${w.archive.site}/lta \\(copy ${p.archiveCopy?.id}\\) to ${w.processing.site}/processing$`,
      ),
    );
    const group = /group ([0-9a-f-]{36})/.exec(second ?? '')?.[1];
    expect(second).toBe(
      `retention claim held by group ${group}; release it with opstate release ${group}`,
    );
    const json = await inProcess(['release', group as string, '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      groupId: group,
      releasedBy: `operator:alice (cli, ${hostname()})`,
    });
  });

  it('exits 1 for an unknown package, location or group, 2 for bad input, creating nothing', async () => {
    const none = await archivedPackage(database, w, 'none');
    const good = await archivedPackage(database, w, 'verified');
    const staged = await inProcess(['stage', good.pkg, '--to', w.processing.id, '--json']);
    const { groupId } = JSON.parse(staged.stdout);
    expect((await inProcess(['release', groupId])).code).toBe(0);
    const processing = `${w.processing.site}/${w.processing.name}`;
    const cases: [string[], number, RegExp][] = [
      [
        ['stage', '0190a8f4-0000-7000-8000-000000000000', '--to', processing],
        1,
        /no raw data package/,
      ],
      [['stage', good.pkg, '--to', `${w.processing.site}/nowhere`], 1, /unknown location/],
      [['stage', none.pkg, '--to', processing], 2, /has no verified archive copy to stage from/],
      [['stage', good.pkg, '--to', w.buffer.id], 2, /is a buffer location/],
      [['stage', good.pkg], 2, /required option '--to <location>'/],
      [
        ['stage', good.pkg, '--to', processing, '--operator', 'a b'],
        2,
        /OPSTATE_OPERATOR|--operator/,
      ],
      [['release', '0190a8f4-0000-7000-8000-000000000001'], 1, /no operation group/],
      [['release', groupId], 2, /holds no retention claim to release \(it was released at/],
      [['release', 'group-1'], 2, /group id "group-1" is not a uuid/],
    ];
    for (const [args, code, message] of cases) {
      const before = await groupRows();
      const r = await inProcess(args);
      expect(r.code, `opstate ${args.join(' ')}: ${r.stderr}`).toBe(code);
      expect(r.stderr, args.join(' ')).toMatch(message);
      expect(await groupRows(), args.join(' ')).toEqual(before);
    }
  });
});
