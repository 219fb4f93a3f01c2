/**
 * What the deletion path costs per member, on the real Postgres and real files. Prints one JSON
 * object per line (`{"name", "value", "unit"}`):
 * - statements per member: every `execute` the planning, start and run of a deletion issue,
 *   measured for copies of SMALL and LARGE members; per member = the difference / the member
 *   difference (the fixed part — schedule, start, receipt, DELETED — cancels out);
 * - system calls per member that opstate's code issues, by the deletion path's own count
 *   (`SyscallCount`), split into the open-file scan (`/proc/<pid>/fd`, which grows with the
 *   descriptors open on the machine) and the rest (lstat, realpath, the `.git` walk, unlink…);
 * - system calls per member the whole process made, counted by `strace -f -c` attached around the
 *   same runs (the same difference), when strace is installed;
 * - milliseconds per member.
 * The archive a deletion relies on is made through the archive protocol (a completed, VERIFIED archive
 * operation with the package manifest); the deletion path never reads the archive object, so none
 * is written here. Folders live outside any git work tree, as buffer folders usually do.
 *
 *   node --import tsx bench/deletion.ts
 *
 * Env: OPSTATE_BENCH_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres),
 * OPSTATE_BENCH_ROUNDS (copies per size, default 3).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { planDeletion } from '../deleter/planDeletion.ts';
import { runDeletion } from '../deleter/runDeletion.ts';
import { SyscallCount } from '../deleter/SyscallCount.ts';
import { OperationKind } from '../machines/OperationKind.ts';
import { LocationType } from '../machines/routing.ts';
import { ArchiveRecordRepository } from '../persistence/ArchiveRecordRepository.ts';
import { ArtifactRepository } from '../persistence/ArtifactRepository.ts';
import { CopyLifecycle } from '../persistence/CopyLifecycle.ts';
import { DeletionRepository } from '../persistence/DeletionRepository.ts';
import { migrate } from '../persistence/migrate.ts';
import { OperationStore } from '../persistence/OperationStore.ts';
import { type Database, type Executor, openDatabase } from '../persistence/openDatabase.ts';
import { timeOrderedId } from '../persistence/timeOrderedId.ts';
import { runArchiveProtocol } from '../stages/longTermArchive.ts';
import { checksumOf, MANIFEST_NAME, sha256, writePackage } from '../stages/packageFormat.ts';
import { readPackageSource } from '../stages/packageSource.ts';
import { archiveStoreAt } from '../stages/registerArchiveStore.ts';
import { unpackTar } from '../stages/tar.ts';
import type { HandlerContext } from '../worker/OperationHandler.ts';
import { print } from './lib/figure.ts';

const ADMIN = process.env.OPSTATE_BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ROUNDS = Number(process.env.OPSTATE_BENCH_ROUNDS ?? 3);
const SMALL = 4;
const LARGE = 64;

const figure = (name: string, value: number, unit: string) => print({ name, value, unit });

function counting(database: Database): { database: Database; count: () => number } {
  let n = 0;
  const wrap = (e: Executor): Executor => ({
    execute: (q) => {
      n++;
      return e.execute(q);
    },
  });
  return {
    database: { ...database, execute: wrap(database).execute },
    count: () => n,
  };
}

function hasStrace(): boolean {
  try {
    execFileSync('strace', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Counts every system call of this process (all threads) while `fn` runs, with strace -c. */
async function straced(fn: () => Promise<void>): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'opstate-strace-'));
  const out = join(dir, 'summary');
  const tracer = spawn('strace', ['-f', '-c', '-o', out, '-p', String(process.pid)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise<void>((resolve) => {
    const check = (chunk: Buffer) => {
      if (/attached/.test(chunk.toString())) {
        tracer.stderr?.off('data', check);
        resolve();
      }
    };
    tracer.stderr?.on('data', check);
  });
  await new Promise((r) => setTimeout(r, 200)); // every thread attached
  await fn();
  tracer.kill('SIGINT');
  await new Promise((r) => tracer.on('exit', r));
  const summary = await readFile(out, 'utf8');
  await rm(dir, { recursive: true, force: true });
  const total = summary.split('\n').find((l) => /\btotal$/.test(l.trim()));
  // `% time  seconds  usecs/call  calls  errors  total`: the calls column.
  const calls = total?.trim().split(/\s+/)[3];
  return Number(calls ?? Number.NaN);
}

async function openFds(): Promise<number> {
  let n = 0;
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    n += await readdir(`/proc/${pid}/fd`).then(
      (f) => f.length,
      () => 0,
    );
  }
  return n;
}

