import { resolve } from 'node:path';
import { ArchiveState } from '../../machines/ArchiveState.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import { checkId } from '../../persistence/applyEvents.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import type { ArchiveStore } from '../../stages/ArchiveStore.ts';
import { archiveCipherFromEnv } from '../../stages/archiveCipher.ts';
import { openArchiveObject, readArchiveObject } from '../../stages/archiveObject.ts';
import { loadRecordedArchive } from '../../stages/recordedArchive.ts';
import { archiveStoreAt } from '../../stages/registerArchiveStore.ts';
import { restorePackage } from '../../stages/restoreArchive.ts';
import { deletedNotHeld, verifyArchive } from '../../stages/verifyArchive.ts';
import { argumentsOf, type Command, defineCommand, type Io, optionsOf } from '../Command.ts';
import {
  ARCHIVE_STORE_MODULES_ENV,
  loadArchiveStores,
  storeModulesOf,
} from '../loadArchiveStores.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

/**
 * The store a storage root names; a scheme no module registered in this process is a `CONFIG`
 * error that says how to load the module that registers it.
 */
function storeAt(storageRoot: string): ArchiveStore {
  try {
    return archiveStoreAt(storageRoot);
  } catch (err) {
    const scheme = err instanceof OpstateError ? err.details.unregisteredScheme : undefined;
    if (typeof scheme !== 'string') throw err;
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `storage root '${storageRoot}' names archive store '${scheme}', which no module registered here (registered: ${String(err instanceof OpstateError ? err.details.registered : '')}); pass --store-module <module> (or set ${ARCHIVE_STORE_MODULES_ENV}) naming a .js or .mjs module that exports archiveStores = { '${scheme}': factory }`,
      { details: { unregisteredScheme: scheme } },
    );
  }
}

async function verify(database: Database, id: string, json: boolean, io: Io): Promise<number> {
  const recorded = await loadRecordedArchive(database, id);
  const store = storeAt(recorded.storageRoot);
  const v = await verifyArchive(store, recorded.expected, archiveCipherFromEnv());
  await new ArchiveRecordRepository(database).recordVerification({
    operationId: id,
    state: v.ok ? ArchiveState.VERIFIED : ArchiveState.VERIFY_FAILED,
    by: 'operator',
    archiveKey: recorded.expected.key,
    objectVersion: v.read?.objectVersion ?? null,
    objectSha256: recorded.expected.objectSha256,
    contentSha256: recorded.expected.contentSha256,
    encrypted: recorded.encrypted,
    keyId: recorded.keyId,
    detail: {
      independent: true,
      differences: [...v.differences],
      membersChecked: v.membersChecked,
      deletedMembersHeld: v.deletedHeld ?? 0,
    },
  });
  if (json) {
    io.out(
      JSON.stringify({
        operationId: id,
        ok: v.ok,
        key: recorded.expected.key,
        location: store.describe(recorded.expected.key),
        objectSha256: recorded.expected.objectSha256,
        objectVersion: recorded.expected.objectVersion,
        contentSha256: recorded.expected.contentSha256,
        encrypted: recorded.encrypted,
        keyId: recorded.keyId,
        membersChecked: v.membersChecked,
        deletedMembers: recorded.expected.deleted?.length ?? 0,
        deletedMembersHeld: v.deletedHeld ?? 0,
        differences: v.differences,
      }),
    );
    return v.ok ? 0 : 1;
  }
  io.out(`archive of operation ${id}: ${store.describe(recorded.expected.key)}`);
  io.out(`  key            ${recorded.expected.key}`);
  io.out(`  object sha256  ${recorded.expected.objectSha256} (as first written)`);
  io.out(`  object version ${recorded.expected.objectVersion ?? '-'}`);
  io.out(`  package sha256 ${recorded.expected.contentSha256}`);
  io.out(`  encrypted      ${recorded.encrypted ? `yes (key ${recorded.keyId})` : 'no'}`);
  if (v.ok) {
    io.out(
      `OK: the object reads back as written; ${v.membersChecked} members match the manifest by name, size and sha256; ${v.deletedHeld ?? 0} deleted source member(s) are held byte for byte.`,
    );
    return 0;
  }
  io.out(`DIFFERS (${v.differences.length}):`);
  for (const d of v.differences) io.out(`  - ${d}`);
  io.out('Recorded VERIFY_FAILED: no deletion relies on this archive until it verifies again.');
  return 1;
}

