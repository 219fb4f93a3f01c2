/**
 * A value as a message shows it after "got": strings quoted (long ones cut), `nothing` for
 * undefined, arrays and objects as short JSON, anything else as itself.
 *
 * @example
 * ```ts
 * describeValue('op-1');       // "'op-1'"
 * describeValue(undefined);    // 'nothing'
 * describeValue([1, 2]);       // 'an array [1,2]'
 * ```
 */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return `'${cut(value)}'`;
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return `an array ${cut(json(value))}`;
  if (typeof value === 'object' && value !== null) return `an object ${cut(json(value))}`;
  if (typeof value === 'bigint') return `${value}n`;
  return String(value);
}

function cut(text: string): string {
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

function json(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return '(not JSON)';
  }
}
