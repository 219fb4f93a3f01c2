import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import {
  derivePackageState,
  PACKAGE_TYPES,
  type PackageState,
  type PackageType,
} from '../../machines/packageState.ts';
import type { Executor } from '../openDatabase.ts';
import { isUuid } from '../subtypeFields.ts';
import { PACKAGE_PAGE_SIZE, selectPackageStatePage } from './selectPackageStatePage.ts';

/** One package in a list by state. */
export interface PackageInState {
  readonly type: PackageType;
  readonly id: string;
  readonly name: string;
  readonly state: PackageState;
}

/**
 * The packages whose derived state is `state` (any state when null): raw data packages first,
 * then data transfer packages, each in id order, at most `limit`, starting after the token
 * `after` (`<type>,<id>` from an earlier page); `next` is the token of the following page, null on
 * the last. Each package is derived from its facts a page at a time (`selectPackageStatePage`),
 * so a rare state costs a walk over the packages before it, never a full read at once.
 *
 * @example
 * ```ts
 * const { rows } = await listPackagesInState(database, 'FAILED', { limit: 50 });
 * ```
 */
export async function listPackagesInState(
  exec: Executor,
  state: PackageState | null,
  options: { readonly limit: number; readonly after?: string | null },
): Promise<{ rows: PackageInState[]; next: string | null }> {
  const start = parseAfter(options.after ?? null);
  const rows: PackageInState[] = [];
  for (const type of PACKAGE_TYPES.slice(PACKAGE_TYPES.indexOf(start.type))) {
    let after = type === start.type ? start.id : null;
    for (;;) {
      const page = await selectPackageStatePage(exec, type, after, PACKAGE_PAGE_SIZE);
      for (const p of page) {
        const derived = derivePackageState(p.facts);
        if (state !== null && derived !== state) continue;
        rows.push({ type, id: p.facts.id, name: p.name, state: derived });
        if (rows.length === options.limit) return { rows, next: `${type},${p.facts.id}` };
      }
      if (page.length < PACKAGE_PAGE_SIZE) break;
      after = (page.at(-1) as (typeof page)[number]).facts.id;
    }
  }
  return { rows, next: null };
}

function parseAfter(after: string | null): { type: PackageType; id: string | null } {
  if (after === null || after === '') return { type: PACKAGE_TYPES[0], id: null };
  const [type, id] = after.split(',');
  if (!(PACKAGE_TYPES as readonly string[]).includes(type ?? '') || !isUuid(id)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      'after must be a token from a previous page; start from the first page',
    );
  }
  return { type: type as PackageType, id };
}