async function restore(
  database: Database,
  id: string,
  to: string,
  json: boolean,
  io: Io,
): Promise<number> {
  const recorded = await loadRecordedArchive(database, id);
  const store = storeAt(recorded.storageRoot);
  const read = await readArchiveObject(store, recorded.expected.key);
  const plain = openArchiveObject(read, archiveCipherFromEnv());
  const members = await restorePackage(plain, recorded.manifest, resolve(to));
  const bad = members.filter((m) => !m.ok);
  // The source members deleted on the strength of this archive: each must come back as it was.
  const gone = deletedNotHeld(plain, recorded.expected.deleted ?? []);
  const ok = bad.length === 0 && gone.differences.length === 0;
  if (json) {
    io.out(
      JSON.stringify({
        operationId: id,
        to: resolve(to),
        ok,
        members,
        deletedMembersHeld: gone.held,
        deletedNotHeld: gone.differences,
      }),
    );
    return ok ? 0 : 1;
  }
  io.out(`restored archive of operation ${id} (${recorded.expected.key}) into ${resolve(to)}`);
  for (const m of members) {
    io.out(
      `  ${m.ok ? 'ok     ' : 'DIFFERS'} ${m.name}  ${m.size} bytes  ${m.sha256}${m.problem ? `  (${m.problem})` : ''}`,
    );
  }
  for (const d of gone.differences) io.out(`  DIFFERS ${d}`);
  io.out(
    ok
      ? `OK: ${members.length} members restored, each with the size and sha256 of the manifest; ${gone.held} deleted source member(s) come back byte for byte.`
      : `NOT OK: ${bad.length} of ${members.length} members differ from the manifest; ${gone.differences.length} deleted source member(s) do not come back as they were.`,
  );
  return ok ? 0 : 1;
}

/** An archive the rekey report names: its operation and its key in the store. */
interface SealedArchive {
  readonly operationId: string;
  readonly key: string | null;
}

async function rekeyDryRun(database: Database, json: boolean, io: Io): Promise<number> {
  const cipher = archiveCipherFromEnv();
  const configured = cipher === undefined ? [] : [...(cipher.keyIds ?? [cipher.keyId])];
  const byKey = new Map<string, SealedArchive[]>(configured.map((k) => [k, []]));
  const plain: SealedArchive[] = [];
  const unopenable: (SealedArchive & { keyId: string | null })[] = [];
  for (const r of await new ArchiveRecordRepository(database).uploaded()) {
    const archive = { operationId: r.operationId, key: r.archiveKey };
    if (r.encrypted !== true) {
      plain.push(archive);
      continue;
    }
    const keyId = r.keyId;
    if (keyId === null || !configured.includes(keyId)) unopenable.push({ ...archive, keyId });
    if (keyId !== null) byKey.set(keyId, [...(byKey.get(keyId) ?? []), archive]);
  }
  const keys = [...byKey].map(([keyId, archives]) => ({
    keyId,
    configured: configured.includes(keyId),
    seals: keyId === cipher?.keyId,
    count: archives.length,
    archives,
  }));
  if (json) {
    io.out(
      JSON.stringify({
        dryRun: true,
        sealingKeyId: cipher?.keyId ?? null,
        keys,
        unencrypted: { count: plain.length, archives: plain },
        unopenable: { count: unopenable.length, archives: unopenable },
      }),
    );
    return unopenable.length === 0 ? 0 : 1;
  }
  io.out(
    `archive keys (dry run: nothing is rewritten); new archives are sealed with ${cipher === undefined ? 'no key (OPSTATE_ARCHIVE_KEY_FILE is not set)' : `key ${cipher.keyId}`}`,
  );
  const line = (a: SealedArchive) => `    ${a.operationId}  ${a.key ?? '-'}`;
  for (const k of keys) {
    const role = k.seals ? 'seals new archives' : k.configured ? 'read key' : 'NOT CONFIGURED';
    io.out(`  key ${k.keyId} (${role}): sealed ${k.count} archive(s)`);
    for (const a of k.archives) io.out(line(a));
  }
  io.out(`  not encrypted: ${plain.length} archive(s)`);
  for (const a of plain) io.out(line(a));
  if (unopenable.length === 0) {
    io.out('OK: every encrypted archive opens with a configured key.');
    return 0;
  }
  io.out(`NO CONFIGURED KEY OPENS ${unopenable.length} archive(s):`);
  for (const a of unopenable) io.out(`${line(a)}  (key ${a.keyId ?? 'not recorded'})`);
  return 1;
}

