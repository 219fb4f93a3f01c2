import { describeValue } from '../machines/describeValue.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/** A name as a refusal shows it: a string quoted (a long one cut), anything else described. */
function shown(name: unknown): string {
  if (typeof name !== 'string') return describeValue(name);
  return JSON.stringify(name.length > 120 ? `${name.slice(0, 120)}…` : name);
}

/**
 * Checks a package member name from anywhere (a manifest, a tar header, a folder listing) before
 * it is joined to a path: a plain file name of 1–99 bytes of UTF-8, never `.` or `..`, with no `/`,
 * `\`, NUL or other control character, and no lone surrogate (no UTF-8 form). A hostile name is refused with `BAD_INPUT` naming where it came
 * from, so nothing is ever written or read outside the folder it belongs to. A name that is not a
 * string (a manifest may hold any JSON there) is refused the same way, whatever it holds.
 *
 * @example
 * ```ts
 * checkMemberName('scan_0001.fits', 'manifest');      // returns the name
 * checkMemberName('../etc/passwd', 'archive member');  // throws BAD_INPUT
 * ```
 */
export function checkMemberName(name: unknown, where: string): string {
  const refuse = (why: string) =>
    new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${where}: member name ${shown(name)} refused: ${why}; a member is a plain file name`,
      { details: { name: typeof name === 'string' ? name : shown(name), where } },
    );
  if (typeof name !== 'string') throw refuse('it is not a string');
  if (name === '') throw refuse('it is empty');
  if (name === '.' || name === '..') throw refuse('it names a folder, not a file');
  if (name.includes('/') || name.includes('\\')) throw refuse('it contains a path separator');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we refuse
  if (/[\u0000-\u001f\u007f]/.test(name)) throw refuse('it contains a NUL or control character');
  // A lone surrogate has no UTF-8 form: written to a tar header it would read back as U+FFFD.
  if (/[\ud800-\udfff]/u.test(name)) throw refuse('it is not well-formed Unicode');
  if (Buffer.byteLength(name) > 99) throw refuse('it is longer than 99 bytes');
  return name;
}
