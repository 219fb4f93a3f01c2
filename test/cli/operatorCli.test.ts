import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.ts';
import { deploymentPerTest, HANDLERS, NATS_URL, waitFor } from '../actors/harness.ts';
import { runCliInProcess, spawnCli } from '../helpers/runCli.ts';

/**
 * The operator's CLI, spawned as a user runs it: register what the pipeline works on, submit,
 * wait, list — against real Postgres and NATS, and against the embedded default.
 */
const deploy = deploymentPerTest();
let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

const opstate = spawnCli;
const inProcess = runCliInProcess;

async function ok(
  args: string[],
  env: Record<string, string>,
  run: typeof opstate = opstate,
): Promise<string> {
  const r = await run(args, env);
  expect(r.code, `opstate ${args.join(' ')}\n${r.stderr}`).toBe(0);
  return r.stdout;
}

const UUID = /^[0-9a-f-]{36}$/;

describe('opstate for operators', () => {
  it('registers, submits, waits for COMPLETED and lists, on Postgres and NATS', async () => {
    const dep = await deploy();
    const env = { DATABASE_URL: dep.db.url, OPSTATE_PREFIX: dep.prefix };
    dep.runtime.startControlPlane();
    const worker = dep.spawnCli(['worker', '--kinds', 'long_term_archive', '--handlers', HANDLERS]);

    const source = await ok(
      ['location', 'add', '--site', 'cli', '--name', 'src', '--type', 'source', '--root', '/s'],
      env,
    );
    const archive = JSON.parse(
      await ok(
        [
          'location',
          'add',
          '--site',
          'cli',
          '--name',
          'lta',
          '--type',
          'long_term_archive',
          '--root',
          's3://lta',
          '--json',
        ],
        env,
      ),
    ) as { id: string; locationType: string };
    expect(source).toMatch(UUID);
    expect(archive.locationType).toBe('long_term_archive');
    const pkg = await ok(['artifact', 'add', 'raw_data_package', '--name', 'obs-cli-1'], env);
    const copy = await ok(
      [
        'copy',
        'add',
        '--artifact-type',
        'raw_data_package',
        '--artifact',
        pkg,
        '--location',
        source,
      ],
      env,
    );
    const fields = JSON.stringify({
      rawDataPackageId: pkg,
      sourceLocationId: source,
      destinationLocationId: archive.id,
    });
    const id = await ok(['submit', 'long_term_archive', '--fields', fields, '--inputs', copy], env);
    expect(id).toMatch(UUID);
    await waitFor(() => worker.printed('started for'), 'the worker to start', 60_000);
    // `status`, reading the heartbeats, names the worker as the archive queue's reader.
    const started = worker.output.find((l) => l.includes('started for')) ?? '';
    const workerId = /worker (\S+) started for/.exec(started)?.[1];
    const withBeats = { ...env, NATS_URL, OPSTATE_TIMING: JSON.stringify(dep.timing) };
    const reading = JSON.parse(await ok(['status', '--json'], withBeats, inProcess)) as {
      queues: { queue: string; readers: string[] | null }[];
    };
    expect(
      reading.queues.find((q) => q.queue === 'long_term_archive_long_term_archive_transfer'),
    ).toMatchObject({ readers: [workerId] });

    const waited = await opstate(['wait', id, '--timeout', '60s', '--json'], env);
    expect(waited.code, waited.stderr).toBe(0);
    expect(JSON.parse(waited.stdout)).toMatchObject({ id, status: 'COMPLETED', timedOut: false });

    const listed = JSON.parse(
      await ok(
        ['list', '--kind', 'long_term_archive', '--status', 'COMPLETED', '--since', '1h', '--json'],
        env,
      ),
    ) as { id: string }[];
    expect(listed.map((o) => o.id)).toEqual([id]);
    const none = JSON.parse(await ok(['list', '--status', 'FAILED', '--json'], env, inProcess));
    expect(none).toEqual([]);

    // A second operation, with no worker left to run it, cancelled by the operator: `wait` exits
    // 1 and says FAILED.
    worker.proc.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    const other = await ok(['submit', 'long_term_archive', '--fields', fields], env, inProcess);
    await ok(['cancel', other, '--reason', 'not wanted'], env, inProcess);
    const failed = await opstate(['wait', other, '--timeout', '30s'], env);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toContain(`${other} FAILED`);

    // Bad input is a usage error that says what to type instead, and writes nothing.
    const missing = await inProcess(['submit', 'long_term_archive', '--fields', '{}'], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/rawDataPackageId/);
    const counts = JSON.parse(await ok(['status', '--json'], env, inProcess)) as {
      operations: Record<string, Record<string, number>>;
    };
    expect(counts.operations.long_term_archive).toMatchObject({ COMPLETED: 1, FAILED: 1 });

    // Counts a write made behind the triggers' back (two SCHEDULED archives that are not there,
    // enough to hold back a scheduler): `status` names the difference, a spawned `recount` puts the
    // counts back on the rows while the control plane runs beside it.
    await dep.runtime.store.database.execute(
      `insert into operation_tally (kind, status, n) values ('long_term_archive', 'SCHEDULED', 2)`,
    );
    const drifted = JSON.parse(await ok(['status', '--json'], env, inProcess)) as {
      countsDrift: unknown[];
    };
    expect(drifted.countsDrift).toEqual([
      { kind: 'long_term_archive', status: 'SCHEDULED', tallied: 2, stored: 0 },
    ]);
    expect((await ok(['recount'], env)).split('\n')).toEqual([
      'long_term_archive SCHEDULED: the counts said 2, 0 stored',
      '1 of the counts put back on the rows',
    ]);
    const recounted = JSON.parse(await ok(['status', '--json'], env, inProcess)) as {
      operations: Record<string, Record<string, number>>;
      countsDrift: unknown[];
    };
    expect(recounted.countsDrift).toEqual([]);
    expect(recounted.operations.long_term_archive).toMatchObject({
      SCHEDULED: 0,
      COMPLETED: 1,
      FAILED: 1,
    });
  });

  it('works the same on the embedded default, and a wait that times out exits 1', async () => {
    dir = await mkdtemp(join(tmpdir(), 'opstate-cli-embedded-'));
    await chmod(dir, 0o711); // as root, the embedded Postgres server runs as another user
    const env = { DATABASE_URL: '', NATS_URL: '', OPSTATE_DATA_DIR: join(dir, 'data') };
    const pkg = await ok(['artifact', 'add', 'data_transfer_package', '--name', 'dtp-1'], env);
    const loc = await ok(
      ['location', 'add', '--site', 'e', '--name', 'b', '--type', 'buffer', '--root', '/b'],
      env,
      inProcess,
    );
    const src = await ok(
      ['location', 'add', '--site', 'e', '--name', 's', '--type', 'source', '--root', '/s'],
      env,
      inProcess,
    );
    const id = await ok(
      [
        'submit',
        'transfer',
        '--fields',
        JSON.stringify({
          dataTransferPackageId: pkg,
          sourceLocationId: src,
          destinationLocationId: loc,
        }),
      ],
      env,
      inProcess,
    );
    const listed = JSON.parse(await ok(['list', '--json'], env, inProcess)) as {
      id: string;
      status: string;
    }[];
    expect(listed).toMatchObject([{ id, status: 'PENDING' }]);
    // The history says who submitted: the operator, unless --by names someone else.
    const creator = async (of: string) =>
      (
        JSON.parse(await ok(['inspect', of, '--json'], env, inProcess)) as {
          transitions: { event: string; by: string }[];
        }
      ).transitions[0];
    expect(await creator(id)).toMatchObject({ event: 'CREATE', by: 'operator' });
    const transferFields = JSON.stringify({
      dataTransferPackageId: pkg,
      sourceLocationId: src,
      destinationLocationId: loc,
    });
    const byCron = await ok(
      ['submit', 'transfer', '--fields', transferFields, '--by', 'nightly-cron'],
      env,
      inProcess,
    );
    expect(await creator(byCron)).toMatchObject({ event: 'CREATE', by: 'nightly-cron' });
    // A deadline of its own, as a duration; one past the cap is refused and nothing is written.
    const hurried = await ok(
      ['submit', 'transfer', '--fields', transferFields, '--deadline', '90m'],
      env,
      inProcess,
    );
    expect(
      (
        JSON.parse(await ok(['inspect', hurried, '--json'], env, inProcess)) as {
          deadlineMs: number;
        }
      ).deadlineMs,
    ).toBe(5_400_000);
    expect(await ok(['inspect', hurried], env, inProcess)).toContain(
      'deadline    90 min per attempt (set at submit)',
    );
    const before = (JSON.parse(await ok(['list', '--json'], env, inProcess)) as unknown[]).length;
    const tooLong = await inProcess(
      ['submit', 'transfer', '--fields', transferFields, '--deadline', '8d'],
      env,
    );
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toContain(
      "opstate submit: deadlineMs must be a whole number of milliseconds from 1 to 604800000 (7 days); got 691200000; leave it out for the kind's deadline [BAD_INPUT]",
    );
    expect((JSON.parse(await ok(['list', '--json'], env, inProcess)) as unknown[]).length).toBe(
      before,
    );
    const badBy = await inProcess(
      ['submit', 'transfer', '--fields', transferFields, '--by', 'reconciler'],
      env,
    );
    expect(badBy.code).toBe(2);
    expect(badBy.stderr).toContain(
      "opstate submit: by 'reconciler' is one of opstate's own actors; name the service or person that submits [BAD_INPUT]",
    );
    // Setting up again is harmless to what is there: a second `location add` names the row.
    const again = await inProcess(
      ['location', 'add', '--site', 'e', '--name', 'b', '--type', 'buffer', '--root', '/b'],
      env,
    );
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(
      `opstate location: location e/b already exists (id ${loc}, locationType buffer, storageRoot /b); reuse that id (findOrAddLocation returns it) or choose another name [CONFLICT]`,
    );
    const waited = await opstate(['wait', id, '--timeout', '1s'], env);
    expect(waited.code).toBe(1);
    expect(waited.stderr).toContain(
      `${id} is still PENDING (attempt 1); run 'opstate inspect ${id}'`,
    );
  });

  it('answers a usage error with exit 2 and what to type instead, before touching a database', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['submit', 'nope', '--fields', '{}'],
        /value 'nope' is invalid for argument 'kind'\. use one of raw_data_package/,
      ],
      [['submit', 'transfer', '--fields', '{bad'], /not JSON; quote an object/],
      [['submit', 'transfer'], /required option '--fields <json>' not specified/],
      [['list', '--status', 'DONE'], /Allowed choices are PENDING, SCHEDULED/],
      [['list', '--since', 'yesterday'], /an age such as 2h/],
      [['wait', 'x', '--timeout', 'soon'], /a duration such as 30s/],
      [['submit', 'transfer', '--fields', '{}', '--deadline', 'soon'], /a duration such as 30s/],
      [['location', 'add', '--site', 's'], /required option '--name <name>'/],
      [['copy', 'add', '--artifact-type', 'tape'], /Allowed choices are raw_data_file/],
      [['stauts'], /Did you mean status\?/],
    ];
    for (const [args, message] of cases) {
      const err: string[] = [];
      const code = await main(args, { out: () => {}, err: (l) => err.push(l) });
      expect(code, args.join(' ')).toBe(2);
      expect(err.join('\n'), args.join(' ')).toMatch(message);
      expect(err.join('\n'), args.join(' ')).toMatch(
        /Run 'opstate [a-z -]*--help' for its usage\./,
      );
    }
    const help: string[] = [];
    expect(await main(['submit', '--help'], { out: (l) => help.push(l), err: () => {} })).toBe(0);
    expect(help.join('\n')).toMatch(
      /--fields <json>[\s\S]*--inputs <ids>[\s\S]*--deadline <duration>[\s\S]*--by <name>[\s\S]*--json/,
    );
  });
});
