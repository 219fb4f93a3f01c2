import { PACKAGE_STATES, PACKAGE_TYPES } from '../../machines/packageState.ts';
import type { PackageStateCounts } from '../../persistence/reads/countPackageStates.ts';
import type { Io } from '../Command.ts';

/**
 * `opstate status`'s package section: the packages of each type per derived state, every state a
 * column (zeros included), so a state nothing is in still reads as 0.
 *
 * @example
 * ```ts
 * printPackageStates(await countPackageStates(database), io);
 * ```
 */
export function printPackageStates(counts: PackageStateCounts, io: Io): void {
  const width = Math.max(...PACKAGE_TYPES.map((t) => t.length), 'package'.length);
  io.out('');
  io.out(
    "packages per derived state ('opstate list --package-state <state>' lists them, 'opstate inspect <id>' says why one waits)",
  );
  io.out(['package'.padEnd(width), ...PACKAGE_STATES].join('  '));
  for (const type of PACKAGE_TYPES) {
    const cells = PACKAGE_STATES.map((s) => String(counts[type][s]).padStart(s.length));
    io.out([type.padEnd(width), ...cells].join('  '));
  }
}
