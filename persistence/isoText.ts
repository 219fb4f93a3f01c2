/**
 * The text of the last few instants formatted. Rows written together mostly carry the same
 * instants (one batch's `now`, the claim that scheduled them, the batch that started them), and
 * `toISOString` costs about a microsecond (it formats with printf), several times per row.
 */
const texts = new Map<number, string>();

/**
 * `d.toISOString()`, remembered for the last few instants; throws on an invalid date as
 * `toISOString` does (an invalid date is never remembered).
 *
 * @example
 * ```ts
 * isoText(new Date(0)); // '1970-01-01T00:00:00.000Z'
 * ```
 */
export function isoText(d: Date): string {
  const t = d.getTime();
  let text = texts.get(t);
  if (text === undefined) {
    text = d.toISOString();
    if (texts.size >= 64) texts.clear();
    texts.set(t, text);
  }
  return text;
}