/**
 * `opstate archive verify <id>` re-reads the stored object of a long-term-archive operation
 * through the archive store, without any worker: the object first written (not replaced), its
 * whole digest, the decrypted package digest and every member's name, size and sha256 against the
 * recorded manifest, and every source member deleted on its strength against the bytes the
 * archive holds for it (a deleted member it cannot give back is named). Exit 0 when it holds, 1
 * when not (each difference printed). The outcome is
 * appended to the archive record (VERIFIED or VERIFY_FAILED; a failure stops every deletion that
 * relies on the archive). `opstate archive restore <id> --to DIR` restores the package through the
 * same store (decrypting with `OPSTATE_ARCHIVE_KEY_FILE`) into an empty folder and checks every
 * restored member's size and sha256: a rehearsal to run during an incident. Both reach the
 * object through the store the archive location's storage root names: the local folder store,
 * `sftp:`, or a store a module registers (`--store-module <module>` or
 * `OPSTATE_ARCHIVE_STORE_MODULES`, loaded first: see `loadArchiveStores`). `opstate archive
 * rekey --dry-run` lists, per key id, the archives each key sealed (from the records) and those no
 * configured key opens (exit 1 when any); a rewrite under the new key is not implemented.
 *
 * @example
 * ```ts
 * await createArchiveCommand(() => Promise.resolve(database)).run(['verify', id], io);
 * ```
 */
const collect = (value: string, previous: string[] = []) => [...previous, value];
const STORE_MODULE_HELP =
  'load an archive store module first: a .js/.mjs module exporting archiveStores = { scheme: factory } (repeatable; also OPSTATE_ARCHIVE_STORE_MODULES, comma-separated)';

/** Registers the stores of every module named by `--store-module` and the environment. */
async function loadStoreModules(fromOption: readonly string[] | undefined): Promise<void> {
  for (const module of storeModulesOf(fromOption, process.env)) await loadArchiveStores(module);
}

export function createArchiveCommand(open: DatabaseOpener = databaseFromEnv): Command {
  const summary =
    'Verify or restore a long-term archive independently of any worker; report what each key sealed';
  return defineCommand('archive', summary, (program, ctx) => {
    const archive = program.command('archive').description(summary);
    archive
      .command('verify')
      .description('Re-read the stored archive: exit 0 when it holds, 1 with every difference')
      .argument('<operation-id>', 'the long-term-archive operation')
      .option('--json', 'print the verification as one JSON object')
      .option('--store-module <module>', STORE_MODULE_HELP, collect)
      .action(
        ctx.action(async (cmd) => {
          const [id] = argumentsOf(cmd) as [string];
          const o = optionsOf<{ json?: boolean; storeModule?: string[] }>(cmd);
          checkId(id);
          await loadStoreModules(o.storeModule);
          const database = await open({ io: ctx.io });
          try {
            return await verify(database, id, o.json === true, ctx.io);
          } finally {
            await database.close();
          }
        }),
      );
    archive
      .command('restore')
      .description('Restore the package into an empty folder and check every member')
      .argument('<operation-id>', 'the long-term-archive operation')
      .requiredOption('--to <dir>', 'an empty or new folder')
      .option('--json', 'print the restore as one JSON object')
      .option('--store-module <module>', STORE_MODULE_HELP, collect)
      .action(
        ctx.action(async (cmd) => {
          const [id] = argumentsOf(cmd) as [string];
          const o = optionsOf<{ to: string; json?: boolean; storeModule?: string[] }>(cmd);
          checkId(id);
          await loadStoreModules(o.storeModule);
          const database = await open({ io: ctx.io });
          try {
            return await restore(database, id, o.to, o.json === true, ctx.io);
          } finally {
            await database.close();
          }
        }),
      );
    archive
      .command('rekey')
      .description(
        'With --dry-run: list, per key id, the archives each key sealed and those no configured key opens',
      )
      .option('--dry-run', 'report only (the only mode implemented: nothing is rewritten)')
      .option('--json', 'print the report as one JSON object')
      .action(
        ctx.action(async (cmd) => {
          const o = optionsOf<{ dryRun?: boolean; json?: boolean }>(cmd);
          if (o.dryRun !== true) {
            throw new OpstateError(
              OpstateErrorCode.BAD_INPUT,
              'archive rekey rewrites nothing yet: only `opstate archive rekey --dry-run` (the report of what each key sealed) is implemented',
            );
          }
          const database = await open({ io: ctx.io });
          try {
            return await rekeyDryRun(database, o.json === true, ctx.io);
          } finally {
            await database.close();
          }
        }),
      );
  });
}

export const archiveCommand: Command = createArchiveCommand();