/** The bench's world: a buffer and an archive location, and the repositories the runs use. */
async function openWorld(opened: Database, dir: string) {
  const artifacts = new ArtifactRepository(opened);
  const buffer = await artifacts.addLocation({
    site: 'bench',
    name: 'buffer',
    locationType: LocationType.BUFFER,
    storageRoot: join(dir, 'buffer'),
  });
  const lta = await artifacts.addLocation({
    site: 'bench',
    name: 'lta',
    locationType: LocationType.LONG_TERM_ARCHIVE,
    storageRoot: join(dir, 'lta'),
  });
  await mkdir(buffer.storageRoot, { recursive: true });
  const store = new OperationStore(opened);
  const records = new ArchiveRecordRepository(opened);
  return { opened, artifacts, buffer, lta, store, records };
}

type World = Awaited<ReturnType<typeof openWorld>>;

/** A buffer folder of `n` members with a completed, VERIFIED archive recorded. */
async function archivedCopy(world: World, n: number) {
  const { artifacts, buffer, lta, store } = world;
  const files = Array.from({ length: n - 1 }, (_, i) => ({
    name: `scan_${String(i).padStart(4, '0')}.fits`,
    data: randomBytes(4096),
  }));
  const bytes = writePackage(files);
  const pkg = await artifacts.addRawDataPackage({ name: `bench-${randomUUID()}` });
  const folder = join(buffer.storageRoot, pkg);
  await mkdir(folder);
  const head = unpackTar(bytes)[0]?.data ?? Buffer.alloc(0);
  await writeFile(join(folder, MANIFEST_NAME), head);
  for (const f of files) await writeFile(join(folder, f.name), f.data);
  const digest = sha256(bytes);
  const { copy } = await artifacts.addCopy({
    artifactType: 'raw_data_package',
    artifactId: pkg,
    locationId: buffer.id,
    path: folder,
    checksum: checksumOf(digest),
    size: bytes.length,
  });
  const op = await store.create({
    kind: OperationKind.LONG_TERM_ARCHIVE,
    fields: {
      rawDataPackageId: pkg,
      sourceLocationId: buffer.id,
      destinationLocationId: lta.id,
    },
    inputs: [copy.id],
  });
  await store.apply(op, { type: 'SCHEDULE' });
  await store.apply(op, { type: 'START', attempt: 1, workerId: 'bench' });
  // Archived through the archive protocol, as the archive stage does it (a long-term archive
  // completes only with its VERIFIED record), into the local folder store of the archive.
  const ctx = {
    operation: { id: op, kind: OperationKind.LONG_TERM_ARCHIVE, attempt: 1, retryCount: 0 },
    step: <T>(_name: string, fn: () => Promise<T>) => fn(),
    signal: new AbortController().signal,
    withDatabase: <T>(_what: string, run: (db: Database) => Promise<T>) => run(world.opened),
  } as unknown as HandlerContext;
  const { plan, uploaded } = await runArchiveProtocol(
    ctx,
    {},
    archiveStoreAt(lta.storageRoot),
    `raw_data_package/${pkg}.tar`,
    { read: () => readPackageSource(copy), detail: { sourceCopyId: copy.id }, name: folder },
  );
  await store.complete(op, 1, [
    {
      artifactType: 'raw_data_package',
      artifactId: pkg,
      locationId: lta.id,
      path: uploaded.location,
      checksum: checksumOf(plan.contentSha256),
      size: plan.size,
    },
  ]);
  return { ...copy, storageRoot: buffer.storageRoot };
}

