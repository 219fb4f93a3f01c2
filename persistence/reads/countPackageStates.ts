import {
  derivePackageState,
  PACKAGE_STATES,
  PACKAGE_TYPES,
  type PackageState,
  type PackageType,
} from '../../machines/packageState.ts';
import type { Executor } from '../openDatabase.ts';
import { PACKAGE_PAGE_SIZE, selectPackageStatePage } from './selectPackageStatePage.ts';

/** Packages per derived state, per package type; every state present (zeros included). */
export type PackageStateCounts = Record<PackageType, Record<PackageState, number>>;

/**
 * Counts the packages of each type per derived state (`derivePackageState`), deriving every one
 * from its facts page by page (`selectPackageStatePage`): nothing is stored to count, so the
 * cost follows the packages and their operations (four index-served statements per thousand
 * packages), not a counter that could drift from them.
 *
 * @example
 * ```ts
 * (await countPackageStates(database)).raw_data_package.ARCHIVED; // 12
 * ```
 */
export async function countPackageStates(exec: Executor): Promise<PackageStateCounts> {
  const counts = Object.fromEntries(
    PACKAGE_TYPES.map((t) => [t, Object.fromEntries(PACKAGE_STATES.map((s) => [s, 0]))]),
  ) as PackageStateCounts;
  for (const type of PACKAGE_TYPES) {
    let after: string | null = null;
    for (;;) {
      const page = await selectPackageStatePage(exec, type, after, PACKAGE_PAGE_SIZE);
      for (const p of page) counts[type][derivePackageState(p.facts)] += 1;
      if (page.length < PACKAGE_PAGE_SIZE) break;
      after = (page.at(-1) as (typeof page)[number]).facts.id;
    }
  }
  return counts;
}
