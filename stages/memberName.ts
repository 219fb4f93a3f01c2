import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/**
 * Checks a package member name from anywhere (a manifest, a tar header, a folder listing) before
 * it is joined to a path: a plain file name of 1–99 bytes, never `.` or `..`, with no `/`, `\`,
 * NUL or other control character. A hostile name is refused with `BAD_INPUT` naming where it came
 * from, so nothing is ever written or read outside the folder it belongs to.
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
      `${where}: member name ${JSON.stringify(name)} refused: ${why}; a member is a plain file name`,
      { details: { name: String(name), where } },
    );
  if (typeof name !== 'string' || name === '') throw refuse('it is empty');
  if (name === '.' || name === '..') throw refuse('it names a folder, not a file');
  if (name.includes('/') || name.includes('\\')) throw refuse('it contains a path separator');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we refuse
  if (/[\u0000-\u001f\u007f]/.test(name)) throw refuse('it contains a NUL or control character');
  if (Buffer.byteLength(name) > 99) throw refuse('it is longer than 99 bytes');
  return name;
}