/** Schedules, plans, starts and runs one deletion; returns its statements, syscalls and time. */
async function deleteOne(world: World, n: number) {
  const { opened } = world;
  const copy = await archivedCopy(world, n);
  const { database, count } = counting(opened);
  const copies = new CopyLifecycle(database);
  const deletions = new DeletionRepository(database);
  const syscalls = new SyscallCount();
  const started = performance.now();
  await copies.apply(copy.id, { type: 'SCHEDULE_DELETION' }, { by: 'bench' });
  const facts = await copies.facts(copy.id);
  const archive = facts.facts.archive;
  const archived = archive === null ? null : await deletions.archivedManifest(archive.operationId);
  if (archive === null || archived === null || facts.archiveObjectSha256 === null) {
    throw new Error('the bench archive is not VERIFIED');
  }
  const plan = await planDeletion(
    {
      copy,
      archive: { ...archive, objectSha256: facts.archiveObjectSha256 },
      archived,
      alreadyGone: new Set(),
      holder: 'bench',
      leaseMs: 60_000,
      deletionId: timeOrderedId(Date.now()),
    },
    syscalls,
  );
  const t = await copies.apply(copy.id, { type: 'START_DELETION' }, { by: 'bench', plan });
  const result = await runDeletion({
    deletions,
    copies,
    copyId: copy.id,
    deletionId: plan.deletionId,
    epoch: t.epoch ?? 1,
    holder: 'bench',
    leaseMs: 60_000,
    alive: () => true,
    count: syscalls,
  });
  if (result.result !== 'deleted') throw new Error(`bench deletion ended ${result.result}`);
  const ms = performance.now() - started;
  const scan = (syscalls.byKind.get('stat') ?? 0) + (syscalls.byKind.get('readdir') ?? 0) - 1;
  return { statements: count(), syscalls: syscalls.total(), scan, ms };
}

/** The mean of `ROUNDS` deletions of copies of `n` members. */
async function average(world: World, n: number) {
  const runs: Awaited<ReturnType<typeof deleteOne>>[] = [];
  for (let r = 0; r < ROUNDS; r++) runs.push(await deleteOne(world, n));
  const mean = (k: 'statements' | 'syscalls' | 'scan' | 'ms') =>
    runs.reduce((s, x) => s + x[k], 0) / runs.length;
  return {
    statements: mean('statements'),
    syscalls: mean('syscalls'),
    scan: mean('scan'),
    ms: mean('ms'),
  };
}

/** Deletes copies of SMALL and LARGE members and prints the per-member figures. */
async function measure(world: World): Promise<void> {
  await deleteOne(world, SMALL); // warm the statement cache and the file system
  const small = await average(world, SMALL);
  const large = await average(world, LARGE);
  const per = (k: 'statements' | 'syscalls' | 'scan' | 'ms') =>
    (large[k] - small[k]) / (LARGE - SMALL);
  figure('deletion_statements_per_member', per('statements'), 'statements');
  figure(`deletion_statements_${SMALL}_member_copy`, small.statements, 'statements');
  figure('deletion_syscalls_per_member', per('syscalls'), 'syscalls');
  figure('deletion_open_file_scan_syscalls_per_member', per('scan'), 'syscalls');
  figure('deletion_other_syscalls_per_member', per('syscalls') - per('scan'), 'syscalls');
  figure('open_descriptors_on_machine', await openFds(), 'descriptors');
  figure('deletion_ms_per_member', per('ms'), 'ms');
  if (hasStrace()) {
    const traced = async (n: number) => straced(async () => void (await deleteOne(world, n)));
    const a = await traced(SMALL);
    const b = await traced(LARGE);
    figure('deletion_process_syscalls_per_member_strace', (b - a) / (LARGE - SMALL), 'syscalls');
  } else {
    process.stderr.write(
      'bench deletion: strace is not installed; the process-wide syscall figure needs it (apt-get install strace)\n',
    );
  }
}

async function main(): Promise<void> {
  const name = `opstate_bench_${randomBytes(5).toString('hex')}`;
  const admin = postgres(ADMIN, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(ADMIN);
  url.pathname = `/${name}`;
  const opened = await openDatabase({ databaseUrl: url.toString(), max: 4 });
  const dir = await mkdtemp(join(tmpdir(), 'opstate-bench-deletion-'));
  try {
    await migrate(opened);
    await measure(await openWorld(opened, dir));
  } finally {
    await opened.close();
    await rm(dir, { recursive: true, force: true });
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end({ timeout: 5 });
  }
}

await main();
