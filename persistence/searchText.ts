import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/** The longest search text taken (a longer one is refused, not cut). */
export const SEARCH_TEXT_MAX = 200;

/**
 * Checks the free text of a search: trimmed; empty is no text; longer than `SEARCH_TEXT_MAX`
 * is refused with `BAD_INPUT`. It is then matched as literal text inside a name or an error
 * (`likeLiteral`, for `ilike … escape '\'`) or as the start of a uuid (`uuidPrefixRange`, a
 * range of a primary key), and always reaches SQL as a parameter.
 *
 * @example
 * ```ts
 * searchText('  checksum '); // 'checksum'
 * ```
 */
export function searchText(text: string | null | undefined): string | undefined {
  const t = (text ?? '').trim();
  if (t === '') return undefined;
  if (t.length > SEARCH_TEXT_MAX) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `search text is ${t.length} characters; use at most ${SEARCH_TEXT_MAX} (a part of an id, a package name or an error is enough)`,
    );
  }
  return t;
}

/**
 * `%`, `_` and `\` as plain characters in a LIKE pattern (escape character `\`).
 *
 * @example
 * ```ts
 * likeLiteral('100%_done'); // '100\\%\\_done'
 * ```
 */
export function likeLiteral(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/**
 * The uuid range a text names when it is the start of a uuid's canonical form (hex digits, and
 * dashes where a uuid has them): from it padded with 0s to it padded with fs. Null otherwise.
 *
 * @example
 * ```ts
 * uuidPrefixRange('019adb2e-6c'); // ['019adb2e-6c00-0000-0000-000000000000', '019adb2e-6cff-ffff-ffff-ffffffffffff']
 * ```
 */
export function uuidPrefixRange(text: string): [string, string] | null {
  const t = text.toLowerCase();
  if (!/^[0-9a-f-]{1,36}$/.test(t)) return null;
  const hex = t.replace(/-/g, '');
  if (hex.length === 0 || hex.length > 32) return null;
  const form = (h: string) =>
    `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  const low = form(hex.padEnd(32, '0'));
  if (!low.startsWith(t)) return null;
  return [low, form(hex.padEnd(32, 'f'))];
}
